"""NCCL's p2p channels per network peer (sim.planning.p2p): the version rules, the ceiling a Send plan
carries, Simple on network p2p, and the ceiling in a virtual sendrecv against its closed form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.bench.run import run_bench
from sim.errors import SimError
from sim.planning import p2p, tuning
from sim.planning.collectives import plan_collective
from sim.planning.cost_model import CostModel
from sim.planning.plan_latency import pxn_store_latency_s


@pytest.mark.parametrize(("version", "nranks", "nnodes", "ppn", "want"), [
    # NCCL 2.29's rule on the suite's three SendRecv tables (docs/validation.md, Session 19)
    ("2.29.2", 80, 10, 8, 1), ("2.29.2", 10, 10, 1, 2), ("2.29.7", 32, 4, 8, 4),
    # 2.19: NCCL_NCHANNELS_PER_NET_PEER = 2 whatever the size; 2.20-2.28 halve beyond 2 nRanks > 4 p2pn
    ("2.19.4", 80, 10, 8, 2), ("2.23.4", 80, 10, 8, 1), ("2.23.4", 32, 4, 8, 2), ("2.26.2", 10, 10, 1, 1),
])
def test_channels_per_net_peer(version, nranks, nnodes, ppn, want):
    assert p2p.p2p_net_channels(CostModel(), nranks, nnodes, ppn, version)[0] == want


@given(st.sampled_from(["2.19.4", "2.23.4", "2.29.2"]), st.integers(2, 1024), st.sampled_from([1, 2, 4, 8]),
       st.floats(0, 2.0 ** 34))
@settings(max_examples=25, deadline=None)
def test_message_channels_bounds(version, nranks, ppn, nbytes):
    per_peer, p2pn = p2p.p2p_net_channels(CostModel(), nranks, max(2, nranks // ppn), ppn, version)
    assert per_peer & (per_peer - 1) == 0 and 1 <= per_peer <= p2pn   # powers of two (NCCL relies on it)
    n = p2p.message_channels(nbytes, per_peer, nranks, p2pn)
    assert 1 <= n <= per_peer
    assert p2p.message_channels(2 * nbytes + 1, per_peer, nranks, p2pn) >= n   # more bytes, no fewer channels


def test_version_parsing():
    assert p2p.parse_nccl_version("2.23.4-1") == (2, 23, 4) and p2p.parse_nccl_version(None) == p2p.CURRENT_NCCL_VERSION
    with pytest.raises(SimError, match="nccl_version"):
        p2p.parse_nccl_version("latest")
    with pytest.raises(topologies.TopologyError, match="nccl_version"):
        topologies.build("rail_optimized", num_gpus=16, nccl_version="3.0")


def test_send_plan_carries_the_ceiling_on_its_network_leg():
    g = topologies.build("rail_optimized", num_gpus=16, nccl_version="2.29.2")
    plan = plan_collective("Send", 1 << 28, [7, 8], graph=g, comm_nranks=80)
    # PXN: 7 -> 0 over NVLink (no ceiling), 0 -> 8 over the network: one channel of 14 GB/s
    assert plan.src.tolist() == [7, 0] and plan.dst.tolist() == [0, 8]
    assert plan.rate_cap_bytes_per_s.tolist() == [np.inf, 14e9]
    assert plan.proto == "Simple"   # network p2p has no LL buffers, even for 1 KiB
    small = plan_collective("Send", 1024, [7, 8], graph=g, comm_nranks=80)
    # the relayed network leg: Simple's network step after the first chunk's store at the relay
    assert small.proto == "Simple" and small.delay_s[-1] == pytest.approx(tuning.p2p_latency_s("Simple", True)
                                                                          + pxn_store_latency_s())
    inside = plan_collective("Send", 1 << 28, [1, 2], graph=g, comm_nranks=80)
    assert inside.rate_cap_bytes_per_s is None


@pytest.mark.parametrize(("version", "want_gbs"), [("2.23.4", 28.0),
                                                   pytest.param("2.29.2", 50.0, marks=pytest.mark.slow)])
def test_sendrecv_busbw_is_the_ceiling_or_the_nic(version, want_gbs):
    """Four servers of one GPU (400 Gb/s NIC, line rate): NCCL 2.23 gives each peer 2 channels (28 GB/s),
    2.29 gives 4 (56 GB/s, above the NIC's 50): busbw = bytes / (latency + bytes / rate)."""
    g = topologies.build("rail_optimized", num_gpus=4, gpus_per_server=1, nccl_version=version)
    size = 1 << 28
    row = run_bench("Send", g, [size]).iloc[0]
    want = size / (tuning.p2p_latency_s("Simple", True) + size / (want_gbs * 1e9)) / 1e9
    assert float(row["busbw"]) == pytest.approx(want, rel=2e-3)   # path latency: a few microseconds
