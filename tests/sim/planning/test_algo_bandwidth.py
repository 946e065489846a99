"""NCCL's algorithm bandwidth (sim.planning.algo_bandwidth) checked against hand calculations.

The expected numbers are worked out by hand from NCCL 2.23's tables (performance.md §1); model
machine: 450 GB/s NVLink, 50 GB/s NIC per GPU, 16 channels.
"""

from __future__ import annotations

import pytest

from sim.planning.algo_bandwidth import algo_bandwidth_bytes_per_s
from sim.planning.cost_model import CostModel
from sim.planning.search_channels import net_graph_channels


@pytest.mark.parametrize(
    ("op", "algo", "proto", "n", "nodes", "expected_gbps"),
    [
        ("AllReduce", "ring", "Simple", 8, 1, 450 * 8 / 14),
        # multi-node rings: the channels use all 8 NICs of a server (8 x 50 GB/s), below NVLink's 450
        ("AllReduce", "ring", "Simple", 32, 4, 400 * 32 / 62),
        ("AllReduce", "ring", "LL", 32, 4, min(400 / 4, 20.4) * 32 / 62),
        # across servers the per-channel caps scale with the search's 8 channels (one per NIC), not 16
        ("AllReduce", "ring", "LL128", 32, 4, min(400 * 0.92, 8 * 36.7) * 32 / 62),
        ("AllGather", "ring", "LL", 8, 1, min(450 * 0.5, 141.0) * 8 / 7),  # ring LL x0.5, Hopper cap 141
        # Hopper trees across servers: capped at 8 x 36.0, then the TREE pattern's 0.85
        ("AllReduce", "tree", "Simple", 32, 4, min(400 * 0.92, 8 * 36.0) * 0.85 / 2),
        # 2 nodes: 2x NICs, NVLink-bound at 0.92 x 450, capped at 8 x 41.4
        ("AllReduce", "tree", "Simple", 16, 2, min(450 * 0.92, 8 * 41.4) * 0.85 / 2),
        ("AllReduce", "tree", "LL", 32, 4, min(8 * 36.0 / 3.8, 20.4) * 0.85 / 2),
    ],
)
def test_bandwidth_matches_hand_formulas(op, algo, proto, n, nodes, expected_gbps):
    got = algo_bandwidth_bytes_per_s(op, algo, proto, n, nodes)
    assert got == pytest.approx(expected_gbps * 1e9)


def test_ampere_trees_keep_the_balanced_pattern():
    # A100 (sm80): no "simpler tree" retry, so no 0.85; 8 channels of 24 GB/s (25 GB/s NICs, not
    # duplicated below 25), cap 8 x 17.8 on > 2 nodes: min(0.92 x 200, 142.4) / 2
    a100 = CostModel(intra_bw_bytes_per_s=240e9, inter_bw_bytes_per_s=25e9, arch="ampere")
    assert net_graph_channels(a100, 8) == (8, 24.0)
    got = algo_bandwidth_bytes_per_s("AllReduce", "tree", "Simple", 32, 4, a100)
    assert got == pytest.approx(min(0.92 * 200, 8 * 17.8) / 2 * 1e9)


def test_tree_plans_pay_the_tree_kernels_efficiency():
    """A tree plan runs at NCCL's tree kernel rate (tuning.cc: 0.92 of the graph, per-channel ceilings)."""
    import topologies
    from sim.bench.run import run_bench
    from sim.planning.algo_bandwidth import tree_kernel_busbw, tree_kernel_factor
    from sim.planning.machine import graph_machine

    # 2 x 8 A100, 16 x 100 Gb/s NICs (OCI BM.GPU4.8): the tree is NVLink-bound, each GPU forwarding 1.75 S
    # over its 240 GB/s; the kernel delivers 0.92 of it (16 search channels x 23.6 GB/s do not bind)
    g = topologies.build("rail_optimized", num_gpus=16, gpu="a100", nic="roce", link_gbps=200, nics_per_gpu=2,
                         nccl_algo="Tree", nccl_proto="Simple")
    t = run_bench("AllReduce", g, [1 << 30])
    assert t["algo"].tolist() == ["tree"]
    assert float(t["busbw"].iloc[0]) == pytest.approx(240 / 1.75 * 1.875 * 0.92, rel=0.01)
    _, a100 = graph_machine(g, range(16))
    assert tree_kernel_factor(a100, "Simple", 16, 2) == pytest.approx(1 / 0.92)
    # 8 x 8 H100 (8 NICs, 8 search channels): Hopper's ceilings beyond two servers bind, 8 x 36.0 (Simple)
    # and 8 x 29.0 (LL128) against NVLink's 370.8 (x 120/128 of LL128's lines); LL: 1/3.8, capped at 20.4
    h100 = CostModel(intra_bw_bytes_per_s=370.8e9, inter_bw_bytes_per_s=47e9, protocol_overhead=True)
    assert tree_kernel_factor(h100, "Simple", 64, 8) == pytest.approx(370.8 / 288.0)
    assert tree_kernel_factor(h100, "LL128", 64, 8) == pytest.approx(370.8 * 120 / 128 / 232.0)
    assert tree_kernel_busbw(h100, "LL", 8, 8) == pytest.approx(20.4e9)
    # no hardware preset (closed forms), or one rank: no factor
    assert tree_kernel_factor(CostModel(), "LL", 64, 8) == 1.0 and tree_kernel_factor(h100, "Simple", 1, 1) == 1.0
