"""Result.write: the SPEC §6 files, report.html with its plots, timeline.json in Chrome trace format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import sim
from topologies import leaf_spine
from traces.schema import new_metadata, validate

MIB = 1 << 20


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    world = 8
    rows = [dict(rank=r, comm="w", seq=k, op=op, count=MIB, dtype="uint8", bytes=MIB, root=-1, nranks=world,
                 t_start_s=np.nan, duration_s=np.nan, host="", device=-1, context="", algo="", proto="")
            for r in range(world) for k, op in enumerate(["AllToAll", "AllGather"])]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"w": list(range(world))}, "test", gpus_per_node=1)
    res = sim.simulate(validate(df), leaf_spine(world, gpus_per_server=1, gpus_per_leaf=4))
    out = tmp_path_factory.mktemp("run")
    res.write(out)
    return res, out


def test_spec_files_round_trip(written):
    res, out = written
    summary = json.loads((out / "summary.json").read_text())
    assert summary["collectives"] == 2 and summary["makespan_s"] == pytest.approx(res.summary["makespan_s"])
    for name, table in [("collectives", res.collectives), ("links", res.links),
                        ("link_timeseries", res.link_timeseries), ("incast", res.incast)]:
        back = pd.read_parquet(out / f"{name}.parquet")
        assert list(back.columns) == list(table.columns)
        assert len(back) == len(table)
    inc = pd.read_parquet(out / "incast.parquet")
    assert {"port", "t_start_s", "t_end_s", "fanin", "demand_gbps", "capacity_gbps", "est_buffer_bytes"} <= set(inc)


def test_report_has_its_plots_and_the_fidelity_statement(written):
    _, out = written
    page = (out / "report.html").read_text()
    for png in ("utilization_heatmap.png", "slowdown_cdf.png", "hot_links.png", "incast_timeline.png",
                "top_links.png"):
        assert (out / png).stat().st_size > 1000
        assert png in page
    assert "PFC" in page and "drops" in page
