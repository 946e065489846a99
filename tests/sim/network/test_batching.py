"""Completion batching bounded per group: independent jobs sharing a fabric, whole all-to-alls, and the
stated bound (``docs/network.md``, "Accuracy knob").

The error of ``completion_quantile`` must hold whatever else shares the fabric: a job's ops are not held
up by batches taken over another job's flows. Checked against the exact solve (q = 0) with the tolerances
of issue 14: makespan within 0.5 % and median op time within 1 % at the CLI default (``DEFAULT_QUANTILE``,
0.02). The bound
itself (``docs/network.md``): at any time a group holds (finished, bandwidth not yet handed on) at most
``floor(q n_g)`` of the ``n_g`` flows it had in flight when the batch began (any fabric); on one shared
link, with every flow starting together, each flow then finishes no earlier than exact and at most
``q`` times its finish time later.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.cli.run import DEFAULT_QUANTILE
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


@pytest.mark.parametrize("q", [0.01, DEFAULT_QUANTILE, 0.05])
def test_independent_jobs_keep_their_op_times_under_batching(q):
    exact_makespan, exact_ops = run_jobs(0.0, True)
    makespan, ops = run_jobs(q, True)
    # the default (and below) holds the bounds; 0.05 its own (measured: about half of them)
    limit = 1.0 if q <= DEFAULT_QUANTILE else 3.0
    assert abs(makespan / exact_makespan - 1) <= 0.005 * limit
    assert abs(np.median(ops) / np.median(exact_ops) - 1) <= 0.01 * limit
    # every job's end, not only the last one
    for j in range(4):
        job = slice(4 * j, 4 * j + 4)
        assert ops[job].sum() == pytest.approx(exact_ops[job].sum(), rel=0.005 * limit)


@settings(max_examples=4, deadline=None)
@given(st.sampled_from([(2, 24), (2, 32), (3, 48)]), st.integers(1, 2), st.integers(0, 2**31 - 1))
def test_random_jobs_sharing_a_fabric_keep_the_bars_at_the_cli_default(jobs_hosts, rounds, seed):
    # issue 14's bars at the default, on random multi-job cases (12-16 hosts a job, so 132-240 flows an op:
    # more than 1 / q, so batched): makespan within 0.5 % and median op time within 1 % of exact
    jobs, hosts = jobs_hosts
    exact_makespan, exact_ops = run_jobs(0.0, True, jobs=jobs, rounds=rounds, hosts=hosts, seed=seed)
    makespan, ops = run_jobs(DEFAULT_QUANTILE, True, jobs=jobs, rounds=rounds, hosts=hosts, seed=seed)
    assert abs(makespan / exact_makespan - 1) <= 0.005
    assert abs(np.median(ops) / np.median(exact_ops) - 1) <= 0.01


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


def drive_held(capacity, flows, q):
    """Run ``flows`` ((start, links, size, group) tuples, by start) to the end; return every flow's finish
    time and, for every ``advance``, per group: (flows it held: finished before the time ``advance``
    returned them, flows it had in flight when the jump began)."""
    net = FlowNetwork(np.asarray(capacity, dtype=float), completion_quantile=q)
    finish = np.full(len(flows), np.nan)
    checks = []
    order = []

    def add(t):
        batch = [i for i, f in enumerate(flows) if f[0] == t]
        ptr = np.r_[0, np.cumsum([len(flows[i][1]) for i in batch])]
        idx = np.array([x for i in batch for x in flows[i][1]], dtype=np.int64)
        net.add_flows(t, ptr, idx, np.array([flows[i][2] for i in batch]),
                      group=np.array([flows[i][3] for i in batch]))
        order.extend(batch)

    pending = sorted({f[0] for f in flows})
    while pending or net.num_active or net.has_completions:
        if pending and (not (net.num_active or net.has_completions) or pending[0] <= net.now_s):
            add(pending.pop(0))
            continue
        ids, _ = net.active_flows()
        in_flight: dict = {}
        for fid in ids.tolist():
            g = flows[order[fid]][3]
            in_flight[g] = in_flight.get(g, 0) + 1
        t = net.next_completion_s()
        if pending:
            t = min(t, pending[0])
        held: dict = {}
        for fid, f_s in zip(net.advance(t).tolist(), net.last_finish_s.tolist(), strict=True):
            finish[order[fid]] = f_s
            if f_s < t - 1e-9 * t:
                g = flows[order[fid]][3]
                held[g] = held.get(g, 0) + 1
        checks.append({g: (h, in_flight.get(g, 0)) for g, h in held.items()})
    return finish, checks


@st.composite
def small_fabrics(draw):
    links = draw(st.integers(1, 5))
    capacity = draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=links, max_size=links))
    n = draw(st.integers(2, 30))
    flows = []
    for _ in range(n):
        path = sorted(set(draw(st.lists(st.integers(0, links - 1), min_size=1, max_size=3))))
        flows.append((draw(st.sampled_from([0.0, 0.0, 1.0, 2.5])), path,
                      float(draw(st.integers(1, 50))), draw(st.integers(0, 2))))
    return capacity, flows


@settings(max_examples=15, deadline=None)
@given(small_fabrics(), st.sampled_from([0.1, 0.2, 0.5]))
def test_no_group_holds_more_than_q_of_its_flows_in_flight(inst, q):
    capacity, flows = inst
    _, checks = drive_held(capacity, flows, q)
    for by_group in checks:
        for held, in_flight in by_group.values():
            assert held <= np.floor(q * in_flight)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=2, max_size=60), st.lists(st.integers(0, 3), min_size=60,
       max_size=60), st.sampled_from([0.1, 0.2, 0.5]), st.sampled_from([1.0, 3.0]))
def test_on_one_link_every_finish_is_within_the_bound_of_exact(sizes, groups, q, capacity):
    # (q >= 0.1: groups of 1 / q flows or more hold flows.) One link, every flow starting at 0: batched
    # = exact processor sharing on the capacity the held flows leave (at most q of it: docs/network.md),
    # so a flow is never early and late by at most q x its finish time
    flows = [(0.0, [0], float(b), g) for b, g in zip(sizes, groups, strict=False)]
    exact, _ = drive_held([capacity], flows, 0.0)
    fast, _ = drive_held([capacity], flows, q)
    assert (fast >= exact * (1 - 1e-9)).all()
    assert (fast - exact <= q * fast * (1 + 1e-9)).all()


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
    exact, fast = a2a_makespans(64, graph, 0.0), a2a_makespans(64, graph, DEFAULT_QUANTILE)
    assert 0.0 <= fast / exact - 1 <= 0.005


@pytest.mark.slow
def test_all_to_all_256_gpus_within_bound_of_exact():
    graph = topologies.build("fat_tree", num_gpus=256)
    exact, fast = a2a_makespans(256, graph, 0.0), a2a_makespans(256, graph, DEFAULT_QUANTILE)
    assert 0.0 <= fast / exact - 1 <= 0.005
