"""Outputs never mix runs; -o/--out everywhere; the terminal's hints and tables."""

from __future__ import annotations

import pytest

from sim.cli import main
from traces import write_trace


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory, small_step_trace):
    return write_trace(small_step_trace, tmp_path_factory.mktemp("t") / "step.parquet")


RUN = ["--topo", "leaf_spine", "--set", "gpus_per_server=1,gpus_per_leaf=4"]


def test_a_second_run_replaces_the_first_runs_files(trace_path, tmp_path, capsys):
    out = tmp_path / "o"
    code, stdout, err = _run(["--trace", str(trace_path), *RUN, "-o", str(out)], capsys)
    assert code == 0, err and (out / "report.html").is_file() and "report.html" in stdout
    code, stdout, err = _run(["--trace", str(trace_path), *RUN, "-o", str(out), "--no-report"], capsys)
    assert code == 0, err
    assert "report.html" not in stdout
    assert not (out / "report.html").exists() and not list(out.glob("*.png"))
    assert (out / "summary.json").is_file()


def test_a_folder_with_other_files_needs_force(trace_path, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = _run(["--trace", str(trace_path), *RUN, "--out", str(out), "--no-report"], capsys)
    assert code == 2 and err.startswith("simrun: error:") and "--force" in err and "notes.txt" in err
    code, _, err = _run(["--trace", str(trace_path), *RUN, "--out", str(out), "--no-report", "--force"], capsys)
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "summary.json").is_file()


def test_hints_in_errors(trace_path, tmp_path, capsys):
    log = tmp_path / "rank0.log"
    log.write_text("NCCL INFO AllReduce: opCount 0\n")
    code, _, err = _run(["--trace", str(log), "--topo", "fat_tree"], capsys)
    assert code == 2 and "simrun ingest" in err and err.count("\n") == 1
    code, _, err = _run(["--trace", str(trace_path), "--topo", "fat_tree", "--set", "num_gpus=8", "-o",
                         str(tmp_path / "x")], capsys)
    assert code == 2 and "--set num_gpus=16" in err
    code, _, err = _run(["sweep", "--trace", str(trace_path), "--topo", "fat_tree", "--set", "k=4,8", "--serial"],
                        capsys)
    assert code == 2 and "'|'" in err and "k=1|2" in err


def test_bare_simrun_prints_its_usage(capsys):
    code, out, err = _run([], capsys)
    assert code == 0 and out.startswith("Usage: simrun") and "\n  compare" in out and not err


def test_sweep_table_is_not_truncated_when_redirected(trace_path, tmp_path, capsys):
    long_name = tmp_path / ("a_rather_long_topology_file_name_that_a_narrow_console_would_cut" + ".yaml")
    long_name.write_text("preset: leaf_spine\ngpus_per_server: 1\ngpus_per_leaf: 4\n")
    code, out, err = _run(["sweep", "--trace", str(trace_path), "--topo", f"leaf_spine,{long_name}", "--set",
                           "gpus_per_server=1,gpus_per_leaf=4", "--serial", "-o", str(tmp_path / "s")], capsys)
    assert code == 0, err
    assert str(long_name) in out and "…" not in out
    assert "tie" in out  # the same fabric twice: the ranking says so
