"""The event core against closed forms, with hand-made plans (no collective planner needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.csr import csr_take, reverse_csr
from sim.engine.engine import Engine
from sim.engine.paths import path_latency_s
from sim.engine.prepared import PreparedOp
from sim.engine.stats import LinkStats, add_rows_in_order
from sim.engine.workload import Workload
from sim.errors import SimError
from sim.network.flow_network import FlowNetwork
from topologies.builders.fat_tree import fat_tree
from topologies.builders.ideal import nonblocking
from topologies.routing import Router

MIB = 1 << 20


def _prep(router: Router, paths, src, dst, nbytes, delay_s=0.0, dep_ptr=None, dep_idx=None):
    """A prepared op of single-path transfers (``paths`` is unused: the op carries its own links)."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    n = len(src)
    dep_ptr = np.zeros(n + 1, np.int64) if dep_ptr is None else np.asarray(dep_ptr, np.int64)
    dep_idx = np.zeros(0, np.int64) if dep_idx is None else np.asarray(dep_idx, np.int64)
    routes = router.route(src, dst, np.zeros(n, np.int64))
    lat = path_latency_s(routes.link_ptr, routes.link_idx, router.links["latency_us"].to_numpy())
    rp, ri = reverse_csr(dep_ptr, dep_idx, n)
    return PreparedOp("direct", "Simple", np.broadcast_to(np.asarray(delay_s, float), (n,)).copy(),
                      np.diff(dep_ptr), rp, ri, np.arange(n + 1), np.broadcast_to(np.asarray(nbytes, float), (n,)).copy(),
                      lat, np.arange(n), src, dst, np.asarray(routes.link_ptr, np.int64),
                      np.asarray(routes.link_idx, np.int64))


def _setup(graph):
    router = Router(graph, "ecmp", seed=0)
    cap = router.links["capacity_gbps"].to_numpy() * 1e9 / 8
    return router, None, cap


def _workload(programs: list[list[list[int]]], n_ops: int, keys=None, t_start=None, gap=None, delay=None):
    """programs[p] = list of steps, each a list of op ids."""
    prog_ptr = np.cumsum([0] + [len(p) for p in programs])
    steps = [s for p in programs for s in p]
    step_op_ptr = np.cumsum([0] + [len(s) for s in steps])
    n_steps = len(steps)
    return Workload(n_ops, keys or [None] * n_ops, prog_ptr, np.zeros(len(programs)) if delay is None else
                    np.asarray(delay, float), step_op_ptr, np.array([o for s in steps for o in s], np.int64),
                    np.zeros(n_steps) if t_start is None else np.asarray(t_start, float),
                    np.zeros(n_steps) if gap is None else np.asarray(gap, float))


def _run(w, preps, paths, cap, quantile=0.0, **kw):
    return Engine(w, preps, FlowNetwork(cap, completion_quantile=quantile), **kw).run()


def test_all_to_all_matches_busiest_link_bound():
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router, paths, cap = _setup(graph)
    s, d = np.meshgrid(np.arange(16), np.arange(16))
    m = s != d
    prep = _prep(router, paths, s[m], d[m], MIB)
    log = _run(_workload([[[0]] for _ in range(16)], 1), [prep], paths, cap)
    load = np.bincount(prep.sub_link_idx, minlength=len(cap)) * MIB
    bound = float((load / cap).max())
    duration = log.op_end_s[0] - log.op_start_s[0]
    assert bound <= duration <= bound * 1.02
    # bytes on each link equal the bytes of the flows that crossed it
    np.testing.assert_allclose(log.link_stats.total, load, rtol=1e-9)


def test_dependency_chain_adds_transfer_times_latencies_and_delays():
    graph = nonblocking(fat_tree(4, num_gpus=4, gpus_per_server=1))
    router, paths, cap = _setup(graph)
    # 0->1, then 1->2, then 2->3: each waits for the previous one plus 5 µs of software delay
    prep = _prep(router, paths, [0, 1, 2], [1, 2, 3], 4 * MIB, delay_s=5e-6, dep_ptr=[0, 0, 1, 2], dep_idx=[0, 1])
    log = _run(_workload([[[0]] for _ in range(4)], 1), [prep], paths, cap)
    rate = 400e9 / 8
    expected = 3 * (4 * MIB / rate + 5e-6 + prep.sub_latency_s[0])
    assert log.op_end_s[0] == pytest.approx(expected, rel=1e-9)


def test_memoised_phases_equal_the_explicit_run():
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router, paths, cap = _setup(graph)
    s, d = np.meshgrid(np.arange(16), np.arange(16))
    m = s != d
    a2a = _prep(router, paths, s[m], d[m], MIB)
    ring = _prep(router, paths, np.arange(16), (np.arange(16) + 1) % 16, 2 * MIB)
    preps = [a2a, ring, a2a, ring, a2a]
    keys = [("a2a",), ("ring",), ("a2a",), ("ring",), ("a2a",)]
    w = _workload([[[k] for k in range(5)] for _ in range(16)], 5, keys=keys)
    plain = _run(w, preps, paths, cap, memoize=False)
    memo = _run(w, preps, paths, cap, memoize=True)
    assert memo.memo_hits == 3
    np.testing.assert_allclose(memo.op_end_s, plain.op_end_s, rtol=1e-12)
    np.testing.assert_allclose(memo.link_stats.total, plain.link_stats.total, rtol=1e-12)
    np.testing.assert_allclose(memo.link_stats.peak_rate, plain.link_stats.peak_rate, rtol=1e-9)
    np.testing.assert_allclose(memo.link_stats.busy90_s, plain.link_stats.busy90_s, rtol=1e-9, atol=1e-15)
    assert len(memo.flow_path) == len(plain.flow_path)
    np.testing.assert_allclose(np.sort(memo.flow_end_s), np.sort(plain.flow_end_s), rtol=1e-12)


def test_flows_of_replayed_ops_stay_in_the_log_when_live_flows_follow():
    # A replayed op's flows take log rows too; flows the network starts after it must not overwrite them.
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router, paths, cap = _setup(graph)
    s, d = np.meshgrid(np.arange(16), np.arange(16))
    m = s != d
    a2a = _prep(router, paths, s[m], d[m], MIB)
    ring = _prep(router, paths, np.arange(16), (np.arange(16) + 1) % 16, 2 * MIB)
    ring3 = _prep(router, paths, np.arange(16), (np.arange(16) + 1) % 16, 3 * MIB)
    preps = [a2a, ring, a2a, ring3, ring]
    keys = [("a2a",), ("ring",), ("a2a",), ("ring3",), ("ring",)]
    w = _workload([[[k] for k in range(5)] for _ in range(16)], 5, keys=keys)
    plain = _run(w, preps, paths, cap, memoize=False)
    memo = _run(w, preps, paths, cap, memoize=True)
    assert memo.memo_hits == 2
    expected = 2 * 240 + 3 * 16  # two all-to-alls of 16 x 15 flows, three 16-flow rings
    assert len(plain.flow_path) == len(memo.flow_path) == memo.op_flows.sum() == expected
    for op in range(5):  # every op keeps exactly its own flows in the log
        assert (memo.flow_op == op).sum() == memo.op_flows[op] == plain.op_flows[op]
    np.testing.assert_allclose(np.sort(memo.flow_end_s), np.sort(plain.flow_end_s), rtol=1e-12)
    np.testing.assert_allclose(np.sort(memo.flow_bytes), np.sort(plain.flow_bytes), rtol=1e-12)


def test_trace_timing_honours_issue_times_and_gaps():
    graph = nonblocking(fat_tree(4, num_gpus=2, gpus_per_server=1))
    router, paths, cap = _setup(graph)
    p = _prep(router, paths, [0], [1], MIB)
    one = _run(_workload([[[0]], [[0]]], 1), [p], paths, cap).op_end_s[0]
    # two ops on both ranks; recorded issue at 1 ms and 5 ms, recorded compute gap before op 1 of 2 ms
    w = _workload([[[0], [1]], [[0], [1]]], 2, t_start=[1e-3, 5e-3, 1e-3, 5e-3], gap=[0, 2e-3, 0, 2e-3])
    log = _run(w, [p, p], paths, cap, timing="trace")
    assert log.op_start_s[0] == pytest.approx(1e-3)
    assert log.op_start_s[1] == pytest.approx(max(5e-3, 1e-3 + one + 2e-3))
    asap = _run(w, [p, p], paths, cap, timing="asap")
    assert asap.op_start_s[1] == pytest.approx(one)


def test_op_waits_for_its_last_member_and_stragglers_delay_it():
    graph = nonblocking(fat_tree(4, num_gpus=2, gpus_per_server=1))
    router, paths, cap = _setup(graph)
    p = _prep(router, paths, [0], [1], MIB)
    w = _workload([[[0]], [[0]]], 1, delay=[0.0, 30e-6])
    log = _run(w, [p], paths, cap)
    assert log.op_start_s[0] == pytest.approx(30e-6)


def test_grouped_ops_progress_together_and_overlap():
    graph = nonblocking(fat_tree(4, num_gpus=4, gpus_per_server=1))
    router, paths, cap = _setup(graph)
    a = _prep(router, paths, [0], [1], 8 * MIB)
    b = _prep(router, paths, [2], [3], 8 * MIB)
    # rank 0 is in op 0 and op 1 (grouped: one step); they run at the same time
    w = _workload([[[0, 1]], [[0]], [[1]], [[1]]], 2)
    log = _run(w, [a, b], paths, cap)
    assert log.op_start_s[0] == log.op_start_s[1] == 0.0
    assert log.op_end_s[1] == pytest.approx(log.op_end_s[0])
    serial = _run(_workload([[[0], [1]], [[0]], [[1]], [[1]]], 2), [a, b], paths, cap)
    assert serial.op_start_s[1] == pytest.approx(serial.op_end_s[0])


def test_deadlock_is_a_clear_error():
    graph = nonblocking(fat_tree(4, num_gpus=2, gpus_per_server=1))
    router, paths, cap = _setup(graph)
    p = _prep(router, paths, [0], [1], MIB)
    # rank 0 issues op 0 then op 1; rank 1 issues op 1 then op 0: neither can start
    w = _workload([[[0], [1]], [[1], [0]]], 2)
    with pytest.raises(SimError, match="deadlock"):
        _run(w, [p, p], paths, cap)


def test_link_stats_bins_are_exact_when_the_width_doubles():
    stats = LinkStats(np.array([10.0, 10.0]), max_bins=8)
    rng = np.random.default_rng(1)
    t = 0.0
    for _ in range(200):
        dt = float(rng.uniform(0, 3e-6))
        stats.add(t, t + dt, np.array([0, 1]), np.array([dt * 10.0, dt * 5.0]))
        t += dt
    width, bins = stats.binned(t)
    assert width > 1e-6
    np.testing.assert_allclose(bins.sum(axis=0), stats.total, rtol=1e-12)
    np.testing.assert_allclose(stats.peak_rate, [10.0, 5.0])
    assert stats.busy90_s[0] == pytest.approx(t) and stats.busy90_s[1] == 0.0


def _spread_one_by_one(a, b, vals, w, n_bins):
    """Each segment [a, b) spread over the width-``w`` bins it overlaps, one segment after the other: those
    inside one bin first, then those across bins (the order in which a block of segments is reduced)."""
    bins = np.zeros((n_bins, vals.shape[1]))
    k0s, k1s = (a // w).astype(int), np.minimum(np.ceil(b / w).astype(int) - 1, n_bins - 1)
    for k0, k1, v in zip(k0s, k1s, vals, strict=True):
        if k1 <= k0:
            bins[k0] += v
    for ai, bi, v, k0, k1 in zip(a, b, vals, k0s.tolist(), k1s.tolist(), strict=True):
        if k1 <= k0:
            continue
        edges = np.arange(k0, k1 + 2) * w
        frac = np.clip(np.minimum(edges[1:], bi) - np.maximum(edges[:-1], ai), 0.0, None) / (bi - ai)
        bins[k0:k1 + 1] += frac[:, None] * v[None, :]
    return bins


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1e-12, 3e-7, 1.5e-6, 4e-5]), st.floats(0, 1)), min_size=1,
                max_size=80), st.integers(1, 4))
def test_dense_segments_bin_as_one_segment_at_a_time(segs, n):
    # the engine hands every network interval over as a dense row, reduced in blocks; its bins are each
    # segment spread over the bins it overlaps, as one segment at a time would (bit for bit)
    w = 2e-6
    stats = LinkStats(np.full(n, 10.0), bin_s=w)
    rng = np.random.default_rng(len(segs))
    t, a, b, vals = 0.0, [], [], []
    for dt, x in segs:
        v = x * dt * 10.0 * rng.random(n)
        stats.dense_row(t, t + dt)[:] = v
        a.append(t), b.append(t + dt), vals.append(v)
        t += dt
    bins = stats.bins
    assert np.array_equal(bins, _spread_one_by_one(np.array(a), np.array(b), np.array(vals), w, len(bins)))
    np.testing.assert_allclose(stats.total, np.sum(vals, axis=0), rtol=1e-12)
    # peak rates and time above 90 % as segment-by-segment ``add`` gives them (slivers take no rate)
    one = LinkStats(np.full(n, 10.0), bin_s=w)
    for ai, bi, v in zip(a, b, vals, strict=True):
        one.add(ai, bi, np.arange(n), v)
    assert np.array_equal(stats.peak_rate, one.peak_rate)
    np.testing.assert_allclose(stats.busy90_s, one.busy90_s, rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=40), st.integers(1, 3))
def test_add_rows_in_order_is_add_at(idx, width):
    idx = np.sort(np.array(idx))
    rows = np.random.default_rng(len(idx)).random((len(idx), width)) * 10.0 ** np.arange(len(idx))[:, None] % 7
    a, b = np.ones((7, width)) / 3, np.ones((7, width)) / 3
    np.add.at(a, idx, rows)
    add_rows_in_order(b, idx, rows)
    assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(2, 300), min_size=1, max_size=3), st.integers(1, 700), st.integers(0, 2**32 - 1))
def test_add_rows_in_order_long_runs_are_the_accumulate(runs, width, seed):
    """Few long runs (a block of network events in one time bin): the per-row loop gives the sums of
    ``np.add.accumulate`` (the code it replaced) and of ``np.add.at``, bit for bit, over values of wide
    dynamic range."""
    rng = np.random.default_rng(seed)
    idx = np.repeat(np.arange(len(runs)) * 2, runs)
    rows = rng.random((len(idx), width)) * 10.0 ** rng.integers(-6, 6, size=(len(idx), width))
    start = rng.random((2 * len(runs), width))
    want_at, want_acc, got = start.copy(), start.copy(), start.copy()
    np.add.at(want_at, idx, rows)
    lo = 0
    for k, n in zip(np.arange(len(runs)) * 2, runs, strict=True):
        run = rows[lo:lo + n].copy()
        run[0] += want_acc[k]
        np.add.accumulate(run, axis=0, out=run)
        want_acc[k] = run[-1]
        lo += n
    add_rows_in_order(got, idx, rows.copy())
    assert np.array_equal(got, want_acc) and np.array_equal(got, want_at)


@given(st.lists(st.lists(st.integers(0, 9), max_size=4), min_size=1, max_size=10))
def test_reverse_csr_inverts_dependencies(deps):
    n = max(10, len(deps))
    deps = deps + [[]] * (n - len(deps))
    ptr = np.cumsum([0] + [len(d) for d in deps])
    idx = np.array([x for d in deps for x in d], dtype=np.int64)
    rp, ri = reverse_csr(ptr, idx, n)
    pairs = {(i, j) for i, d in enumerate(deps) for j in d}
    back = {(int(i), j) for j in range(n) for i in ri[rp[j]:rp[j + 1]]}
    assert back == pairs
    p2, i2 = csr_take(ptr, idx, np.arange(n)[::-1])
    assert [sorted(i2[p2[k]:p2[k + 1]].tolist()) for k in range(n)] == [sorted(d) for d in deps[::-1]]
