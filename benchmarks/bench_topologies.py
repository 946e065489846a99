"""Topology benchmark: build an 8,192-GPU fat-tree (k=32) and route 1,000,000 GPU pairs.

Prints the median of 3 runs of each step (seconds). Run: ``python benchmarks/bench_topologies.py``
(``--quick`` for one run of each on smaller inputs; ``--large`` adds ``simrun topo``'s description of the
65,536-GPU fat-tree, the largest topology collsim builds).

Describing the 65,536-GPU fat-tree (``topologies.summary``: tiers, links, bisection, oversubscription,
diameter), measured in one process on the shared 2-core machine (load 4-6), 2026-12-01:

    before (networkx edge iteration, per-edge Python work, diameter as float sparse-matrix BFS)  71-81 s
    after  (one pass into arrays, bincount sums, diameter as bit-parallel BFS by node degree)     9-13 s

(`simrun topo fat_tree --set num_gpus=65536`, process start and build included, same JSON: 71 s and 460 MB
before, 45 s with the arrays alone, 22 s and 345 MB after.)
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import topologies


def median_s(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls of ``fn`` and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    quick = "--quick" in sys.argv
    repeats = 1 if quick else 3
    pairs = 100_000 if quick else 1_000_000
    rng = np.random.default_rng(0)
    rows = []

    t, graph = median_s(lambda: topologies.fat_tree(32), repeats)
    rows.append(("fat_tree(k=32) build: 8,192 GPUs, "
                 f"{graph.number_of_nodes():,} nodes, {graph.number_of_edges():,} cables", t))
    t, _ = median_s(lambda: topologies.validate_graph(graph), repeats)
    rows.append(("validate_graph", t))
    t, router = median_s(lambda: topologies.Router(graph, routing="ecmp", seed=0), repeats)
    rows.append(("Router(ecmp) set-up (BFS distances, next-hop tables)", t))
    src, dst = rng.integers(0, 8192, pairs), rng.integers(0, 8192, pairs)
    keys = np.arange(pairs)
    t, routes = median_s(lambda: router.route(src, dst, keys), repeats)
    rows.append((f"route {pairs:,} random GPU pairs, ecmp ({len(routes.link_idx):,} link entries)", t))

    spray = topologies.Router(graph, routing="spray")
    n_spray = pairs // 10
    t, routes = median_s(lambda: spray.route(src[:n_spray], dst[:n_spray], keys[:n_spray]), repeats)
    rows.append((f"route {n_spray:,} pairs, spray ({len(routes.fraction):,} sub-flows)", t))

    for name, pxn in (("rail_optimized", True), ("rail_only", False)):
        rails = topologies.build(name, num_gpus=8192)
        t, router = median_s(lambda rails=rails, pxn=pxn: topologies.Router(rails, pxn=pxn), 1)
        t_route, _ = median_s(lambda router=router: router.route(src, dst, keys), repeats)
        rows.append((f"{name}(8,192 GPUs{', pxn' if pxn else ''}): set-up {t:.2f} s; route {pairs:,} pairs", t_route))

    t, info = median_s(lambda: topologies.summary(graph), 1)
    rows.append((f"summary of fat_tree(k=32) (bisection {info['bisection_gbps']:,.0f} Gbps, "
                 f"diameter {info['diameter_hops']})", t))

    if "--large" in sys.argv:
        t, big = median_s(lambda: topologies.build("fat_tree", num_gpus=65536), 1)
        rows.append((f"build fat_tree(65,536 GPUs): {big.number_of_nodes():,} nodes, {big.number_of_edges():,} cables", t))
        t, info = median_s(lambda: topologies.summary(big), repeats)
        rows.append((f"summary of fat_tree(65,536 GPUs) (diameter {info['diameter_hops']})", t))

    width = max(len(label) for label, _ in rows)
    print(f"bench_topologies ({'quick, 1 run' if quick else 'median of 3'}; seconds)")
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds:8.3f}")


if __name__ == "__main__":
    main()
