"""Speed and accuracy of single collectives through ``sim.simulate`` (the whole replay path).

Cases (issue 5): an 8-GPU ring AllReduce of 256 MiB (one server's worth of GPUs, one GPU per server, on the
non-blocking fabric: compared with the alpha-beta closed form), and a 64-GPU all-to-all of 1 MiB per pair
on a k=8 fat-tree (4,032 flows; compared with the busiest link's bytes over its capacity). Prints the
median wall and CPU time of ``--repeat`` runs (the ideal reference run is off: one replay per case) and the
simulated duration against its closed form.

Issue 10 adds: a 2 x 8 tree AllReduce of 1 GiB (NCCL chunking: 68 chunks per channel, bounded by
``max_pipeline_transfers``), a ring Broadcast of 256 MiB over 8 ranks at 100 Gb/s against its pipelined
closed form, and one ``simrun bench`` sweep (all_reduce, 2 x 8 H100, 8 B .. 1 GiB, factor 4). Then NVLS:
8 x H100 AllReduce of 1 GiB against its closed form ``(n+1)/n S / B``, NVLSTree on 2 x 8 H100, and a
PXN-relayed all-to-all on ``rail_only``.

Run: ``python benchmarks/bench_collectives.py [--repeat 3] [--quantile 0]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

import sim
from sim.planning import tuning
from topologies import fat_tree, nonblocking
from traces.schema import new_metadata, validate

MIB = 1 << 20


def one_op_trace(world: int, op: str, nbytes: int) -> pd.DataFrame:
    rows = [dict(rank=r, comm="w", seq=0, op=op, count=nbytes, dtype="uint8", bytes=nbytes, root=-1,
                 nranks=world, t_start_s=np.nan, duration_s=np.nan, host="", device=-1, context="", algo="",
                 proto="") for r in range(world)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"w": list(range(world))}, "bench", gpus_per_node=1)
    return validate(df)


def timed(fn, repeat: int):
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quantile", type=float, default=0.0)
    args = parser.parse_args()
    q = args.quantile

    n, size = 8, 256 * MIB
    df = one_op_trace(n, "AllReduce", size)
    graph = nonblocking(fat_tree(4, num_gpus=n, gpus_per_server=1))
    wall, cpu, res = timed(lambda: sim.simulate(df, graph, algo="ring", ideal=False, completion_quantile=q),
                           args.repeat)
    row = res.collectives.iloc[0]
    closed = tuning.ideal_time_s("AllReduce", size, n, 400e9 / 8, "ring")
    print(f"8-GPU ring AllReduce 256 MiB: wall {wall:.3f} s, cpu {cpu:.3f} s (median of {args.repeat}); "
          f"{row['flows']} flows; duration {row['duration_s'] * 1e3:.4f} ms vs alpha-beta bandwidth term "
          f"{closed * 1e3:.4f} ms ({(row['duration_s'] / closed - 1) * 100:+.2f}%, latency included); "
          f"busbw {row['busbw_gbps']:.1f} Gbps of 400")

    n, size = 64, MIB
    df = one_op_trace(n, "AllToAll", size)
    graph = fat_tree(8, num_gpus=n, gpus_per_server=1)
    wall, cpu, res = timed(lambda: sim.simulate(df, graph, ideal=False, completion_quantile=q), args.repeat)
    links = res.links
    bound = float((links["bytes"] / (links["capacity_gbps"] * 1e9 / 8)).max())
    d = float(res.collectives["duration_s"].iloc[0])
    print(f"64-GPU all-to-all 1 MiB/pair, k=8 fat-tree: wall {wall:.3f} s, cpu {cpu:.3f} s (median of "
          f"{args.repeat}); {res.summary['flows']} flows; duration {d * 1e3:.4f} ms vs busiest link "
          f"{bound * 1e3:.4f} ms ({(d / bound - 1) * 100:+.2f}%, software and path latency included)")

    import topologies
    from sim.bench.run import run_bench
    from sim.bench.sizes import bench_sizes

    g16 = topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="h100", nic="ib")
    wall, cpu, t = timed(lambda: run_bench("AllReduce", g16, [1 << 30], algo="tree"), args.repeat)
    print(f"2 x 8 tree AllReduce 1 GiB (h100, ib): wall {wall:.3f} s, cpu {cpu:.3f} s; busbw "
          f"{t['busbw'].iloc[0]:.1f} GB/s ({t['proto'].iloc[0]})")
    g8 = fat_tree(4, num_gpus=8, gpus_per_server=1, link_gbps=100.0)
    wall, cpu, t = timed(lambda: run_bench("Broadcast", g8, [256 * MIB], proto="Simple"), args.repeat)
    closed = tuning.ideal_time_s("Broadcast", 256 * MIB, 8, 100e9 / 8)
    print(f"8-rank ring Broadcast 256 MiB at 100 Gb/s: wall {wall:.3f} s, cpu {cpu:.3f} s; "
          f"{t['time'].iloc[0] / 1e3:.2f} ms vs pipelined closed form {closed * 1e3:.2f} ms")
    g8n = topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8)
    wall, cpu, t = timed(lambda: run_bench("AllReduce", g8n, [1 << 30], algo="NVLS"), args.repeat)
    closed = tuning.ideal_time_s("AllReduce", 1 << 30, 8, 3600e9 / 8, "nvls")
    print(f"8-GPU NVLS AllReduce 1 GiB (line rate): wall {wall:.3f} s, cpu {cpu:.3f} s; {t['time'].iloc[0] / 1e3:.3f} ms "
          f"vs closed form {closed * 1e3:.3f} ms (+25 us latency, pipeline fill)")
    wall, cpu, t = timed(lambda: run_bench("AllReduce", g16, [1 << 30]), args.repeat)
    print(f"2 x 8 AllReduce 1 GiB (h100, ib, tuner): wall {wall:.3f} s, cpu {cpu:.3f} s; {t['algo'].iloc[0]} busbw "
          f"{t['busbw'].iloc[0]:.1f} GB/s")
    ro = topologies.build("rail_only", num_gpus=16)
    wall, cpu, t = timed(lambda: run_bench("AllToAll", ro, [256 * MIB]), args.repeat)
    print(f"2 x 8 all-to-all 256 MiB on rail_only (PXN in the plan): wall {wall:.3f} s, cpu {cpu:.3f} s; "
          f"busbw {t['busbw'].iloc[0]:.1f} GB/s")
    sizes = bench_sizes(8, 1 << 30, 4)
    wall, cpu, t = timed(lambda: run_bench("AllReduce", g16, sizes), 1)
    print(f"simrun bench all_reduce, 2 x 8 H100, {len(sizes)} sizes 8 B .. 1 GiB: wall {wall:.3f} s, cpu {cpu:.3f} s")


if __name__ == "__main__":
    main()
