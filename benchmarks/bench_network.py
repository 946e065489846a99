"""Speed of the flow network (sim/network/flow_network.py): prints the median wall time of 3 runs per case.

Cases (issue 5): a 64-GPU all-to-all of 1 MiB per pair (4,032 flows) on a k=8 fat-tree, target < 2 s on
one core; the same with random sizes (0.5-1.5 MiB: completions spread out, the hard case for exact
re-solving); an 8-GPU ring AllReduce of 256 MiB as pipelined chunk flows released by completions (many
small events); and a 256-GPU all-to-all as the scaling row (``--big``: also 1,024 GPUs, 1,047,552 flows).
Each at ``completion_quantile`` 0 (exact) and 0.01. ``route`` is the time of :class:`topologies.Router` (not this module), ``network`` the time of the
:class:`~sim.network.flow_network.FlowNetwork` alone, ``total`` of :func:`sim.flows.run_flows` (validation, routing,
network, result tables).

Run: ``python benchmarks/bench_network.py [--repeat 3] [--slow] [--big]``.

**Network-only replay** (``--record TRACE ... --log LOG.npz``, ``--replay LOG.npz``): the network alone on
the exact work a simulation gives it, in ``benchmarks/bench_network_replay.py`` (its docstring says how).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd
from bench_network_replay import record, replay_report

import topologies
from sim.flows import run_flows
from sim.network.flow_network import FlowNetwork

MIB = 2**20


def all_to_all(num_gpus: int, rng: np.random.Generator | None = None) -> pd.DataFrame:
    src, dst = np.meshgrid(np.arange(num_gpus), np.arange(num_gpus), indexing="ij")
    keep = src != dst
    size = MIB if rng is None else rng.integers(MIB // 2, 3 * MIB // 2, int(keep.sum()))
    return pd.DataFrame({"src": src[keep], "dst": dst[keep], "bytes": size, "start_s": 0.0})


def time_all_to_all(graph, flows: pd.DataFrame, q: float) -> dict:
    """Route once, then time the network alone and run_flows end to end."""
    t0 = time.perf_counter()
    router = topologies.Router(graph, "ecmp", 0)
    routes = router.route(flows.src.to_numpy(), flows.dst.to_numpy(), np.arange(len(flows)))
    t_route = time.perf_counter() - t0
    capacity = router.links["capacity_gbps"].to_numpy(float) * 1e9 / 8
    t0, c0 = time.perf_counter(), time.process_time()
    net = FlowNetwork(capacity, completion_quantile=q)
    net.add_flows(0.0, routes.link_ptr, routes.link_idx, flows.bytes.to_numpy(float))
    net.advance(np.inf)
    t_net, c_net = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    result = run_flows(graph, flows, completion_quantile=q)
    t_total = time.perf_counter() - t0
    return {"route": t_route, "network": t_net, "network_cpu": c_net, "total": t_total,
            "makespan_s": result.makespan_s,
            "solves": net.stats["solves"], "flows_solved": net.stats["flows_solved"]}


def ring_allreduce(graph, num_gpus: int, total_bytes: int, chunk_bytes: int, q: float) -> dict:
    """Ring AllReduce as pipelined chunk flows driven by completions (one event per chunk, as NCCL sends).

    Rank i sends its 2(n-1) steps x (S/n / chunk) chunks to rank i+1 one at a time, in order; chunk c of step
    s > 0 may go only once chunk c of step s-1 has arrived from rank i-1.
    """
    router = topologies.Router(graph, "ecmp", 0)
    ranks = np.arange(num_gpus)
    routes = router.route(ranks, (ranks + 1) % num_gpus, ranks)
    capacity = router.links["capacity_gbps"].to_numpy(float) * 1e9 / 8
    chunks = max(1, total_bytes // num_gpus // chunk_bytes)
    items = 2 * (num_gpus - 1) * chunks                # per rank, in sending order: step-major
    t0, c0 = time.perf_counter(), time.process_time()
    net = FlowNetwork(capacity, completion_quantile=q)
    sent = np.zeros(num_gpus, dtype=np.int64)          # next item each rank sends
    arrived = np.zeros(num_gpus, dtype=np.int64)       # items rank i has received (they arrive in order)
    busy = np.zeros(num_gpus, dtype=bool)
    owner: list[int] = []

    def launch(now: float) -> None:
        # item k needs item k - chunks received (the same chunk one step earlier), except in step 0
        ready = ~busy & (sent < items) & ((sent < chunks) | (arrived >= sent - chunks + 1))
        senders = np.flatnonzero(ready)
        if not senders.size:
            return
        deg = np.diff(routes.link_ptr)[senders]
        idx = np.concatenate([routes.links_of(s) for s in senders])
        net.add_flows(now, np.r_[0, np.cumsum(deg)], idx, np.full(senders.size, float(chunk_bytes)))
        owner.extend(senders.tolist())
        busy[senders] = True
        sent[senders] += 1

    launch(0.0)
    while net.num_active or net.has_completions:
        now = net.next_completion_s()
        for fid in net.advance(now).tolist():
            s = owner[fid]
            busy[s] = False
            arrived[(s + 1) % num_gpus] += 1
        launch(now)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"route": 0.0, "network": wall, "network_cpu": cpu, "total": wall,
            "makespan_s": float(np.nanmax(net.finish_s)),
            "solves": net.stats["solves"], "flows_solved": net.num_flows}


def median_of(fn, repeat: int) -> dict:
    runs = [fn() for _ in range(repeat)]
    out = dict(runs[0])
    for key in ("route", "network", "network_cpu", "total"):
        out[key] = statistics.median(r[key] for r in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slow", action="store_true",
                        help="add the exact (q=0) random-size all-to-all (~10 s of CPU per run)")
    parser.add_argument("--big", action="store_true",
                        help="add the 1,024-GPU all-to-all at q = 0.01 (about 2.5 GB; check free memory first)")
    parser.add_argument("--record", metavar="TRACE", help="record the engine's network calls on TRACE")
    parser.add_argument("--topo", default="fat_tree", help="fabric preset of --record")
    parser.add_argument("--quantile", type=float, default=0.01, help="completion_quantile of --record")
    parser.add_argument("--stop-ms", type=float, default=None, help="end --record at this simulated time")
    parser.add_argument("--log", default="netlog.npz", help="call log written by --record")
    parser.add_argument("--replay", metavar="LOG", help="replay a call log on this tree's network")
    args = parser.parse_args()
    if args.record:
        record(args.record, args.topo, args.quantile, args.log, args.stop_ms)
        return
    if args.replay:
        replay_report(args.replay, args.repeat)
        return
    ft64 = topologies.build("fat_tree", k=8, num_gpus=64)              # 8 servers x 8 GPUs, NVLink inside
    ft64_1 = topologies.build("fat_tree", k=8, num_gpus=64, gpus_per_server=1)
    ft256 = topologies.build("fat_tree", num_gpus=256)
    ring = topologies.build("fat_tree", k=8, num_gpus=8, gpus_per_server=1)
    cases = [
        ("a2a 64 GPU 1 MiB, k=8 (8/server)", 0.0, lambda q: time_all_to_all(ft64, all_to_all(64), q)),
        ("a2a 64 GPU 1 MiB, k=8 (8/server)", 0.01, lambda q: time_all_to_all(ft64, all_to_all(64), q)),
        ("a2a 64 GPU 1 MiB, k=8 (1/server)", 0.0, lambda q: time_all_to_all(ft64_1, all_to_all(64), q)),
        ("a2a 64 GPU random 0.5-1.5 MiB", 0.01,
         lambda q: time_all_to_all(ft64_1, all_to_all(64, np.random.default_rng(0)), q)),
        ("ring AllReduce 8 GPU 256 MiB, 1 MiB chunks", 0.0, lambda q: ring_allreduce(ring, 8, 256 * MIB, MIB, q)),
        ("a2a 256 GPU 1 MiB (65,280 flows)", 0.0, lambda q: time_all_to_all(ft256, all_to_all(256), q)),
        ("a2a 256 GPU 1 MiB (65,280 flows)", 0.01, lambda q: time_all_to_all(ft256, all_to_all(256), q)),
    ]
    if args.big:
        ft1024 = topologies.build("fat_tree", num_gpus=1024)
        cases.append(("a2a 1024 GPU 1 MiB (1,047,552 flows)", 0.01,
                      lambda q: time_all_to_all(ft1024, all_to_all(1024), q)))
    if args.slow:
        cases[4:4] = [("a2a 64 GPU random 0.5-1.5 MiB", 0.0,
                       lambda q: time_all_to_all(ft64_1, all_to_all(64, np.random.default_rng(0)), q))]
    print(f"{'case':44s} {'q':>5s} {'network s':>10s} {'(cpu s)':>8s} {'total s':>8s} {'route s':>8s} "
          f"{'makespan ms':>12s} {'solves':>7s} {'flows solved':>12s}")
    for name, q, fn in cases:
        r = median_of(lambda fn=fn, q=q: fn(q), args.repeat)
        print(f"{name:44s} {q:5.2f} {r['network']:10.3f} {r['network_cpu']:8.3f} {r['total']:8.3f} {r['route']:8.3f} "
              f"{r['makespan_s'] * 1e3:12.4f} {r['solves']:7d} {r['flows_solved']:12d}", flush=True)


if __name__ == "__main__":
    main()
