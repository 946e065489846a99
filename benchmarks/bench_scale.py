"""Scaling benchmark: wall time, peak RSS, flows and network events from 64 to 4,096 GPUs.

Workloads: ``a2a`` (one AllToAll of 1 MiB per pair) and ``decode`` (the DeepSeek-V3 decode step of
``docs/synthesis.md``: SGLang, attention TP 8, EP over every GPU with EPLB redundant experts beyond 256,
16 x EP256 at 4,096 GPUs), on ``fat_tree`` and ``rail_optimized``, for the flow tier (CLI defaults: quantile
``sim.option_values.DEFAULT_QUANTILE``, ideal reference on) and the analytical tier. Every point runs in a child process; the parent polls
its RSS and CPU time and kills it past ``--max-gb`` / ``--max-s`` ("over budget"), so no point can eat the
machine's memory. Peak RSS is the child's ``ru_maxrss`` (imports and trace reading included).

    python benchmarks/bench_scale.py                      # 64 and 256 GPUs
    python benchmarks/bench_scale.py --big                # also 1,024 and 4,096
    python benchmarks/bench_scale.py --profile decode:64:fat_tree:flow   # pyinstrument text profile
    python benchmarks/bench_scale.py --startup /path/to/other/checkout     # fresh start-up, A/B medians
    python benchmarks/bench_scale.py --solver-crossover    # numba load cost vs the numpy max-min solver
    python benchmarks/bench_scale.py --walk-crossover      # numba load cost vs the numpy route walk
    python benchmarks/bench_scale.py --warm-analytical     # warm analytical 1,024-GPU all-to-all, medians

Writes ``docs/img/scale/bench_scale.csv`` and ``scale.png`` (wall time against flows, log-log, with the
fitted exponent per workload and tier; CPU time, which the other jobs on shared cores disturb less than wall time) and prints the table. Traces are cached in ``--cache``.
The start-up, warm and crossover probes are in ``benchmarks/bench_scale_probes.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench_scale_probes import solver_crossover, startup, walk_crossover, warm, warm_analytical

from sim.option_values import DEFAULT_QUANTILE

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img" / "scale"
SIZES, BIG = (64, 256), (1024, 4096)
TOPOS = ("fat_tree", "rail_optimized")
TIERS = ("flow", "analytical")
MIB = 1 << 20


def decode_args(gpus: int) -> list[str]:
    """``simrun synth`` arguments of the decode step at ``gpus`` GPUs (docs/synthesis.md)."""
    ep = gpus if gpus <= 1024 else 256  # 4,096 GPUs: 16 EP256 deployments side by side
    return ["deepseek-v3", "--engine", "sglang", "--tp", "8", "--dp", str(gpus // 8), "--ep", str(ep),
            "--nodes", str(gpus // 8), "--set", "decode_batch=1024"]


def a2a_trace(gpus: int):
    """One AllToAll of 1 MiB to every peer over ``gpus`` ranks, 8 per server."""
    import numpy as np
    import pandas as pd

    from traces.schema import new_metadata, normalize

    df = pd.DataFrame({"rank": np.arange(gpus), "comm": "world", "seq": 0, "op": "AllToAll", "count": MIB,
                       "dtype": "uint8", "bytes": MIB, "root": -1, "nranks": gpus, "t_start_s": 0.0,
                       "duration_s": np.nan, "host": "", "device": -1, "context": "", "algo": "", "proto": ""})
    return normalize(df, new_metadata(gpus, {"world": list(range(gpus))}, "bench:a2a", gpus_per_node=8))


def child(point: dict) -> dict:
    """Run one point in this process and return its figures."""
    t0 = time.perf_counter()
    from sim import simulate
    from traces import read_trace

    df = a2a_trace(point["gpus"]) if point["workload"] == "a2a" else read_trace(point["trace"])
    t1, c1 = time.perf_counter(), time.process_time()
    opts = {"model": "analytical"} if point["tier"] == "analytical" else {"completion_quantile": DEFAULT_QUANTILE}
    res = simulate(df, point["topo"], **opts)
    wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    s = res.summary
    events = int(s.get("network_events") or 0)
    return {"wall_s": wall, "cpu_s": cpu, "load_s": t1 - t0, "flows": int(s["flows"]), "network_events": events,
            "events_per_s": events / wall if wall > 0 else 0.0, "collectives": int(s["collectives"]),
            "makespan_s": float(s["makespan_s"]), "ideal_makespan_s": float(s["ideal_makespan_s"] or 0.0)}


def _rss_gb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return 0.0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run_limited(argv: list[str], max_s: float, max_gb: float) -> tuple[str, str, float, float, float]:
    """Run ``argv``; return (status, stdout, wall s, peak RSS GB, CPU s). Status ``ok``, ``over budget`` or
    ``failed``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status = None
    while True:
        pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        # the budget is CPU time (other jobs share the cores), with wall time capped at 4x as a backstop
        if (_cpu_s(proc.pid) > max_s or time.perf_counter() - t0 > 4 * max_s
                or _rss_gb(proc.pid) > max_gb):
            status = "over budget"
            proc.kill()
            pid, code, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.returncode = code
    if status is None:
        status = "ok" if code == 0 else "failed"
    if status == "failed":
        sys.stderr.write(err[-2000:])
    return status, out, wall, usage.ru_maxrss / 1e6, usage.ru_utime + usage.ru_stime


def ensure_decode(gpus: int, cache: Path, max_s: float, max_gb: float) -> tuple[Path | None, dict]:
    """The cached decode-step trace at ``gpus`` GPUs (synthesized in a child process when missing)."""
    path = cache / f"ds_v3_decode_{gpus}.parquet"
    if path.exists():
        return path, {"status": "cached"}
    cache.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "sim", "synth", *decode_args(gpus), "-o", str(path)]
    status, _, wall, rss, _ = run_limited(argv, max_s, max_gb)
    return (path if status == "ok" else None), {"status": status, "synth_s": wall, "synth_rss_gb": rss}


def profile(spec: str, cache: Path) -> Path:
    """pyinstrument text profile of one point ``workload:gpus:topo:tier``."""
    from pyinstrument import Profiler

    workload, gpus, topo, tier = spec.split(":")
    point = {"workload": workload, "gpus": int(gpus), "topo": topo, "tier": tier,
             "trace": str(cache / f"ds_v3_decode_{gpus}.parquet")}
    prof = Profiler(interval=0.005)
    prof.start()
    fig = child(point)
    prof.stop()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"profile_{workload}_{gpus}_{topo}_{tier}.txt"
    path.write_text(json.dumps(fig) + "\n" + prof.output_text(unicode=False, color=False, show_all=False))
    return path


def tail_exponent(g) -> float:
    """Exponent over the points from 256 GPUs up (fixed start-up costs dominate at 64), else all points."""
    big = g[g["gpus"] >= 256]
    big = big if len(big) >= 2 else g
    return fit_exponent(big["flows"], big["cpu_s"])


def fit_exponent(flows, wall) -> float:
    """Slope of log(wall) against log(flows) (least squares); NaN with fewer than two points."""
    import numpy as np

    x, y = np.log(np.asarray(flows, float)), np.log(np.asarray(wall, float))
    return float(np.polyfit(x, y, 1)[0]) if len(x) >= 2 and np.ptp(x) > 0 else float("nan")


def plot(table, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = table[table["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(8, 6.5))
    for (workload, tier), g in ok.groupby(["workload", "tier"]):
        for topo, marker in zip(TOPOS, "os", strict=True):
            h = g[g["topo"] == topo].sort_values("flows")
            if len(h):
                slope = tail_exponent(h)
                since = "256+" if (h["gpus"] >= 256).sum() >= 2 else "all"
                note = f"slope {slope:.2f}, {since} GPUs" if len(h) >= 2 else "one point"
                ax.loglog(h["flows"], h["cpu_s"], marker=marker, ls="-" if tier == "flow" else "--",
                          label=f"{workload} {tier} {topo} ({note})")
                for r in h.itertuples():
                    ax.annotate(str(r.gpus), (r.flows, r.cpu_s), fontsize=7, xytext=(3, 3),
                                textcoords="offset points")
    ax.set_xlabel("flows (transfers)")
    ax.set_ylabel("simulation CPU time (s)")
    ax.set_title("collsim scaling, one simulate() call (labels: GPUs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also 1,024 and 4,096 GPUs")
    ap.add_argument("--sizes", default=None, help="comma-separated GPU counts (overrides --big)")
    ap.add_argument("--workloads", default="a2a,decode")
    ap.add_argument("--topos", default=",".join(TOPOS))
    ap.add_argument("--tiers", default=",".join(TIERS))
    ap.add_argument("--max-s", type=float, default=300.0, help="CPU-time budget per point (wall: 4x)")
    ap.add_argument("--max-gb", type=float, default=8.0, help="RSS budget per point")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/collsim-bench-scale"))
    ap.add_argument("--profile", default=None, metavar="WORKLOAD:GPUS:TOPO:TIER")
    ap.add_argument("--startup", nargs="?", const="", default=None, metavar="BASE_TREE",
                    help="time fresh simrun start-up (against another checkout BASE_TREE when given)")
    ap.add_argument("--solver-crossover", action="store_true", help="numba load cost vs the numpy solver")
    ap.add_argument("--warm", action="store_true", help="warm simulate_flows calls on the 64-GPU all-to-all")
    ap.add_argument("--walk-crossover", action="store_true", help="numba load cost vs the numpy route walk")
    ap.add_argument("--warm-analytical", action="store_true",
                    help="warm analytical calls on the 1,024-GPU all-to-all")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.warm:
        warm(args.repeats)
        return
    if args.walk_crossover:
        walk_crossover(min(args.repeats, 5))
        return
    if args.warm_analytical:
        warm_analytical(args.repeats, a2a_trace(1024))
        return
    if args.solver_crossover:
        solver_crossover(min(args.repeats, 5))
        return
    if args.startup is not None:
        startup(Path(args.startup) if args.startup else None, args.repeats)
        return
    if args.profile:
        print(profile(args.profile, args.cache))
        return
    import pandas as pd

    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [*SIZES, *(BIG if args.big else ())]
    rows, skip = [], set()  # (workload, topo, tier) over budget at a smaller size: larger ones are too
    for gpus in sizes:
        for workload in args.workloads.split(","):
            trace, synth = None, {}
            if workload == "decode":
                trace, synth = ensure_decode(gpus, args.cache, 4 * args.max_s, args.max_gb)
            for topo in args.topos.split(","):
                for tier in args.tiers.split(","):
                    row = {"workload": workload, "gpus": gpus, "topo": topo, "tier": tier, **synth}
                    if workload == "decode" and trace is None:
                        row["status"] = f"trace {synth.get('status')}"
                    elif (workload, topo, tier) in skip:
                        row["status"] = "over budget"
                    else:
                        point = {"workload": workload, "gpus": gpus, "topo": topo, "tier": tier, "trace": str(trace)}
                        argv = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(point)]
                        status, out, wall, rss, cpu = run_limited(argv, args.max_s, args.max_gb)
                        row.update(status=status, process_s=wall, process_cpu_s=cpu, peak_rss_gb=rss)
                        if status == "ok":
                            row.update(json.loads(out.strip().splitlines()[-1]))
                        elif status == "over budget":
                            skip.add((workload, topo, tier))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    table = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    old = OUT / "bench_scale.csv"
    if old.exists():  # keep points measured by earlier runs (e.g. --big on its own)
        prev = pd.read_csv(old)
        key = ["workload", "gpus", "topo", "tier"]
        prev = prev[~prev.set_index(key).index.isin(table.set_index(key).index)]
        table = pd.concat([prev, table], ignore_index=True)
    table = table.sort_values(["workload", "tier", "topo", "gpus"]).reset_index(drop=True)
    table.to_csv(old, index=False)
    plot(table, OUT / "scale.png")
    cols = [c for c in ("workload", "tier", "topo", "gpus", "status", "wall_s", "cpu_s", "peak_rss_gb", "flows",
                        "network_events", "events_per_s") if c in table]
    print(table[cols].to_string(index=False))
    ok = table[table["status"] == "ok"]
    for (workload, tier, topo), g in ok.groupby(["workload", "tier", "topo"]):
        print(f"exponent {workload} {tier} {topo}: cpu ~ flows^{tail_exponent(g):.2f} (from 256 GPUs up)")


if __name__ == "__main__":
    main()
