"""Incast events: the sweep over flow intervals at switch egress ports."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from sim.engine.engine import EngineLog
from sim.engine.paths import PathTable
from sim.engine.stats import LinkStats
from sim.results.incast import incast_events


def _star():
    """gpu0, gpu1, gpu2 -> leaf0 -> gpu3 (100 Gbps access links, 1 µs per hop)."""
    g = nx.Graph()
    for i in range(4):
        g.add_node(f"gpu{i}", kind="gpu")
    g.add_node("leaf0", kind="leaf")
    rows = []
    for i in range(4):
        g.add_edge(f"gpu{i}", "leaf0", capacity_gbps=100.0, latency_us=1.0, kind="access")
        rows += [(f"gpu{i}", "leaf0"), ("leaf0", f"gpu{i}")]
    links = pd.DataFrame(rows, columns=["src", "dst"]).assign(kind="access", capacity_gbps=100.0, latency_us=1.0)
    return g, links


def _log(links, flows):
    """flows: (src gpu, dst gpu, start, sent)."""
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
    return EngineLog(op_start_s=np.zeros(1), op_end_s=np.ones(1), op_algo=["direct"], op_flows=np.array([n]),
                     flow_op=np.zeros(n, np.int64), flow_path=ids, flow_bytes=np.ones(n), flow_start_s=start,
                     flow_sent_s=sent, flow_end_s=sent + 2e-6, paths=paths,
                     link_stats=LinkStats(np.ones(len(links))), makespan_s=float(sent.max()))


def test_two_senders_overlapping_make_one_event():
    g, links = _star()
    log = _log(links, [(0, 3, 0.0, 1.0), (1, 3, 0.5, 2.0), (0, 3, 0.2, 0.8)])
    ev = incast_events(log, links, g)
    assert len(ev) == 1
    row = ev.iloc[0]
    assert row["port"] == "leaf0->gpu3"
    assert (row["t_start_s"], row["t_end_s"]) == (0.5, 1.0)
    assert row["fanin"] == 2  # gpu0's two flows count as one sender
    assert row["demand_gbps"] == pytest.approx(200.0)
    # (200 - 100) Gbps for one round trip of the 2-hop path (2 x 2 µs)
    assert row["est_buffer_bytes"] == pytest.approx(100e9 / 8 * 4e-6)


def test_three_senders_report_the_peak_fanin_and_demand():
    g, links = _star()
    log = _log(links, [(0, 3, 0.0, 3.0), (1, 3, 1.0, 3.0), (2, 3, 2.0, 4.0)])
    ev = incast_events(log, links, g)
    assert len(ev) == 1
    assert (ev["t_start_s"].iloc[0], ev["t_end_s"].iloc[0]) == (1.0, 3.0)
    assert ev["fanin"].iloc[0] == 3
    assert ev["demand_gbps"].iloc[0] == pytest.approx(300.0)


def test_back_to_back_and_distinct_ports_are_no_incast():
    g, links = _star()
    # gpu0 -> gpu3 ends exactly when gpu1 -> gpu3 starts (half-open intervals); gpu2 -> gpu1 elsewhere
    log = _log(links, [(0, 3, 0.0, 1.0), (1, 3, 1.0, 2.0), (2, 1, 0.0, 2.0)])
    assert incast_events(log, links, g).empty


def test_gpu_ports_are_not_switch_ports():
    g, links = _star()
    ev = incast_events(_log(links, [(0, 3, 0.0, 1.0), (0, 2, 0.0, 1.0)]), links, g)
    assert ev.empty  # one sender on two ports; the GPU's own egress is not a switch port
