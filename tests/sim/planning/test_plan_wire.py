"""Direct plans (sim.planning.plan_wire, through plan_collective): AllToAll, Gather, Scatter, Send/Recv.

Bytes per pair against the split matrix, no dependencies, latency by link type.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.planning.collectives import plan_collective
from sim.planning.plan_wire import server_ids
from tests.sim.planning.plan_checks import check_dag

# --- direct ----------------------------------------------------------------------------------------------

@given(st.integers(2, 9), st.integers(1, 3), st.data())
def test_uneven_alltoall(n, parts, data):
    split = np.array(data.draw(st.lists(st.lists(st.integers(0, 10**6), min_size=n, max_size=n),
                                        min_size=n, max_size=n)))
    ranks = np.arange(n) * 5
    plan = plan_collective("AllToAll", 0, ranks, split_bytes=split, nchannels=parts)
    off = split.astype(float).copy()
    np.fill_diagonal(off, 0)
    if off.sum() == 0:
        assert len(plan) == 0
        return
    check_dag(plan)
    assert plan.algo == "direct" and len(plan.dep_idx) == 0
    assert plan.total_bytes == pytest.approx(off.sum())
    got = np.zeros((n, n))
    for s, d, b in zip(plan.src.tolist(), plan.dst.tolist(), plan.bytes.tolist(), strict=True):
        got[s // 5, d // 5] += b
    np.testing.assert_allclose(got, off)
    assert len(plan) == parts * int((off > 0).sum())


def test_even_alltoall_gather_scatter_sendrecv():
    plan = plan_collective("AllToAll", 1000, range(4), server_of=[0, 0, 1, 1])
    assert len(plan) == 12 and plan.total_bytes == 12000
    # latency by link type: NVLink pairs pay the NVLink step, network pairs the NET step
    inter = (plan.src // 2) != (plan.dst // 2)
    assert plan.delay_s[inter].min() > plan.delay_s[~inter].max()
    g = plan_collective("Gather", 10, [4, 5, 6], root=1)
    assert sorted(zip(g.src.tolist(), g.dst.tolist(), strict=True)) == [(4, 5), (6, 5)]
    s = plan_collective("Scatter", 10, [4, 5, 6], root=2)
    assert sorted(zip(s.src.tolist(), s.dst.tolist(), strict=True)) == [(6, 4), (6, 5)]
    p = plan_collective("Send", 1 << 20, [7, 3], nchannels=2)
    assert p.src.tolist() == [7, 7] and p.dst.tolist() == [3, 3] and p.total_bytes == 1 << 20


# --- server_ids: the per-transfer server lookups, vectorised, against the dict --------------------------

_servers = st.dictionaries(st.integers(0, 60), st.integers(0, 80), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_servers, st.lists(st.integers(0, 70), max_size=50))
def test_lenient_lookup_is_the_dict_get_with_the_gpu_as_default(server, gpus):
    got = server_ids(server, np.array(gpus, dtype=np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == [server.get(g, g) for g in gpus]


@settings(max_examples=200, deadline=None)
@given(_servers, st.lists(st.integers(0, 70), max_size=50))
def test_strict_lookup_is_the_dict_index_or_its_key_error(server, gpus):
    arr = np.array(gpus, dtype=np.int64)
    missing = [g for g in gpus if g not in server]
    if missing:
        with pytest.raises(KeyError):
            server_ids(server, arr, strict=True)
    else:
        assert server_ids(server, arr, strict=True).tolist() == [server[g] for g in gpus]


def test_numpy_keys_and_values_are_read_as_ints():
    server = {np.int64(3): np.int32(1), 5: 2}
    assert server_ids(server, np.array([5, 3, 4])).tolist() == [2, 1, 4]


# --- the transport's step on network pairs (issue 10, s23-p2p) ----------------------------------------------

def _fabric(nic: str, gpu: str):
    import topologies

    return topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu=gpu, nic=nic, link_gbps=200)


# NCCL's ring base and NET / NVLink ring step for Simple (tuning.cc: 8.4, 14, 3.4 us) plus the plugin's step
# (aws-ofi-nccl: 20 us network latency, 3 us completion; on A100 the receive's flush, 20 us more): closed forms
@pytest.mark.parametrize("nic, gpu, net_us", [("efa", "h100", 8.4 + 14 + 20 + 3),
                                              ("efa_p4d", "a100", 8.4 + 14 + 20 + 20 + 3),
                                              ("ib", "h100", 8.4 + 14), ("roce", "a100", 8.4 + 14)])
def test_a_network_pair_pays_the_transports_step(nic, gpu, net_us):
    graph = _fabric(nic, gpu)
    send = plan_collective("Send", 1 << 20, [0, 8], graph=graph, pxn=False)
    assert send.proto == "Simple" and np.allclose(send.delay_s, net_us * 1e-6, rtol=1e-12, atol=0)
    # a Scatter from GPU 0: its own server's GPUs over NVLink pay NCCL's step alone, the others the network's
    scatter = plan_collective("Scatter", 1 << 20, range(16), root=0, graph=graph, pxn=False, channels=1)
    want = np.where(scatter.dst >= 8, net_us, 8.4 + 3.4) * 1e-6
    assert scatter.proto == "Simple" and np.allclose(scatter.delay_s, want, rtol=1e-12, atol=0)
