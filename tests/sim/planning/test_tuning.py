"""NCCL's cost model (sim.planning.tuning) checked against hand calculations from performance.md §1.

Every expected number below is worked out by hand from the tables in performance.md (NCCL 2.19):
base latency {LL, LL128, Simple} tree {6.8, 14, 0}, ring {6.6, 14, 8.4}; per-step NVLink tree
{0.6, 1.25, 28}, ring {0.6, 1.9, 3.4}; NET tree {5, 8.5, 28}, ring {2.7, 4, 14}; network overhead
1 µs (Intel), ×3 for Simple; model machine: 450 GB/s NVLink, 50 GB/s NIC per GPU, 16 channels.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.errors import SimError
from sim.planning import tuning

US = 1e-6


@pytest.mark.parametrize(
    ("op", "algo", "proto", "n", "nodes", "expected_us"),
    [
        # ring AllReduce, one node: 8.4 + 14 steps × 3.4
        ("AllReduce", "ring", "Simple", 8, 1, 8.4 + 14 * 3.4),
        # ring AllReduce LL, one node: 6.6 + 14 × 0.6
        ("AllReduce", "ring", "LL", 8, 1, 6.6 + 14 * 0.6),
        # 2 nodes × 8: nsteps 30, nInter 2(2 − 1) = 2 (NCCL 2.23), intra max(3.4, 3·1) = 3.4
        ("AllReduce", "ring", "Simple", 16, 2, 8.4 + 28 * 3.4 + 2 * 14),
        # 4 nodes × 8, LL: nsteps 62, nInter 6, intra max(0.6, 1) = 1
        ("AllReduce", "ring", "LL", 32, 4, 6.6 + 56 * 1.0 + 6 * 2.7),
        # 4 nodes × 1 GPU (ppn 1): inter steps pay the tree's NET latency (LL128 8.5, not 4.0)
        ("AllReduce", "ring", "LL128", 4, 4, 14.0 + 6 * 8.5),
        # AllGather 4 × 8, LL128: nsteps 31, nInter 3, intra max(1.9, 1) = 1.9
        ("AllGather", "ring", "LL128", 32, 4, 14 + 28 * 1.9 + 3 * 4.0),
        # tree LL, 4 nodes × 8: 6.8 + 2(7 × 0.6 + log2(4) × 5)
        ("AllReduce", "tree", "LL", 32, 4, 6.8 + 2 * (7 * 0.6 + 2 * 5.0)),
        # tree Simple, one node of 8: 0 + 2(7 × 28)
        # NCCL 2.23: tree Simple base 8.4, NVLink 4.0, NET 14 per hop
        ("AllReduce", "tree", "Simple", 8, 1, 8.4 + 2 * 7 * 4.0),
        # Broadcast, 2 nodes, Simple: 8.4 + nsteps(16) × tree NET Simple 14
        ("Broadcast", "ring", "Simple", 16, 2, 8.4 + 16 * 14.0),
        # Broadcast, one node, LL: 6.6 + 8 × 0.6
        ("Broadcast", "ring", "LL", 8, 1, 6.6 + 8 * 0.6),
    ],
)
def test_latency_matches_hand_formulas(op, algo, proto, n, nodes, expected_us):
    assert tuning.algo_latency_s(op, algo, proto, n, nodes) == pytest.approx(expected_us * US)


@pytest.mark.parametrize(("ppn", "line_gbps", "arch", "expected"), [
    (8, 400, "hopper", (8, 48.0)),    # 48 < 50 with 8 channels on sm90: not duplicated (NVIDIA/nccl#1041: 8)
    (8, 200, "hopper", (8, 24.0)),    # 25 GB/s NICs: 24 GB/s, below the duplication threshold
    (1, 400, "hopper", (2, 24.0)),    # one channel of 48 duplicated into two of 24
    (4, 400, "ampere", (8, 24.0)),    # not sm90: 48 >= 25 is duplicated
    (16, 400, "hopper", (16, 48.0)),  # at most MAXCHANNELS / 2
])
def test_net_graph_channels_follow_the_search(ppn, line_gbps, arch, expected):
    model = tuning.CostModel(inter_bw_bytes_per_s=line_gbps / 8 * 1e9 * 0.94, nic_efficiency=0.94, arch=arch)
    assert tuning.net_graph_channels(model, ppn) == expected


def test_auto_choice_small_multinode_allreduce_is_tree_ll():
    # 1 KiB on 4 × 8: tree LL 35.2 µs latency beats ring LL 78.8 µs; bandwidth terms < 1 µs
    assert tuning.choose_algorithm("AllReduce", 1024, 32, 4) == ("tree", "LL")


def test_auto_choice_large_multinode_allreduce_is_ring_simple():
    # 1 GiB on 4 × 8: ring Simple 1 GiB / (400·32/62 GB/s) = 5.2 ms + 0.43 ms, tree Simple
    # 1 GiB / 184 GB/s = 5.8 ms + 0.5 ms, ring LL128 1 GiB / (368·32/62 GB/s) = 5.65 ms
    ring = 2**30 / (400e9 * 32 / 62) + 1.4 * (8.4 + 56 * 3.4 + 6 * 14) * US
    tree = 2**30 / 184e9 + (8.4 + 2 * (7 * 4.0 + 2 * 14.0)) * US
    assert ring < tree
    assert tuning.choose_algorithm("AllReduce", 2**30, 32, 4) == ("ring", "Simple")
    assert tuning.predict_time_s("AllReduce", 2**30, 32, 4, "ring", "Simple") == pytest.approx(ring)


def test_auto_choice_single_node_small_is_ring_ll():
    # 1 KiB on 8 GPUs: ring LL 15.0 µs vs tree LL 6.8 + 2·7·0.6 = 15.2 µs
    assert tuning.choose_algorithm("AllReduce", 1024, 8, 1) == ("ring", "LL")


def test_two_nodes_large_allreduce_tree_when_the_nics_are_slower_than_half_nvlink():
    # performance.md (A3 Mega, 8 x 200G per node): at 2 nodes the tree moves ~S per node; NCCL lets its
    # intra speed reach 2x the NICs. 1 GiB on 2 x 8, 25 GB/s per GPU: tree Simple 1 GiB / (331.2 x 0.85/2 GB/s)
    # = 7.6 ms vs ring 1 GiB / (200·16/30 GB/s) = 10.1 ms.
    a3mega = tuning.CostModel(inter_bw_bytes_per_s=25e9)
    assert tuning.choose_algorithm("AllReduce", 2**30, 16, 2, model=a3mega) == ("tree", "Simple")
    # with one 400G NIC per GPU the ring's 8 NICs (400 GB/s) beat the NVLink-bound tree, as in NCCL's model:
    # ring 1 GiB / (400·16/30) = 5.03 ms + 0.21 ms vs tree 1 GiB / (331.2 x 0.85/2) = 7.6 ms + 0.45 ms
    assert tuning.choose_algorithm("AllReduce", 2**30, 16, 2) == ("ring", "Simple")


@pytest.mark.parametrize("op", ["AllGather", "ReduceScatter", "Broadcast", "Reduce"])
def test_other_collectives_use_rings(op):
    for size in (256, 1 << 20, 1 << 30):
        assert tuning.choose_algorithm(op, size, 32, 4)[0] == "ring"
        assert tuning.choose_algorithm(op, size, 32, 4, algo="tree")[0] == "ring"  # no tree: fallback


@pytest.mark.parametrize("op", ["AllToAll", "Send", "Recv", "Gather", "Scatter"])
def test_direct_ops(op):
    assert tuning.choose_algorithm(op, 1024, 8, 1) == ("direct", "LL")
    assert tuning.choose_algorithm(op, 1 << 20, 8, 1, algo="ring") == ("direct", "Simple")


def test_forced_algorithm_and_protocol():
    assert tuning.choose_algorithm("AllReduce", 1024, 32, 4, algo="ring") == ("ring", "LL")
    assert tuning.choose_algorithm("AllReduce", 1024, 32, 4, algo="ring", proto="Simple") == ("ring", "Simple")
    no_ll128 = tuning.CostModel(ll128=False)
    for size in (1 << 16, 1 << 22, 1 << 26):
        assert tuning.choose_algorithm("AllReduce", size, 32, 4, model=no_ll128)[1] != "LL128"


def test_bad_names():
    with pytest.raises(SimError):
        tuning.choose_algorithm("AllReduce", 1, 8, 1, algo="butterfly")
    with pytest.raises(SimError):
        tuning.choose_algorithm("AllReduce", 1, 8, 1, proto="LL64")
    with pytest.raises(SimError):
        tuning.supported_algos("Barrier")
    with pytest.raises(SimError):
        tuning.CostModel(cpu="arm")


def test_ring_step_latency_spreads_nccl_latency_over_plan_steps():
    for op, n, nodes, steps in (("AllReduce", 16, 2, 30), ("AllGather", 16, 2, 15), ("Broadcast", 8, 1, 7)):
        base, step = tuning.ring_step_latency_s(op, "LL", n, nodes)
        assert base == pytest.approx(6.6 * US)
        assert base + steps * step == pytest.approx(tuning.algo_latency_s(op, "ring", "LL", n, nodes))


def test_plateau_applies_to_large_multinode_ring_simple_allreduce():
    base, step = tuning.ring_step_latency_s("AllReduce", "Simple", 16, 2, 1 << 30)
    assert base + 30 * step == pytest.approx(1.4 * (8.4 + 28 * 3.4 + 2 * 14) * US)


def test_direct_latencies():
    assert tuning.p2p_latency_s("Simple", True) == pytest.approx((8.4 + 14) * US)
    assert tuning.p2p_latency_s("LL", False) == pytest.approx((6.6 + 0.6) * US)
    assert tuning.tree_hop_latency_s("LL128", False) == pytest.approx(1.25 * US)


def test_channels_follow_nccl_thresholds():
    # Simple: one channel per 512 threads × 64 B = 32 KiB
    assert tuning.channels_for("AllReduce", "ring", "Simple", 32 * 1024 * 3 - 1, 8) == 2
    # ring LL: 512 × 8 × n bytes per channel
    assert tuning.channels_for("AllReduce", "ring", "LL", 4096 * 8 * 5, 8) == 5
    assert tuning.channels_for("AllReduce", "tree", "LL", 4096 * 5, 8) == 5
    # AllGather counts the whole array
    assert tuning.channels_for("AllGather", "ring", "Simple", 32 * 1024, 4) == 4
    assert tuning.channels_for("AllReduce", "ring", "Simple", 1, 8) == 1
    assert tuning.channels_for("AllReduce", "ring", "Simple", 1 << 40, 8, max_channels=3) == 3


@given(st.floats(0, 1e10), st.sampled_from(tuning.PROTOS), st.integers(1, 16))
def test_chunks_bounded_and_cover_the_step(step_bytes, proto, max_chunks):
    c = tuning.chunks_for(step_bytes, proto, max_chunks)
    assert 1 <= c <= max_chunks
    if c < max_chunks:  # not capped: chunks are no larger than the grain
        assert step_bytes / c <= tuning.chunk_unit_bytes(proto) + 1e-9


@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_busbw_is_link_rate_at_alpha_beta_time(n):
    b = 50e9
    for op, size in (("AllReduce", 1e9), ("AllGather", 1e8), ("ReduceScatter", 1e8), ("AllToAll", 1e7)):
        t = tuning.ideal_time_s(op, size, n, b)
        assert tuning.busbw_bytes_per_s(op, size, n, t) == pytest.approx(b)
    t = tuning.ideal_time_s("Broadcast", 1e9, n, b)
    assert tuning.busbw_bytes_per_s("Broadcast", 1e9, n, t) == pytest.approx(b)


def test_closed_forms_by_hand():
    # ring AllReduce: 2(n−1)/n · S/B + 2(n−1)α
    assert tuning.ideal_time_s("AllReduce", 1e9, 4, 1e9, alpha_s=1e-6) == pytest.approx(1.5 + 6e-6)
    # pipelined chain: S/B (1 + (n−2)/C)
    assert tuning.ideal_time_s("Broadcast", 1e9, 6, 1e9, chunks=4) == pytest.approx(2.0)
    assert tuning.ideal_time_s("Reduce", 1e9, 6, 1e9) == pytest.approx(1.0)
    # uneven all-to-all: the busiest row or column off the diagonal
    split = [[9, 1, 2], [3, 9, 4], [5, 6, 9]]
    assert tuning.ideal_time_s("AllToAll", 0, 3, 1.0, split_bytes=split) == pytest.approx(11.0)
    assert tuning.ideal_time_s("Gather", 10, 5, 1.0) == pytest.approx(40.0)
    assert tuning.ideal_time_s("AllReduce", 1e9, 1, 1e9) == 0.0
    assert tuning.busbw_factor("AllReduce", 4) == 1.5
    assert tuning.busbw_factor("AllGather", 4) == 0.75
    assert tuning.busbw_factor("Reduce", 4) == 1.0
    assert math.isnan(tuning.algbw_bytes_per_s("AllReduce", 1, 4, 0.0))
    with pytest.raises(SimError):
        tuning.busbw_factor("Barrier", 4)


@given(st.sampled_from(["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]),
       st.integers(2, 64), st.integers(1, 8), st.booleans())
def test_auto_is_the_fastest_prediction(op, n, nodes_exp, nvls):
    nodes = min(n, nodes_exp)
    model = tuning.CostModel(nvls=nvls)
    for size in (64, 1 << 16, 1 << 24):
        algo, proto = tuning.choose_algorithm(op, size, n, nodes, model=model)
        best = tuning.predict_time_s(op, size, n, nodes, algo, proto, model)
        assert algo in tuning.enabled_algos(op, n, nodes, model)
        for a in tuning.enabled_algos(op, n, nodes, model):
            for p in tuning.PROTOS:
                assert best <= tuning.predict_time_s(op, size, n, nodes, a, p, model)


# --- NCCL 2.23's own prediction on 4-10 servers of 8 H100s with 8 x 400G NICs -------------------------------
# NCCL's tuning.cc with the graphs its search builds there (search.cc, NVIDIA/nccl#1041): 8 search channels;
# ring 8 x 45 or 8 x 48 GB/s (which one depends on PCIe details; the sizes below agree for both), tree
# 8 x 48 (pattern TREE: x 0.85), NVLS graph 8 x min(40 intra, 48 / 2 inter) (NVLSTree beyond two nodes).

_CORR = {"LL": tuning.TREE_CORRECTION["LL"], "LL128": tuning.TREE_CORRECTION["LL128"],
         "Simple": tuning.TREE_CORRECTION["Simple"]}


def _nccl_choice(nodes: int, size: int, ring_gbs: float) -> tuple[str, str]:
    n, nch = 8 * nodes, 8  # 8 GPUs per server
    lg = int(math.floor(math.log2(nodes)))
    times = {}
    for i, p in enumerate(("LL", "LL128", "Simple")):
        bus = nch * ring_gbs
        bus = min(20.4, bus * 0.5) if p == "LL" else min(bus * 0.92, nch * 36.7) if p == "LL128" else bus
        lat = (6.6, 14.0, 8.4)[i] + (2 * (n - 1) - 2 * (nodes - 1)) * max((0.6, 1.9, 3.4)[i], 3.0 if p == "Simple" else 1.0)
        lat += 2 * (nodes - 1) * (2.7, 4.0, 14.0)[i]
        lat *= 1.4 if p == "Simple" and size / (16 * n) >= 64 else 1.0
        times[("ring", p)] = lat * US + size / (bus * n / (2 * (n - 1)) * 1e9)
        bus = min(nch * 48 * 0.92, nch * 36.0)
        bus = min(bus / 3.8, 20.4) if p == "LL" else min(bus * 120 / 128, nch * 29.0) if p == "LL128" else bus
        alg = bus * 0.85 * 0.5 * (_CORR[p][int(size >> 6).bit_length() - 1] if size >> 6 < 2**23 else 1.0)
        lat = (6.8, 14.0, 8.4)[i] + 2 * (7 * (0.6, 1.25, 4.0)[i] + lg * (5.0, 8.5, 14.0)[i])
        times[("tree", p)] = lat * US + size / (alg * 1e9)
    times[("nvls_tree", "Simple")] = (25 + 2 * lg * 14) * US + size / (nch * min(40, 48 / 2) * 5 / 6 * 1e9)
    return min(times, key=times.get)


_H100_IB = tuning.CostModel(intra_bw_bytes_per_s=370.8e9, inter_bw_bytes_per_s=47e9, nic_efficiency=0.94, nvls=True)


@pytest.mark.parametrize("nodes", [4, 8, 10])
@pytest.mark.parametrize("size_mib", [1, 8, 32, 128, 256, 512, 1024, 2048, 4096])
def test_choice_on_4_to_10_h100_servers_matches_nccl(nodes, size_mib):
    size = size_mib << 20
    nccl = {_nccl_choice(nodes, size, gbs) for gbs in (45.0, 48.0)}  # two where the ring's speed decides
    assert tuning.choose_algorithm("AllReduce", size, 8 * nodes, nodes, model=_H100_IB) in nccl
    if size_mib >= 8:  # the tree, at 0.85 x 8 x 36 GB/s, is never NCCL's choice here
        assert tuning.choose_algorithm("AllReduce", size, 8 * nodes, nodes, model=_H100_IB)[0] != "tree"
