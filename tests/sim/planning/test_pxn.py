"""PXN in the planner (sim.planning.pxn): cross-rail sends hop over NVLink to the receiver's rail first."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.errors import SimError
from sim.planning.collectives import plan_collective
from sim.planning.options import PlanOptions
from sim.planning.plan_latency import pxn_store_latency_s
from sim.planning.pxn import CONNECTION_STRIDE, apply_pxn, merge_streamed, network_rails


def split(plan, gps):
    inter = (plan.src // gps) != (plan.dst // gps)
    return inter, ~inter & (plan.src != plan.dst)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 4), st.sampled_from([2, 4, 8]), st.integers(1, 3))
def test_rail_only_alltoall_leaves_every_server_on_the_receivers_rail(servers, gps, parts):
    n = servers * gps
    g = topologies.build("rail_only", num_gpus=n, gpus_per_server=gps)
    size = 1 << 16
    plan = plan_collective("AllToAll", size, range(n), graph=g, nchannels=parts)
    inter, nvl = split(plan, gps)
    assert np.all(plan.src[inter] % gps == plan.dst[inter] % gps)  # the network hop stays on one rail
    # every cross-rail pair is relayed once: its bytes cross NVLink at the sender and the network once
    cross = sum(1 for a in range(n) for b in range(n) if a // gps != b // gps and a % gps != b % gps)
    same_rail = sum(1 for a in range(n) for b in range(n) if a // gps != b // gps and a % gps == b % gps)
    local = sum(1 for a in range(n) for b in range(n) if a != b and a // gps == b // gps)
    assert plan.bytes[inter].sum() == pytest.approx((cross + same_rail) * size)
    assert plan.bytes[nvl].sum() == pytest.approx((cross + local) * size)
    # a direct plan's relayed message streams through the relay: both legs start at once, with its delay,
    # the network leg after the first chunk's store at the relay (one NVLink Simple step)
    assert len(plan.dep_idx) == 0
    lead = np.flatnonzero(nvl[:-1] & inter[1:] & (plan.dst[:-1] == plan.src[1:]))  # NVLink leg, then its network leg
    assert len(lead) == cross * parts
    assert np.array_equal(plan.bytes[lead], plan.bytes[lead + 1])
    assert np.allclose(plan.delay_s[lead] + pxn_store_latency_s(), plan.delay_s[lead + 1], rtol=0, atol=1e-15)


@settings(max_examples=10, deadline=None)
@given(st.integers(3, 4), st.sampled_from([2, 4]), st.integers(0, 2 ** 16), st.booleans())
def test_apply_pxn_keeps_every_dependency(servers, gps, seed, pipelined):
    """Relaying any subset of a pipelined DAG's transfers keeps the topological order and every original
    dependency (on the network leg), doubles exactly the relayed bytes, and in the pipelined form lets both
    legs wait for what the original waited for."""
    n = servers * gps
    g = topologies.build("rail_optimized", num_gpus=n, gpus_per_server=gps)
    plan = plan_collective("AllReduce", 1 << 20, range(n), graph=g, algo="tree", pxn=False)
    rng = np.random.default_rng(seed)
    relay = np.where(rng.random(len(plan)) < 0.3, rng.integers(0, n, len(plan)), -1)
    q = apply_pxn(plan, relay, pipelined=pipelined)
    hop = relay >= 0
    pos = np.arange(len(plan)) + np.cumsum(hop)
    assert len(q) == len(plan) + hop.sum() and q.total_bytes == pytest.approx(plan.total_bytes + plan.bytes[hop].sum())
    rows = np.repeat(np.arange(len(q)), np.diff(q.dep_ptr))
    assert np.all(q.dep_idx < rows)
    for i in range(len(plan)):
        want = sorted(pos[plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]].tolist())
        got = sorted(q.dep_idx[q.dep_ptr[pos[i]]:q.dep_ptr[pos[i] + 1]].tolist())
        if hop[i]:
            first = pos[i] - 1
            legs = (q.src[first], q.dst[first], q.src[pos[i]], q.dst[pos[i]])
            assert legs == (plan.src[i], relay[i], relay[i], plan.dst[i])
            lead = sorted(q.dep_idx[q.dep_ptr[first]:q.dep_ptr[first + 1]].tolist())
            assert lead == want and got == (want if pipelined else [first])
            assert q.delay_s[pos[i]] == pytest.approx(plan.delay_s[i] + pxn_store_latency_s() if pipelined
                                                      else 0.0, abs=1e-15)
            # the network leg hashes as the sender's own connection at the relay
            assert q.channel[pos[i]] == plan.channel[i] + CONNECTION_STRIDE * (1 + plan.src[i])
            assert q.channel[first] == plan.channel[i]
        else:
            assert got == want
    # a streamed pair is one transfer sender -> peer again (the flow tier's one flow): the original plan
    # with the relay noted and the network leg's channel; a stored-and-forwarded pair stays two
    merged, via, via_channel = merge_streamed(q)
    assert q.stream_next is None if not (pipelined and hop.any()) else q.stream_next.sum() == hop.sum()
    if not pipelined:
        assert merged is q and (via == -1).all()
        return
    for name in ("src", "dst", "bytes", "dep_ptr", "dep_idx", "step", "chunk"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(plan, name))
    # the merged message pays the network leg's delay: its own, and the store at the relay if relayed
    np.testing.assert_allclose(merged.delay_s, plan.delay_s + np.where(hop, pxn_store_latency_s(), 0.0), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(via, relay)
    np.testing.assert_array_equal(merged.channel, np.where(hop, q.channel[pos], plan.channel))
    np.testing.assert_array_equal(via_channel, plan.channel)


def test_pxn_modes():
    only = topologies.build("rail_only", num_gpus=16)
    opt = topologies.build("rail_optimized", num_gpus=16)
    base = len(plan_collective("AllToAll", 1 << 20, range(16), graph=opt, pxn=False))
    assert base == 16 * 15
    assert len(plan_collective("AllToAll", 1 << 20, range(16), graph=only)) == base + 2 * 8 * 7  # 112 relays
    assert len(plan_collective("AllToAll", 1 << 20, range(16), graph=only, pxn=False)) == base
    for mode in (None, True):  # NCCL's default PXN (NCCL_P2P_PXN_LEVEL=2) relays on rail_optimized too
        forced = plan_collective("AllToAll", 1 << 20, range(16), graph=opt, pxn=mode)
        inter, _ = split(forced, 8)
        assert len(forced) == base + 112 and np.all(forced.src[inter] % 8 == forced.dst[inter] % 8)
    # rail-aligned rings need no relay, even where the rails require it
    ring = plan_collective("AllReduce", 1 << 24, range(16), graph=only, algo="ring")
    assert len(ring) == len(plan_collective("AllReduce", 1 << 24, range(16), graph=opt, algo="ring"))
    assert len(ring) == len(plan_collective("AllReduce", 1 << 24, range(16), graph=opt, algo="ring", pxn=False))
    rails = network_rails(only)
    assert len(set(rails.values())) == 8 and len(set(network_rails(opt).values())) == 1


@pytest.mark.parametrize("preset", ["fat_tree", "leaf_spine", "rail_optimized", "rail_only"])
def test_sendrecv_leaves_on_the_receivers_rail_on_every_preset(preset):
    """nccl-tests' sendrecv crosses each server boundary as GPU 7 -> GPU 0 of the next server: NCCL sends it
    from the NIC of the sender's server-mate with the receiver's local rank (search.cc, PXN level 2),
    although the Send's communicator in the plan is the pair only."""
    g = topologies.build(preset, num_gpus=16)
    plan = plan_collective("Send", 1 << 20, [7, 8], graph=g)
    assert plan.src.tolist() == [7, 0] and plan.dst.tolist() == [0, 8]
    assert len(plan.dep_idx) == 0 and plan.bytes.tolist() == [1 << 20] * 2  # streamed through the relay
    assert plan.delay_s[0] > 0 and plan.delay_s[1] == pytest.approx(plan.delay_s[0] + pxn_store_latency_s())
    # same local rank: no relay; NCCL_PXN_DISABLE=1: none
    assert plan_collective("Send", 1 << 20, [3, 11], graph=g).src.tolist() == [3]
    assert plan_collective("Send", 1 << 20, [7, 8], graph=g, pxn=False).src.tolist() == [7]


def test_a_streamed_relay_is_one_flow_sender_to_peer(tmp_path):
    """The flow tier runs a relayed Send as one flow gpu7 -> gpu0 (NVLink) -> gpu8 (network): one flow whose
    src/dst are the sender and the peer, its bytes over both legs' links, its time the message at the NIC's
    rate (the slower leg) plus the software delay and what both legs' latencies add beyond it."""
    import pandas as pd

    import sim
    from traces.schema import new_metadata, validate

    size = 1 << 24
    base = dict(comm="pp", seq=0, count=size, dtype="uint8", bytes=size, nranks=2, t_start_s=0.0, duration_s=np.nan,
                host="", device=-1, context="", algo="", proto="")
    df = pd.DataFrame([dict(base, rank=7, op="Send", root=1), dict(base, rank=8, op="Recv", root=0)])
    df.attrs["collsim"] = new_metadata(16, {"pp": [7, 8]}, "test", gpus_per_node=8)
    g = topologies.build("rail_optimized", num_gpus=16)
    res = sim.simulate(validate(df), g, flows_out=tmp_path / "flows.parquet")
    plan = plan_collective("Send", size, [7, 8], graph=g)
    assert res.summary["flows"] == 1 and plan.src.tolist() == [7, 0]
    f = pd.read_parquet(tmp_path / "flows.parquet").iloc[0]
    assert (f["src"], f["dst"], f["hops"]) == ("gpu7", "gpu8", 4)
    links = res.links.set_index(["src", "dst"])["bytes"]
    assert [links[hop] for hop in [("gpu7", "nvs0"), ("nvs0", "gpu0"), ("gpu0", "su0_rail0")]] == [size] * 3
    lat_s = sum(g.edges[u, v]["latency_us"] for u, v in [("gpu7", "nvs0"), ("nvs0", "gpu0"), ("gpu0", "su0_rail0"),
                                                          ("su0_rail0", "gpu8")]) * 1e-6
    nic_bytes_per_s = g.edges["gpu0", "su0_rail0"]["capacity_gbps"] * 1e9 / 8
    # NCCL's step latency (the delay) includes the wire: the path pays only what exceeds it (plan_latency)
    want = plan.delay_s[1] + size / nic_bytes_per_s + max(lat_s - plan.delay_s[1], 0.0)
    assert res.collectives["duration_s"].iloc[0] == pytest.approx(want, rel=1e-9)


def test_no_relay_without_nvlink_to_it():
    """NCCL relays only through a GPU joined to the sender by NVLink (PATH_NVL)."""
    g = topologies.build("rail_optimized", num_gpus=16)
    g.remove_edge("gpu0", "nvs0")
    assert plan_collective("Send", 1 << 20, [7, 8], graph=g).src.tolist() == [7]
    assert plan_collective("Send", 1 << 20, [7, 9], graph=g).src.tolist() == [7, 1]


def test_pxn_option_is_checked():
    with pytest.raises(SimError, match="plan option pxn='yes' must be true, false or None"):
        PlanOptions(pxn="yes")


def test_relayed_alltoall_runs_on_rail_only():
    from sim.bench.run import run_bench

    t = run_bench("AllToAll", topologies.build("rail_only", num_gpus=16), [1 << 24])
    # each GPU's 400G NIC carries 8 x 1 MiB out of its 15 x 1 MiB: >= 8 MiB / 50 GB/s
    assert float(t["time"].iloc[0]) * 1e-6 >= 8 * (1 << 20) / 50e9
