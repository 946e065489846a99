"""Checks shared by the plan tests: a plan's critical path, its DAG shape, bytes per rank and channel.

The engine does not take part: the critical path is a tiny longest-path pass in which a transfer takes
``bytes / B_channel + delay`` (every channel gets ``B / channels`` of a GPU's link, as channels share
it), or two rates, NVLink inside a server and the network across. ``layouts`` draws server sizes.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import strategies as st

from sim.planning.plan import TransferPlan

__all__ = ["B", "check_dag", "critical_path_s", "critical_path_two_rates_s", "layout", "layouts", "per_channel",
           "sent_by"]

B = 50e9


def critical_path_s(plan: TransferPlan, bw_per_channel: float) -> float:
    finish = np.zeros(len(plan))
    for i in range(len(plan)):
        deps = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        start = finish[deps].max() if len(deps) else 0.0
        finish[i] = start + plan.delay_s[i] + plan.bytes[i] / bw_per_channel
    return float(finish.max()) if len(plan) else 0.0


def check_dag(plan: TransferPlan) -> None:
    """Topological order, and every dependency is an earlier step, or the same step's earlier chunk."""
    n = len(plan)
    assert plan.dep_ptr[0] == 0 and plan.dep_ptr[-1] == len(plan.dep_idx) and len(plan.dep_ptr) == n + 1
    rows = np.repeat(np.arange(n), np.diff(plan.dep_ptr))
    assert np.all(plan.dep_idx < rows)  # acyclic: every dependency comes first
    d = plan.dep_idx
    earlier_step = plan.step[d] < plan.step[rows]
    same_step_earlier_chunk = (plan.step[d] == plan.step[rows]) & (plan.chunk[d] < plan.chunk[rows])
    assert np.all(earlier_step | same_step_earlier_chunk)
    for a in (plan.src, plan.dst, plan.bytes, plan.channel, plan.delay_s, plan.step, plan.chunk):
        assert len(a) == n
    assert np.all(plan.bytes > 0) and np.all(plan.delay_s >= 0)


def sent_by(plan: TransferPlan) -> dict[int, float]:
    out: dict[int, float] = defaultdict(float)
    for s, b in zip(plan.src.tolist(), plan.bytes.tolist(), strict=True):
        out[s] += b
    return out


def per_channel(plan: TransferPlan) -> np.ndarray:
    return np.bincount(plan.channel, weights=plan.bytes)


layouts = st.lists(st.integers(1, 4), min_size=1, max_size=4).filter(lambda s: sum(s) >= 2)


def layout(sizes):
    server_of = np.repeat(np.arange(len(sizes)), sizes)
    ranks = 100 + 2 * np.arange(len(server_of))
    return ranks, server_of


def critical_path_two_rates_s(plan: TransferPlan, server_of, nvlink_bw: float, net_bw: float) -> float:
    """Longest path where a transfer inside a server runs at ``nvlink_bw`` and one across at ``net_bw``."""
    finish = np.zeros(len(plan))
    pos = {int(r): i for i, r in enumerate(sorted(set(plan.src.tolist()) | set(plan.dst.tolist())))}
    for i in range(len(plan)):
        deps = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        start = finish[deps].max() if len(deps) else 0.0
        same = server_of[pos[int(plan.src[i])]] == server_of[pos[int(plan.dst[i])]]
        finish[i] = start + plan.delay_s[i] + plan.bytes[i] / (nvlink_bw if same else net_bw)
    return float(finish.max()) if len(plan) else 0.0
