"""Every output file of every command goes through the atomic helper (issue 13).

Each command runs once to a folder; then again into the same folder with a write that fails half way: the
k-th file write puts a few bytes at the path it was given and raises "No space left on device". Because
collsim writes to a temporary file and renames it, the failure must leave every file in the folder as the
first run wrote it (the run folder marked ``.incomplete``), no temporary file, exit code 2 and one
``simrun: error:`` line naming the file. A write that went to its final path directly would leave the
partial bytes there, and the test names it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sim.cli import main

ROOT = Path(__file__).resolve().parents[1]
PARTIAL = b"PAR1 partial write"


def small_trace(folder: Path) -> Path:
    """Three AllReduce of 1 MiB on four ranks, written with the API."""
    from traces.io import write_trace
    from traces.schema import new_metadata

    rows = [dict(rank=r, comm="c0", seq=s, op="AllReduce", count=1 << 18, dtype="fp32", bytes=1 << 20, root=-1,
                 nranks=4, t_start_s=s * 1e-3, duration_s=float("nan"), host=f"node{r // 2}", device=r % 2,
                 context="", algo="", proto="") for s in range(3) for r in range(4)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world_size=4, gpus_per_node=8, comms={"c0": [0, 1, 2, 3]}, source="test")
    path = folder / "small.parquet"
    write_trace(df, path)
    return path


def flows_csv(folder: Path) -> Path:
    path = folder / "flows.csv"
    path.write_text("src,dst,bytes,start_s\n0,1,1000000,0\n2,3,5000000,0.0001\n1,3,2000000,0\n")
    return path


COMMANDS = {
    "run": lambda t, d: ["run", "--trace", str(t), "--topo", "leaf_spine", "--out", str(d / "run")],
    "run-both": lambda t, d: ["run", "--trace", str(t), "--topo", "fat_tree", "--model", "both", "--out",
                              str(d / "both")],
    "analyze": lambda t, d: ["analyze", str(t), "--out", str(d / "analyze")],
    "flows": lambda t, d: ["flows", str(flows_csv(d)), "--topo", "fat_tree", "-o", str(d / "flows")],
    "bench": lambda t, d: ["bench", "all_reduce", "--topo", "fat_tree", "--nodes", "2", "-b", "8", "-e", "64K",
                           "-o", str(d / "bench")],
    "validate": lambda t, d: ["validate", str(ROOT / "tests/data/nccl_tests/dgx_spark_2x1_gb10_allgather.txt"), "--topo",
                              "rail_optimized", "-o", str(d / "validate")],
    "compare": lambda t, d: ["compare", "--trace", str(t), "--topo", "fat_tree,leaf_spine", "--serial", "-o",
                             str(d / "compare")],
    "sweep": lambda t, d: ["sweep", "--trace", str(t), "--topo", "fat_tree,leaf_spine", "--serial", "-o",
                           str(d / "sweep")],
    "synth": lambda t, d: ["synth", "llama3-8b", "--mode", "training", "--tp", "2", "--dp", "2", "-o",
                           str(d / "synth.parquet")],
    "export": lambda t, d: ["export", str(t), "--format", "nccl", "-o", str(d / "nccl"), "--per-host"],
    "ingest": lambda t, d: ["ingest", str(ROOT / "tests/data/nccl_logs/constructed_v2_29.log"), "-o",
                            str(d / "ingest.parquet")],
    "topo-draw": lambda t, d: ["topo", "fat_tree", "--set", "k=4,gpus_per_server=4", "--draw", str(d / "ft.png")],
}


class FaultyWrites:
    """Counts the file writes below ``folder``; makes the ``fail_at``-th one write ``PARTIAL`` and fail."""

    def __init__(self, folder: Path, fail_at: int | None) -> None:
        self.folder, self.fail_at, self.count, self._depth = folder.resolve(), fail_at, 0, 0
        self.failed_path: Path | None = None

    def wrap(self, real, path_arg: int):
        def write(*args, **kwargs):
            target = args[path_arg] if len(args) > path_arg else None
            inside = isinstance(target, str | Path) and self.folder in Path(target).resolve().parents
            if not inside or self._depth:  # pandas' to_parquet calls pq.write_table: count the outer call
                return real(*args, **kwargs)
            self.count += 1
            if self.count == self.fail_at:
                Path(target).write_bytes(PARTIAL)
                self.failed_path = Path(target)
                raise OSError(errno.ENOSPC, "No space left on device")
            self._depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                self._depth -= 1
        return write

    @contextlib.contextmanager
    def active(self, monkeypatch):
        with monkeypatch.context() as m:
            m.setattr(pd.DataFrame, "to_parquet", self.wrap(pd.DataFrame.to_parquet, 1))
            m.setattr(pd.DataFrame, "to_csv", self.wrap(pd.DataFrame.to_csv, 1))
            m.setattr(matplotlib.figure.Figure, "savefig", self.wrap(matplotlib.figure.Figure.savefig, 1))
            m.setattr(Path, "write_text", self.wrap(Path.write_text, 0))
            m.setattr(Path, "write_bytes", self.wrap(Path.write_bytes, 0))
            m.setattr(pq, "write_table", self.wrap(pq.write_table, 1))
            # streamed Parquet (ingest writes row groups as it reads): the writer opening its file
            m.setattr(pq.ParquetWriter, "__init__", self.wrap(pq.ParquetWriter.__init__, 1))
            yield self


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            return (exc.code if isinstance(exc.code, int) else 1), err.getvalue()
    return 0, err.getvalue()


def snapshot(folder: Path, skip: set[Path]) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p not in skip}


def same(rel: Path, a: bytes, b: bytes) -> bool:
    if rel.name == "summary.json":  # sim_wall_s is a wall-clock measurement (SPEC §6)
        ja, jb = json.loads(a), json.loads(b)
        ja.pop("sim_wall_s", None), jb.pop("sim_wall_s", None)
        return ja == jb
    if rel.name in ("sweep.parquet", "compare.parquet") and a != b:  # one row per run: sim_wall_s again
        fa, fb = (pd.read_parquet(io.BytesIO(x)).drop(columns="sim_wall_s", errors="ignore") for x in (a, b))
        return fa.equals(fb)
    return a == b


def check_failure_leaves_old_files(name: str, tmp_path: Path, monkeypatch, which: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SIMRUN_QUIET_ERRORS", "1")
    trace = small_trace(tmp_path)
    argv = COMMANDS[name](trace, tmp_path)
    inputs = {p for p in tmp_path.rglob("*") if p.is_file()}
    with FaultyWrites(tmp_path, None).active(monkeypatch) as counter:
        code, err = run_cli(argv)
    assert code == 0, err
    inputs |= {p for p in tmp_path.rglob("*") if p.is_file() and p.name == "flows.csv"}
    first = snapshot(tmp_path, inputs)
    assert first and counter.count >= 1
    ks = range(1, counter.count + 1) if which == "all" else [(counter.count + 1) // 2]
    for k in ks:
        with FaultyWrites(tmp_path, k).active(monkeypatch) as faulty:
            code, err = run_cli(argv)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("simrun: error: "), (name, k, err)
        assert faulty.failed_path is not None and "No space left on device" in lines[0]
        now = snapshot(tmp_path, inputs)
        extra = sorted(str(p) for p in set(now) - set(first) if p.name != ".incomplete")
        assert not extra, f"{name}: write {k} left {extra}"
        changed = sorted(str(p) for p in now if p in first and not same(p, now[p], first[p]))
        assert not changed, f"{name}: write {k} ({faulty.failed_path.name}) left partial or changed files {changed}"
        for marker in (p for p in now if p.name == ".incomplete"):
            assert (marker.parent / "summary.json") not in now, f"{name}: an incomplete folder holds summary.json"
        for folder in {p.parent for p in first if p.name == "summary.json"}:
            # a run folder that looks complete (summary.json, no .incomplete) is complete
            looks_complete = (folder / "summary.json") in now and (folder / ".incomplete") not in now
            missing = [str(p) for p in first if p.parent == folder and p not in now]
            assert not (looks_complete and missing), f"{name}: {folder} looks complete but lacks {missing}"
    code, err = run_cli(argv)  # and the next run into the same folder succeeds and completes it
    assert code == 0, err
    assert not any(p.name == ".incomplete" for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_failed_write_leaves_the_old_files_and_no_partial_file(name, tmp_path, monkeypatch):
    check_failure_leaves_old_files(name, tmp_path, monkeypatch, "middle")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_write_of_every_command_is_atomic(name, tmp_path, monkeypatch):
    check_failure_leaves_old_files(name, tmp_path, monkeypatch, "all")
