"""Sweeps (SPEC §8): the table, a point = the run, Dask = serial, one-line errors (the grid: test_sweep_grid.py)."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from sim.cli import main
from sim.sweep import expand, run_point, run_sweep
from traces.io import write_trace
from traces.schema import new_metadata


def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


@pytest.fixture
def trace_df():
    """Two AllReduces of 1 MiB over 8 ranks on 2 servers of 4 GPUs, then an AllToAll; timed."""
    world = 8
    rows = []
    for seq, (op, count) in enumerate([("AllReduce", 1 << 18), ("AllReduce", 1 << 18), ("AllToAll", 1 << 12)]):
        rows += [dict(rank=r, comm="w", seq=seq, op=op, count=count, dtype="fp32", bytes=4 * count, root=-1,
                      nranks=world, t_start_s=0.001 * seq) for r in range(world)]
    df = pd.DataFrame(rows)
    for name, value in dict(duration_s=math.nan, host="", device=-1, context="", algo="", proto="").items():
        df[name] = value
    df.attrs["collsim"] = new_metadata(world, {"w": list(range(world))}, "test", gpus_per_node=4)
    return df


@pytest.fixture
def trace_path(trace_df, tmp_path):
    return write_trace(trace_df, tmp_path / "tiny.parquet")


@pytest.mark.parametrize(("extra", "needle"), [
    (["--topo", "fat_tree,moebius"], "moebius"),
    (["--topo", "fat_tree", "--set", "warp_factor=1|2"], "warp_factor"),
    (["--topo", "fat_tree", "--set", "oversubscription=1|0.5"], "oversubscription"),
    (["--topo", "fat_tree", "--algo", "ring,psychic"], "psychic"),
])
def test_bad_grid_is_one_error_line_and_exit_2(extra, needle, trace_path, tmp_path, capsys):
    code, _, err = _run(["sweep", "--trace", str(trace_path), *extra, "--serial", "--out", str(tmp_path / "o")],
                        capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("simrun: error:"), err
    assert needle in lines[0]


def test_missing_trace_is_exit_2(tmp_path, capsys):
    code, _, err = _run(["sweep", "--trace", str(tmp_path / "no.parquet"), "--topo", "fat_tree"], capsys)
    assert code == 2 and err.startswith("simrun: error:") and "no.parquet" in err


GRID = ["--topo", "fat_tree,leaf_spine", "--set", "oversubscription=1|4"]


def _points():
    return expand(["fat_tree", "leaf_spine"], {"oversubscription": [1, 4]}, ["auto"], ["ecmp"], seed=3)


def test_a_point_is_the_simulate_call_of_simrun_run(trace_df):
    from sim import simulate

    point = _points()[3]
    row = run_point(trace_df, point, "tiny.parquet")
    direct = simulate(trace_df, "leaf_spine", seed=3, trace_name="tiny.parquet",
                      topology_params={"oversubscription": 4}).summary
    for key in ("makespan_s", "ideal_makespan_s", "bytes_on_wire", "flows", "slowdown_p99", "topology", "trace"):
        assert row[key] == direct[key], key
    assert row["oversubscription"] == 4 and row["topo"] == "leaf_spine" and row["seed"] == 3


def test_dask_sweep_equals_serial(trace_df):
    from distributed import LocalCluster

    points = _points()
    serial = run_sweep(trace_df, points, serial=True)
    # Threads keep this test fast; the process cluster of the CLI is checked in the slow test below. The
    # points go through the scheduler's address, as with --scheduler ADDR.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        done = []
        distributed = run_sweep(trace_df, points, scheduler=cluster.scheduler_address, on_done=done.append)
    assert sum(done) == len(points) == len(serial)
    pd.testing.assert_frame_equal(serial.drop(columns="sim_wall_s"), distributed.drop(columns="sim_wall_s"))
    assert serial["point"].tolist() == [0, 1, 2, 3]
    assert (serial["makespan_s"] >= serial["ideal_makespan_s"] * (1 - 1e-9)).all()
    assert not any(isinstance(v, list | dict) for v in serial.iloc[0])


def test_cli_sweep_writes_table_and_plot(trace_path, tmp_path, capsys):
    out = tmp_path / "s"
    argv = ["sweep", "--trace", str(trace_path), "--topo", "fat_tree,leaf_spine", "--set", "oversubscription=2",
            "--algo", "ring,tree", "--serial", "--out", str(out)]
    code, stdout, err = _run(argv, capsys)
    assert code == 0, err
    table = pd.read_parquet(out / "sweep.parquet")
    assert table[["topo", "oversubscription", "algo"]].values.tolist() == [
        ["fat_tree", 2, "ring"], ["fat_tree", 2, "tree"], ["leaf_spine", 2, "ring"], ["leaf_spine", 2, "tree"]]
    assert {"makespan_s", "ideal_makespan_s", "slowdown_p99", "max_link_utilization"} <= set(table.columns)
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "makespan:" in stdout and ("wins" in stdout or "tie" in stdout)  # sim.results.verdict's rule
    # the verdict names a point by what varies (topology, algorithm), not by the constant oversubscription
    verdicts = [line for line in stdout.splitlines() if " wins " in line or " tie" in line]
    assert verdicts and all(re.search(r"(fat_tree|leaf_spine) algo=(ring|tree)", line) for line in verdicts)
    assert not any("oversubscription=" in line or "routing=" in line for line in verdicts)
    # every row of a column in one fixed format: makespans to the microsecond
    header = next(line for line in stdout.splitlines() if "makespan ms" in line)
    assert "exposed comm ms" in header and "incast events" in header
    rows = [line for line in stdout.splitlines() if line.startswith("│") and ("fat_tree" in line or "leaf_spine" in line)]
    assert len(rows) == 4 and all(re.search(r"│\s+\d+\.\d{3} │", line) for line in rows)


@pytest.mark.slow
def test_cli_sweep_on_a_local_process_cluster_equals_serial(trace_path, tmp_path, capsys):
    for mode in ("serial", "dask"):
        extra = ["--serial"] if mode == "serial" else ["--workers", "2"]
        code, _, err = _run(["sweep", "--trace", str(trace_path), *GRID, *extra, "--out", str(tmp_path / mode)],
                            capsys)
        assert code == 0, err
    serial = pd.read_parquet(tmp_path / "serial" / "sweep.parquet").drop(columns="sim_wall_s")
    dask = pd.read_parquet(tmp_path / "dask" / "sweep.parquet").drop(columns="sim_wall_s")
    pd.testing.assert_frame_equal(serial, dask)
