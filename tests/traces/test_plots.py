"""Plots of the characterisation tables: each writes a valid PNG (light checks: files, not pixels)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from traces import plots, stats
from traces.schema import new_metadata, validate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def trace():
    rows = []
    for seq in range(20):
        for rank in range(4):
            rows.append(dict(rank=rank, comm="w", seq=seq, op="AllReduce" if seq % 3 else "AllGather",
                             count=1 << (seq % 12), dtype="bf16", root=-1, nranks=4,
                             t_start_s=0.01 * seq if seq != 5 else math.nan))
    rows.append(dict(rank=0, comm="w", seq=20, op="Broadcast", count=0, dtype="int8", root=0, nranks=4,
                     t_start_s=0.3))
    df = pd.DataFrame(rows)
    df["bytes"] = df["count"] * df["dtype"].map({"bf16": 2, "int8": 1})
    for name, value in dict(duration_s=math.nan, host="", device=-1, context="", algo="", proto="").items():
        df[name] = value
    df.attrs["collsim"] = new_metadata(4, {"w": [0, 1, 2, 3]}, "test")
    return validate(df)


def _is_png(path):
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_every_plot_writes_a_png(trace, tmp_path):
    bw = stats.bandwidth_over_time(trace, window_s=0.02)
    _is_png(plots.plot_op_counts(stats.op_counts(trace), tmp_path / "a.png"))
    _is_png(plots.plot_sizes_per_op(trace, tmp_path / "b.png"))
    _is_png(plots.plot_request_sizes(stats.size_histogram(trace), tmp_path / "c.png"))
    _is_png(plots.plot_bandwidth(bw, tmp_path / "d.png"))
    _is_png(plots.plot_bandwidth_by_comm(stats.bandwidth_by_comm(trace, 0.02), tmp_path / "sub" / "e.png"))


def test_plots_of_an_empty_trace_still_write(tmp_path):
    empty = stats.op_counts(pd.DataFrame(columns=["op", "bytes", "comm", "seq", "rank", "nranks", "root"]))
    _is_png(plots.plot_op_counts(empty, tmp_path / "a.png"))
    _is_png(plots.plot_request_sizes(stats.size_histogram(pd.DataFrame(columns=["op", "bytes"])), tmp_path / "c.png"))


@pytest.mark.parametrize(("value", "text"), [(0, "0 B"), (1023, "1023 B"), (14336, "14 KiB"),
                                             (3 * 2**20, "3 MiB"), (2**50, "1 PiB")])
def test_human_bytes(value, text):
    assert plots.human_bytes(value) == text
