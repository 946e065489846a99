"""Memory that does not grow with flows: the path table, the flow sample, streamed incast, sparse memo records.

Each streamed structure is checked against the whole-log computation it replaces.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.engine import Engine, EngineLog
from sim.engine.flowlog import FlowSample
from sim.engine.paths import PathTable
from sim.engine.stats import LinkStats
from sim.network.flow_network import FlowNetwork
from sim.results.incast import incast_events
from sim.results.incast_stream import IncastStream
from tests.sim.engine.test_core import MIB, _prep, _setup, _workload
from topologies.builders.fat_tree import fat_tree

# -- the path table ----------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(0, 5), max_size=4), min_size=1, max_size=12), min_size=1, max_size=5))
def test_path_table_stores_each_distinct_path_once(batches):
    table = PathTable(np.ones(6), np.ones(6))
    seen: dict[tuple, int] = {}
    for batch in batches:
        ptr = np.cumsum([0] + [len(p) for p in batch])
        ids, lat = table.add(ptr, np.array([x for p in batch for x in p], dtype=np.int64))
        np.testing.assert_allclose(lat, [len(p) * 1e-6 for p in batch])
        for p, i in zip(batch, ids.tolist(), strict=True):
            assert seen.setdefault(tuple(p), i) == i          # equal paths share one id
            assert table.links[table.ptr[i]:table.ptr[i + 1]].tolist() == p
    assert len(table) == len(seen)                            # and distinct paths get distinct ids


def test_path_table_survives_hash_collisions(monkeypatch):
    import sim.engine.paths as paths_mod

    monkeypatch.setattr(paths_mod, "path_hashes", lambda ptr, idx: np.zeros(len(ptr) - 1, dtype=np.uint64))
    table = PathTable(np.ones(4), np.ones(4))
    ids, _ = table.add(np.array([0, 1, 3, 4]), np.array([2, 0, 1, 2]))
    again, _ = table.add(np.array([0, 2, 3]), np.array([0, 1, 2]))
    for i, p in zip([*ids.tolist(), *again.tolist()], [[2], [0, 1], [2], [0, 1], [2]], strict=True):
        assert table.links[table.ptr[i]:table.ptr[i + 1]].tolist() == p
    assert ids[0] == ids[2]


# -- the flow sample ----------------------------------------------------------------------------------


@given(st.lists(st.integers(1, 40), min_size=1, max_size=30), st.integers(1, 16))
def test_flow_sample_is_every_stride_th_flow(batch_sizes, limit):
    s = FlowSample(limit)
    start = 0
    for n in batch_sizes:
        s.add({"op": np.arange(start, start + n)}, None)
        start += n
    kept = s.columns()["op"]
    assert kept.tolist() == list(range(0, start, s.stride))
    assert len(kept) <= 2 * limit


# -- streamed incast against the sweep over the whole log ----------------------------------------------


def _star(n_gpu=5, cap=100.0):
    g = nx.Graph()
    rows = []
    g.add_node("leaf0", kind="leaf")
    for i in range(n_gpu):
        g.add_node(f"gpu{i}", kind="gpu")
        g.add_edge(f"gpu{i}", "leaf0")
        rows += [(f"gpu{i}", "leaf0", cap if i else cap / 2), ("leaf0", f"gpu{i}", cap)]
    links = pd.DataFrame(rows, columns=["src", "dst", "capacity_gbps"]).assign(kind="access", latency_us=1.0)
    links.loc[0, "latency_us"] = 3.0   # gpu0's uplink: slower and farther (other rates and round trips)
    return g, links


def _flows_log(links, flows):
    lid = {(s, d): i for i, (s, d) in enumerate(zip(links["src"], links["dst"], strict=True))}
    paths = PathTable(links["capacity_gbps"].to_numpy(), links["latency_us"].to_numpy())
    ptr, idx = [0], []
    for s, d, _, _ in flows:
        idx += [lid[(f"gpu{s}", "leaf0")], lid[("leaf0", f"gpu{d}")]]
        ptr.append(len(idx))
    ids, _ = paths.add(np.array(ptr), np.array(idx))
    n = len(flows)
    start = np.array([f[2] for f in flows], float)
    sent = np.array([f[3] for f in flows], float)
    log = EngineLog(op_start_s=np.zeros(1), op_end_s=np.ones(1), op_algo=["direct"], op_flows=np.array([n]),
                    flow_op=np.zeros(n, np.int64), flow_path=ids, flow_bytes=np.ones(n), flow_start_s=start,
                    flow_sent_s=sent, flow_end_s=sent, paths=paths, link_stats=LinkStats(np.ones(len(links))),
                    makespan_s=float(sent.max()))
    return log, paths


def _stream(log, paths, links, graph, batch, chunk):
    """Hand the flows over in finishing order, ``batch`` at a time, with the engine's horizon promise."""
    order = np.argsort(log.flow_sent_s, kind="stable")
    inc = IncastStream(links, graph, chunk=chunk)
    state = {"pos": 0}

    def horizon():   # no flow handed over later starts before this
        rest = order[state["pos"]:]
        return float(log.flow_start_s[rest].min()) if len(rest) else np.inf

    inc.set_horizon(horizon)
    for a in range(0, len(order), batch):
        sel = order[a:a + batch]
        state["pos"] = a + len(sel)
        inc.add({"path": log.flow_path[sel], "bytes": log.flow_bytes[sel], "start": log.flow_start_s[sel],
                 "sent": log.flow_sent_s[sel]}, paths)
    inc.close(paths)
    return inc.table


def _same_events(a: pd.DataFrame, b: pd.DataFrame):
    assert len(a) == len(b)
    assert a["port"].tolist() == b["port"].tolist()
    for col in ("t_start_s", "t_end_s", "fanin", "capacity_gbps"):
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
    for col in ("demand_gbps", "est_buffer_bytes"):
        np.testing.assert_allclose(a[col].to_numpy(), b[col].to_numpy(), rtol=1e-12, err_msg=col)


_flow = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 40), st.integers(0, 12))


@settings(max_examples=100, deadline=None)
@given(st.lists(_flow, min_size=1, max_size=40), st.integers(1, 7), st.sampled_from([1, 3, 16, 1 << 20]))
def test_streamed_incast_equals_the_sweep_over_the_whole_log(raw, batch, chunk):
    graph, links = _star()
    # integer-grid times: many flows touch and coincide, the hard cases for merging and ordering
    flows = [(s, d, t * 0.25, t * 0.25 + dur * 0.25) for s, d, t, dur in raw if s != d]
    if not flows:
        return
    log, paths = _flows_log(links, flows)
    _same_events(_stream(log, paths, links, graph, batch, chunk), incast_events(log, links, graph))


def test_streamed_incast_finalises_as_it_goes():
    graph, links = _star()
    # 200 bursts of three senders into gpu4, one after another: each burst is an event
    flows = [(s, 4, 10.0 * k, 10.0 * k + 2.0 + s) for k in range(200) for s in (1, 2, 3)]
    log, paths = _flows_log(links, flows)
    order = np.argsort(log.flow_sent_s, kind="stable")
    inc = IncastStream(links, graph, chunk=12)
    state = {"pos": 0}
    inc.set_horizon(lambda: float(log.flow_start_s[order[state["pos"]:]].min()) if state["pos"] < len(order)
                    else np.inf)
    for a in range(0, len(order), 3):
        sel = order[a:a + 3]
        state["pos"] = a + 3
        inc.add({"path": log.flow_path[sel], "bytes": log.flow_bytes[sel], "start": log.flow_start_s[sel],
                 "sent": log.flow_sent_s[sel]}, paths)
    assert inc.peak_waiting <= 30   # what waits is a few bursts, not the run (600 flows, 1,200 incidences)
    inc.close(paths)
    assert len(inc.table) == 200
    _same_events(inc.table, incast_events(log, links, graph))


# -- the engine: flows streamed, records only for ops that repeat ------------------------------------------


@pytest.fixture(scope="module")
def a2a_setup():
    graph = fat_tree(4, num_gpus=16, gpus_per_server=1)
    router, paths, cap = _setup(graph)
    s, d = np.meshgrid(np.arange(16), np.arange(16))
    m = s != d
    big = _prep(router, paths, s[m], d[m], MIB)
    small = _prep(router, paths, s[m][::3], d[m][::3], MIB // 4)
    return graph, router, cap, [big, small, big, big, small]


def _run(setup, w, **kw):
    graph, router, cap, preps = setup
    return Engine(w, preps, FlowNetwork(cap), **kw).run()


def test_streamed_engine_gives_the_kept_runs_incast_and_counts(a2a_setup):
    graph, router, cap, preps = a2a_setup
    # ops 0, 2, 3 (same key) and 1, 4 (same key); 1 overlaps 0 on every rank, the rest run alone
    keys = ["big", "small", "big", "big", "small"]
    w = _workload([[[0, 1], [2], [3], [4]] for _ in range(16)], 5, keys=keys)
    kept = _run(a2a_setup, w)
    inc = IncastStream(router.links, graph, chunk=64)
    # small blocks and rounds: hand-overs and rounds fall inside releases, as at scale
    streamed = _run(a2a_setup, w, flows="none", sinks=[inc], sink_block=7)
    assert streamed.n_flows == kept.n_flows == len(kept.flow_path) == int(kept.op_flows.sum())
    assert len(streamed.flow_path) == 0 and streamed.peak_live_flows < kept.n_flows
    np.testing.assert_array_equal(streamed.op_end_s, kept.op_end_s)
    _same_events(streamed.incast, incast_events(kept, router.links, graph))
    assert len(streamed.incast) > 0
    for op in range(5):   # the links an op's flows used, from its prepared op or from the kept log
        np.testing.assert_array_equal(streamed.used_links(op), kept.used_links(op))


def test_only_ops_that_repeat_are_recorded(a2a_setup):
    # every op alone: "big" x3 and "small" x2 repeat, "once" occurs once and is not recorded
    graph, router, cap, preps = a2a_setup
    keys = ["big", "small", "big", "once", "small"]
    w = _workload([[[0], [1], [2], [3], [4]] for _ in range(16)], 5, keys=keys)
    memo: dict = {}
    run = Engine(w, preps, FlowNetwork(cap), memo=memo).run()
    plain = Engine(w, preps, FlowNetwork(cap), memoize=False).run()
    assert run.memo_records == 2 and run.memo_hits == 2 and set(memo) == {"big", "small"}
    # no op of either key is left: both records are cut down to their duration
    assert all(len(r.seg_a) == 0 and len(r.flows[0]) == 0 for r in memo.values())
    np.testing.assert_allclose(run.op_end_s, plain.op_end_s, rtol=1e-12)
    np.testing.assert_allclose(run.link_stats.total, plain.link_stats.total, rtol=1e-9)
    np.testing.assert_allclose(np.sort(run.flow_end_s), np.sort(plain.flow_end_s), rtol=1e-12)


# -- the whole replay: flows to Parquet as they finish ----------------------------------------------------


def _small_trace(gpus=16):
    from traces.schema import new_metadata, normalize

    rows = []
    for seq, (op, nbytes) in enumerate([("AllToAll", MIB), ("AllReduce", 4 * MIB), ("AllToAll", MIB)]):
        for r in range(gpus):
            rows.append({"rank": r, "comm": "world", "seq": seq, "op": op, "count": nbytes, "dtype": "uint8",
                         "bytes": nbytes, "root": -1, "nranks": gpus, "t_start_s": seq * 1e-3,
                         "duration_s": np.nan, "host": "", "device": -1, "context": "", "algo": "", "proto": ""})
    return normalize(pd.DataFrame(rows), new_metadata(gpus, {"world": list(range(gpus))}, "small",
                                                      gpus_per_node=4))


def test_flows_out_writes_every_flow_and_the_bytes_on_wire(tmp_path):
    from sim import simulate

    out = tmp_path / "flows.parquet"
    res = simulate(_small_trace(), "fat_tree", flows_out=str(out))
    flows = pd.read_parquet(out)
    assert len(flows) == res.summary["flows"] == int(res.collectives["flows"].sum())
    np.testing.assert_array_equal(np.bincount(flows["op"], minlength=len(res.collectives)),
                                  res.collectives["flows"].to_numpy())
    # each flow's bytes cross each link of its path once: together they are the bytes on the wire
    assert float((flows["bytes"] * flows["hops"]).sum()) == pytest.approx(res.summary["bytes_on_wire"], rel=1e-9)
    assert (flows["start_s"] <= flows["sent_s"]).all() and (flows["sent_s"] <= flows["end_s"]).all()
    assert flows["src"].str.startswith("gpu").all() and flows["dst"].str.startswith("gpu").all()
    # the log counts every flow though it holds only a sample
    assert res.log.n_flows == len(flows)
