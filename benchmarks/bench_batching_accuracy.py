"""What completion batching's ``q`` costs in accuracy, against the exact solve (issue 14).

For each case and each ``q`` it prints the makespan error against the reference (exact, q = 0, unless
the row says otherwise), the error of the median collective (or op) time, the 99th percentile of the
per-collective |relative error| (collectives matched by ``comm``, ``seq``), the network events and the
CPU seconds of the run. Cases:

* ``decode64``, ``decode256``: the DeepSeek-V3 decode step of ``benchmarks/bench_scale.py``
  (``/tmp/collsim-bench-scale/ds_v3_decode_{64,256}.parquet``) through ``sim.simulate`` on ``fat_tree``,
  cut to its first ``--layers`` layers (``context`` ``layer=<L`` and the embedding AllReduce) so the
  exact run fits in minutes; ``--layers 0`` keeps the whole step.
* ``a2a64``, ``a2a256``: one all-to-all of random 0.5-1.5 MiB flows on a fat-tree, one GPU per server
  (``tests/sim/network/test_batching.py``'s ``a2a_makespans`` flows, through ``sim.flows.run_flows``);
  the per-flow finish times take the collectives' place in the p99 column.
* ``jobs4``: the four independent jobs sharing one leaf-spine of ``test_batching.run_jobs`` (16 ops).
* ``main``: the main job (``ds_v3.parquet``, fat_tree).

Every (case, q) runs in a child process at ``nice 5`` and is cached as JSON in ``--cache`` (delete a
file to rerun it)::

    python benchmarks/bench_batching_accuracy.py --cases jobs4,a2a64 --qs 0,0.01,0.05
    python benchmarks/bench_batching_accuracy.py --cases decode64 --layers 8 --qs 0,0.01,0.02,0.05,0.1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCALE = Path("/tmp/collsim-bench-scale")


def decode_prefix(gpus: int, layers: int):
    """The cached decode step at ``gpus`` GPUs, its first ``layers`` layers (0: all of it)."""
    from traces import read_trace

    df = read_trace(SCALE / f"ds_v3_decode_{gpus}.parquet")
    if layers <= 0:
        return df
    layer = df["context"].str.extract(r"layer=(\d+)", expand=False).astype(float)
    # the embedding AllReduce opens the step; the logits AllGather closes it (issued at the step's end, it
    # would stretch the prefix's makespan to the whole step's timeline), so it goes
    keep = df["context"].str.contains("site=embed").to_numpy() | (layer < layers).to_numpy()
    out = df[keep].reset_index(drop=True)
    out.attrs = df.attrs
    return out


def run_simulate(df, q: float, topo: str = "fat_tree") -> dict:
    """``sim.simulate`` at ``q`` (defaults otherwise, as ``bench_scale.py``: the ideal reference sets the
    compute gaps of a trace without recorded ends): figures and per-collective durations."""
    from sim import simulate

    c0 = time.process_time()
    res = simulate(df, topo, completion_quantile=q)
    cpu = time.process_time() - c0
    col = res.collectives
    return {"makespan_s": float(res.summary["makespan_s"]), "events": int(res.summary.get("network_events") or 0),
            "cpu_s": cpu, "keys": [f"{c}:{s}" for c, s in zip(col["comm"], col["seq"], strict=True)],
            "times_s": col["duration_s"].astype(float).tolist()}


def run_a2a(gpus: int, q: float) -> dict:
    """The random-size all-to-all of ``test_batching.a2a_makespans`` at ``q``: per-flow finish times."""
    import pandas as pd

    import topologies
    from sim.flows import run_flows

    graph = (topologies.build("fat_tree", k=8, num_gpus=64, gpus_per_server=1) if gpus == 64
             else topologies.build("fat_tree", num_gpus=gpus))
    src, dst = np.meshgrid(np.arange(gpus), np.arange(gpus), indexing="ij")
    keep = src != dst
    rng = np.random.default_rng(1)
    flows = pd.DataFrame({"src": src[keep], "dst": dst[keep],
                          "bytes": rng.integers(2**19, 3 * 2**19, int(keep.sum())), "start_s": 0.0})
    c0 = time.process_time()
    res = run_flows(graph, flows, completion_quantile=q)
    cpu = time.process_time() - c0
    return {"makespan_s": float(res.makespan_s), "events": int(res.network.stats["solves"]), "cpu_s": cpu,
            "keys": [str(i) for i in range(len(flows))], "times_s": res.flows["finish_s"].astype(float).tolist()}


def run_jobs4(q: float) -> dict:
    """The four-job test of ``tests/sim/network/test_batching.py`` at ``q``: per-op durations."""
    sys.path.insert(0, str(ROOT / "tests" / "sim" / "network"))
    from test_batching import run_jobs

    c0 = time.process_time()
    makespan, ops = run_jobs(q, True)
    cpu = time.process_time() - c0
    return {"makespan_s": makespan, "events": None, "cpu_s": cpu, "keys": [str(i) for i in range(len(ops))],
            "times_s": [float(x) for x in ops]}


def run_case(case: str, q: float, layers: int) -> dict:
    """One (case, q) in this process."""
    if case.startswith("decode"):
        return run_simulate(decode_prefix(int(case[6:]), layers), q)
    if case.startswith("a2a"):
        return run_a2a(int(case[3:]), q)
    if case == "jobs4":
        return run_jobs4(q)
    if case == "main":
        from traces import read_trace
        return run_simulate(read_trace("ds_v3.parquet"), q)
    raise SystemExit(f"unknown case {case!r}")


def cache_path(cache: Path, case: str, q: float, layers: int) -> Path:
    tag = f"_L{layers}" if case.startswith("decode") else ""
    return cache / f"{case}{tag}_q{q:g}.json"


def get(cache: Path, case: str, q: float, layers: int, run: bool) -> dict | None:
    """The cached figures of (case, q), computed in a ``nice 5`` child first when missing and ``run``."""
    path = cache_path(cache, case, q, layers)
    if not path.exists() and run:
        cache.mkdir(parents=True, exist_ok=True)
        argv = ["nice", "-n", "5", sys.executable, __file__, "--child", case, "--q", repr(q), "--layers",
                str(layers), "--cache", str(cache)]
        subprocess.run(argv, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(path.read_text()) if path.exists() else None


def errors(run: dict, ref: dict) -> dict:
    """Makespan error, error of the median time, p99 of the matched |relative errors| and the error of the
    median AllToAll (communicator ``ep``, the decode step's) against ``ref``."""
    a = dict(zip(ref["keys"], ref["times_s"], strict=True))
    keys = [k for k in run["keys"] if k in a]
    mine = np.array([t for k, t in zip(run["keys"], run["times_s"], strict=True) if k in a])
    theirs = np.array([a[k] for k in keys])
    ok = theirs > 0
    rel = np.abs(mine[ok] / theirs[ok] - 1)
    ep = np.array([k.startswith("ep:") for k in keys])
    ep_median = (float(np.median(mine[ep]) / np.median(theirs[ep]) - 1) if ep.any() else float("nan"))
    return {"makespan": run["makespan_s"] / ref["makespan_s"] - 1,
            "median": float(np.median(run["times_s"]) / np.median(ref["times_s"]) - 1),
            "p99": float(np.percentile(rel, 99)) if rel.size else float("nan"), "ep_median": ep_median}


def _events(fig: dict) -> str:
    return "-" if fig["events"] is None else f"{fig['events']:,}"


def table(cache: Path, cases: list[str], qs: list[float], layers: int, ref_q: dict[str, float],
          run: bool) -> str:
    """The printed table (markdown)."""
    lines = ["| case | q | makespan ms | makespan vs ref | median time vs ref | p99 abs error | median AllToAll vs ref | events | CPU s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        rq = ref_q.get(case, 0.0)
        ref = get(cache, case, rq, layers, run)
        name = f"{case} (first {layers} layers)" if case.startswith("decode") and layers > 0 else case
        for q in sorted(set(qs) | {rq}):
            fig = get(cache, case, q, layers, run)
            if fig is None:
                continue
            if ref is None or q == rq:
                err = "reference" if q == rq else "no reference"
                lines.append(f"| {name} | {q:g} | {fig['makespan_s'] * 1e3:.6f} | {err} | | | | {_events(fig)} | "
                             f"{fig['cpu_s']:.1f} |")
                continue
            e = errors(fig, ref)
            lines.append(f"| {name} | {q:g} | {fig['makespan_s'] * 1e3:.6f} | {e['makespan'] * 100:+.3f} % | "
                         f"{e['median'] * 100:+.3f} % | {e['p99'] * 100:.2f} % | "
                         f"{'' if np.isnan(e['ep_median']) else format(e['ep_median'] * 100, '+.3f') + ' %'} | "
                         f"{_events(fig)} | "
                         f"{fig['cpu_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="jobs4,a2a64")
    parser.add_argument("--qs", default="0,0.01,0.02,0.05,0.1,0.2")
    parser.add_argument("--layers", type=int, default=8, help="decode cases: keep the first N layers (0: all)")
    parser.add_argument("--ref", default="", help="reference q per case, e.g. a2a256=0.001 (default exact)")
    parser.add_argument("--cache", default="/tmp/collsim-bench-batching")
    parser.add_argument("--no-run", action="store_true", help="print what is cached only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--q", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = Path(args.cache)
    if args.child:
        fig = run_case(args.child, args.q, args.layers)
        cache_path(cache, args.child, args.q, args.layers).write_text(json.dumps(fig))
        print(f"{args.child} q={args.q:g}: makespan {fig['makespan_s'] * 1e3:.6f} ms, {fig['events']} events, "
              f"{fig['cpu_s']:.1f} s CPU", flush=True)
        return
    ref_q = {k: float(v) for k, v in (item.split("=") for item in args.ref.split(",") if item)}
    print(table(cache, args.cases.split(","), [float(x) for x in args.qs.split(",")], args.layers, ref_q,
                not args.no_run))


if __name__ == "__main__":
    main()
