"""The analytical tier's vectorised AllToAll plan is the planner's plan, array for array."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.analytical.plans import alltoall_plan, plan_op, servers_of
from sim.planning.collectives import plan_collective


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.integers(0, 2 ** 16),
       st.sampled_from([0, 100, 1 << 14, 1 << 22]), st.booleans())
def test_alltoall_plan_equals_the_planner(n, gps, parts, seed, hi, uniform):
    graph = topologies.leaf_spine(16, gpus_per_server=gps)
    rng = np.random.default_rng(seed)
    ranks = np.sort(rng.choice(16, size=n, replace=False)).astype(np.int64)
    split = None if uniform else rng.integers(0, hi + 1, size=(n, n))
    nbytes = float(hi)
    ref = plan_collective("AllToAll", nbytes, ranks, split_bytes=split, graph=graph, channels=parts, pxn=False)
    got = alltoall_plan(nbytes, ranks, split, servers_of(graph, ranks), parts)
    _same(got, ref)
    # the tier's plan carries the planner's PXN relays (NCCL's p2p rule) too
    rec = {"kind": "coll", "op": "AllToAll", "rank_bytes": nbytes, "members": ranks, "root": -1, "comm": "c"}
    _same(plan_op(rec, split, "auto", graph, {}, {"channels": parts}),
          plan_collective("AllToAll", nbytes, ranks, split_bytes=split, graph=graph, channels=parts))


def _same(got, ref):
    assert (got.algo, got.proto) == (ref.algo, ref.proto)
    for name in ("src", "dst", "bytes", "channel", "delay_s", "dep_ptr", "dep_idx"):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
