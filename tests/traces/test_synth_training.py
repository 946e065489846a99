"""Training synthesis against closed forms from the models' published dimensions and Megatron's layout.

Parameter counts are written out here from the configs (Llama-3 70B: h 8192, 80 layers, 64 heads, 8 KV
heads of 128, FFN 28,672, vocab 128,256; GPT-3 175B: h 12,288, 96 layers, FFN 4h, vocab 50,257, 2048
learned positions, tied embeddings), not taken from the generator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from traces.synth import synthesize

H, L, FFN, KV, HD, V = 8192, 80, 28_672, 8, 128, 128_256


def llama70b_params_per_rank(tp: int, pp: int, stage: int) -> int:
    """Parameters of one rank: its layers' TP shards + replicated RMSNorms, embedding / head rows."""
    vp = math.ceil(V / (128 * tp)) * 128 * tp  # Megatron pads the vocabulary to 128·tp
    layer = (H * (H + 2 * KV * HD) + H * H + 3 * H * FFN) // tp + 2 * H
    total = (L // pp) * layer
    if stage == 0:
        total += vp // tp * H
    if stage == pp - 1:
        total += H + vp // tp * H
    return total


def _site(df):
    return df["context"].str.extract(r"site=(\w+)")[0]


@pytest.fixture(scope="module")
def llama_zero0():
    return synthesize("llama3-70b", mode="training", tp=8, pp=4, dp=2, micro_batches=4, seq_len=128)


def test_gradient_allreduce_bytes_equal_parameter_bytes(llama_zero0):
    df = llama_zero0
    grads = df[_site(df) == "grad_sync"]
    assert set(grads["op"]) == {"AllReduce"} and set(grads["dtype"]) == {"fp32"}
    for stage in range(4):
        for rank in (8 * 2 * stage, 8 * 2 * stage + 7, 8 * 2 * stage + 8):  # tp ranks 0 and 7, dp rank 1
            mine = grads[grads["rank"] == rank]
            assert mine["bytes"].sum() == 4 * llama70b_params_per_rank(8, 4, stage)
            assert set(mine["nranks"]) == {2}


def test_tp_collectives_per_micro_batch(llama_zero0):
    df = llama_zero0
    r0 = df[df["rank"] == 0]  # stage 0: embedding + 20 layers
    tp_rows = r0[r0["comm"] == "tp0.0"]
    act = 1 * 128 * H * 2
    per_layer = tp_rows[tp_rows["context"].str.contains("layer=")]
    assert len(per_layer) == 4 * (L // 4) * 4  # 2 forward + 2 backward AllReduce per layer, 4 micro-batches
    assert set(per_layer["bytes"]) == {act}
    assert (tp_rows["context"].str.contains("site=embed")).sum() == 4
    last = df[(df["rank"] == 48) & (df["comm"] == "tp0.3")]
    ce = last[_site(last).str.startswith("ce_")]
    assert len(ce) == 3 * 4 and set(ce["bytes"]) == {128 * 4}


def test_pipeline_sends_per_micro_batch(llama_zero0):
    df = llama_zero0
    act = 128 * H * 2
    for stage in range(4):
        rank = 16 * stage
        sub = df[df["rank"] == rank]
        sends, recvs = sub[sub["op"] == "Send"], sub[sub["op"] == "Recv"]
        neighbours = (stage > 0) + (stage < 3)
        assert len(sends) == len(recvs) == 4 * neighbours  # activations forward, gradients backward
        assert set(sends["bytes"]) == {act}
    # 1F1B steady state pairs a Send with a Recv in one group
    grouped = df[df["group"] >= 0]
    assert len(grouped) > 0
    sizes = grouped.groupby(["rank", "group"]).size()
    assert set(sizes) == {2}
    kinds = grouped.groupby(["rank", "group"])["op"].agg(lambda s: tuple(sorted(s)))
    assert set(kinds) == {("Recv", "Send")}


def test_distributed_optimizer_shards_gradients_and_gathers_params():
    df = synthesize("llama3-70b", mode="training", tp=8, pp=4, dp=4, micro_batches=1, seq_len=64, zero=1,
                    gpus_per_node=8)
    grads = df[_site(df) == "grad_sync"]
    assert set(grads["op"]) == {"ReduceScatter"}
    params = df[_site(df) == "param_ag"]
    assert set(params["op"]) == {"AllGather"} and set(params["dtype"]) == {"bf16"}
    for stage in range(4):
        rank = 32 * stage
        n = llama70b_params_per_rank(8, 4, stage)
        rs = grads[grads["rank"] == rank]
        buckets = len(rs)
        # per-rank receive count x dp covers the parameters, padded below dp per bucket
        assert n <= rs["count"].sum() * 4 < n + 4 * buckets
        ag = params[params["rank"] == rank]
        assert ag["count"].sum() == rs["count"].sum()
        assert ag["bytes"].sum() * 2 == rs["bytes"].sum()


def test_fsdp_reduce_scatters_every_micro_batch():
    df = synthesize("llama3-8b", mode="training", tp=1, dp=8, micro_batches=3, seq_len=32, zero=3)
    h, layers, ffn, kv = 4096, 32, 14_336, 8
    vp = math.ceil(128_256 / 128) * 128
    total = layers * (h * (h + 2 * kv * 128) + h * h + 3 * h * ffn + 2 * h) + vp * h + h + vp * h
    rs = df[(df["rank"] == 0) & (df["op"] == "ReduceScatter")]
    units = layers + 2
    assert len(rs) == 3 * units
    assert total <= rs["count"].sum() / 3 * 8 < total + 8 * units
    ag = df[(df["rank"] == 0) & (df["op"] == "AllGather")]
    assert len(ag) == 2 * 3 * units  # before each unit's forward and backward


def test_sequence_parallel_replaces_allreduce_by_gather_scatter():
    df = synthesize("llama3-8b", mode="training", tp=4, dp=1, micro_batches=1, seq_len=64, sequence_parallel=True)
    r0 = df[(df["rank"] == 0) & df["context"].str.contains("layer=")]
    ops = r0["op"].value_counts().to_dict()
    assert ops == {"AllGather": 32 * (2 + 4), "ReduceScatter": 32 * (2 + 2)}
    assert set(r0["bytes"]) == {64 * 4096 * 2 // 4}


def test_gpt3_tied_embedding_grads_between_first_and_last_stage():
    df = synthesize("gpt3-175b", mode="training", tp=8, pp=2, dp=2, micro_batches=2, seq_len=32)
    emb = df[_site(df) == "embedding_grads"]
    vp = math.ceil(50_257 / 1024) * 1024
    assert set(emb["rank"]) == set(range(32))  # every rank of both stages, one pair per (dp, tp) rank
    assert set(emb["count"]) == {vp // 8 * 12_288} and set(emb["nranks"]) == {2}
    # GPT-3's layer on one TP rank: 12h^2/t weights + column biases /t + row biases + 2 LayerNorms
    h = 12_288
    layer = 12 * h * h // 8 + 3 * h // 8 + h + 4 * h // 8 + h + 4 * h
    stage0 = 48 * layer + vp // 8 * h + 2048 * h
    grads = df[(df["rank"] == 0) & (_site(df) == "grad_sync")]
    assert grads["bytes"].sum() == 4 * stage0


def test_mixtral_expert_parallel_all_to_all():
    seq, ep = 32, 4
    df = synthesize("mixtral-8x7b", mode="training", pp=1, dp=8, ep=ep, micro_batches=2, seq_len=seq)
    a2a = df[df["op"] == "AllToAll"]
    per_rank_layer = a2a[a2a["rank"] == 0].groupby(a2a["context"].str.extract(r"layer=(\d+)")[0]).size()
    assert (per_rank_layer == 4 * 2).all() and len(per_rank_layer) == 32
    disp = a2a[_site(a2a) == "moe_dispatch"]
    for _, rows in disp.groupby(["comm", "seq"]):
        m = np.array(rows.sort_values("rank")["split_bytes"].tolist())
        assert m.sum() == ep * seq * 2 * 4096 * 2  # tokens of the EP group x top-2 x bf16 hidden
    # expert gradients are reduced over the expert-data-parallel group (dp / ep = 2 ranks)
    grads = df[_site(df) == "grad_sync"]
    assert {len(df.attrs["collsim"]["comms"][c]) for c in grads["comm"].unique()} == {2, 8}
