"""NVLS, NVLSTree and PAT: the bytes each link carries, the closed forms, and NCCL's enable rules and choices.

The NVLS data path (NCCL 2.23 ``all_reduce.h``): a GPU's NVLink carries ``S (n + 1) / n`` each way (its
share of every head's reduction plus its own head's multicast). NVLSTree adds the heads' tree across
servers on their own rail. PAT sends ``n - 1`` blocks per rank in ``ceil(log2 n)`` stages.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.errors import SimError
from sim.planning import tuning
from sim.planning.collectives import graph_machine, plan_collective
from sim.planning.pat_nvls import pat_block_counts
from sim.planning.plan import LEG_DOWN, LEG_PATH, LEG_UP

NVLS = tuning.CostModel(nvls=True)


def leg_bytes(plan, gpu: int) -> tuple[float, float]:
    """(GPU -> switch, switch -> GPU) bytes of one GPU."""
    up = plan.bytes[(plan.leg == LEG_UP) & (plan.src == gpu)].sum()
    down = plan.bytes[(plan.leg == LEG_DOWN) & (plan.dst == gpu)].sum()
    return float(up), float(down)


def check_order(plan) -> None:
    rows = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(plan.dep_idx < rows)
    d = plan.dep_idx
    assert np.all((plan.step[d] < plan.step[rows]) | ((plan.step[d] == plan.step[rows]) & (plan.chunk[d] < plan.chunk[rows])))


@given(st.integers(3, 8), st.integers(1, 3))
def test_nvls_moves_n_plus_one_over_n_on_every_nvlink(n, chunks):
    size = 3 << 20
    plan = plan_collective("AllReduce", size, range(n), algo="nvls", model=NVLS, max_chunks=chunks)
    assert plan.algo == "nvls" and set(plan.leg.tolist()) == {LEG_UP, LEG_DOWN}
    assert np.all(plan.src == plan.dst)  # every transfer is a leg to or from the switch
    for g in range(n):
        up, down = leg_bytes(plan, g)
        assert up == pytest.approx(size * (n + 1) / n) and down == pytest.approx(size * (n + 1) / n)
    check_order(plan)
    assert plan.delay_s.max() == pytest.approx(tuning.algo_latency_s("AllReduce", "nvls", "Simple", n, 1))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 5), st.integers(3, 6))
def test_nvls_tree_heads_talk_on_their_rail(servers, ppn):
    n, size = servers * ppn, 6 << 20
    server_of = np.arange(n) // ppn
    plan = plan_collective("AllReduce", size, range(n), server_of=server_of, model=NVLS, algo="nvls_tree")
    assert plan.algo == "nvls_tree"
    net = plan.leg == LEG_PATH
    assert np.all(server_of[plan.src[net]] != server_of[plan.dst[net]])
    assert np.all(plan.src[net] % ppn == plan.dst[net] % ppn)  # head h of one server to head h of another
    # each tree (half the buffer) moves every head's slice up and down its m - 1 edges
    assert plan.bytes[net].sum() == pytest.approx(2 * (servers - 1) * size)
    for g in range(n):
        up, down = leg_bytes(plan, g)
        assert up == pytest.approx(size * (ppn + 1) / ppn) and down == pytest.approx(size * (ppn + 1) / ppn)
    if servers == 2:  # one peer server: each head's NIC carries its 1/ppn of the buffer each way
        for g in range(n):
            assert plan.bytes[net & (plan.src == g)].sum() == pytest.approx(size / ppn)
            assert plan.bytes[net & (plan.dst == g)].sum() == pytest.approx(size / ppn)
    check_order(plan)


def test_nvls_heads_match_nccls_log():
    # NVIDIA/nccl#1453 (3 x 8 H100): "NVLS Head h: h 8+h 16+h"
    plan = plan_collective("AllReduce", 1 << 26, range(24), server_of=np.arange(24) // 8, model=NVLS,
                           algo="nvls_tree")
    net = plan.leg == LEG_PATH
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in zip(plan.src[net], plan.dst[net], strict=True)}
    heads = {h: {h, 8 + h, 16 + h} for h in range(8)}
    assert all(set(p) <= heads[p[0] % 8] for p in pairs)


@pytest.mark.parametrize("size", [64 << 20, 1 << 30])
def test_nvls_on_one_server_is_its_closed_form_plus_the_pipeline_fill(size):
    from sim.bench.run import run_bench

    g = topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8)  # NVLink 3600 Gb/s, line rate
    t = run_bench("AllReduce", g, [size], algo="NVLS")
    assert t["algo"].tolist() == ["nvls"]
    b = 3600e9 / 8
    lat = tuning.algo_latency_s("AllReduce", "nvls", "Simple", 8, 1)
    closed = tuning.ideal_time_s("AllReduce", size, 8, b, "nvls") + lat
    chunks = math.ceil(size / (16 * 8 * tuning.nvls_chunk_bytes("nvls", size, 8, 1)))
    got = float(t["time"].iloc[0]) * 1e-6
    assert closed * (1 - 1e-6) <= got <= closed + 4 / chunks * (closed - lat)


def test_nvls_busbw_beats_the_ring_on_h100():
    from sim.bench.run import run_bench

    g = topologies.build("rail_optimized", num_gpus=8, gpu="h100", nic="ib")
    auto = run_bench("AllReduce", g, [1 << 30])
    ring = run_bench("AllReduce", g, [1 << 30], algo="ring")
    assert auto["algo"].tolist() == ["nvls"]
    # NCCL's model: 370.8 GB/s x 8/9 x 5/6 algbw; the ring cannot exceed 370.8 GB/s busbw
    assert float(auto["busbw"].iloc[0]) > 1.2 * float(ring["busbw"].iloc[0])
    assert float(auto["algbw"].iloc[0]) <= 18 * 20.6 * 8 / 9 * 5 / 6


def machine(nccl_algo=None, **params):
    g = topologies.build("rail_optimized", **params)
    if nccl_algo:
        g.graph["nccl_algo"] = nccl_algo
    servers, model = graph_machine(g, range(g.graph["num_gpus"]))
    return len(np.unique(servers)), g.graph["num_gpus"], model


@pytest.mark.parametrize(("params", "size", "expected"), [
    (dict(num_gpus=8, gpu="h100", nic="ib"), 1 << 30, "nvls"),
    (dict(num_gpus=8, gpu="b200", nic="ib"), 1 << 30, "nvls"),
    (dict(num_gpus=16, gpu="h100", nic="ib"), 1 << 30, "nvls_tree"),
    (dict(num_gpus=8, gpu="a100", nic="ib"), 1 << 30, "ring"),               # no NVLink SHARP before sm90
    (dict(num_gpus=4, gpus_per_server=2, gpu="h100"), 1 << 30, "tree"),      # <= 2 GPUs per server
    (dict(num_gpus=8, gpu="h100", nccl_algo="^NVLS"), 1 << 30, "ring"),
    (dict(num_gpus=24, gpu="h100", nic="ib"), 1024, "tree"),                  # nccl#1453: Algo 0 proto 0
])
def test_the_tuner_enables_and_picks_as_nccl(params, size, expected):
    nnodes, n, model = machine(**params)
    assert tuning.choose_algorithm("AllReduce", size, n, nnodes, model=model)[0] == expected


def test_predicted_small_allreduce_time_matches_nccls_log():
    # NVIDIA/nccl#1453, 3 x 8 H100 with 400G NICs: "1024 Bytes -> Algo 0 proto 0 time 25.331232"
    t = tuning.predict_time_s("AllReduce", 1024, 24, 3, "tree", "LL")
    assert t * 1e6 == pytest.approx(25.331232, rel=0.01)


@given(st.integers(2, 70))
def test_pat_stages_deliver_every_block_once(n):
    counts = pat_block_counts(n)
    assert len(counts) == math.ceil(math.log2(n)) and counts.sum() == n - 1
    # AllGather, distances high to low: rank x holds the blocks of ranks x + t (offsets t) and hands rank
    # x - 2^d those it needs, t + 2^d < n (PAT skips offsets past n: they arrive by another branch)
    have = [{0} for _ in range(n)]
    for d in range(len(counts) - 1, -1, -1):
        sends = [((x - (1 << d)) % n, {t + (1 << d) for t in have[x] if t + (1 << d) < n}) for x in range(n)]
        assert {len(s) for _, s in sends} == {int(counts[d])}
        for y, offsets in sends:
            assert not offsets & have[y]  # every block arrives once
            have[y] |= offsets
    assert all(h == set(range(n)) for h in have)


@given(st.integers(2, 33), st.sampled_from(["AllGather", "ReduceScatter"]), st.integers(1, 3))
def test_pat_plans_send_n_minus_one_blocks_in_log_stages(n, op, nch):
    size = 1 << 20
    plan = plan_collective(op, size, range(n), server_of=range(n), algo="pat", nchannels=nch)
    assert plan.algo == "pat" and plan.proto == "Simple"
    for r in range(n):
        assert plan.bytes[plan.src == r].sum() == pytest.approx((n - 1) * size)
        assert plan.bytes[plan.dst == r].sum() == pytest.approx((n - 1) * size)
    assert plan.step.max() + 1 == math.ceil(math.log2(n))
    dist = (plan.dst - plan.src) % n
    assert set(dist.tolist()) <= {(s * (1 << d)) % n for d in range(6) for s in (1, -1)}
    check_order(plan)


def test_pat_only_with_one_gpu_per_server_and_chosen_small():
    model = tuning.CostModel()
    assert "pat" in tuning.enabled_algos("AllGather", 16, 16, model)
    assert "pat" not in tuning.enabled_algos("AllGather", 32, 16, model)
    assert "pat" not in tuning.enabled_algos("AllReduce", 16, 16, model)
    assert tuning.choose_algorithm("AllGather", 4096, 16, 16)[0] == "pat"  # 16 x 4 KiB: log latency wins
    assert tuning.choose_algorithm("AllGather", 64 << 20, 16, 16)[0] == "ring"  # 0.85 busbw loses
    # a PAT plan asked for where NCCL has none falls back to the tuner
    assert plan_collective("AllGather", 1 << 20, range(8), algo="pat").algo != "pat"


def test_nvls_allgather_reducescatter_legs():
    for op, up, down in (("AllGather", 1.0, 8.0), ("ReduceScatter", 8.0, 1.0)):
        plan = plan_collective(op, 1 << 20, range(8), model=NVLS, algo="nvls")
        assert plan.algo == "nvls"
        for g in range(8):
            assert leg_bytes(plan, g) == pytest.approx((up * (1 << 20), down * (1 << 20)))


def test_nccl_algo_names_and_errors():
    assert tuning.parse_nccl_list("Ring,NVLSTree,PAT,CollNetDirect", "algo") == (
        "ring", "nvls_tree", "pat", "collnet_direct")
    with pytest.raises(SimError, match="'SHARP' is not one of: Ring, Tree, NVLS, NVLSTree, PAT"):
        tuning.parse_nccl_list("SHARP", "algo")
    with pytest.raises(SimError, match="algo 'nvlstree' is not one of"):
        tuning.choose_algorithm("AllReduce", 1, 8, 1, algo="nvlstree")
    with pytest.raises(SimError, match="same number of GPUs"):
        from sim.planning.nvls import nvls_edges
        nvls_edges(np.arange(5), [np.arange(3), np.arange(3, 5)], 1, 1.0)
    with pytest.raises(SimError, match="cost model: nvls 'yes' must be true or false"):
        tuning.CostModel(nvls="yes")
    # CollNet names are NCCL's; without SHARP switches NCCL ignores them and keeps its ring backup
    assert tuning.enabled_algos("AllReduce", 16, 2, tuning.CostModel(algos=("collnet_direct",))) == ("ring",)


def test_switch_legs_take_one_nvlink_link():
    from sim.prepare import switch_leg_links
    from topologies.routing import Router

    router = Router(topologies.build("rail_optimized", num_gpus=16))
    links = switch_leg_links(router, np.array([3, 3, 12]), np.array([LEG_UP, LEG_DOWN, LEG_UP]))
    assert [router.links["src"][i] + ">" + router.links["dst"][i] for i in links] == [
        "gpu3>nvs0", "nvs0>gpu3", "gpu12>nvs1"]
    with pytest.raises(SimError, match="no NVSwitch"):
        switch_leg_links(Router(topologies.build("rail_optimized", num_gpus=4, gpus_per_server=1)),
                         np.array([0]), np.array([LEG_UP]))


@pytest.mark.parametrize(("servers", "net_latency_us"), [(2, 0.0), (4, 0.0), (2, 75.0)])
def test_nvls_tree_critical_path_latency_is_nccls(servers, net_latency_us):
    model = tuning.CostModel(nvls=True, net_latency_us=net_latency_us)
    n = 8 * servers
    plan = plan_collective("AllReduce", 1 << 20, range(n), server_of=np.arange(n) // 8, model=model,
                           algo="nvls_tree", max_chunks=1)
    finish = np.zeros(len(plan))
    for i in range(len(plan)):  # an infinitely fast network: only the software latency remains
        deps = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        finish[i] = (finish[deps].max() if len(deps) else 0.0) + plan.delay_s[i]
    assert finish.max() == pytest.approx(tuning.algo_latency_s("AllReduce", "nvls_tree", "Simple", n, servers, model))


def test_nvls_tree_pays_the_kernels_ceiling_per_nvls_channel():
    from sim.bench.run import run_bench
    from sim.planning.nvls import nvls_edges, nvls_tree_kernel_factor

    g = topologies.build("rail_optimized", num_gpus=16, gpu="h100", nic="ib")
    t = run_bench("AllReduce", g, [1 << 30])
    assert t["algo"].tolist() == ["nvls_tree"]
    cap_busbw = 8 * 57.7  # GB/s: NCCL 2.28's perChMaxNVLSTreeBws (Hopper, 2 nodes) x one NVLS channel per head
    assert 0.93 * cap_busbw <= float(t["busbw"].iloc[0]) <= cap_busbw
    # NVLink's bound (18 x 20.6 GB/s x 8/9 x 5/6 algbw) over the kernel's (8 x cap x 16/30) on 2 servers;
    # beyond two servers the Hopper row's 45.5; Blackwell has its own row; no preset: the closed forms
    _, h100 = graph_machine(g, range(16))
    assert nvls_tree_kernel_factor(h100, 16, 2) == pytest.approx(370.8 * 8 / 9 * 5 / 6 / (8 * 57.7 * 16 / 30))
    assert nvls_tree_kernel_factor(h100, 32, 4) == pytest.approx(370.8 * 8 / 9 * 5 / 6 / (8 * 45.5 * 32 / 62))
    _, b200 = graph_machine(topologies.build("rail_optimized", num_gpus=16, gpu="b200", nic="ib"), range(16))
    assert b200.gpu_arch == "blackwell" and b200.arch == "hopper"
    assert nvls_tree_kernel_factor(b200, 16, 2) == pytest.approx(max(1.0, 18 * 40.1 * 8 / 9 * 5 / 6 / (8 * 96.0 * 16 / 30)))
    assert nvls_tree_kernel_factor(NVLS, 16, 2) == 1.0 and nvls_tree_kernel_factor(h100, 8, 1) == 1.0
    with pytest.raises(SimError, match="nvlink_factor"):
        nvls_edges(np.arange(4), [np.arange(4)], 1, 4096.0, nvlink_factor=0.5)
    with pytest.raises(SimError, match="gpu_arch"):
        tuning.CostModel(gpu_arch="pascal")
