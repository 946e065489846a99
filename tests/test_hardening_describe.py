"""The vectorised topology description (issue 13) against plain networkx definitions of the same figures."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from topologies.describe import access_oversubscription, bisection_gbps, diameter_hops, summary
from topologies.schema import SWITCH_KINDS, gpu_name


def reference_diameter(graph: nx.Graph) -> int:
    gpus = [gpu_name(s) for s in range(graph.graph["num_gpus"])]
    distances = (nx.single_source_shortest_path_length(graph, g) for g in gpus)  # one search per GPU
    return max(max(dist[h] for h in gpus) for dist in distances)


def reference_bisection(graph: nx.Graph) -> float | None:
    gpus = [gpu_name(s) for s in range(graph.graph["num_gpus"])]
    servers = sorted({graph.nodes[g]["server"] for g in gpus})
    if len(servers) < 2:
        return None
    first = set(servers[: len(servers) // 2])
    flow = nx.DiGraph()
    for u, v, d in graph.edges(data=True):
        flow.add_edge(u, v, capacity=d["capacity_gbps"])
        flow.add_edge(v, u, capacity=d["capacity_gbps"])
    for g in gpus:
        total = sum(d["capacity_gbps"] for _, _, d in graph.edges(g, data=True))
        if graph.nodes[g]["server"] in first:
            flow.add_edge("SRC", g, capacity=total)
        else:
            flow.add_edge(g, "SNK", capacity=total)
    return nx.maximum_flow_value(flow, "SRC", "SNK")


def reference_access(graph: nx.Graph) -> float | None:
    down = up = 0.0
    for node, data in graph.nodes(data=True):
        kinds = [(graph.nodes[v]["kind"], d["capacity_gbps"]) for _, v, d in graph.edges(node, data=True)]
        if data["kind"] in SWITCH_KINDS and any(k == "gpu" for k, _ in kinds):
            down += sum(c for k, c in kinds if k == "gpu")
            up += sum(c for k, c in kinds if k in SWITCH_KINDS)
    return round(down / up, 6) if up else None


PRESETS = [("fat_tree", {"num_gpus": 32}), ("fat_tree", {"k": 4, "gpus_per_server": 4}),
           ("fat_tree", {"num_gpus": 64, "oversubscription": 2}),
           ("leaf_spine", {"num_gpus": 48, "oversubscription": 3}),
           ("leaf_spine", {"num_gpus": 16, "gpus_per_server": 1}),
           ("rail_optimized", {"num_gpus": 64}), ("rail_only", {"num_gpus": 64}),
           ("fat_tree", {"num_gpus": 8})]


@pytest.mark.parametrize("name,params", PRESETS, ids=[f"{n}-{p}" for n, p in PRESETS])
def test_figures_equal_the_networkx_definitions(name, params):
    graph = topologies.build(name, **params)
    assert diameter_hops(graph) == reference_diameter(graph)
    expected = reference_bisection(graph)
    got = bisection_gbps(graph)
    assert got == (None if expected is None else pytest.approx(expected, rel=1e-6))
    assert access_oversubscription(graph) == reference_access(graph)
    info = summary(graph)
    assert info["tiers"]["gpu"] == graph.graph["num_gpus"] == info["num_gpus"]
    assert sum(e["count"] for e in info["links"].values()) == graph.number_of_edges()


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_diameter_of_random_fabrics(gpus, switches, seed):
    """GPUs hung on random connected switch graphs (some GPU-GPU cables too): the same as networkx."""
    import random

    rng = random.Random(seed)
    graph = nx.Graph()
    names = [f"s{i}" for i in range(switches)]
    for i, s in enumerate(names):
        graph.add_node(s, kind="leaf")
        if i:
            graph.add_edge(s, names[rng.randrange(i)], capacity_gbps=100.0, latency_us=1.0, kind="fabric")
    for _ in range(rng.randrange(switches + 1)):
        a, b = rng.sample(names, 2) if switches > 1 else (None, None)
        if a is not None:
            graph.add_edge(a, b, capacity_gbps=100.0, latency_us=1.0, kind="fabric")
    for g in range(gpus):
        graph.add_node(gpu_name(g), kind="gpu", server=g, local_rank=0)
        for s in rng.sample(names, rng.randint(1, min(2, switches))):
            graph.add_edge(gpu_name(g), s, capacity_gbps=400.0, latency_us=1.0, kind="access")
        if g and rng.random() < 0.2:
            graph.add_edge(gpu_name(g), gpu_name(rng.randrange(g)), capacity_gbps=900.0, latency_us=0.5,
                           kind="nvlink")
    graph.graph.update(num_gpus=gpus, gpus_per_server=1, name="random", preset="yaml")
    assert diameter_hops(graph) == reference_diameter(graph)
    assert bisection_gbps(graph) == pytest.approx(reference_bisection(graph), rel=1e-6)
    assert access_oversubscription(graph) == reference_access(graph)


def test_many_sources_span_several_batches(monkeypatch):
    """More distinct GPU neighbourhoods than one batch of bits holds: several batches, the same answer."""
    import topologies.describe as describe

    graph = topologies.build("fat_tree", num_gpus=256, gpus_per_server=2)  # 128 servers: 128 neighbourhoods
    whole = diameter_hops(graph)
    monkeypatch.setattr(describe, "_BFS_WORDS", 1)  # 64 searches per batch
    assert diameter_hops(graph) == whole == reference_diameter(graph)
