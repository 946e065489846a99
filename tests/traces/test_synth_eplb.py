"""Redundant experts (EPLB placement, static dispatch) and the DeepSeek-V3 decode step at scale.

Closed forms are typed in from DeepSeek-V3's ``config_671B.json`` (hidden 7168, 61 layers of which 3 dense,
256 routed experts, top-8) and DeepEP's V3 configuration (FP8 dispatch with one fp32 scale per 128
channels, bf16 combine), not read from the generator's tables.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.schema import TraceError, validate
from traces.synth import synthesize
from traces.synth.eplb import balanced_packing, dispatch_gpus, place_experts, replicate_experts

HIDDEN, LAYERS, DENSE, EXPERTS, TOPK = 7168, 61, 3, 256, 8
DISPATCH_COPY = HIDDEN + HIDDEN // 128 * 4  # 7392 B
COMBINE_COPY = 2 * HIDDEN  # 14,336 B

loads = st.lists(st.integers(0, 1000), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(loads, st.integers(0, 5))
def test_replication_minimises_the_largest_load_per_replica(load, extra):
    load = np.array(load, dtype=float)
    phys, count = replicate_experts(load, len(load) + extra)
    assert (count >= 1).all() and count.sum() == len(load) + extra
    assert np.array_equal(np.bincount(phys, minlength=len(load)), count)
    # brute force over every way to hand out the spare replicas
    best = min(max(load / (1 + np.array(c))) for c in itertools.product(range(extra + 1), repeat=len(load))
               if sum(c) == extra)
    assert max(load / count) == pytest.approx(best)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.data())
def test_packing_gives_every_pack_the_same_number_of_items(packs, per_pack, data):
    w = np.array(data.draw(st.lists(st.floats(0, 100), min_size=packs * per_pack, max_size=packs * per_pack)))
    pack = balanced_packing(w, packs)
    assert np.array_equal(np.bincount(pack, minlength=packs), np.full(packs, per_pack))
    # greedy bound: no pack exceeds the mean by more than the heaviest item
    totals = np.bincount(pack, weights=w, minlength=packs)
    assert totals.max() <= w.sum() / packs + w.max() + 1e-9


@pytest.mark.parametrize(("gpus", "nodes", "physical", "policy"),
                         [(64, 8, 320, "hierarchical"), (144, 18, 288, "global"), (1024, 128, 1024, "global"),
                          (16, 2, 256, "hierarchical")])
def test_placement_invariants(gpus, nodes, physical, policy):
    rng = np.random.default_rng(1)
    load = rng.gamma(2.0, 50.0, size=(3, EXPERTS))
    phy, used = place_experts(load, physical, 8, nodes, gpus)
    assert used == policy and phy.shape == (3, physical)
    per_gpu = physical // gpus
    for layer in range(3):
        counts = np.bincount(phy[layer], minlength=EXPERTS)
        assert (counts >= 1).all() and counts.sum() == physical  # every expert has a replica
        if policy == "hierarchical":  # a group's replicas stay on one server
            node = np.arange(physical) // (physical // nodes)
            for g in range(8):
                assert len(set(node[phy[layer] // 32 == g])) == 1
        # the heaviest experts get the redundant replicas: a replica never carries more than an unreplicated
        # expert's whole load would require (max load per replica <= max load)
        share = load[layer] / counts
        assert share.max() <= load[layer].max() + 1e-9
        assert phy[layer].reshape(gpus, per_gpu).shape == (gpus, per_gpu)  # replicas per GPU equal


def test_dispatch_uses_local_replicas_and_spreads_the_rest_evenly():
    rng = np.random.default_rng(2)
    load = rng.gamma(2.0, 50.0, size=(1, EXPERTS))
    gpus, physical = 512, 512
    phy, _ = place_experts(load, physical, 8, 64, gpus)
    dest = dispatch_gpus(phy[0], EXPERTS, gpus, np.random.default_rng(0))
    host = {x: set(np.flatnonzero(phy[0] == x).tolist()) for x in range(EXPERTS)}  # one slot per GPU
    for x in range(EXPERTS):
        col = dest[:, x]
        assert set(col.tolist()) <= host[x]  # a copy always reaches a replica of its expert
        for g in host[x]:
            assert col[g] == g  # a GPU that hosts the expert keeps the copy
        others = [g for g in range(gpus) if g not in host[x]]
        served = np.bincount(col[others], minlength=gpus)[sorted(host[x])]
        assert served.max() - served.min() <= 1


def _decode(n, batch=64, layers=5, **extra):
    return synthesize("deepseek-v3", engine="sglang", tp=8, dp=n // 8, ep=n, nodes=n // 8, decode_batch=batch,
                      layers=layers, **extra)


def _a2a(df, site):
    rows = df[df["context"].str.endswith(f"site={site}")]
    return rows


@pytest.mark.parametrize("n", [64, 512])
def test_decode_step_sizes_match_the_config(n):
    batch, tp, layers = 64, 8, 5
    df = _decode(n, batch, layers)
    validate(df)
    meta = df.attrs["collsim"]
    assert meta["world_size"] == n
    moe = layers - DENSE
    per_rank = df.groupby("rank")["op"].value_counts().unstack().fillna(0).astype(int)
    # per rank: embedding + 2 per dense layer AllReduce; per MoE layer RS, 2 AllToAll, AG; logits AG
    assert (per_rank["AllReduce"] == 1 + 2 * DENSE).all()
    assert (per_rank["AllToAll"] == 2 * moe).all()
    assert (per_rank["ReduceScatter"] == moe).all()
    assert (per_rank["AllGather"] == moe + 1).all()
    rs = df[df["op"] == "ReduceScatter"]
    assert set(rs["bytes"]) == {-(-batch // tp) * HIDDEN * 2}
    tokens_per_rank = batch // tp
    for layer in range(DENSE, layers):
        disp = _a2a(df, "moe_dispatch")
        disp = disp[disp["context"].str.contains(f"layer={layer};")]
        comb = _a2a(df, "moe_combine")
        comb = comb[comb["context"].str.contains(f"layer={layer};")]
        d = np.array(disp.sort_values("rank")["split_bytes"].tolist())
        c = np.array(comb.sort_values("rank")["split_bytes"].tolist())
        assert d.shape == (n, n)
        # every rank sends each of its tokens to 8 experts: row sums are the closed form
        assert (d.sum(axis=1) == tokens_per_rank * TOPK * DISPATCH_COPY).all()
        # combine returns exactly what the dispatch delivered (bytes conserved, transposed)
        assert np.array_equal(c, d.T // DISPATCH_COPY * COMBINE_COPY)
        assert d.sum() == n * tokens_per_rank * TOPK * DISPATCH_COPY
    if n > EXPERTS:
        assert meta["parallelism"]["redundant_experts"] == n - EXPERTS
        assert meta["parallelism"]["expert_slots_per_gpu"] == 1
        assert meta["parallelism"]["expert_placement"] == "eplb-global"
    else:
        assert "redundant_experts" not in meta["parallelism"]


def test_redundant_experts_below_256_gpus_and_rank_dedup():
    df = _decode(64, 64, 4, redundant_experts=64, dedup="rank")
    meta = df.attrs["collsim"]
    assert meta["parallelism"]["expert_slots_per_gpu"] == 5
    assert meta["parallelism"]["expert_placement"] == "eplb-hierarchical"
    d = np.array(_a2a(df, "moe_dispatch").sort_values("rank")["split_bytes"].tolist())
    copies = d.sum(axis=1) // DISPATCH_COPY
    # one copy per (token, destination rank): between 1 and 8 per token
    assert ((copies >= 8) & (copies <= 8 * TOPK)).all() and (copies < 8 * TOPK).any()


def test_decode_step_is_deterministic():
    a, b = _decode(64, 32, 4), _decode(64, 32, 4)
    assert a.equals(b)


def test_uneven_replicas_are_rejected():
    with pytest.raises(TraceError, match="redundant"):
        _decode(64, 32, 4, redundant_experts=3)


def test_ep_deployments_side_by_side():
    # 512 GPUs as two EP256 deployments: each all-to-all stays inside its own 256 ranks
    df = synthesize("deepseek-v3", engine="sglang", tp=8, dp=64, ep=256, nodes=64, decode_batch=64, layers=4)
    meta = df.attrs["collsim"]
    assert meta["comms"]["ep0"] == list(range(256)) and meta["comms"]["ep1"] == list(range(256, 512))
    assert meta["parallelism"]["ep_instances"] == 2
    for comm in ("ep0", "ep1"):
        d = np.array(df[(df["comm"] == comm) & df["context"].str.endswith("moe_dispatch")]
                     .sort_values("rank")["split_bytes"].tolist())
        assert d.shape == (256, 256) and (d.sum(axis=1) == 8 * TOPK * DISPATCH_COPY).all()
