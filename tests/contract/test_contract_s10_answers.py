"""Conformance to SPEC.md §10 Answers and validation: the answer figures of ``summary.json``, ``simrun compare``,
``simrun bench``, ``simrun ingest --format nccl-tests`` and ``simrun validate`` (the hand-made trace and the
fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from contract_support import (
    SUMMARY_KEYS,
    WORLD,
    micro_trace,
    simrun,
)

import traces

#: The solver's stated error (docs/report.md, "ranking rule"): figures within 1 % are a tie.
SOLVER_ERROR = 0.01
ANSWER_KEYS = ["comm_time_s", "exposed_comm_s", "fabric_delay_s", "timing"]
#: nccl-tests' column order, as ``simrun bench`` must print it.
BENCH_COLUMNS = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw"]


def test_s10_answer_figures_of_the_summary(result):
    s, coll = result.summary, result.collectives
    assert set(ANSWER_KEYS) <= set(s)
    assert isinstance(s["timing"], str) and s["timing"]
    # fabric_delay_s: the sum over collectives of duration_s - ideal_s
    assert s["fabric_delay_s"] == pytest.approx((coll["duration_s"] - coll["ideal_s"]).sum(), rel=1e-9)
    # ideal_s is a lower bound: slowdown >= 1 up to the solver's stated error
    assert (coll["slowdown"] >= 1 - SOLVER_ERROR).all(), coll["slowdown"].min()
    # comm_time_s: ranks' time inside collectives summed, over world size. In the hand-made trace every
    # member enters each op together (one issue time) and leaves at its end, so a collective adds its
    # duration once per member: all WORLD ranks, or the two ends of a Send/Recv pair.
    members = np.where(coll["op"].isin(["Send", "Recv"]), 2, coll["nranks"])
    assert s["comm_time_s"] == pytest.approx((coll["duration_s"] * members).sum() / WORLD, rel=1e-9)
    # exposed_comm_s: the ops are issued 1 ms apart, each after the previous one ended, and rank 0 is in
    # every one of them, so the critical path waits on each op in turn
    assert (coll["start_s"].iloc[1:].to_numpy() >= coll["end_s"].iloc[:-1].to_numpy()).all()
    assert s["exposed_comm_s"] == pytest.approx(coll["duration_s"].sum(), rel=1e-9)
    assert 0 < s["exposed_comm_s"] <= s["makespan_s"]


def test_s10_compare_table_page_and_one_folder_per_fabric(tmp_path):
    trace = traces.write_trace(micro_trace(), tmp_path / "micro.parquet")  # one AllReduce: the cheapest replay
    out = tmp_path / "cmp"
    code, stdout, err = simrun("compare", "--trace", str(trace), "--topo", "fat_tree,leaf_spine", "--set",
                               "gpus_per_server=1", "--serial", "--no-report", "--out", str(out))
    assert code == 0, err
    table = pd.read_parquet(out / "compare.parquet")
    assert len(table) == 2  # one row per fabric
    scalars = [k for k in SUMMARY_KEYS if k != "hot_links"]
    assert set(scalars) | set(ANSWER_KEYS) <= set(table.columns), (set(scalars) | set(ANSWER_KEYS)) - set(table.columns)
    assert table["topology"].tolist() == ["fat_tree", "leaf_spine"]
    page = (out / "compare.html").read_text()
    body = page[page.index("<body"):]
    assert "verdict" in body.lower()
    # verdict first: before the figures of any fabric
    assert body.lower().index("verdict") < body.index("makespan")
    for folder, topo in zip(table["folder"], table["topology"], strict=True):  # each fabric's own §6 folder
        summary = json.loads((out / folder / "summary.json").read_text())
        assert summary["topology"] == topo
        assert summary["makespan_s"] == pytest.approx(table.loc[table["folder"] == folder, "makespan_s"].iloc[0])
        for name in ("collectives.parquet", "links.parquet", "link_timeseries.parquet", "incast.parquet"):
            assert (out / folder / name).is_file(), (folder, name)


def _bench_rows(stdout: str) -> tuple[list[str], list[list[str]], float]:
    """(header names, data rows, the ``# Avg bus bandwidth`` figure) of a printed nccl-tests table."""
    lines = stdout.splitlines()
    header = next(ln for ln in lines if ln.lstrip("# ").startswith("size"))
    rows = [ln.split() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    avg = next(ln for ln in lines if ln.startswith("# Avg bus bandwidth"))
    return header.lstrip("# ").split(), rows, float(avg.split(":")[1])


def test_s10_bench_prints_nccl_tests_and_validate_replays_it(tmp_path):
    n = 4  # ranks: a 4-server leaf-spine, one GPU each
    fabric = ["--topo", "leaf_spine", "--set", f"num_gpus={n},gpus_per_server=1"]
    code, stdout, err = simrun("bench", "all_reduce", *fabric, "-b", "1M", "-e", "2M", "-f", "2", "-o",
                               str(tmp_path / "b"))
    assert code == 0, err
    names, rows, avg_busbw = _bench_rows(stdout)
    assert names[:len(BENCH_COLUMNS)] == BENCH_COLUMNS
    assert [int(r[0]) for r in rows] == [1 << 20, 2 << 20]
    for r in rows:
        size, count, time_us, algbw, busbw = int(r[0]), int(r[1]), float(r[5]), float(r[6]), float(r[7])
        assert r[2] == "float" and r[3] == "sum" and size == 4 * count
        assert algbw == pytest.approx(size / (time_us * 1e-6) / 1e9, rel=2e-2)  # GB/s = 10^9 B/s, time in us
        assert busbw == pytest.approx(algbw * 2 * (n - 1) / n, rel=2e-2)  # nccl-tests' AllReduce factor
    assert avg_busbw == pytest.approx(np.mean([float(r[7]) for r in rows]), rel=1e-2)
    table = pd.read_parquet(tmp_path / "b" / "bench.parquet")
    assert set(BENCH_COLUMNS + ["algo", "proto"]) <= set(table.columns)
    assert table["size"].tolist() == [1 << 20, 2 << 20]

    # the printed table is nccl-tests output: ingest reads it with the measured duration_s ...
    perf = tmp_path / "all_reduce_perf.txt"
    perf.write_text(stdout)
    code, _, err = simrun("ingest", str(perf), "--format", "nccl-tests", "-o", str(tmp_path / "t.parquet"))
    assert code == 0, err
    df = traces.read_trace(tmp_path / "t.parquet")
    assert set(df["op"]) == {"AllReduce"} and df["rank"].nunique() == n
    by_size = df.groupby(df["count"] * 4)["duration_s"].agg(["min", "max"])
    for r in rows:
        assert by_size.loc[int(r[0])].tolist() == pytest.approx([float(r[5]) * 1e-6] * 2, rel=1e-9)
    # ... and validate replays it on the same fabric: simulated busbw over "measured" is 1 up to print rounding
    code, _, err = simrun("validate", str(perf), *fabric, "-o", str(tmp_path / "v"))
    assert code == 0, err
    val = pd.read_parquet(tmp_path / "v" / "validate.parquet")
    assert list(val.columns[:4]) == ["size", "busbw_measured", "busbw_sim", "ratio"]
    assert val["size"].tolist() == [1 << 20, 2 << 20]
    assert np.allclose(val["ratio"], val["busbw_sim"] / val["busbw_measured"], rtol=1e-9)
    assert np.allclose(val["ratio"], 1.0, atol=2e-2)
    assert list((tmp_path / "v").glob("*.png"))
