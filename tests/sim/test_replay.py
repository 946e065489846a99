"""`sim.simulate` against closed forms, congestion where it exists, determinism and bad input."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import sim
from sim.errors import SimError
from sim.planning import tuning
from topologies import fat_tree, leaf_spine, nonblocking
from traces.schema import new_metadata, validate

MIB = 1 << 20
LINK_BYTES_PER_S = 400e9 / 8


def trace(world: int, ops: list[tuple[str, int]], gpn: int = 1, t_start=None, comm: str = "world") -> pd.DataFrame:
    """Every rank issues ``ops`` (op, bytes) on one communicator of all ranks."""
    rows = []
    for r in range(world):
        for k, (op, nbytes) in enumerate(ops):
            rows.append(dict(rank=r, comm=comm, seq=k, op=op, count=nbytes, dtype="uint8", bytes=nbytes,
                             root=0 if op in ("Broadcast", "Reduce") else -1, nranks=world,
                             t_start_s=np.nan if t_start is None else t_start[k], duration_s=np.nan,
                             host="", device=-1, context="", algo="", proto=""))
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {comm: list(range(world))}, "test", gpus_per_node=gpn)
    return validate(df)


def _ideal_fabric(n: int) -> nx.Graph:
    return nonblocking(fat_tree(4, num_gpus=n, gpus_per_server=1))


@pytest.mark.parametrize("op", ["AllReduce", "AllGather", "ReduceScatter"])
def test_single_ring_collective_matches_alpha_beta(op):
    n, nbytes = 8, 64 * MIB if op == "AllReduce" else 8 * MIB
    res = sim.simulate(trace(n, [(op, nbytes)]), _ideal_fabric(n), algo="ring", ideal=False)
    row = res.collectives.iloc[0]
    assert row["algo"] == "ring"
    base, per_step = tuning.ring_step_latency_s(op, "Simple", n, n, nbytes)
    channels = tuning.channels_for(op, "ring", "Simple", nbytes, n)
    step_bytes = nbytes / channels / (n if op == "AllReduce" else 1)
    chunks = tuning.chunks_for(step_bytes, "Simple")
    # alpha per ring step on the critical path: NCCL's step latency, which includes the wire: the path
    # (gpu -> crossbar -> gpu, 1 µs each) only where it is longer; the pipelined chunks pay none
    assert chunks >= 1
    alpha = max(per_step, 2e-6)
    expected = tuning.ideal_time_s(op, nbytes, n, LINK_BYTES_PER_S, "ring", alpha_s=alpha) + base
    assert row["duration_s"] == pytest.approx(expected, rel=0.01)
    # nccl-tests busbw equals the link rate once the latency terms are taken out
    latency = expected - tuning.ideal_time_s(op, nbytes, n, LINK_BYTES_PER_S, "ring")
    assert row["busbw_gbps"] * row["duration_s"] / (row["duration_s"] - latency) == pytest.approx(400.0, rel=0.01)


def test_single_all_to_all_matches_the_busiest_link():
    n = 16
    res = sim.simulate(trace(n, [("AllToAll", 4 * MIB)]), fat_tree(4, num_gpus=n, gpus_per_server=1), ideal=False)
    links = res.links
    bound = float((links["bytes"] / (links["capacity_gbps"] * 1e9 / 8)).max())
    alpha = tuning.p2p_latency_s("Simple", True) + 6e-6  # software latency + the longest path (6 hops)
    d = float(res.collectives["duration_s"].iloc[0])
    assert bound <= d <= bound * 1.02 + alpha


def test_oversubscribed_leaf_spine_slows_all_to_all_by_the_factor():
    n, per_leaf, over = 16, 4, 4.0
    df = trace(n, [("AllToAll", 2 * MIB)])
    res = sim.simulate(df, leaf_spine(n, gpus_per_server=1, gpus_per_leaf=per_leaf, oversubscription=over))
    # cross-leaf bytes of one leaf over its uplinks, against every GPU's (n - 1) shares over its NIC
    expected = over * (n - per_leaf) / (n - 1)
    assert res.summary["makespan_s"] / res.summary["ideal_makespan_s"] == pytest.approx(expected, rel=0.05)
    assert res.summary["slowdown_p50"] == pytest.approx(expected, rel=0.05)


def test_ecmp_collisions_show_as_imbalance_and_spraying_evens_them():
    n = 16
    df = trace(n, [("AllToAll", MIB)])
    topo = fat_tree(4, num_gpus=n, gpus_per_server=1)
    ecmp = sim.simulate(df, topo, routing="ecmp", ideal=False).summary
    spray = sim.simulate(df, topo, routing="spray", ideal=False).summary
    assert ecmp["ecmp_imbalance_max"] > 1.2
    assert spray["ecmp_imbalance_max"] == pytest.approx(1.0, abs=1e-6)


def test_all_to_all_shows_incast_and_a_ring_does_not():
    n = 16
    topo = leaf_spine(n, gpus_per_server=1, gpus_per_leaf=4)
    a2a = sim.simulate(trace(n, [("AllToAll", MIB)]), topo, ideal=False)
    ring = sim.simulate(trace(n, [("AllGather", MIB)]), topo, algo="ring", ideal=False)
    assert a2a.summary["incast_events"] > 0 and a2a.summary["max_incast_fanin"] >= 2
    assert ring.summary["incast_events"] == 0


def test_same_seed_same_results():
    df = trace(16, [("AllToAll", MIB), ("AllReduce", MIB)])
    topo = fat_tree(4, num_gpus=16, gpus_per_server=4)
    a = sim.simulate(df, topo, seed=3)
    b = sim.simulate(df, topo, seed=3)
    pd.testing.assert_frame_equal(a.collectives, b.collectives)
    pd.testing.assert_frame_equal(a.links, b.links)
    pd.testing.assert_frame_equal(a.incast, b.incast)
    drop = {"sim_wall_s"}
    assert {k: v for k, v in a.summary.items() if k not in drop} == {k: v for k, v in b.summary.items() if k not in drop}


def test_memoised_replay_equals_the_explicit_one():
    df = trace(16, [("AllToAll", MIB), ("AllReduce", MIB)] * 2)
    topo = fat_tree(4, num_gpus=16, gpus_per_server=4)
    memo = sim.simulate(df, topo, ideal=False)
    plain = sim.simulate(df, topo, ideal=False, memoize=False)
    assert memo.summary["memo_hits"] == 2
    np.testing.assert_allclose(memo.collectives["end_s"], plain.collectives["end_s"], rtol=1e-12)
    np.testing.assert_allclose(memo.links["bytes"], plain.links["bytes"], rtol=1e-9)
    assert len(memo.incast) == len(plain.incast)


def test_send_recv_pairs_match_and_trace_timing_is_honoured():
    rows = []
    for k in range(2):  # 0 -> 1 twice, recorded at 1 ms and 3 ms
        base = dict(comm="pp", seq=k, count=MIB, dtype="uint8", bytes=MIB, nranks=2, t_start_s=1e-3 + 2e-3 * k,
                    duration_s=np.nan, host="", device=-1, context="", algo="", proto="")
        rows += [dict(base, rank=0, op="Send", root=1), dict(base, rank=1, op="Recv", root=0)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(2, {"pp": [0, 1]}, "test", gpus_per_node=1)
    res = sim.simulate(validate(df), _ideal_fabric(2))
    c = res.collectives
    assert len(c) == 2 and set(c["op"]) == {"Send"}  # one row per matched pair, a §3 op name
    np.testing.assert_allclose(c["start_s"], [1e-3, 3e-3])
    # the 2 us path (gpu -> crossbar -> gpu) is inside the p2p step latency (22.4 us), which includes the wire
    expected = MIB / LINK_BYTES_PER_S + max(tuning.p2p_latency_s("Simple", True), 2e-6)
    np.testing.assert_allclose(c["duration_s"], expected, rtol=1e-6)
    asap = sim.simulate(validate(df), _ideal_fabric(2), timing="asap")
    assert asap.collectives["start_s"].iloc[1] == pytest.approx(asap.collectives["end_s"].iloc[0])


def test_incomplete_collectives_are_skipped_and_counted():
    df = trace(4, [("AllReduce", MIB), ("AllReduce", MIB)])
    df = df[~((df["rank"] == 3) & (df["seq"] == 1))].reset_index(drop=True)
    res = sim.simulate(df, _ideal_fabric(4), ideal=False)
    assert res.summary["collectives"] == 1
    assert res.summary["skipped"]["incomplete_collectives"] == 1


def test_trace_larger_than_the_topology_is_an_error():
    with pytest.raises(SimError, match="world_size 32 exceeds the 16 GPUs"):
        sim.simulate(trace(32, [("AllReduce", MIB)]), fat_tree(4, num_gpus=16, gpus_per_server=1))


def test_disconnected_topology_is_an_error():
    g = fat_tree(4, num_gpus=16, gpus_per_server=1)
    g.remove_edges_from(list(g.edges("gpu5")))
    # a caller's graph is checked by topologies.validate_graph (TopologyError) before the fit (SimError)
    with pytest.raises(ValueError, match="disconnected|not connected"):
        sim.simulate(trace(16, [("AllReduce", MIB)]), g)


def test_unknown_option_is_an_error():
    with pytest.raises(SimError, match="unknown simulate option"):
        sim.simulate(trace(2, [("AllReduce", MIB)]), _ideal_fabric(2), warp_speed=True)


def test_preset_name_sizes_itself_to_the_trace():
    res = sim.simulate(trace(16, [("AllReduce", MIB)], gpn=8), "leaf_spine", ideal=False)
    assert res.summary["world_size"] == 16
    assert res.summary["makespan_s"] > 0


def test_a_link_window_and_a_user_process_slow_the_replay_and_switch_memo_off():
    n = 16
    graph = fat_tree(4, num_gpus=n, gpus_per_server=1)
    tr = trace(n, [("AllToAll", 4 * MIB)] * 3)
    base = sim.simulate(tr, graph, ideal=False)
    assert base.summary["memo_hits"] > 0
    # every switch cable at a quarter of its capacity from the start to the middle of the run
    half = base.summary["makespan_s"] / 2
    slow = sim.simulate(tr, graph, ideal=False, degrade_links=f"{len(sim.anomalies.switch_links(graph))}:0.25"
                        f"@0-{half}")
    assert slow.summary["makespan_s"] > base.summary["makespan_s"] * 1.2
    assert slow.summary["memo_hits"] == 0 and len(slow.summary["link_windows"]) > 0
    # the same through a user process: the figures agree
    seen = []

    def quarter(env, net):
        ids = np.concatenate([net.cable_links(u, v) for u, v in sim.anomalies.switch_links(graph)])
        net.scale_links(ids, 0.25)
        yield env.timeout(half)
        net.scale_links(ids, 1.0)
        seen.append(env.now)

    user = sim.simulate(tr, graph, ideal=False, processes=[quarter])
    assert seen == [pytest.approx(half)]
    assert user.summary["makespan_s"] == pytest.approx(slow.summary["makespan_s"], rel=1e-12)


def test_a_cable_down_for_a_window_stalls_and_recovers():
    n = 16
    graph = fat_tree(4, num_gpus=n, gpus_per_server=1)
    tr = trace(n, [("AllToAll", 4 * MIB)])
    base = sim.simulate(tr, graph, ideal=False, routing="single")
    t = base.summary["makespan_s"]
    cables = sim.anomalies.switch_links(graph)
    window = ",".join(f"{u}-{v}@{t / 4}-{t / 2}" for u, v in cables)   # a window belongs to its item
    down = sim.simulate(tr, graph, ideal=False, routing="single", fail_links=window)
    # every switch cable down for a quarter of the run: the flows crossing them stall that long
    assert down.summary["makespan_s"] == pytest.approx(t + t / 4, rel=1e-6)
    with pytest.raises(SimError, match="never ends"):
        sim.simulate(tr, graph, ideal=False, fail_links=",".join(f"{u}-{v}@{t / 4}" for u, v in cables))
