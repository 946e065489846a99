"""The analytical tier's exact memo (ops with equal traffic computed once) gives a memo-less run's numbers,
never reuses an op whose split matrix differs, and the compiled schedule is the Python loop's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import topologies
from sim.analytical import tier
from sim.options import resolve_options
from sim.setup import setup_replay
from topologies.routing import Router
from traces.schema import DTYPE_BYTES, new_metadata, normalize

WORLD = 8


def _trace(ops: list) -> pd.DataFrame:
    """``ops`` = [(op, bytes per rank or (n, n) split)] issued in turn on one communicator of every rank."""
    rows = []
    for seq, (op, size) in enumerate(ops):
        for r in range(WORLD):
            split = () if np.isscalar(size) else tuple(int(x) for x in np.asarray(size)[r])
            # an AllToAll's count is the mean elements per peer of its splits (the schema's rule, floor)
            count = int(size) if np.isscalar(size) else int(np.asarray(size)[r].sum()) // WORLD
            rows.append(dict(rank=r, comm="ep", seq=seq, op=op, count=count, dtype="uint8",
                             bytes=count * DTYPE_BYTES["uint8"], root=-1, nranks=WORLD, t_start_s=0.0,
                             duration_s=np.nan, host="", device=-1, context="", algo="", proto="", group=-1,
                             split_bytes=split))
    return normalize(pd.DataFrame(rows), new_metadata(WORLD, {"ep": list(range(WORLD))}, "test", gpus_per_node=2))


def _op_times(df, topo: str, unique_keys: bool, keys_override=None):
    opts = resolve_options(None, "auto", "ecmp", 0, {"model": "analytical"})
    s = setup_replay(df, topo, opts)
    keys = [(k, i) for i, k in enumerate(s.keys)] if unique_keys else (keys_override or s.keys)
    router = Router(s.damaged, routing="ecmp", seed=0)
    ideal_graph = topologies.nonblocking(s.damaged)
    return tier.op_times(s.ops, keys, "auto", s.damaged, ideal_graph, router, s.meta, opts.plan_options())


def _ops(draw_spec):
    ops, pool = [], []
    for kind, size, seed, repeat in draw_spec:
        if repeat and pool:
            ops.append(pool[seed % len(pool)])
            continue
        rng = np.random.default_rng(seed)
        if kind == "AllToAll":
            split = rng.integers(0, size + 1, size=(WORLD, WORLD)) * (rng.random((WORLD, WORLD)) < 0.7)
            np.fill_diagonal(split, 0)
            op = ("AllToAll", split)
        else:
            op = (kind, size)
        pool.append(op)
        ops.append(op)
    return ops


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(st.tuples(st.sampled_from(["AllToAll", "AllReduce", "AllGather"]), st.integers(1, 1 << 20),
                               st.integers(0, 2**16), st.booleans()), min_size=2, max_size=8),
       topo=st.sampled_from(["fat_tree", "rail_optimized"]))
@example(spec=[("AllToAll", 1, 0, False), ("AllToAll", 1, 0, True)], topo="fat_tree")  # rows of < WORLD bytes
def test_memo_hits_give_the_memo_less_times(spec, topo):
    df = _trace(_ops(spec))
    memo = _op_times(df, topo, unique_keys=False)
    plain = _op_times(df, topo, unique_keys=True)
    pd.testing.assert_frame_equal(memo, plain, check_exact=True)
    np.testing.assert_array_equal(memo.attrs["link_bytes"], plain.attrs["link_bytes"])


def test_a_key_collision_with_other_splits_is_not_a_hit():
    rng = np.random.default_rng(1)
    small = rng.integers(1, 100, (WORLD, WORLD)) << 10
    big = small * 1000
    np.fill_diagonal(small, 0)
    np.fill_diagonal(big, 0)
    df = _trace([("AllToAll", small), ("AllToAll", big), ("AllToAll", small.copy())])
    keys = [("same",)] * 3  # as if the split checksums collided
    times = _op_times(df, "fat_tree", unique_keys=False, keys_override=keys)
    pd.testing.assert_frame_equal(times, _op_times(df, "fat_tree", unique_keys=True), check_exact=True)
    assert times["time_s"][1] > 10 * times["time_s"][0]   # the bigger matrix got its own computation


@pytest.mark.parametrize("timing", ["trace", "gaps", "asap"])
def test_compiled_schedule_is_the_python_loop(monkeypatch, timing):
    rng = np.random.default_rng(7)
    ops = [("AllReduce", int(rng.integers(1, 1 << 20))) for _ in range(6)]
    df = _trace(ops)
    df["t_start_s"] = rng.random(len(df)) * 1e-4
    opts = resolve_options(None, "auto", "ecmp", 0, {"model": "analytical"})
    s = setup_replay(df, "fat_tree", opts)
    dur = rng.random(s.workload.n_ops) * 1e-5
    out = {}
    for mode in ("numpy", "jit"):
        monkeypatch.setattr(tier, "SCHEDULE", mode)
        out[mode] = tier.schedule(s.workload, dur, timing)
    for a, b in zip(out["numpy"], out["jit"], strict=True):
        np.testing.assert_array_equal(a, b)
