"""Conformance to SPEC.md §6 Outputs of run: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from contract_support import (
    BUSBW_FACTOR,
    COLLECTIVE_COLUMNS,
    GPUS_PER_NODE,
    INCAST_COLUMNS,
    LINK_COLUMNS,
    NCCLTESTS_S_FACTOR,
    SENDS,
    SUMMARY_KEYS,
    TIMESERIES_COLUMNS,
    TINY_OPS,
    WORLD,
)

import topologies


def test_s6_summary_keys_and_hot_links(result):
    s = result.summary
    assert set(SUMMARY_KEYS) <= set(s)
    assert s["world_size"] == WORLD and s["collectives"] == len(TINY_OPS) + SENDS
    assert 0 < s["ideal_makespan_s"] <= s["makespan_s"] * (1 + 1e-9)
    assert 0 <= s["mean_link_utilization"] <= s["max_link_utilization"]
    busy_links = int((result.links["bytes"] > 0).sum())
    assert len(s["hot_links"]) == min(10, busy_links) > 0
    for entry in s["hot_links"]:
        assert {"link", "utilization", "bytes"} <= set(entry)
        u, v = entry["link"].split("->")
        assert u and v
    utils = [e["utilization"] for e in s["hot_links"]]
    assert utils == sorted(utils, reverse=True) and utils[0] == pytest.approx(s["max_link_utilization"])
    json.dumps(s)  # serialisable as summary.json


def test_s6_tables_columns(result):
    for frame, cols in ((result.collectives, COLLECTIVE_COLUMNS), (result.links, LINK_COLUMNS),
                        (result.link_timeseries, TIMESERIES_COLUMNS), (result.incast, INCAST_COLUMNS)):
        assert isinstance(frame, pd.DataFrame)
        assert set(cols) <= set(frame.columns), set(cols) - set(frame.columns)
    assert len(result.collectives) == len(TINY_OPS) + SENDS
    # one row per directed link: every fabric cable twice
    g = topologies.build("fat_tree", num_gpus=WORLD, gpus_per_server=GPUS_PER_NODE)
    assert len(result.links) == 2 * g.number_of_edges()
    assert set(zip(result.links["src"], result.links["dst"], strict=True)) == \
        {(u, v) for a, b in g.edges() for u, v in ((a, b), (b, a))}
    edge_kind = {(u, v): d["kind"] for a, b, d in g.edges(data=True) for u, v in ((a, b), (b, a))}
    assert [edge_kind[(u, v)] for u, v in zip(result.links["src"], result.links["dst"], strict=True)] == \
        result.links["kind"].tolist()
    assert len(result.incast) > 0  # the tiny trace's AllReduce does converge on ports
    for port in result.incast["port"]:
        u, v = port.split("->")
        assert g.has_edge(u, v)


def test_s6_algbw_busbw_nccl_tests(result):
    coll = result.collectives
    for op, (_, _, rank_bytes) in TINY_OPS.items():
        row = coll[coll["op"] == op].iloc[0]
        n = int(row["nranks"])
        size = rank_bytes * NCCLTESTS_S_FACTOR[op](n)
        assert row["bytes"] == size
        algbw = size * 8 / row["duration_s"] / 1e9
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-9)
        assert row["busbw_gbps"] == pytest.approx(algbw * BUSBW_FACTOR[op](n), rel=1e-9)
        assert row["duration_s"] == pytest.approx(row["end_s"] - row["start_s"], rel=1e-9)
        assert row["slowdown"] == pytest.approx(row["duration_s"] / row["ideal_s"], rel=1e-9)


def test_s6_write_files(result, tmp_path):
    result.write(tmp_path)
    for name in ("summary.json", "collectives.parquet", "links.parquet", "link_timeseries.parquet",
                 "incast.parquet", "report.html"):
        assert (tmp_path / name).is_file(), name
    assert list(tmp_path.glob("*.png"))
    assert set(SUMMARY_KEYS) <= set(json.loads((tmp_path / "summary.json").read_text()))
    for name, cols in (("collectives", COLLECTIVE_COLUMNS), ("links", LINK_COLUMNS),
                       ("link_timeseries", TIMESERIES_COLUMNS), ("incast", INCAST_COLUMNS)):
        assert set(cols) <= set(pd.read_parquet(tmp_path / f"{name}.parquet").columns), name


def test_s6_cli_run_writes_files_and_report(run_out):
    out, summary = run_out
    assert set(SUMMARY_KEYS) <= set(summary)
    assert summary["trace"] and summary["topology"] == "fat_tree"
    for name in ("summary.json", "collectives.parquet", "links.parquet", "link_timeseries.parquet",
                 "incast.parquet", "report.html"):
        assert (out / name).is_file(), name
    pngs = list(out.glob("*.png"))
    assert len(pngs) >= 4  # heatmap, slowdown CDF, hot links, incast timeline
    html = (out / "report.html").read_text()
    assert all(p.name in html for p in pngs)
    # the preset sized itself to the trace's world size
    links = pd.read_parquet(out / "links.parquet")
    gpus = {n for n in set(links["src"]) | set(links["dst"]) if n.startswith("gpu")}
    assert gpus == {f"gpu{i}" for i in range(WORLD)}


def test_s6_summary_agrees_with_tables(result):
    s = result.summary
    assert s["bytes_on_wire"] == pytest.approx(result.links["bytes"].sum(), rel=1e-9)
    assert s["incast_events"] == len(result.incast)
    if len(result.incast):
        assert s["max_incast_fanin"] == result.incast["fanin"].max()
        inc = result.incast
        assert (inc["fanin"] >= 2).all() and (inc["t_end_s"] >= inc["t_start_s"]).all()
        assert (inc["demand_gbps"] > inc["capacity_gbps"]).all()
    slow = result.collectives["slowdown"].dropna()
    assert s["slowdown_p50"] == pytest.approx(slow.quantile(0.5), rel=1e-6)
    assert s["slowdown_p99"] == pytest.approx(slow.quantile(0.99), rel=1e-6)
    ts = result.link_timeseries
    assert (ts["utilization"] >= 0).all() and (ts["utilization"] <= 1 + 1e-6).all()
    assert s["max_link_utilization"] == pytest.approx(result.links["mean_utilization"].max(), rel=1e-9)
    # t_s is a bin start: every bin starts inside the run
    assert (ts["t_s"] >= 0).all() and (ts["t_s"] < s["makespan_s"]).all()
    links = result.links.set_index(["src", "dst"])
    assert set(zip(ts["src"], ts["dst"], strict=True)) <= set(links.index)
    # per directed link: mean <= peak <= 1, time above 90 % within the run
    assert (links["mean_utilization"] <= links["peak_utilization"] + 1e-9).all()
    assert (links["peak_utilization"] <= 1 + 1e-6).all()
    assert ((links["busy_above_90_s"] >= 0) & (links["busy_above_90_s"] <= s["makespan_s"])).all()
    # hot_links name links of links.parquet, with their bytes and mean utilisation
    for entry in s["hot_links"]:
        row = links.loc[tuple(entry["link"].split("->"))]
        assert entry["bytes"] == pytest.approx(row["bytes"], rel=1e-9)
        assert entry["utilization"] == pytest.approx(row["mean_utilization"], rel=1e-9)
    # an incast port is a directed link; its capacity is that link's
    for port, cap in zip(result.incast["port"], result.incast["capacity_gbps"], strict=True):
        assert cap == pytest.approx(links.loc[tuple(port.split("->")), "capacity_gbps"], rel=1e-9)
    assert (result.incast["est_buffer_bytes"] >= 0).all()
    # collectives: one algorithm named per row, end after start
    coll = result.collectives
    assert coll["algo"].map(lambda a: isinstance(a, str) and bool(a)).all()
    assert (coll["end_s"] >= coll["start_s"]).all()
