"""The analytical tier's vectorised AllToAll plan is the planner's plan, array for array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.analytical.plans import alltoall_plan, plan_op_pair, servers_of
from sim.planning.collectives import plan_collective
from sim.planning.machine import graph_machine

_GRAPHS: dict = {}


def _graph(gps: int, nic: str | None):
    """A 16-GPU leaf-spine, without presets or with a ``nic=`` preset (built once per shape)."""
    key = (gps, nic)
    if key not in _GRAPHS:
        presets = {} if nic is None else {"nic": nic, "gpu": "a100" if nic == "efa_p4d" else "h100"}
        _GRAPHS[key] = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=gps, **presets)
    return _GRAPHS[key]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.integers(0, 2 ** 16),
       st.sampled_from([0, 100, 1 << 14, 1 << 22]), st.booleans(), st.sampled_from([None, "ib", "efa", "efa_p4d"]))
def test_alltoall_plan_equals_the_planner(n, gps, parts, seed, hi, uniform, nic):
    graph = _graph(gps, nic)
    rng = np.random.default_rng(seed)
    ranks = np.sort(rng.choice(16, size=n, replace=False)).astype(np.int64)
    split = None if uniform else rng.integers(0, hi + 1, size=(n, n))
    nbytes = float(hi)
    ref = plan_collective("AllToAll", nbytes, ranks, split_bytes=split, graph=graph, channels=parts, pxn=False)
    # the fabric's model gives the tuner's protocol and the network pairs' transport step
    got = alltoall_plan(nbytes, ranks, split, servers_of(graph, ranks), parts,
                        model=graph_machine(graph, ranks)[1])
    _same(got, ref, payload=True)
    # the tier's plan carries the planner's PXN relays (NCCL's p2p rule) and wire bytes too (not the p2p
    # rate caps, which its bound does not read)
    rec = {"kind": "coll", "op": "AllToAll", "rank_bytes": nbytes, "members": ranks, "root": -1, "comm": "c"}
    plan, bare = plan_op_pair(rec, split, "auto", graph, {}, {"channels": parts})
    _same(plan, plan_collective("AllToAll", nbytes, ranks, split_bytes=split, graph=graph, channels=parts))
    _same(bare, ref)
    assert plan.rate_cap_bytes_per_s is None and bare.rate_cap_bytes_per_s is None


def _same(got, ref, payload=False):
    """Equal plans but for the p2p rate caps; ``payload``: ``got`` is before wire bytes."""
    assert (got.algo, got.proto) == (ref.algo, ref.proto)
    for name in ("src", "dst", "channel", "delay_s", "dep_ptr", "dep_idx") + (() if payload else ("bytes",)):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_an_efa_alltoall_pays_the_plugins_step_in_the_tier():
    # 2 servers of 4 H100 on EFA (P5): a network pair pays NCCL's 8.4 + 14 us and the plugin's 20 + 3 us
    graph = _graph(4, "efa")
    rec = {"kind": "coll", "op": "AllToAll", "rank_bytes": 1 << 20, "members": np.arange(8), "root": -1, "comm": "c"}
    bare = plan_op_pair(rec, None, "auto", graph, {}, {})[1]
    inter = (bare.src // 4) != (bare.dst // 4)
    assert bare.proto == "Simple" and inter.any() and (~inter).any()
    assert np.allclose(bare.delay_s[inter], (8.4 + 14 + 20 + 3) * 1e-6, rtol=1e-12, atol=0)
    assert np.allclose(bare.delay_s[~inter], (8.4 + 3.4) * 1e-6, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9), st.integers(0, 2 ** 16), st.sampled_from([0, 3, 1 << 20, 2 ** 53 + 7]),
       st.floats(-1.0, 1e6), st.sampled_from(["int64", "int32", "float", "list", "none", "shape"]))
def test_split_pairs_is_split_matrix_nonzero(n, seed, hi, nbytes, kind):
    from sim.analytical.plans import split_pairs
    from sim.errors import SimError
    from sim.planning.collectives import split_matrix

    rng = np.random.default_rng(seed)
    m = rng.integers(0, hi + 1, size=(n, n)) * (rng.random((n, n)) < 0.4)
    if n and rng.random() < 0.2:  # a negative entry, on the diagonal or off it
        m[rng.integers(n), rng.integers(n)] = -1
    split = {"int64": m, "int32": m.astype(np.int32), "float": m.astype(float), "list": m.tolist(),
             "none": None, "shape": m[:, : max(n - 1, 0)]}[kind]

    def reference():  # alltoall_plan's former code
        full = split_matrix(split, nbytes, n)
        i, j = np.nonzero(full)
        return i, j, full[i, j], float(full.max()) if n > 1 else float(nbytes), full.sum() <= 0

    try:
        ri, rj, rb, rtop, empty = reference()
    except SimError as exc:
        with pytest.raises(SimError, match=str(exc).replace("(", r"\(").replace(")", r"\)")):
            split_pairs(split, nbytes, n)
        return
    i, j, b, top = split_pairs(split, nbytes, n)
    assert top == rtop
    if empty:  # no byte to send: the plan is empty either way
        assert not len(i) or n <= 1
        return
    if n > 1:
        assert np.array_equal(i, ri) and np.array_equal(j, rj) and b.dtype == rb.dtype and np.array_equal(b, rb)
