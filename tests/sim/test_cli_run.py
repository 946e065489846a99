"""`simrun run` / `simrun --trace T --topo X`: files, --json, and one-line errors with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.cli import main
from traces import write_trace
from traces.schema import new_metadata

MIB = 1 << 20


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    world = 8
    rows = [dict(rank=r, comm="w", seq=k, op=op, count=MIB, dtype="uint8", bytes=MIB, root=-1, nranks=world,
                 t_start_s=1e-3 * k, duration_s=np.nan, host="", device=-1, context="", algo="", proto="")
            for r in range(world) for k, op in enumerate(["AllToAll", "AllReduce"])]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"w": list(range(world))}, "test", gpus_per_node=4)
    return write_trace(df, tmp_path_factory.mktemp("t") / "small.parquet")


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_short_form_writes_files_and_prints_json(trace_file, tmp_path, capsys):
    out_dir = tmp_path / "o"
    code, out, err = _run(["--trace", str(trace_file), "--topo", "leaf_spine", "--out", str(out_dir), "--json",
                           "--no-report"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["collectives"] == 2 and summary["timing"] == "gaps"
    for name in ("summary.json", "collectives.parquet", "links.parquet", "link_timeseries.parquet",
                 "incast.parquet", "timeline.json"):
        assert (out_dir / name).is_file()


def test_table_and_default_out_folder(trace_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["run", "--trace", str(trace_file), "--topo", "fat_tree", "--no-report",
                           "--set", "k=4", "--seed", "2", "--straggler", "1:5"], capsys)
    assert code == 0, err
    assert "makespan" in out and "incast" in out
    assert (tmp_path / "simrun-out" / "small-fat_tree" / "summary.json").is_file()


@pytest.mark.parametrize("extra, message", [
    (["--set", "num_gpus=4"], "exceeds the 4 GPUs"),
    (["--straggler", "x"], "RANK:DELAY_US"),
    (["--fail-links", "nosuch-link"], "not a cable"),
])
def test_bad_input_is_one_error_line_and_exit_2(trace_file, tmp_path, capsys, extra, message):
    code, out, err = _run(["--trace", str(trace_file), "--topo", "leaf_spine", "--out", str(tmp_path), *extra],
                          capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:") and message in lines[0]


def test_missing_trace_is_exit_2(tmp_path, capsys):
    code, _, err = _run(["--trace", str(tmp_path / "nope.parquet"), "--topo", "fat_tree"], capsys)
    assert code == 2 and err.startswith("simrun: error:")
