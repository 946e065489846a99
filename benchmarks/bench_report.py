"""Median CPU and wall time of writing report.html (with its PNGs) and timeline.json for the main job.

    python benchmarks/bench_report.py [--old FILE]   # FILE: an older sim/results/report.py to compare

The replay runs once; each writer then runs 3 times into a fresh temporary folder. Run the old and the new
writer in separate processes for a fair first-run (import) figure: the first writer pays matplotlib's import.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path


def _timed(call) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", default=None, help="an older report.py (write_report / write_timeline)")
    parser.add_argument("--topo", default="fat_tree")
    args = parser.parse_args()
    from sim.replay import simulate
    from sim.results import report
    from traces.io import read_trace

    result = simulate(read_trace("ds_v3.parquet"), args.topo, completion_quantile=0.01)
    modules = {"new": report}
    if args.old:
        spec = importlib.util.spec_from_file_location("old_report", args.old)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        modules["old"] = old
    for name, mod in modules.items():
        for what in ("write_report", "write_timeline"):
            runs = []
            for _ in range(3):
                with tempfile.TemporaryDirectory() as tmp:
                    target = tmp if what == "write_report" else Path(tmp) / "timeline.json"
                    runs.append(_timed(lambda mod=mod, what=what, target=target: getattr(mod, what)(result, target)))
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{name:4s} {what:15s} first run cpu {runs[0][1]:5.2f} s (imports included); "
                  f"median of 3: wall {wall:6.2f} s, cpu {cpu:6.2f} s")


if __name__ == "__main__":
    main()
