"""NCCL's cross-NIC ring graph (sim.planning.search_channels.ring_crosses_nics, logical.cross_nic_ring):
the search's choice against NCCL's logged graphs, and the rings' NIC and NVLink budgets against the rule."""

from __future__ import annotations

import numpy as np
import pytest

from sim.planning import logical
from sim.planning.cost_model import CostModel
from sim.planning.search_channels import ring_crosses_nics

H100_NVL_GBS = 18 * 20.6  # SM90_NVLINK_BW x 18 links (src/graph/topo.h)
B200_NVL_GBS = 18 * 40.1  # SM100_NVLINK_BW x 18


def _servers(nservers: int, ppn: int) -> tuple[list[int], list[int]]:
    return list(range(nservers * ppn)), [r // ppn for r in range(nservers * ppn)]


def test_logged_h100_graph_is_cross_nic():
    # "Pattern 4, crossNic 2, nChannels 8, bw 48.000000/48.000000, type NVL/PIX": 8 H100 / H800 and eight
    # 400 Gb/s NICs, one PIX NIC per GPU (NCCL INFO of a 2 x 8 run); 8 search channels (NVIDIA/nccl#1041)
    assert ring_crosses_nics(CostModel(inter_bw_bytes_per_s=50e9), 8, H100_NVL_GBS)


@pytest.mark.parametrize(("ppn", "nic_gbs", "nvl_gbs"), [
    (1, 50.0, H100_NVL_GBS),   # one GPU: the ring enters and leaves at the same GPU
    (2, 50.0, H100_NVL_GBS),   # 2 x 48 through PXN fits NVLink: a tie keeps the same-NIC graph
    (4, 50.0, H100_NVL_GBS),
    (8, 25.0, H100_NVL_GBS),   # 200 Gb/s NICs: 8 x 24 = 192 fits NVLink both ways
    (8, 50.0, B200_NVL_GBS),   # B200: 8 x 48 = 384 fits 721.8
])
def test_same_nic_graph_where_pxn_fits(ppn, nic_gbs, nvl_gbs):
    assert not ring_crosses_nics(CostModel(inter_bw_bytes_per_s=nic_gbs * 1e9), ppn, nvl_gbs)


def test_rule_reads_line_rate_and_nvlink_credit_of_the_model():
    # the NIC's line rate is inter / nic_efficiency (0.94 x 50 is still a 400 Gb/s NIC); NVLink from the model
    eff = CostModel(inter_bw_bytes_per_s=0.94 * 50e9, nic_efficiency=0.94, intra_bw_bytes_per_s=H100_NVL_GBS * 1e9)
    assert ring_crosses_nics(eff, 8)
    # collsim's default NVLink without a preset (450 GB/s line rate) holds 9 channels of 48: no crossing
    assert not ring_crosses_nics(CostModel(), 8)


@pytest.mark.parametrize("ppn", [2, 4, 8])
def test_cross_nic_rings_budgets(ppn):
    ranks, server_of = _servers(3, ppn)
    rings = logical.rings_for_channels(ranks, ppn, server_of, cross_nic=True)
    nvlink_sends = np.zeros(ppn, dtype=int)
    entries = np.zeros(ppn, dtype=int)
    for c, ring in enumerate(rings):
        local = ring % ppn
        assert sorted(ring.tolist()) == ranks
        per_server = local.reshape(3, ppn)
        assert (per_server == per_server[0]).all()  # the same GPU order on every server
        a, b = c - c % 2, c - c % 2 + 1
        first, last = (a, b) if c % 2 == 0 else (b, a)
        assert per_server[0, 0] == first and per_server[0, -1] == last
        entries[first] += 1
        for u, v in zip(ring, np.roll(ring, -1), strict=True):
            if u // ppn == v // ppn:
                nvlink_sends[u % ppn] += 1
            else:  # a network hop: from the exit GPU's own NIC to the next server's entry NIC, another rail
                assert (u % ppn, v % ppn) == (last, first) and last != first
    # each NIC starts one channel of the ppn (net.bw -= bw: one 48 GB/s channel per 50 GB/s NIC) ...
    assert (entries == 1).all()
    # ... and each GPU carries ppn - 1 of the ppn channels' NVLink hops: the n - n // ppn of the rule
    assert (nvlink_sends == 3 * (ppn - 1)).all()


def test_default_rings_unchanged():
    ranks, server_of = _servers(2, 8)
    default = logical.rings_for_channels(ranks, 16, server_of)
    assert np.array_equal(default, np.stack([logical.nvlink_ring(ranks, server_of, c) for c in range(16)]))
    # odd or unequal servers fall back to the rail-aligned ring
    r, s = [0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1]
    assert np.array_equal(logical.cross_nic_ring(r, s, 1), logical.nvlink_ring(r, s, 1))
