"""Inference synthesis against closed forms derived from DeepSeek-V3's config and the engines' code.

Constants below are typed in from ``inference/configs/config_671B.json`` (DeepSeek-V3) and the engines'
call sites (``../shared/docs/workloads.md`` §2), not read from the generator's model table.
"""

from __future__ import annotations

import numpy as np
import pytest

from traces.schema import TraceError, validate
from traces.synth import synthesize
from traces.synth.models import get_model
from traces.synth.router import Router, copies_matrix

HIDDEN, LAYERS, DENSE, VOCAB, EXPERTS, TOPK, GROUPS, TOPK_GROUPS = 7168, 61, 3, 129_280, 256, 8, 8, 4
MOE = LAYERS - DENSE
REF_AR = 1 + LAYERS + DENSE + 2 * MOE  # embedding, attention wo, dense w2, shared w2 + routed sum
VLLM_AR = 1 + 2 * LAYERS  # embedding, o_proj, MLP (shared + routed reduced together)
DISPATCH_COPY = HIDDEN + (HIDDEN // 128) * 4  # FP8 values + fp32 scale per 128 channels
COMBINE_COPY = HIDDEN * 2


def _steps(df):
    return df["context"].str.extract(r"step=(\d+)")[0].astype(int)


def _phase(df):
    return df["context"].str.extract(r"phase=(\w+)")[0]


def test_closed_forms_from_the_config():
    assert REF_AR == 181 and VLLM_AR == 123 and DISPATCH_COPY * TOPK == 59_136


@pytest.mark.parametrize(("n_out", "prompt"), [(1, 6), (4, 5)])
def test_reference_tp16_per_forward(n_out, prompt):
    df = synthesize("deepseek-v3", engine="reference", tp=16, nodes=2, requests=1, prompt_tokens=prompt,
                    output_tokens=n_out)
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 16 and meta["comms"] == {"tp0": list(range(16))}
    assert meta["source"] == "synth:deepseek-v3:reference"
    step = _steps(df)
    # N generated tokens = 1 prefill forward + N-1 decode forwards
    assert step.nunique() == n_out
    phases = df.groupby(step)["context"].first().str.extract(r"phase=(\w+)")[0].tolist()
    assert phases == ["prefill"] + ["decode"] * (n_out - 1)
    for k in range(n_out):
        fwd = df[(step == k)]
        ar = fwd[fwd["op"] == "AllReduce"]
        assert len(ar) == 16 * REF_AR
        tokens = prompt if k == 0 else 1
        assert set(ar["bytes"]) == {14_336 * tokens}
        ag = fwd[fwd["op"] == "AllGather"]
        assert len(ag) == 16 and set(ag["count"]) == {VOCAB // 16} and set(ag["bytes"]) == {16_160}
    bc = df[df["op"] == "Broadcast"]
    assert len(bc) == 2 * 16 and set(bc["root"]) == {0}
    assert sorted(bc.groupby("seq")["bytes"].first())[0] == 8  # the int64 size tensor comes first


def test_reference_static_batch_counts_forwards_like_generate_py():
    # prompts 3 and 5 long, 2 and 4 tokens out: the loop runs cur_pos in [3, max(3+2, 5+4)) = 6 forwards,
    # the first over B x min(L) = 2 x 3 tokens, then B = 2 tokens each
    from traces.synth.workload import Requests, static_batching

    reqs = Requests(np.zeros(2), np.array([3, 5]), np.array([2, 4]))
    steps = static_batching(reqs, 8, lambda s: 0.01)
    assert [s.batches[0].tokens for s in steps] == [6, 2, 2, 2, 2, 2]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vllm_sglang_tp16_per_forward(engine):
    df = synthesize("deepseek-v3", engine=engine, tp=16, nodes=2, requests=2, prompt_tokens=3, output_tokens=3)
    step = _steps(df)
    # two requests arriving together: one prefill of 2 x 3 tokens, then 2 decodes of batch 2
    assert step.nunique() == 3
    for k, (tokens, seqs) in enumerate([(6, 2), (2, 2), (2, 2)]):
        fwd = df[step == k]
        ar = fwd[fwd["op"] == "AllReduce"]
        assert len(ar) == 16 * VLLM_AR and set(ar["bytes"]) == {14_336 * tokens}
        ag = fwd[fwd["op"] == "AllGather"]
        assert set(ag["count"]) == {seqs * 8080} and len(ag) == 16
    assert "Broadcast" not in set(df["op"])


def test_ep_mode_all_to_all_totals_per_layer():
    tp, dp, prompt = 4, 4, 10
    df = synthesize("deepseek-v3", engine="sglang", tp=tp, dp=dp, ep=16, gpus_per_node=4, requests=4,
                    prompt_tokens=prompt, output_tokens=2)
    world = tp * dp
    a2a = df[df["op"] == "AllToAll"]
    per_step = a2a.groupby(_steps(a2a)).size()
    assert (per_step == 2 * MOE * world).all()
    for (site, k), rows in a2a.groupby([a2a["context"].str.extract(r"site=(\w+)")[0], _steps(a2a)]):
        tokens = dp * prompt if k == 0 else dp  # one request per replica
        matrices = rows.groupby(rows["context"].str.extract(r"layer=(\d+)")[0])
        for _, layer_rows in matrices:
            layer_rows = layer_rows.sort_values("rank")
            m = np.array(layer_rows["split_bytes"].tolist())
            assert m.shape == (world, world)
            copy = DISPATCH_COPY if site == "moe_dispatch" else COMBINE_COPY
            assert m.sum() == tokens * TOPK * copy
            wire = m.sum() - np.trace(m)
            assert wire == m.sum() - sum(m[i, i] for i in range(world))
            assert (layer_rows["count"].to_numpy() == m.sum(axis=1) // (1 if site == "moe_dispatch" else 2) // world).all()
    # combine sends back what dispatch brought: the matrices are transposes (per copy)
    disp = a2a[a2a["context"].str.contains("moe_dispatch;") | a2a["context"].str.endswith("moe_dispatch")]
    comb = a2a[a2a["context"].str.endswith("moe_combine")]
    d0 = np.array(disp[disp["seq"] == 0].sort_values("rank")["split_bytes"].tolist()) // DISPATCH_COPY
    c0 = np.array(comb[comb["seq"] == 1].sort_values("rank")["split_bytes"].tolist()) // COMBINE_COPY
    assert (d0 == c0.T).all()
    # uneven: per-pair sizes differ
    assert np.std(d0) > 0
    assert set(disp["dtype"]) == {"fp8_e4m3"} and set(comb["dtype"]) == {"bf16"}


def test_ep_mode_tp_collectives_and_logits():
    tp, dp, prompt = 4, 2, 10
    df = synthesize("deepseek-v3", engine="sglang", tp=tp, dp=dp, ep=8, requests=2, prompt_tokens=prompt,
                    output_tokens=1)
    first = df[df["comm"] == "tp0"]
    sizes = first.groupby("op")["bytes"].agg(set).to_dict()
    slice_tokens = -(-prompt // tp)  # ceil(T / tp) rows per rank after padding
    assert sizes["ReduceScatter"] == {slice_tokens * HIDDEN * 2}
    assert {slice_tokens * HIDDEN * 2, 1 * (VOCAB // tp) * 2} == sizes["AllGather"]
    per_rank = first[first["rank"] == 0]["op"].value_counts().to_dict()
    assert per_rank["ReduceScatter"] == MOE and per_rank["AllGather"] == MOE + 1
    assert per_rank["AllReduce"] == 1 + 2 * DENSE
    assert df.attrs["collsim"]["comms"]["ep"] == list(range(tp * dp))


def test_vllm_ep_mode_all_reduces_then_slices():
    df = synthesize("deepseek-v3", engine="vllm", tp=2, dp=2, ep=4, requests=2, prompt_tokens=5, output_tokens=1)
    ops = df[df["rank"] == 0]["op"].value_counts().to_dict()
    assert ops["AllReduce"] == 1 + 2 * DENSE + MOE and "ReduceScatter" not in ops
    assert ops["AllToAll"] == 2 * MOE


def test_router_obeys_node_limited_top_k():
    spec = get_model("deepseek-v3")
    chosen = Router(spec, seed=3).route(10, 500)
    assert chosen.shape == (500, TOPK)
    assert all(len(set(row)) == TOPK for row in chosen.tolist())
    groups = chosen // (EXPERTS // GROUPS)
    assert max(len(set(row)) for row in groups.tolist()) <= TOPK_GROUPS
    # rank dedup never sends more copies than per-expert counting, and at least one per token
    per_expert = copies_matrix([chosen], EXPERTS, 32, "expert")
    per_rank = copies_matrix([chosen], EXPERTS, 32, "rank")
    assert per_expert.sum() == 500 * TOPK
    assert 500 <= per_rank.sum() <= per_expert.sum()
    assert per_rank.sum() == sum(len(set(row)) for row in (chosen // 8).tolist())


def test_router_skew_makes_hot_experts():
    spec = get_model("deepseek-v3")
    counts = np.bincount(Router(spec, seed=0, skew=1.0).route(5, 4000).ravel(), minlength=EXPERTS)
    flat = np.bincount(Router(spec, seed=0, skew=0.0).route(5, 4000).ravel(), minlength=EXPERTS)
    assert counts.std() > flat.std()


def test_same_arguments_same_file_bytes(tmp_path):
    from traces.io import write_trace

    plan = dict(engine="sglang", tp=2, dp=2, ep=4, requests=3, prompt_tokens="lognormal:8:0.5",
                output_tokens="uniform:1:3", arrival_rate=200.0, seed=11)
    a = write_trace(synthesize("deepseek-v3", **plan), tmp_path / "a.parquet").read_bytes()
    b = write_trace(synthesize("deepseek-v3", **plan), tmp_path / "b.parquet").read_bytes()
    c = write_trace(synthesize("deepseek-v3", **{**plan, "seed": 12}), tmp_path / "c.parquet").read_bytes()
    assert a == b and a != c


def test_rows_follow_the_schema_and_placement():
    df = synthesize("deepseek-v3", engine="sglang", tp=4, dp=4, ep=16, requests=2, prompt_tokens=4, output_tokens=2)
    validate(df)
    assert (df["host"] == "node" + (df["rank"] // 8).astype(str)).all()
    assert (df["device"] == df["rank"] % 8).all()
    assert df["duration_s"].isna().all() and df["t_start_s"].notna().all()
    # seq numbers a rank's collectives on each comm 0..n-1
    for (_, _), sub in df.groupby(["comm", "rank"]):
        assert sorted(sub["seq"]) == list(range(len(sub)))
    assert df["context"].str.match(r"phase=\w+;step=\d+(;layer=\d+)?;site=\w+").all()


def test_prefill_takes_longer_than_decode_and_arrivals_leave_gaps():
    df = synthesize("deepseek-v3", engine="vllm", tp=8, requests=2, prompt_tokens=4000, output_tokens=3,
                    arrival_rate=0.5, seed=1)
    r0 = df[df["rank"] == 0]
    starts = r0.groupby(_steps(r0))["t_start_s"].min()
    phases = r0.groupby(_steps(r0))["context"].first().str.extract(r"phase=(\w+)")[0]
    spans = starts.diff().shift(-1)
    assert phases.tolist()[0] == "prefill"
    assert spans.iloc[0] > 3 * spans.iloc[1]  # a 4000-token prefill outlasts a 1-token decode
    # the second request arrives seconds later (rate 0.5/s): its prefill waits for it
    second = [k for k, p in phases.items() if p == "prefill"][1]
    assert starts[second] - starts[second - 1] > 10 * spans.iloc[1]


def test_router_matches_a_plain_reading_of_the_gate():
    # DeepSeek-V3 Gate: sigmoid scores; group score = sum of its two best; keep the best 4 of 8 groups;
    # top-8 experts among the kept groups. Recompute it plainly from the same draws.
    import copy

    spec = get_model("deepseek-v3")
    router = Router(spec, seed=5)
    twin = copy.deepcopy(router)
    chosen = router.route(7, 200)
    logits = (twin.rng.random((200, EXPERTS), dtype=np.float32) - 0.5) * np.float32(np.sqrt(12.0))
    logits = logits + twin.bias[7].astype(np.float32)
    scores = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    size = EXPERTS // GROUPS
    for i in range(200):
        group_scores = [sorted(scores[i, g * size:(g + 1) * size])[-2:] for g in range(GROUPS)]
        kept = sorted(range(GROUPS), key=lambda g: -sum(group_scores[g]))[:TOPK_GROUPS]
        allowed = [x for g in kept for x in range(g * size, (g + 1) * size)]
        expected = sorted(allowed, key=lambda x: -scores[i, x])[:TOPK]
        assert set(expected) == set(chosen[i].tolist())


@pytest.mark.parametrize("layers", [1, 3, 5])
def test_layers_knob_truncates_the_model(layers):
    df = synthesize("deepseek-v3", engine="reference", tp=4, requests=1, prompt_tokens=2, output_tokens=1,
                    layers=layers)
    dense = min(DENSE, layers)
    expected = 1 + layers + dense + 2 * (layers - dense)
    assert (df["op"] == "AllReduce").sum() == 4 * expected
    assert any("truncated" in n for n in df.attrs["collsim"]["notes"])
    with pytest.raises(TraceError, match="layers"):
        synthesize("deepseek-v3", engine="reference", tp=4, layers=62)
