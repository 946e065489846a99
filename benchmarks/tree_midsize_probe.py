"""Probe of collsim's 2-node tree plans at mid sizes against a measured nccl-tests table.

For each size of one AllReduce table (``tests/data/nccl_tests``, fabric from ``fabrics.json``) prints the
measured time, collsim's plan time, NCCL's own tuner prediction (``tuning.predict_time_s``), the plan's
channels and chunks (``tuning.channels_for`` / ``nccl_chunk_bytes`` / ``pipeline_chunks``), the plan's
latency-only critical path (the longest chain of ``delay_s``) and the time of the same plan under one
*variant*, to test a candidate mechanism before it is built:

``nodelay``     every tree transfer's software delay set to 0 (bandwidth and pipeline fill alone)
``cap:R``       every tree transfer capped at R GB/s of wire bytes (a per-channel rate ceiling)
``channels:N``  tree plans on N channels (NCCL runs 2 x the search channels, ``connect.cc``)

    python benchmarks/tree_midsize_probe.py oci_oke_2x8_a100_roce.txt --variant cap:20 [-b 256K -e 64M]

A variant changes plans inside this process only (it wraps ``plan_collective``); it is a measurement, not
a model. docs/validation.md, "Session 23: 2-node tree / LL128 mid sizes (s23-tree)", has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from pathlib import Path

import numpy as np

import sim.planning.collectives as collectives
import topologies
from sim.bench.run import run_bench
from sim.bench.sizes import parse_size
from sim.planning import tuning
from sim.planning.machine import graph_machine
from traces.readers import ingest

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl_tests"


def latency_path_s(plan) -> float:
    """Longest chain of ``delay_s`` through the plan's DAG (seconds; transfers take no time)."""
    fin = np.zeros(len(plan))
    for i in range(len(plan)):
        dep = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        fin[i] = (fin[dep].max() if len(dep) else 0.0) + plan.delay_s[i]
    return float(fin.max()) if len(plan) else 0.0


@contextlib.contextmanager
def variant_plans(variant: str):
    """Wrap ``plan_collective`` so tree plans follow ``variant`` (``plan`` leaves them as they are)."""
    orig = collectives.plan_collective
    kind, _, arg = variant.partition(":")

    def wrapped(op, nbytes, ranks, **kw):
        plan = orig(op, nbytes, ranks, **kw)
        if plan.algo != "tree" or not len(plan):
            return plan
        if kind == "nodelay":
            return dataclasses.replace(plan, delay_s=np.zeros(len(plan)))
        if kind == "cap":
            return dataclasses.replace(plan, rate_cap_bytes_per_s=np.full(len(plan), float(arg) * 1e9))
        if kind == "channels":
            return orig(op, nbytes, ranks, **{**kw, "nchannels": int(arg)})
        return plan

    if kind not in ("plan", "nodelay", "cap", "channels"):
        raise SystemExit(f"tree_midsize_probe: error: unknown variant {variant!r} (plan, nodelay, cap:R, channels:N)")
    collectives.plan_collective = wrapped
    try:
        yield
    finally:
        collectives.plan_collective = orig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", help="file name in tests/data/nccl_tests (an all_reduce table)")
    ap.add_argument("--variant", default="plan", help="plan, nodelay, cap:R (GB/s), channels:N")
    ap.add_argument("-b", "--minbytes", default="256K")
    ap.add_argument("-e", "--maxbytes", default="64M")
    args = ap.parse_args()
    fabrics = json.loads((DATA / "fabrics.json").read_text())
    if args.table not in fabrics:
        raise SystemExit(f"tree_midsize_probe: error: {args.table} is not in fabrics.json")
    fab = fabrics[args.table]
    trace = ingest([DATA / args.table], format="nccl-tests")
    entry = trace.attrs["collsim"]["nccl_tests"][0]
    n = int(entry["nranks"])
    graph = topologies.build(fab["topo"], num_gpus=n, gpus_per_server=int(entry.get("gpus_per_node") or 8),
                             **fab["set"])
    servers, model = graph_machine(graph, range(n))
    nnodes = len(np.unique(servers))
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    rows = trace[(trace["comm"] == entry["comm"]) & (trace["rank"] == 0)]
    measured = {int(b): float(d) * 1e6 for b, d in zip(rows["bytes"], rows["duration_s"], strict=True)
                if lo <= int(b) <= hi}
    sizes = sorted(measured)
    base = run_bench("AllReduce", graph, sizes).set_index("size")["time"]
    with variant_plans(args.variant):
        var = run_bench("AllReduce", graph, sizes).set_index("size")["time"]
    print(f"{args.table}: {n} ranks, {nnodes} servers; variant {args.variant}")
    print("size  measured  plan  variant  nccl_model  algo/proto  channels  chunk_B  chunks  latency_path (us)")
    for size in sizes:
        algo, proto = tuning.choose_algorithm("AllReduce", size, n, nnodes, "auto", None, model)
        nccl = tuning.predict_time_s("AllReduce", size, n, nnodes, algo, proto, model) * 1e6
        plan = collectives.plan_collective("AllReduce", size, range(n), graph=graph)
        nch = int(len(np.unique(plan.channel)))
        chunk = tuning.nccl_chunk_bytes("AllReduce", algo, proto, size, nch, n, nnodes, model.simple_buff_bytes)
        nchunks = tuning.pipeline_chunks(size / nch, chunk) if algo == "tree" else 0  # NCCL's, before pieces
        print(f"{size:>10d} {measured[size]:9.1f} {base[size]:7.1f} {var[size]:8.1f} {nccl:9.1f}  "
              f"{algo}/{proto:<6s} {nch:3d} {chunk:8.0f} {nchunks:4d} {latency_path_s(plan) * 1e6:8.1f}")


if __name__ == "__main__":
    main()
