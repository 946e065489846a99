"""Collective plans (sim.planning.collectives): sizes, channels, empty plans, graphs, bad input, budgets.

The ring, chain and tree plans are checked in ``test_plan_edges.py``, direct plans in ``test_plan_wire.py``
(shared checks: :mod:`tests.sim.planning.plan_checks`).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from sim.errors import SimError
from sim.planning import tuning
from sim.planning.collectives import plan_collective

# --- sizes, channels, empty plans, bad input ---------------------------------------------------------------

def test_small_messages_use_few_channels_and_one_chunk():
    small = plan_collective("AllReduce", 64 * 1024, range(8), algo="ring", proto="Simple", merge_nvlink_channels=False)
    assert small.channel.max() + 1 == 2 and small.chunk.max() == 0
    big = plan_collective("AllReduce", 1 << 30, range(8), algo="ring", proto="Simple", merge_nvlink_channels=False)
    assert big.channel.max() + 1 == tuning.DEFAULT_MAX_CHANNELS
    assert big.chunk.max() + 1 == tuning.DEFAULT_MAX_CHUNKS
    assert len(big) == 8 * 14 * 8 * 4
    merged = plan_collective("AllReduce", 1 << 30, range(8), algo="ring", proto="Simple")
    assert merged.channel.max() == 0 and merged.total_bytes == big.total_bytes


def test_merged_nvlink_channels_give_the_same_per_rank_bytes():
    kw = dict(algo="ring", proto="Simple", server_of=[0] * 8)
    for op in ("AllReduce", "AllGather", "ReduceScatter"):
        split = plan_collective(op, 1 << 24, range(8), merge_nvlink_channels=False, **kw)
        merged = plan_collective(op, 1 << 24, range(8), **kw)
        sent = lambda p: np.bincount(p.src, weights=p.bytes, minlength=8)  # noqa: E731
        got = lambda p: np.bincount(p.dst, weights=p.bytes, minlength=8)  # noqa: E731
        np.testing.assert_allclose(sent(merged), sent(split))
        np.testing.assert_allclose(got(merged), got(split))


@pytest.mark.parametrize("op", ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
                                "AllToAll", "Send", "Gather", "Scatter"])
def test_zero_bytes_and_single_rank_give_empty_plans(op):
    ranks = [0, 1] if op == "Send" else [0, 1, 2]
    plan = plan_collective(op, 0, ranks, root=0)
    assert len(plan) == 0 and len(plan.dep_ptr) == 1 and plan.algo in ("ring", "tree", "direct")
    if op != "Send":
        assert len(plan_collective(op, 1 << 20, [5], root=0)) == 0


def test_auto_picks_nccl_algorithms():
    server_of = np.arange(32) // 8
    assert plan_collective("AllReduce", 1024, range(32), server_of=server_of).algo == "tree"
    assert plan_collective("AllReduce", 1 << 30, range(32), server_of=server_of).algo == "ring"
    assert plan_collective("AllGather", 1 << 20, range(32), server_of=server_of).algo == "ring"
    assert plan_collective("AllToAll", 1 << 20, range(32), server_of=server_of).algo == "direct"


def test_servers_and_rates_from_a_topology_graph():
    g = nx.Graph(name="tiny")
    for r in range(4):
        g.add_node(f"gpu{r}", kind="gpu", server=[1, 0, 1, 0][r], local_rank=r // 2)
        g.add_edge(f"gpu{r}", f"nvs{[1, 0, 1, 0][r]}", kind="nvlink", capacity_gbps=3600.0)
        g.add_edge(f"gpu{r}", "leaf", kind="access", capacity_gbps=400.0)
    plan = plan_collective("AllGather", 1 << 20, range(4), algo="ring", graph=g, nchannels=1)
    ring = [0, 2, 3, 1]  # servers by first appearance: server 1 (gpu0, gpu2), then server 0 backward
    succ = dict(zip(ring, ring[1:] + ring[:1], strict=True))
    assert all(succ[s] == d for s, d in zip(plan.src.tolist(), plan.dst.tolist(), strict=True))
    with pytest.raises(SimError, match="gpu9"):
        plan_collective("AllGather", 1 << 20, [0, 9], graph=g)
    # the graph's rates reach the tuner: on 2 servers a 1 GiB AllReduce takes the tree with fast NVLink
    # (busbw up to 2x the NIC) but the ring when NVLink is slower than the NIC (12.5 vs 50 GB/s)
    assert plan_collective("AllReduce", 1 << 30, range(4), graph=g).algo == "tree"
    nx.set_edge_attributes(g, {e: 100.0 for e in g.edges if g.edges[e]["kind"] == "nvlink"}, "capacity_gbps")
    assert plan_collective("AllReduce", 1 << 30, range(4), graph=g).algo == "ring"


def test_bad_input_raises_sim_error():
    with pytest.raises(SimError, match="op"):
        plan_collective("Barrier", 1, range(4))
    with pytest.raises(SimError, match="root"):
        plan_collective("Broadcast", 1, range(4), root=4)
    with pytest.raises(SimError, match="root"):
        plan_collective("Reduce", 1, range(4))
    with pytest.raises(SimError, match="bytes"):
        plan_collective("AllReduce", -1, range(4))
    with pytest.raises(SimError, match="split_bytes"):
        plan_collective("AllToAll", 1, range(3), split_bytes=np.ones((2, 2)))
    with pytest.raises(SimError, match="sender"):
        plan_collective("Send", 1, range(3))
    with pytest.raises(SimError, match="server_of"):
        plan_collective("AllReduce", 1, range(3), server_of=[0, 1])
    with pytest.raises(SimError, match="nchannels"):
        plan_collective("AllReduce", 1, range(3), nchannels=0)
    with pytest.raises(SimError, match="algo"):
        plan_collective("AllReduce", 1, range(3), algo="butterfly")


def test_transfer_budget_shrinks_chunks_then_channels():
    per_channel_chunk = 30 * 16  # 2(n-1) steps x n ranks
    plan = plan_collective("AllReduce", 1 << 30, range(16), algo="ring", proto="Simple",
                           max_transfers=2 * per_channel_chunk, merge_nvlink_channels=False)
    assert plan.channel.max() + 1 == 2 and plan.chunk.max() == 0 and len(plan) == 2 * per_channel_chunk
    assert plan.total_bytes == pytest.approx(2 * 15 / 16 * 2**30 * 16)
    roomy = plan_collective("AllReduce", 1 << 30, range(16), algo="ring", proto="Simple",
                            max_transfers=8 * 3 * per_channel_chunk, merge_nvlink_channels=False)
    assert roomy.channel.max() + 1 == 8 and roomy.chunk.max() + 1 == 3
    forced = plan_collective("AllReduce", 1 << 30, range(16), algo="ring", nchannels=4, max_transfers=10)
    assert forced.channel.max() + 1 == 4 and forced.chunk.max() == 0  # explicit channels are kept
    # several servers: the budget never drops below one channel per GPU of a server (every NIC in use)
    multi = plan_collective("AllGather", 1 << 24, range(32), algo="ring", server_of=np.arange(32) // 4,
                            max_transfers=10)
    assert multi.channel.max() + 1 == 4 and multi.chunk.max() == 0
    exits = {s for s, d in zip(multi.src.tolist(), multi.dst.tolist(), strict=True) if s // 4 != d // 4}
    assert exits == set(range(32))  # over the 4 channels every GPU sends over the network once
