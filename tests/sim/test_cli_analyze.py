"""`simrun analyze`: files written, printed summary, and one-line errors for bad input (SPEC §2, §7)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sim.cli import main
from traces.io import write_trace
from traces.schema import new_metadata

TABLES = ("op_counts.csv", "sizes.csv", "bandwidth.csv", "request_sizes.csv", "comms.csv",
          "op_counts_by_comm.csv", "sizes_by_comm.csv", "bandwidth_by_comm.csv")
PLOTS = ("op_counts.png", "sizes_per_op.png", "request_sizes.png", "bandwidth.png", "bandwidth_by_comm.png")


def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


@pytest.fixture
def trace_path(tmp_path):
    """Two AllReduces of 64 B over 2 ranks at t = 0 and 1 s, one Send/Recv pair of 8 B untimed."""
    rows = [dict(rank=r, comm="w", seq=s, op="AllReduce", count=16, dtype="fp32", bytes=64, root=-1, nranks=2,
                 t_start_s=float(s)) for s in (0, 1) for r in (0, 1)]
    rows += [dict(rank=0, comm="w", seq=0, op="Send", count=2, dtype="fp32", bytes=8, root=1, nranks=2,
                  t_start_s=math.nan),
             dict(rank=1, comm="w", seq=0, op="Recv", count=2, dtype="fp32", bytes=8, root=0, nranks=2,
                  t_start_s=math.nan)]
    df = pd.DataFrame(rows)
    for name, value in dict(duration_s=math.nan, host="", device=-1, context="", algo="", proto="").items():
        df[name] = value
    df.attrs["collsim"] = new_metadata(2, {"w": [0, 1]}, "test")
    return write_trace(df, tmp_path / "tiny.parquet")


def test_analyze_writes_tables_and_plots(trace_path, tmp_path, capsys):
    out = tmp_path / "res"
    code, stdout, err = _run(["analyze", str(trace_path), "--out", str(out), "--window", "1"], capsys)
    assert code == 0, err
    for name in TABLES + PLOTS:
        assert (out / name).is_file(), name
    counts = pd.read_csv(out / "op_counts.csv").set_index("op")
    assert counts.loc["AllReduce", ["calls", "rank_calls", "bytes_total"]].tolist() == [2, 4, 256]
    assert counts.loc["Send", ["calls", "rank_calls", "bytes_total"]].tolist() == [1, 1, 8]
    bandwidth = pd.read_csv(out / "bandwidth.csv")
    assert bandwidth[["t_s", "bytes_per_s"]].to_numpy().tolist() == [[0.0, 128.0], [1.0, 128.0]]
    assert "AllReduce" in stdout
    assert "peak/mean 1" in stdout and "2 rows (16 bytes) without t_start_s" in stdout


def test_analyze_default_folder_is_named_after_the_trace(trace_path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["analyze", str(trace_path), "--no-plots"], capsys)
    assert code == 0, err
    assert (tmp_path / "simrun-analyze" / "tiny" / "op_counts.csv").is_file()
    assert not (tmp_path / "simrun-analyze" / "tiny" / "bandwidth.png").exists()


@pytest.mark.parametrize("kind", ["missing", "text", "window"])
def test_bad_input_is_one_error_line_and_exit_2(kind, trace_path, tmp_path, capsys):
    if kind == "missing":
        argv = ["analyze", str(tmp_path / "nope.parquet")]
    elif kind == "text":
        bad = tmp_path / "log.parquet"
        bad.write_text("NCCL INFO this is not parquet\n")
        argv = ["analyze", str(bad)]
    else:
        argv = ["analyze", str(trace_path), "--window", "-1"]
    code, _, err = _run([*argv, "--out", str(tmp_path / "o")], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("simrun: error:")
    assert "Traceback" not in err
    if kind != "window":
        assert argv[1] in lines[0]  # names the file


def test_builtin_tp16_trace_has_the_reference_engine_counts(tmp_path, capsys):
    """DeepSeek's reference engine issues 181 AllReduce and 1 AllGather per forward (docs workloads.md §2a);
    the built-in trace runs 8 forwards (1 prefill + 7 decode) and 2 prompt Broadcasts."""
    from traces.io import builtin_dir

    if not (builtin_dir() / "ds_v3_tp16.parquet").is_file():
        pytest.skip("built-in trace not installed")
    code, _, err = _run(["analyze", "ds_v3_tp16.parquet", "--out", str(tmp_path), "--no-plots"], capsys)
    assert code == 0, err
    counts = pd.read_csv(tmp_path / "op_counts.csv").set_index("op")
    assert counts["calls"].to_dict() == {"AllReduce": 181 * 8, "AllGather": 8, "Broadcast": 2}
    assert (counts["rank_calls"] == counts["calls"] * 16).all()
