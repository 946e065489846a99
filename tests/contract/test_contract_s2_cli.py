"""Conformance to SPEC.md §2 CLI: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from contract_support import (
    DTYPE_SIZE,
    GPUS_PER_NODE,
    SENDS,
    TINY_OPS,
    TRACE_COLUMNS,
    WORLD,
    run_json_and_links,
    simrun,
    simrun_process,
    tiny_trace,
    without_wall,
)

import traces


def test_s2_shorthand_is_run(tiny, tmp_path):
    a = simrun("--trace", str(tiny), "--topo", "fat_tree", "--out", str(tmp_path / "a"), "--json", "--no-report")
    b = simrun("run", "--trace", str(tiny), "--topo", "fat_tree", "--out", str(tmp_path / "b"), "--json",
               "--no-report")
    assert a[0] == b[0] == 0
    assert without_wall(json.loads(a[1])) == without_wall(json.loads(b[1]))


SUBCOMMAND_OPTIONS = {
    "run": ["--trace", "--topo", "--set", "--algo", "--routing", "--seed", "--out", "--json", "--fail-links",
            "--degrade-links"],
    "ingest": ["-o", "--format"],
    "synth": ["-o"],
    "analyze": ["--out"],
    "sweep": ["--trace", "--topo", "--set", "--scheduler", "--algo", "--routing", "--seed", "--out"],
    "topo": ["--set", "--draw"],
    "flows": ["--topo", "--set", "--routing", "--seed", "--out"],
    "export": ["--format", "-o"],
    "traces": [],
    "compare": ["--trace", "--topo", "--set", "--out"],
    "bench": ["--topo", "-b", "-e", "-f", "--set"],
    "validate": ["--topo", "--set"],
}


@pytest.mark.parametrize("name", list(SUBCOMMAND_OPTIONS))
def test_s2_subcommands_and_options_exist(name):
    import click

    from sim.cli import cli

    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    opts = {o for p in command.params for o in p.opts}
    assert set(SUBCOMMAND_OPTIONS[name]) <= opts


def test_s2_choices_of_algo_routing_and_ingest_format():
    import click

    from sim.cli import cli

    ctx = click.Context(cli)

    def choices(cmd: str, opt: str) -> set[str]:
        param = next(p for p in cli.get_command(ctx, cmd).params if opt in p.opts)
        return set(param.type.choices)

    for cmd in ("run", "flows"):
        assert {"ecmp", "spray", "single"} <= choices(cmd, "--routing")
    assert {"auto", "ring", "tree", "direct"} <= choices("run", "--algo")
    assert {"auto", "nccl", "inspector", "kineto", "param", "nccl-tests"} <= choices("ingest", "--format")  # §2, §10


@pytest.mark.parametrize("algo", ["ring", "tree", "direct"])
def test_s2_every_algo_runs(tiny, tmp_path, algo):
    code, out, err = simrun("run", "--trace", str(tiny), "--topo", "fat_tree", "--algo", algo, "--out",
                            str(tmp_path), "--json", "--no-report")
    assert code == 0, err
    assert json.loads(out)["collectives"] == len(TINY_OPS) + SENDS


@pytest.mark.parametrize("routing", ["spray", "single"])
def test_s2_every_routing_runs(tiny, tmp_path, routing):
    code, out, err = simrun("run", "--trace", str(tiny), "--topo", "leaf_spine", "--routing", routing, "--out",
                            str(tmp_path), "--json", "--no-report")
    assert code == 0, err
    assert json.loads(out)["world_size"] == WORLD


def test_s2_default_out_folder(tiny, tmp_path, monkeypatch):
    # a file named like a built-in trace in the working folder wins over the built-in (§1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds_v3.parquet").write_bytes(tiny.read_bytes())
    code, out, err = simrun("run", "--trace", "ds_v3.parquet", "--topo", "fat_tree", "--no-report")
    assert code == 0, err
    summary = tmp_path / "simrun-out" / "ds_v3-fat_tree" / "summary.json"
    assert summary.is_file()
    assert json.loads(summary.read_text())["world_size"] == WORLD  # the built-in has 32 ranks
    assert "makespan" in out.lower()  # the summary table


def test_s2_an_output_folder_that_cannot_be_made_is_refused_before_the_work(tiny, tmp_path):
    (tmp_path / "a_file").write_text("")
    out = tmp_path / "a_file" / "out"
    code, stdout, err = simrun("run", "--trace", str(tiny), "--topo", "fat_tree", "--no-report", "--out", str(out))
    assert code == 2 and stdout == ""  # nothing simulated, nothing printed
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:") and str(out) in lines[0]
    assert "--out" in lines[0]


def test_s2_traces_lists_each_builtin_on_one_line():
    code, out, err = simrun("traces")
    assert code == 0, err
    lines = out.strip().splitlines()
    names = [line.split()[0] for line in lines]
    assert names == [name for name, _ in traces.list_builtin()] and len(set(names)) == len(names) >= 3
    for name in names:
        assert traces.resolve_trace_path(name).is_file()


@pytest.mark.parametrize("argv", [["traces"], ["--help"]])
def test_s2_a_closed_pipe_is_quiet_and_no_failure(argv, monkeypatch, capsys):
    """``simrun traces | head -1``: the reader goes away; no traceback and not the internal-failure code 1."""
    import errno

    from sim.cli import EXIT_CLOSED_PIPE, main

    class ClosedStdout:
        def write(self, text):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def isatty(self):
            return False

    monkeypatch.setattr("sys.stdout", ClosedStdout())
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == EXIT_CLOSED_PIPE == 141  # 128 + SIGPIPE, as a shell reports it
    assert capsys.readouterr().err == ""


def test_s2_json_prints_summary_json(run_out):
    out, printed = run_out
    assert printed == json.loads((out / "summary.json").read_text())


def test_s2_seed_is_reproducible(tiny, tmp_path):
    args = ["run", "--trace", str(tiny), "--topo", "fat_tree", "--seed", "7", "--json", "--no-report"]
    a = simrun(*args, "--out", str(tmp_path / "a"))
    b = simrun(*args, "--out", str(tmp_path / "b"))
    assert a[0] == b[0] == 0
    assert without_wall(json.loads(a[1])) == without_wall(json.loads(b[1]))


def test_s2_set_and_anomalies(tiny, tmp_path):
    base = ["run", "--trace", str(tiny), "--topo", "fat_tree", "--json", "--no-report"]
    code, out, err = simrun(*base, "--set", "oversubscription=2", "--out", str(tmp_path / "s"))
    assert code == 0, err
    code, out, err = simrun(*base, "--fail-links", "2", "--out", str(tmp_path / "f"))
    assert code == 0, err
    code, out, err = simrun(*base, "--degrade-links", "4:0.5", "--out", str(tmp_path / "d"))
    assert code == 0, err
    assert json.loads(out)["makespan_s"] > 0


@pytest.mark.parametrize("bad, named", [
    (["run", "--trace", "no_such_trace.parquet", "--topo", "fat_tree"], "no_such_trace.parquet"),
    (["run", "--trace", "TINY", "--topo", "no_such_topology"], "no_such_topology"),
    (["run", "--trace", "TINY", "--topo", "fat_tree", "--set", "no_such_param=3"], "no_such_param"),
    (["run", "--trace", "TINY", "--topo", "fat_tree", "--set", "oversubscription=0.5"], "oversubscription"),
    (["run", "--trace", "TINY", "--topo", "fat_tree", "--degrade-links", "2:abc"], "--degrade-links"),
    (["run", "--trace", "TINY", "--topo", "fat_tree", "--fail-links", "100000"], "--fail-links"),
    (["run", "--trace", "TINY", "--topo", "fat_tree", "--algo", "bogus"], "--algo"),
    (["run", "--no-such-option"], "--no-such-option"),
    (["run", "--trace", "BADROW", "--topo", "fat_tree"], "bytes"),
])
def test_s2_bad_input_exits_2_with_one_line(tiny, tmp_path, bad, named):
    bad_row = tmp_path / "badrow.parquet"
    df = traces.read_trace(tiny)
    df.loc[5, "bytes"] = 7  # not count x dtype size
    table = pa.Table.from_pandas(df[list(TRACE_COLUMNS)], preserve_index=False)
    pq.write_table(table.replace_schema_metadata({"collsim": json.dumps(df.attrs["collsim"])}), bad_row)
    args = [{"TINY": str(tiny), "BADROW": str(bad_row)}.get(a, a) for a in bad] + ["--out", str(tmp_path / "o")]
    code, _, err = simrun(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:"), err
    assert named in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("bad, named", [
    (["no_such_command"], "no_such_command"),
    (["run", "--trace", "x.parquet"], "--topo"),
    (["topo", "no_such_topology"], "no_such_topology"),
    (["synth", "no-such-model", "-o", "x.parquet"], "no-such-model"),
    (["ingest", "no_such.log", "-o", "x.parquet"], "no_such.log"),
    (["analyze", "no_such.parquet"], "no_such.parquet"),
    (["bench", "no_such_op", "--topo", "fat_tree"], "no_such_op"),
    (["validate", "no_such_perf.txt", "--topo", "fat_tree"], "no_such_perf.txt"),
    (["flows", "no_such_flows.csv", "--topo", "fat_tree"], "no_such_flows.csv"),
])
def test_s2_every_command_reports_bad_input_in_one_line(bad, named, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = simrun(*bad)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:") and named in lines[0], err


def test_s2_bad_input_in_a_process_names_the_file(tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_text("not parquet at all\n")
    proc = simrun_process("run", "--trace", str(bad), "--topo", "fat_tree", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:") and "broken.parquet" in lines[0]
    assert "Traceback" not in proc.stderr


def test_s2_internal_failure_exits_1(monkeypatch):
    import sim.cli.traces as traces_command

    def boom():
        raise RuntimeError("deliberate internal failure")

    monkeypatch.setattr(traces_command, "list_builtin", boom)
    code, _, err = simrun("traces")
    assert code == 1 and "deliberate internal failure" in err


def test_s2_set_takes_simulator_parameters(tiny, tmp_path):
    base = ["run", "--trace", str(tiny), "--topo", "fat_tree", "--json", "--no-report"]
    code, out, err = simrun(*base, "--set", "timing=trace", "--out", str(tmp_path / "t"))
    assert code == 0, err
    honoured = json.loads(out)["makespan_s"]
    assert json.loads(out)["timing"] == "trace"  # §10: the replay mode used
    code, out, err = simrun(*base, "--set", "timing=asap", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert json.loads(out)["timing"] == "asap"
    # the last op is issued at 3 ms in the trace; issued back to back the job ends far earlier
    assert honoured >= 3e-3 > json.loads(out)["makespan_s"]


def test_s2_success_is_quiet_on_stderr_without_a_terminal(tiny, tmp_path):
    proc = simrun_process("run", "--trace", str(tiny), "--topo", "fat_tree", "--no-report", "--out",
                          str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ""


def test_s2_fail_and_degrade_links_change_the_fabric(tiny, tmp_path):
    _, base = run_json_and_links(tiny, tmp_path / "base")
    _, failed = run_json_and_links(tiny, tmp_path / "f", "--fail-links", "2")
    assert len(failed) == len(base) - 2 * 2  # two cables, both directions gone
    _, degraded = run_json_and_links(tiny, tmp_path / "d", "--degrade-links", "3:0.25")
    assert len(degraded) == len(base)
    merged = base.merge(degraded, on=["src", "dst"], suffixes=("", "_d"))
    scaled = merged[merged["capacity_gbps_d"] != merged["capacity_gbps"]]
    assert len(scaled) == 2 * 3
    assert np.allclose(scaled["capacity_gbps_d"], 0.25 * scaled["capacity_gbps"])
    # seeded: the same anomalies again
    _, again = run_json_and_links(tiny, tmp_path / "f2", "--fail-links", "2")
    assert set(zip(again["src"], again["dst"], strict=True)) == set(zip(failed["src"], failed["dst"], strict=True))


def test_s2_export_then_ingest_round_trip(tiny, tmp_path):
    log = tmp_path / "tiny.log"
    code, _, err = simrun("export", str(tiny), "--format", "nccl", "-o", str(log))
    assert code == 0, err
    back_path = tmp_path / "back.parquet"
    code, _, err = simrun("ingest", str(log), "-o", str(back_path), "--format", "nccl")
    assert code == 0, err
    a, b = traces.read_trace(tiny), traces.read_trace(back_path)
    key = ["rank", "seq", "op", "count", "dtype", "bytes", "root", "nranks"]
    pd.testing.assert_frame_equal(a[key].sort_values(key).reset_index(drop=True),
                                  b[key].sort_values(key).reset_index(drop=True))
    assert b.attrs["collsim"]["world_size"] == WORLD and b.attrs["collsim"]["schema_version"] == 1
    assert traces.ingest([log]).shape[0] == len(a)


def test_s2_export_per_host(tiny, tmp_path):
    code, _, err = simrun("export", str(tiny), "--format", "nccl", "--per-host", "-o", str(tmp_path / "logs"))
    assert code == 0, err
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(files) == WORLD // GPUS_PER_NODE and all("node0" in f or "node1" in f for f in files)
    assert len(traces.ingest(sorted((tmp_path / "logs").iterdir()))) == len(tiny_trace())


def test_s2_synth_writes_a_schema_trace(tmp_path):
    out = tmp_path / "t.parquet"
    code, _, err = simrun("synth", "llama3-8b", "--mode", "training", "--tp", "2", "--pp", "2", "--dp", "2",
                          "--gpus-per-node", "4", "--nodes", "2", "--steps", "1", "--micro-batches", "2",
                          "-o", str(out))
    assert code == 0, err
    df = traces.read_trace(out)
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 8 and meta["gpus_per_node"] == 4 and meta["schema_version"] == 1
    assert (df["bytes"] == df["count"] * df["dtype"].map(DTYPE_SIZE)).all()
    assert {"Send", "Recv", "AllReduce"} <= set(df["op"])
    # the CLI is a thin layer over traces.synthesize(model, **plan)
    api = traces.synthesize("llama3-8b", mode="training", tp=2, pp=2, dp=2, gpus_per_node=4, nodes=2, steps=1,
                            micro_batches=2)
    pd.testing.assert_frame_equal(api[list(TRACE_COLUMNS)], df[list(TRACE_COLUMNS)])


def test_s2_a_broken_pipe_that_is_not_stdout_is_reported(monkeypatch, tmp_path, capsys):
    """A BrokenPipeError from elsewhere (a socket) while stdout is fine is an error line, not a quiet 141."""
    import errno

    import sim.cli.traces as traces_command
    from sim.cli import main

    def broken():
        raise BrokenPipeError(errno.EPIPE, "Broken pipe", "tcp://127.0.0.1:1")

    monkeypatch.setattr(traces_command, "list_builtin", broken)
    with (tmp_path / "stdout.txt").open("w") as stdout:  # a real descriptor that polls as writable
        monkeypatch.setattr("sys.stdout", stdout)
        with pytest.raises(SystemExit) as exc:
            main(["traces"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("simrun: error:") and "Broken pipe" in err
