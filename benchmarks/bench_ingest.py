"""Ingest throughput: read_nccl_logs end to end (log file in, Parquet out) beside a plain `re` reader.

Generates a trace of >= 500,000 COLL lines (32 ranks on 4 hosts: TP AllReduce/AllGather/ReduceScatter,
pipeline Send/Recv, uneven MoE all-to-all written as grouped Send/Recv, 2.26 timestamps and TUNING lines),
writes it with ``write_nccl_log``, mixes in realistic noise (transport, nccl-tests and framework lines),
then times both readers 3 times each in the same run and prints medians.

The first ``read_nccl_logs`` run of the process also imports numba and loads the compiled kernel from its
on-disk cache (compiling it the first time after an install); the median is over all runs. ``--cli`` also
times ``simrun ingest`` as a new process (interpreter start, imports and that load included).

``--cli`` times both ``simrun ingest`` and the plain reader (:data:`PLAIN_SCRIPT`) as new processes, the
comparison a user sees, and prints the CPU time (user + system) of each new process beside the wall time;
it first builds the compiled kernel ahead of time when it is not built (what ``simrun ingest`` does in the
background after its first large ingest: :mod:`traces.formats.nccl.kernel_aot`). ``--before DIR`` also times
``simrun ingest`` of another source tree (e.g. ``git archive`` of the previous commit), interleaved (every new
process runs in the log's folder, so ``python -m`` imports the tree of ``PYTHONPATH``, not the working
folder's); ``--memory MB...`` prints peak RSS of both against log size.

Run: ``python benchmarks/bench_ingest.py [--lines 500000] [--runs 3] [--keep DIR] [--engine auto|jit|numpy]
[--cli] [--memory LINES ...]``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from traces.formats.nccl import kernel_aot
from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import read_nccl_logs, write_nccl_log
from traces.io import write_trace
from traces.schema import DTYPE_BYTES, new_metadata

ROOT = Path(__file__).resolve().parents[1]
HOSTS, GPN = 4, 8
WORLD = HOSTS * GPN
NOISE = [
    "{p}Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
    "{p}Connected all rings, use ring PXN 0 GDR 1",
    "#       67108864      16777216     float     sum      -1   1234.5   54.36  101.92      0   1230.1   54.55  102.29      0",
    "2025-01-01 00:00:01,234 - INFO - step 12 loss 2.3456 lr 3.0e-04",
    "{p}NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
]


def make_trace(target_lines: int, seed: int = 0) -> pd.DataFrame:
    """A training-like trace whose log has about ``target_lines`` COLL lines."""
    rng = np.random.default_rng(seed)
    tp = {f"tp{h}": list(range(h * GPN, (h + 1) * GPN)) for h in range(HOSTS)}
    pp = {f"pp{k}": [k + h * GPN for h in range(HOSTS)] for k in range(GPN)}
    comms = {"world": list(range(WORLD)), **tp, **pp}
    rows: list[dict] = []
    seq: dict[tuple, int] = {}
    t = 0.0
    lines = 0

    def add(rank, comm, op, count, root=-1, split=(), group=-1, algo="", proto=""):
        kind = (comm, op, root) if op in ("Send", "Recv") else (comm, "c", -1)
        k = seq.get((rank, *kind), 0)
        seq[(rank, *kind)] = k + 1
        rows.append(dict(rank=rank, comm=comm, seq=k, op=op, count=count, dtype="bf16", bytes=count * 2,
                         root=root, nranks=len(comms[comm]), t_start_s=round(t, 6), duration_s=math.nan,
                         host=f"gpu-node-{rank // GPN}", device=rank % GPN, context="", algo=algo, proto=proto,
                         group=group, split_bytes=tuple(split)))

    while lines < target_lines:
        for name, members in tp.items():
            for op in ("AllGather", "ReduceScatter", "AllReduce"):
                count = int(rng.integers(1, 1 << 22))
                for r in members:
                    add(r, name, op, count, algo="RING", proto="SIMPLE")
                lines += len(members)  # COLL lines (each followed by a TUNING line, not counted)
        for name, members in pp.items():
            for a in range(len(members) - 1):
                count = int(rng.integers(1, 1 << 20))
                add(members[a], name, "Send", count, root=a + 1)
                add(members[a + 1], name, "Recv", count, root=a)
                lines += 2
        for name, members in tp.items():  # MoE dispatch: uneven all-to-all inside a node
            splits = rng.integers(0, 4096, size=(GPN, GPN))
            for k, r in enumerate(members):
                add(r, name, "AllToAll", int(splits[k].sum()) // GPN, split=(splits[k] * 2).tolist())
            lines += 2 * GPN * GPN
        count = int(rng.integers(1, 1 << 24))
        for r in range(WORLD):
            add(r, "world", "AllReduce", count)
        lines += WORLD
        t += 0.05
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(WORLD, comms, "bench", gpus_per_node=GPN)
    assert (df["bytes"] == df["count"] * DTYPE_BYTES["bf16"]).all()
    return df


def add_noise(path: Path, every: int = 5, seed: int = 0) -> int:
    """Insert one noise line after every ``every`` lines; return the number of COLL lines."""
    rng = np.random.default_rng(seed)
    text = path.read_text().splitlines()
    out, coll = [], 0
    for k, line in enumerate(text):
        out.append(line)
        coll += ": opCount " in line
        if k % every == every - 1:
            prefix = line[: line.find("NCCL INFO ") + 10] if "NCCL INFO " in line else ""
            out.append(NOISE[int(rng.integers(len(NOISE)))].format(p=prefix))
    path.write_text("\n".join(out) + "\n")
    return coll


PLAIN_RE = re.compile(
    r"(?:\[([^\]]*)\] )?([^\s:]+):(\d+):(\d+) \[(\d+)\] NCCL INFO (\w+): opCount ([0-9a-f]+) sendbuff (\S+) "
    r"recvbuff (\S+) count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (\S+) \[nranks=(\d+)\]"
)
PLAIN_COLS = ["ts", "host", "pid", "tid", "dev", "op", "opcount", "sendbuff", "recvbuff", "count", "datatype",
              "redop", "root", "comm", "nranks"]


def plain_reader(path: Path, out: Path) -> int:
    """The baseline: one regex match per line, rows into a DataFrame, Parquet out (no mapping at all)."""
    rows = []
    with open(path) as handle:
        for line in handle:
            m = PLAIN_RE.match(line)
            if m:
                rows.append(m.groups())
    df = pd.DataFrame(rows, columns=PLAIN_COLS)
    for col in ("pid", "tid", "dev", "count", "datatype", "redop", "root", "nranks"):
        df[col] = df[col].astype("int64")
    df.to_parquet(out)
    return len(df)


#: The last ingest report of :func:`ours` (its members' agreement is printed with the timings).
LAST_REPORT: list = []


def ours(path: Path, out: Path) -> int:
    df, report = read_nccl_logs([path])
    write_trace(df, out)
    LAST_REPORT[:] = [report]
    return len(df)


#: The baseline as its own program (run by ``python -c``, so it imports only ``re``, ``sys`` and pandas):
#: the same regex and columns as :func:`plain_reader`.
PLAIN_SCRIPT = f"""
import re, sys
import pandas as pd
PLAIN_RE = re.compile({PLAIN_RE.pattern!r})
rows = []
with open(sys.argv[1]) as handle:
    for line in handle:
        m = PLAIN_RE.match(line)
        if m:
            rows.append(m.groups())
df = pd.DataFrame(rows, columns={PLAIN_COLS!r})
for col in ("pid", "tid", "dev", "count", "datatype", "redop", "root", "nranks"):
    df[col] = df[col].astype("int64")
df.to_parquet(sys.argv[2])
"""


def plain_fresh(path: Path, out: Path) -> int:
    """The baseline as a user runs it: a new interpreter running a line-by-line ``re`` script that writes
    Parquet with pandas (imports included, as for ``simrun ingest``)."""
    subprocess.run([sys.executable, "-c", PLAIN_SCRIPT, str(path), str(out)], check=True, capture_output=True,
                   cwd=path.parent)
    return -1


def peak_rss_mib(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one fresh process (``ru_maxrss`` of the waited child)."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, *argv], check=True, capture_output=True, text=True).stdout
    secs, rss = out.split()
    return float(secs), float(rss)


#: COLL lines of the generated log per MB of it (the benchmark trace, with its TUNING and noise lines).
COLL_LINES_PER_MB = 3_930


def memory_table(folder: Path, sizes_mb: list[float], runs: int = 1) -> None:
    """Peak RSS (``ru_maxrss``) of ``simrun ingest`` and of the plain script, each a new process, against log
    size; the slope (MiB of peak per MB of log) between the smallest and the largest log."""
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'MB':>7} {'COLL lines':>10} {'rows':>9} {'ingest s':>9} {'ingest MiB':>11} {'plain s':>8} "
          f"{'plain MiB':>10}")
    points = []
    for mb in sizes_mb:
        log = folder / f"mem_{mb:g}MB.log"
        trace = make_trace(int(mb * COLL_LINES_PER_MB), seed=1)
        write_nccl_log(trace, log)
        add_noise(log)
        size = log.stat().st_size / 1e6
        ours = [peak_rss_mib([sys.executable, "-m", "sim", "ingest", str(log), "-o", str(folder / "mem.parquet")])
                for _ in range(runs)]
        plain = [peak_rss_mib([sys.executable, "-c", PLAIN_SCRIPT, str(log), str(folder / "plain.parquet")])
                 for _ in range(runs)]
        (s_ours, rss_ours), (s_plain, rss_plain) = (max(ours, key=lambda x: x[1]), max(plain, key=lambda x: x[1]))
        coll = int(mb * COLL_LINES_PER_MB)
        print(f"{size:7.1f} {coll:>10,} {len(trace):9,} {s_ours:9.2f} {rss_ours:11.0f} {s_plain:8.2f} {rss_plain:10.0f}")
        points.append((size, rss_ours))
        log.unlink()
        del trace
    if len(points) > 1:
        (x0, y0), (x1, y1) = points[0], points[-1]
        print(f"simrun ingest: {(y1 - y0) / (x1 - x0):.2f} MiB of peak RSS per MB of log above {y0:.0f} MiB at "
              f"{x0:.0f} MB")


def cli(path: Path, out: Path, tree: Path | None = None) -> int:
    """``simrun ingest`` as a user runs it: a new interpreter, imports included (``tree``: that source tree's)."""
    # cwd: ``python -m`` puts the working folder first on sys.path, ahead of PYTHONPATH
    env = {**os.environ, "PYTHONPATH": str(tree if tree is not None else ROOT)}
    subprocess.run([sys.executable, "-m", "sim", "ingest", str(path), "-o", str(out)], check=True,
                   capture_output=True, env=env, cwd=path.parent)
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="folder to keep the generated log in")
    parser.add_argument("--engine", choices=["auto", "jit", "aot", "numpy"], default="auto",
                        help="chunk reader (traces.formats.nccl.scan.ENGINE)")
    parser.add_argument("--cli", action="store_true", help="also time `simrun ingest` and the plain script, each "
                        "in a new process (the bar of issue 12: fresh process against fresh process)")
    parser.add_argument("--memory", type=float, nargs="*", default=None, metavar="MB",
                        help="print peak RSS of `simrun ingest` and of the plain script for logs of about these "
                        "sizes in MB (default 10 100 300), then stop")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR",
                        help="with --cli, also time `simrun ingest` of this source tree (interleaved)")
    args = parser.parse_args()
    if args.memory is not None:
        memory_table(args.keep or Path(tempfile.mkdtemp(prefix="bench_ingest_")), args.memory or [10, 100, 300])
        return
    nccl_log_scan.ENGINE = args.engine
    if args.cli and kernel_aot.load() is None:
        print(f"built the compiled kernel ahead of time: {kernel_aot.build()}")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "bench.log"
    t0 = time.perf_counter()
    trace = make_trace(args.lines)
    write_nccl_log(trace, log)
    coll = add_noise(log)
    size_mb = log.stat().st_size / 1e6
    n_lines = sum(1 for _ in open(log))
    print(f"generated {log}: {size_mb:.1f} MB, {n_lines:,} lines, {coll:,} COLL lines, {len(trace):,} trace rows "
          f"({time.perf_counter() - t0:.1f} s)")
    results: dict[str, list[float]] = {"plain re reader": [], "read_nccl_logs": []}
    readers = [("plain re reader", plain_reader), ("read_nccl_logs", ours)]
    if args.cli:
        results["plain re, new process"] = []
        results["simrun ingest"] = []
        readers += [("plain re, new process", plain_fresh), ("simrun ingest", cli)]
        if args.before is not None:
            results["ingest, before"] = []
            readers.append(("ingest, before", lambda path, out: cli(path, out, args.before)))
    cpu: dict[str, list[float]] = {name: [] for name, _ in readers}
    for _ in range(args.runs):
        for name, fn in readers:
            t = time.perf_counter()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            rows = fn(log, folder / f"{name.replace(' ', '_')}.parquet")
            results[name].append(time.perf_counter() - t)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # new processes only: their user + system CPU
            cpu[name].append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
            if name == "read_nccl_logs":
                assert rows == len(trace), (rows, len(trace))
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores shared: medians of {args.runs} interleaved runs)")
    print(f"{'reader':<18} {'median s':>9} {'MB/s':>8} {'lines/s':>12} {'COLL lines/s':>13}   runs")
    med = {}
    for name, times in results.items():
        med[name] = statistics.median(times)
        print(f"{name:<18} {med[name]:9.2f} {size_mb / med[name]:8.1f} {n_lines / med[name]:12,.0f} "
              f"{coll / med[name]:13,.0f}   {', '.join(f'{x:.2f}' for x in times)}")
    rep = LAST_REPORT[0]
    print(f"ingest report: {rep.records:,} rows, {rep.disagreeing or 0:,} collective(s) whose members disagree "
          "(the uneven all-to-alls' members log different counts, as all-to-all-v allows)")
    print(f"speed-up (median): {med['plain re reader'] / med['read_nccl_logs']:.2f}x "
          f"(engine {args.engine}; compiled kernel used: {nccl_log_scan.use_jit(log.stat().st_size)}, ahead-of-time "
          f"build loaded: {kernel_aot.load() is not None})")
    fresh = [name for name, fn in readers if fn in (plain_fresh, cli) or name == "ingest, before"]
    if fresh:  # CPU time is what a loaded machine distorts least (wall time waits for the other users)
        print("new processes, CPU s (user + system, median): " + ", ".join(
            f"{name} {statistics.median(cpu[name]):.2f}" for name in fresh))
    if args.cli:
        cpu_med = {name: statistics.median(cpu[name]) for name in cpu}
        print(f"speed-up of simrun ingest as a new process against the plain script as a new process (median): "
              f"{med['plain re, new process'] / med['simrun ingest']:.2f}x wall, "
              f"{cpu_med['plain re, new process'] / cpu_med['simrun ingest']:.2f}x CPU (bar: 2x)")
        if args.before is not None:
            print(f"simrun ingest, this tree against --before (median): {med['ingest, before'] / med['simrun ingest']:.2f}x")


if __name__ == "__main__":
    main()
