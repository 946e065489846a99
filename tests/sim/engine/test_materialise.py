"""A memo conflict is handled where it arises: a replayed op turned explicit equals the explicit run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.csr import reverse_csr
from sim.engine.engine import Engine
from sim.engine.paths import path_latency_s
from sim.engine.prepared import PreparedOp
from sim.engine.workload import Workload
from sim.network.flow_network import FlowNetwork
from topologies.builders.fat_tree import fat_tree
from topologies.routing import Router

MIB = 1 << 20


def _prep(router, src, dst, nbytes, delay_s, dep_ptr, dep_idx) -> PreparedOp:
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    n = len(src)
    routes = router.route(src, dst, np.arange(n, dtype=np.int64))
    lat = path_latency_s(routes.link_ptr, routes.link_idx, router.links["latency_us"].to_numpy())
    sub_ptr = np.asarray(routes.sub_ptr, np.int64)
    sub_transfer = np.repeat(np.arange(n), np.diff(sub_ptr))
    rp, ri = reverse_csr(np.asarray(dep_ptr, np.int64), np.asarray(dep_idx, np.int64), n)
    return PreparedOp("ring", "Simple", np.full(n, float(delay_s)), np.diff(dep_ptr).astype(np.int64), rp, ri,
                      sub_ptr, np.asarray(nbytes, float)[sub_transfer] * np.asarray(routes.fraction, float), lat,
                      sub_transfer, src, dst, np.asarray(routes.link_ptr, np.int64),
                      np.asarray(routes.link_idx, np.int64))


def _workload(b_start_s: float) -> Workload:
    """Ranks 0-3 run op 0 then op 1 (the same chain: op 1 replays op 0's record); ranks 8-9 run op 2 at
    ``b_start_s`` (trace timing), on links of the chain."""
    programs = {r: [(0, 0.0), (1, 0.0)] for r in range(4)} | {r: [(2, b_start_s)] for r in (8, 9)}
    prog_ptr, op_idx, t_start = [0], [], []
    for r in range(16):
        for op, t in programs.get(r, []):
            op_idx.append(op)
            t_start.append(t)
        prog_ptr.append(len(op_idx))
    n = len(op_idx)
    return Workload(3, [("chain",), ("chain",), ("other",)], np.array(prog_ptr), np.zeros(16),
                    np.arange(n + 1), np.array(op_idx, np.int64), np.array(t_start), np.zeros(n))


@pytest.fixture(scope="module")
def setup():
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router = Router(graph, "spray", seed=0)
    cap = router.links["capacity_gbps"].to_numpy() * 1e9 / 8
    # a chain 0->1->2->3 (each waits for the previous plus 5 us), plus a parallel 3->0 of twice the size
    chain = _prep(router, [0, 1, 2, 3], [1, 2, 3, 0], [4 * MIB, 4 * MIB, 4 * MIB, 8 * MIB], 5e-6,
                  [0, 0, 1, 2, 2], [0, 1])
    other = _prep(router, [8, 9], [1, 2], [6 * MIB, 6 * MIB], 0.0, [0, 0, 0], [])
    return cap, [chain, chain, other]


def _run(cap, preps, w, memoize, quantile=0.0):
    return Engine(w, preps, FlowNetwork(cap, completion_quantile=quantile), timing="trace", memoize=memoize).run()


@pytest.mark.parametrize("frac", [0.01, 0.05, 0.3, 0.55, 0.9, 0.999])
def test_a_replayed_op_met_by_another_equals_the_explicit_run(setup, frac):
    cap, preps = setup
    alone = _run(cap, preps, _workload(1.0), memoize=False)
    t_a = alone.op_end_s[0]
    w = _workload(t_a + frac * t_a)   # op 2 starts while op 1 (a replay) is in flight
    plain = _run(cap, preps, w, memoize=False)
    memo = _run(cap, preps, w, memoize=True)
    assert memo.memo_hits == 1 and memo.memo_materialised == 1
    np.testing.assert_allclose(memo.op_start_s, plain.op_start_s, rtol=1e-12)
    np.testing.assert_allclose(memo.op_end_s, plain.op_end_s, rtol=1e-12)
    if frac < 0.6:   # op 2 meets op 1's flows (later it only meets its footprint): op 1 is slowed
        assert plain.op_end_s[1] - plain.op_start_s[1] > alone.op_end_s[1] - alone.op_start_s[1]
    np.testing.assert_allclose(memo.link_stats.total, plain.link_stats.total, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(memo.link_stats.peak_rate, plain.link_stats.peak_rate, rtol=1e-9)
    np.testing.assert_allclose(memo.link_stats.busy90_s, plain.link_stats.busy90_s, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(memo.link_stats.bins, plain.link_stats.bins, rtol=1e-9, atol=1e-3)
    assert len(memo.flow_op) == len(plain.flow_op) == memo.op_flows.sum()
    np.testing.assert_array_equal(memo.op_flows, plain.op_flows)
    for col in ("flow_start_s", "flow_sent_s", "flow_end_s", "flow_bytes"):
        a, b = getattr(memo, col), getattr(plain, col)
        np.testing.assert_allclose(np.sort(a), np.sort(b), rtol=1e-12, err_msg=col)


def test_no_conflict_no_materialisation(setup):
    cap, preps = setup
    w = _workload(1.0)   # op 2 long after
    memo = _run(cap, preps, w, memoize=True)
    assert memo.memo_hits == 1 and memo.memo_materialised == 0


@settings(max_examples=12, deadline=None)
@given(frac=st.floats(0.001, 0.999), sizes=st.lists(st.integers(1, 16), min_size=2, max_size=2),
       delay_us=st.sampled_from([0.0, 1.0, 20.0]))
def test_property_materialised_runs_equal_explicit_runs(frac, sizes, delay_us):
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router = Router(graph, "ecmp", seed=1)
    cap = router.links["capacity_gbps"].to_numpy() * 1e9 / 8
    chain = _prep(router, [0, 1, 2, 3], [1, 2, 3, 0], [sizes[0] * MIB] * 3 + [sizes[1] * MIB], delay_us * 1e-6,
                  [0, 0, 1, 2, 2], [0, 1])
    other = _prep(router, [8, 9, 10], [1, 2, 0], [sizes[1] * MIB] * 3, 0.0, [0, 0, 0, 0], [])
    preps = [chain, chain, other]
    t_a = _run(cap, preps, _workload(1.0), memoize=False).op_end_s[0]
    w = _workload(t_a * (1 + frac))
    plain, memo = _run(cap, preps, w, memoize=False), _run(cap, preps, w, memoize=True)
    assert memo.memo_hits == 1 and memo.memo_materialised == 1
    np.testing.assert_allclose(memo.op_end_s, plain.op_end_s, rtol=1e-12)
    np.testing.assert_allclose(memo.link_stats.total, plain.link_stats.total, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(memo.link_stats.peak_rate, plain.link_stats.peak_rate, rtol=1e-9)
    np.testing.assert_allclose(np.sort(memo.flow_end_s), np.sort(plain.flow_end_s), rtol=1e-12)
