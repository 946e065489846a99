"""Completion batching bounded per group: independent jobs sharing a fabric, and whole all-to-alls.

The error of ``completion_quantile`` must hold whatever else shares the fabric: a job's ops are not held
up by batches taken over another job's flows. Checked against the exact solve (q = 0) with the tolerances
of issue 14: makespan within 0.5 % and median op time within 1 % at the CLI default q = 0.01.
"""

from __future__ import annotations

import numpy as np
import pytest

import topologies
from sim.flows import run_flows
from sim.network.flow_network import FlowNetwork


def leaf_spine_paths(hosts: int, per_leaf: int, spines: int, pairs: list[tuple[int, int]],
                     rng: np.random.Generator) -> tuple[list[list[int]], int]:
    """One random-spine path per (src, dst) host pair on a two-tier leaf-spine (link ids as in
    ``test_flow_network.leaf_spine_all_to_all``)."""
    leaves = hosts // per_leaf
    paths = []
    for a, b in pairs:
        la, lb = a // per_leaf, b // per_leaf
        if la == lb:
            paths.append([a, hosts + b])
        else:
            s = int(rng.integers(spines))
            paths.append([a, 2 * hosts + la * spines + s, 2 * hosts + leaves * spines + s * leaves + lb, hosts + b])
    return paths, 2 * hosts + 2 * leaves * spines


def run_jobs(q: float, grouped: bool, *, jobs: int = 4, rounds: int = 4, hosts: int = 64, seed: int = 0
             ) -> tuple[float, np.ndarray]:
    """``jobs`` independent jobs on one leaf-spine, each ``rounds`` all-to-alls in a row among its hosts
    (host h belongs to job h % jobs), with per-job message sizes 1, 4, 16, ... x 64 KiB (random +-50 %).
    A round starts when the network reports the previous one done (as the engine starts an op's
    successor). Returns the makespan and every op's duration (job-major)."""
    rng = np.random.default_rng(seed)
    per_leaf, spines = 8, 2
    members = [list(range(j, hosts, jobs)) for j in range(jobs)]
    pairs = [[(a, b) for a in m for b in m if a != b] for m in members]
    capacity = None
    routes, sizes = [], []
    for j in range(jobs):
        for _ in range(rounds):
            paths, num_links = leaf_spine_paths(hosts, per_leaf, spines, pairs[j], rng)
            capacity = np.full(num_links, 12.5e9)
            routes.append(paths)
            sizes.append(rng.uniform(0.5, 1.5, len(paths)) * 65536 * 4.0**j)
    net = FlowNetwork(capacity, completion_quantile=q)
    owner: list[int] = []
    left = np.zeros(jobs * rounds, dtype=np.int64)
    start = np.zeros(jobs * rounds)
    end = np.zeros(jobs * rounds)

    def launch(op: int, t: float) -> None:
        paths = routes[op]
        ptr = np.r_[0, np.cumsum([len(p) for p in paths])]
        idx = np.array([x for p in paths for x in p], dtype=np.int64)
        net.add_flows(t, ptr, idx, sizes[op], group=op if grouped else None)
        owner.extend([op] * len(paths))
        left[op] = len(paths)
        start[op] = t

    for j in range(jobs):
        launch(j * rounds, 0.0)
    while net.num_active or net.has_completions:
        t = net.next_completion_s()
        for fid in net.advance(t).tolist():
            op = owner[fid]
            left[op] -= 1
            if left[op] == 0:
                end[op] = t
                if (op + 1) % rounds:
                    launch(op + 1, t)
    return float(end.max()), end - start


@pytest.mark.parametrize("q", [0.01, 0.05])
def test_independent_jobs_keep_their_op_times_under_batching(q):
    exact_makespan, exact_ops = run_jobs(0.0, True)
    makespan, ops = run_jobs(q, True)
    # the default holds the bounds; 0.05 its own (measured: about a third of them)
    limit = 1.0 if q == 0.01 else 3.0
    assert abs(makespan / exact_makespan - 1) <= 0.005 * limit
    assert abs(np.median(ops) / np.median(exact_ops) - 1) <= 0.01 * limit
    # every job's end, not only the last one
    for j in range(4):
        job = slice(4 * j, 4 * j + 4)
        assert ops[job].sum() == pytest.approx(exact_ops[job].sum(), rel=0.005 * limit)


def test_per_group_batching_is_closer_to_exact_than_one_global_quantile():
    # the failure of issue 14: a quantile over every flow in flight lets the big job's flows set the jump
    _, exact_ops = run_jobs(0.0, True)
    _, grouped_ops = run_jobs(0.05, True)
    _, global_ops = run_jobs(0.05, False)
    err = lambda ops: np.abs(ops / exact_ops - 1).max()  # noqa: E731
    assert err(grouped_ops) < err(global_ops)


def test_a_group_smaller_than_one_over_q_is_solved_exactly():
    # 20 flows of one op at q = 0.01 (rank floor(0.2) = 0): every jump ends at the next finish
    capacity = np.full(3, 1.0)
    ptr, idx = np.arange(21), np.arange(20) % 3
    sizes = np.arange(1.0, 21.0)
    finish = {}
    for q in (0.0, 0.01):
        net = FlowNetwork(capacity, completion_quantile=q)
        net.add_flows(0.0, ptr, idx, sizes, group=7)
        net.advance(np.inf)
        finish[q] = net.finish_s.copy()
        assert net.stats["steps"] == 20   # one step per completion
    np.testing.assert_array_equal(finish[0.0], finish[0.01])


def a2a_makespans(num_gpus: int, graph, q: float) -> float:
    src, dst = np.meshgrid(np.arange(num_gpus), np.arange(num_gpus), indexing="ij")
    keep = src != dst
    rng = np.random.default_rng(1)
    import pandas as pd
    flows = pd.DataFrame({"src": src[keep], "dst": dst[keep],
                          "bytes": rng.integers(2**19, 3 * 2**19, int(keep.sum())), "start_s": 0.0})
    return run_flows(graph, flows, completion_quantile=q).makespan_s


def test_all_to_all_64_gpus_within_bound_of_exact():
    graph = topologies.build("fat_tree", k=8, num_gpus=64, gpus_per_server=1)
    exact, fast = a2a_makespans(64, graph, 0.0), a2a_makespans(64, graph, 0.01)
    assert 0.0 <= fast / exact - 1 <= 0.005


@pytest.mark.slow
def test_all_to_all_256_gpus_within_bound_of_exact():
    graph = topologies.build("fat_tree", num_gpus=256)
    exact, fast = a2a_makespans(256, graph, 0.0), a2a_makespans(256, graph, 0.01)
    assert 0.0 <= fast / exact - 1 <= 0.005
