"""The main job: ``simrun --trace ds_v3.parquet --topo fat_tree`` end to end, and its parts.

Prints the median wall and CPU time of ``--repeat`` runs of: reading the trace, ``sim.simulate`` (the
replay and the non-blocking reference), ``Result.write`` (tables, report with plots, timeline), plus the
replay's counters (ops, flows, network events, memoised ops and memo conflicts). Target (issue 5): the
whole job in under 30 s on one core; issue 9 (the simpy event core): no more than 10 % slower than the
heapq loop it replaced (figures in docs/simulator.md).

Run: ``python benchmarks/bench_main_job.py [--trace ds_v3.parquet] [--topo fat_tree] [--repeat 1]
[--quantile Q] [--profile]`` (``--quantile`` defaults to the CLI's default; ``--profile`` prints a
pyinstrument profile of one simulate call).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import sim
from sim.cli.run import DEFAULT_QUANTILE
from traces import read_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="ds_v3.parquet")
    parser.add_argument("--topo", default="fat_tree")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--quantile", type=float, default=DEFAULT_QUANTILE,
                        help="completion batching (default: the CLI's; 0 = exact)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    opts = {"completion_quantile": args.quantile}
    rows: dict[str, list[tuple[float, float]]] = {"read": [], "simulate": [], "write": []}
    res = None
    for _ in range(args.repeat):
        w, c = time.perf_counter(), time.process_time()
        df = read_trace(args.trace)
        rows["read"].append((time.perf_counter() - w, time.process_time() - c))
        w, c = time.perf_counter(), time.process_time()
        res = sim.simulate(df, args.topo, trace_name=args.trace, **opts)
        rows["simulate"].append((time.perf_counter() - w, time.process_time() - c))
        with tempfile.TemporaryDirectory() as out:
            w, c = time.perf_counter(), time.process_time()
            res.write(out)
            rows["write"].append((time.perf_counter() - w, time.process_time() - c))
    total_w = total_c = 0.0
    for name, vals in rows.items():
        wall = statistics.median(v[0] for v in vals)
        cpu = statistics.median(v[1] for v in vals)
        total_w += wall
        total_c += cpu
        print(f"{name:9s} wall {wall:7.2f} s   cpu {cpu:7.2f} s")
    print(f"{'total':9s} wall {total_w:7.2f} s   cpu {total_c:7.2f} s   (median of {args.repeat})")
    s = res.summary
    print(f"{s['collectives']} ops, {s['flows']} flows, {s['network_events']} network events, "
          f"{s['memo_hits']} ops replayed from {s['memo_records']} records "
          f"({res.log.memo_materialised} materialised on a conflict); makespan {s['makespan_s'] * 1e3:.3f} ms, "
          f"ideal {s['ideal_makespan_s'] * 1e3:.3f} ms, slowdown p50 {s['slowdown_p50']:.3f} p99 "
          f"{s['slowdown_p99']:.3f}, incast events {s['incast_events']}")
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        sim.simulate(read_trace(args.trace), args.topo, **opts)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False))


if __name__ == "__main__":
    main()
