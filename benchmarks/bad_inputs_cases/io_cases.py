"""Cases of output safety: traversal, devices, full disks, interrupted runs, Ctrl-C, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bad_inputs_cases.common import (
    TIMEOUT_S,
    Case,
    Outcome,
    base_meta,
    base_rows,
    check_call,
    small_trace,
    write_raw,
)

__all__ = ["CASES"]


def check_inside(folder: Path, out: Outcome) -> str | None:
    if (folder / "escaped.log").exists() or (folder.parent / "escaped.log").exists():
        return "a host of '../escaped' wrote outside the -o folder"
    logs = folder / "logs"
    names = sorted(p.name for p in logs.iterdir()) if logs.is_dir() else []
    if names != ["_.._escaped.log", "node0.log"]:
        return f"unexpected files in -o: {names}"
    return None


def check_device(folder: Path, out: Outcome) -> str | None:
    import stat

    return None if stat.S_ISCHR(os.stat("/dev/full").st_mode) else "/dev/full is no longer a character device"


def check_interrupted(folder: Path, out: Outcome) -> str | None:
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    if lines != ["simrun: interrupted"]:
        return f"stderr is {lines[:3]!r}, not one line 'simrun: interrupted'"
    run = folder / "out"
    if (run / "summary.json").exists() and not (run / ".incomplete").exists():
        return "the interrupted run's folder looks complete"
    return None


def check_full_disk(folder: Path, _: Any) -> str | None:
    """A write that fails half way (ENOSPC) leaves neither a footer-less file nor a temporary file."""
    import errno
    from unittest import mock

    import traces

    df = traces.read_trace(small_trace(folder))
    target = folder / "full.parquet"
    real = pq.write_table

    def half_then_full(table, where, **kw):
        Path(where).write_bytes(b"PAR1" + b"\0" * 100)  # a Parquet file cut before its footer
        raise OSError(errno.ENOSPC, "No space left on device")

    with mock.patch.object(pq, "write_table", half_then_full):
        try:
            traces.write_trace(df, target)
            return "a failed write raised nothing"
        except ValueError:
            pass
    assert pq.write_table is real
    left = sorted(p.name for p in folder.iterdir() if p.name not in ("small.parquet",))
    return None if not left else f"a failed write left {left}"


def check_run_folder(folder: Path, _: Any) -> str | None:
    """Ctrl-C while the report is written leaves the folder marked .incomplete, without summary.json."""
    from unittest import mock

    import sim
    from sim.results import report
    from traces import read_trace

    res = sim.simulate(read_trace(small_trace(folder)), "fat_tree")
    out = folder / "run"
    with mock.patch.object(report, "write_report", side_effect=KeyboardInterrupt):
        try:
            res.write(out)
        except KeyboardInterrupt:
            pass
    if (out / "summary.json").exists() or not (out / ".incomplete").exists():
        return "an interrupted write left a folder that looks complete"
    res.write(out)
    if (out / ".incomplete").exists() or not (out / "summary.json").exists():
        return "a finished write left the folder marked incomplete"
    return None


def check_deterministic(folder: Path, _: Any) -> str | None:
    """Every output file (report.html and PNGs included) byte-identical across two processes."""
    t = small_trace(folder)
    flows = folder / "flows.csv"
    flows.write_text("src,dst,bytes,start_s\n0,1,1000000,0\n2,3,5000000,0.0001\n1,3,2000000,0\n")
    runs = []
    for k in (1, 2):
        env = {**os.environ, "PYTHONHASHSEED": str(k)}  # a different hash seed in each process
        out = folder / f"run{k}"
        for argv in (["run", "--trace", str(t), "--topo", "leaf_spine", "--out", str(out / "run")],
                     ["synth", "llama3-8b", "--mode", "training", "--tp", "2", "--dp", "2", "-o", str(out / "synth.parquet")],
                     ["flows", str(flows), "--topo", "fat_tree", "-o", str(out / "flows")],
                     ["analyze", str(t), "--out", str(out / "analyze")],
                     ["export", str(t), "--format", "nccl", "-o", str(out / "nccl"), "--per-host"]):
            res = subprocess.run([sys.executable, "-m", "sim", *argv], capture_output=True, text=True, env=env,
                                 cwd=folder, timeout=TIMEOUT_S)
            if res.returncode:
                return f"simrun {argv[0]} failed: {res.stderr.strip()[-300:]}"
        runs.append(out)
    a_files = sorted(p.relative_to(runs[0]) for p in runs[0].rglob("*") if p.is_file())
    b_files = sorted(p.relative_to(runs[1]) for p in runs[1].rglob("*") if p.is_file())
    if a_files != b_files:
        return f"different file sets: {set(a_files) ^ set(b_files)}"
    for rel in a_files:
        a, b = (r / rel for r in runs)
        if rel.name == "summary.json":  # sim_wall_s is a wall-clock measurement (SPEC §6)
            ja, jb = (json.loads(p.read_text()) for p in (a, b))
            ja.pop("sim_wall_s"), jb.pop("sim_wall_s")
            if ja != jb:
                return f"{rel} differs (beyond sim_wall_s)"
        elif a.read_bytes() != b.read_bytes():
            return f"{rel} differs between two identical runs"
    return None


def per_host_trace(d: Path) -> Path:
    df = base_rows()
    df["host"] = ["../escaped" if r < 2 else "node0" for r in df["rank"]]
    return write_raw(d / "hosts.parquet", df, base_meta())



CASES: list[Case] = [
    # 3. I/O safety
    Case("export-traversal", "export --per-host with a host '../escaped'", code=0,
         argv=lambda d: ["export", str(per_host_trace(d)), "--format", "nccl", "-o", str(d / "logs"), "--per-host"],
         check=check_inside),
    Case("ingest-dev-full", "ingest -o /dev/full keeps the device", tags=("dev-full",),
         argv=lambda d: ["ingest", str(Path(__file__).resolve().parents[2] / "tests/data/nccl_logs/constructed_v2_29.log"),
                         "-o", "/dev/full"], expect="/dev/full: cannot write the trace", check=check_device),
    Case("full-disk", "a full disk leaves no footer-less Parquet", call=check_call(check_full_disk)),
    Case("run-folder", "an interrupted write leaves the run folder marked incomplete", call=check_call(check_run_folder)),
    # 5. Ctrl-C
    Case("ctrl-c", "Ctrl-C during a long run", code=130, slow=True, signal_after_s=6.0,
         argv=lambda d: ["run", "--trace", "ds_v3.parquet", "--topo", "fat_tree", "--out", str(d / "out")],
         check=check_interrupted),
    # 6. determinism
    Case("deterministic", "every output byte-identical across processes", slow=True,
         call=check_call(check_deterministic)),
]
