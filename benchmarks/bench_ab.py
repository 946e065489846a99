"""Paired A/B runs of one ``bench_scale`` point: this tree against another checkout, interleaved.

Each pair runs the point once in a fresh process on each tree (``benchmarks/bench_scale.py --child`` of
that tree, its ``PYTHONPATH``), alternating which goes first, so both sides see the same machine load.
Prints every run and the medians of the CPU time of ``simulate()`` (the figure to read on a shared
machine), with the load average, and checks that the two trees give the same makespan bit for bit.

    python benchmarks/bench_ab.py /work/wt/s20-base --gpus 64 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run_point"]

ROOT = Path(__file__).resolve().parents[1]


def run_point(tree: Path, point: dict) -> dict:
    """One fresh ``--child`` run of ``point`` on ``tree``: its figures, the child's peak RSS (GB) and the
    load average before it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out:   # a file, not a pipe: wait4 reaps the child (its rusage)
        proc = subprocess.Popen([sys.executable, str(tree / "benchmarks" / "bench_scale.py"), "--child",
                                 json.dumps(point)], cwd=tree, env=env, stdout=out, text=True)
        _, code, usage = os.wait4(proc.pid, 0)
        proc.returncode = code
        if code != 0:
            raise SystemExit(f"the point failed on {tree}")
        out.seek(0)
        fig = json.loads(out.read().strip().splitlines()[-1])
    fig["load"] = load
    fig["peak_rss_gb"] = usage.ru_maxrss / 1e6
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the other checkout (B)")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--workload", default="decode")
    ap.add_argument("--topo", default="fat_tree")
    ap.add_argument("--tier", default="flow")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/collsim-bench-scale"))
    args = ap.parse_args()
    point = {"workload": args.workload, "gpus": args.gpus, "topo": args.topo, "tier": args.tier,
             "trace": str(args.cache / f"ds_v3_decode_{args.gpus}.parquet")}
    trees = {"this": ROOT, "base": args.base.resolve()}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.pairs):
        for label in (("this", "base") if i % 2 == 0 else ("base", "this")):
            t0 = time.perf_counter()
            fig = run_point(trees[label], point)
            runs[label].append(fig)
            print(f"pair {i + 1} {label:<4} cpu {fig['cpu_s']:8.2f} s  wall {time.perf_counter() - t0:8.1f} s  "
                  f"load {fig['load']:5.2f}  makespan {fig['makespan_s']!r}  flows {fig['flows']}  "
                  f"events {fig['network_events']}", flush=True)
    for label, v in runs.items():
        print(f"{label:<4} median cpu {statistics.median(f['cpu_s'] for f in v):.2f} s over {len(v)} runs "
              f"(load {min(f['load'] for f in v):.1f}-{max(f['load'] for f in v):.1f})")
    same = {f["makespan_s"] for v in runs.values() for f in v}
    print("makespan identical on both trees" if len(same) == 1 else f"MAKESPANS DIFFER: {sorted(same)}")


if __name__ == "__main__":
    main()
