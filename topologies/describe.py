"""Figures that describe a topology: counts per tier, bisection bandwidth, oversubscription, diameter."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from topologies.schema import SWITCH_KINDS, TIER_ORDER, gpu_name

_INT32_MAX = 2**31 - 1


def summary(graph: nx.Graph) -> dict:
    """Describe a topology.

    Parameters
    ----------
    graph : networkx.Graph
        A topology (SPEC §4).

    Returns
    -------
    dict
        ``name``, ``preset``, ``num_gpus``, ``gpus_per_server``, ``servers``, ``tiers`` (node kind ->
        count, bottom tier first), ``links`` (edge kind -> ``{"count", "capacity_gbps"}``: cables and their
        summed capacity per direction), ``bisection_gbps`` (:func:`bisection_gbps`), ``bisection_ratio``
        (bisection over the network capacity of half the GPUs: 1 is full bisection),
        ``oversubscription`` (configured, graph attribute), ``access_oversubscription`` (measured: GPU-facing
        over uplink capacity of the switches GPUs attach to; None without uplinks), ``diameter_hops``
        (:func:`diameter_hops`), and ``parameters`` (the other graph attributes).

    Examples
    --------
    >>> from topologies import fat_tree
    >>> s = summary(fat_tree(4, gpus_per_server=4))
    >>> s["tiers"]["core"], s["bisection_ratio"], s["diameter_hops"]
    (4, 1.0, 6)
    """
    kinds = Counter(d.get("kind") for _, d in graph.nodes(data=True))
    tiers = {k: kinds[k] for k in TIER_ORDER if kinds.get(k)}
    tiers.update({k: v for k, v in kinds.items() if k not in tiers})
    links: dict[str, dict] = {}
    for _, _, d in graph.edges(data=True):
        entry = links.setdefault(d.get("kind", ""), {"count": 0, "capacity_gbps": 0.0})
        entry["count"] += 1
        entry["capacity_gbps"] += float(d["capacity_gbps"])
    num_gpus = int(graph.graph.get("num_gpus", kinds.get("gpu", 0)))
    bisection = bisection_gbps(graph)
    injection = sum(_network_capacity(graph, gpu_name(s)) for s in range(num_gpus)) / 2
    servers = len({graph.nodes[gpu_name(s)].get("server") for s in range(num_gpus)})
    skip = {"name", "preset", "num_gpus", "gpus_per_server", "oversubscription"}
    return {
        "name": graph.graph.get("name"),
        "preset": graph.graph.get("preset"),
        "num_gpus": num_gpus,
        "gpus_per_server": graph.graph.get("gpus_per_server"),
        "servers": servers,
        "tiers": tiers,
        "links": links,
        "bisection_gbps": bisection,
        "bisection_ratio": round(bisection / injection, 6) if bisection is not None and injection else None,
        "oversubscription": graph.graph.get("oversubscription"),
        "access_oversubscription": access_oversubscription(graph),
        "diameter_hops": diameter_hops(graph),
        "parameters": {k: v for k, v in graph.graph.items() if k not in skip},
    }


def _network_capacity(graph: nx.Graph, gpu: str) -> float:
    return sum(d["capacity_gbps"] for _, v, d in graph.edges(gpu, data=True)
               if graph.nodes[v].get("kind") in SWITCH_KINDS)


def bisection_gbps(graph: nx.Graph) -> float | None:
    """Capacity per direction of the minimum cut between the two halves of the servers in slot order.

    The first ``servers // 2`` servers (their GPUs) against the rest: with the presets' numbering this cuts
    fat-trees between pods, leaf-spines between leaves and rail fabrics between units, the usual bisection
    of these designs. Computed as a maximum flow (scipy) on integer capacities (1 Mbps units, coarser for fabrics above
    about 2 Pbps of GPU capacity).

    Returns
    -------
    float or None
        Gbps; None with a single server.
    """
    num_gpus = int(graph.graph["num_gpus"])
    servers = sorted({graph.nodes[gpu_name(s)]["server"] for s in range(num_gpus)})
    if len(servers) < 2:
        return None
    first = set(servers[: len(servers) // 2])
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    src, dst, cap = [], [], []
    for u, v, d in graph.edges(data=True):
        src += [index[u], index[v]]
        dst += [index[v], index[u]]
        cap += [d["capacity_gbps"]] * 2
    source, sink = len(nodes), len(nodes) + 1
    for s in range(num_gpus):
        node = gpu_name(s)
        total = sum(d["capacity_gbps"] for _, _, d in graph.edges(node, data=True))
        if graph.nodes[node]["server"] in first:
            src.append(source), dst.append(index[node])
        else:
            src.append(index[node]), dst.append(sink)
        cap.append(total)
    cap_arr = np.asarray(cap, dtype=float)
    # integer capacities (scipy): the flow is bounded by what the source can send, which must fit int32
    bound = max(cap_arr.max(), cap_arr[-num_gpus:].sum())
    scale = min(1000.0, 10.0 ** np.floor(np.log10(_INT32_MAX / max(1.0, bound))))  # decimal: exact for round Gbps
    matrix = csr_matrix((np.maximum(1, np.round(cap_arr * scale)).astype(np.int32), (src, dst)),
                        shape=(len(nodes) + 2, len(nodes) + 2))
    matrix.sum_duplicates()
    return round(float(maximum_flow(matrix, source, sink).flow_value) / scale, 3)


def access_oversubscription(graph: nx.Graph) -> float | None:
    """GPU-facing over uplink capacity, summed over the switches that GPUs attach to; None without uplinks."""
    down = up = 0.0
    for node, data in graph.nodes(data=True):
        if data.get("kind") not in SWITCH_KINDS:
            continue
        kinds = [(graph.nodes[v].get("kind"), d["capacity_gbps"]) for _, v, d in graph.edges(node, data=True)]
        if not any(kind == "gpu" for kind, _ in kinds):
            continue
        down += sum(c for kind, c in kinds if kind == "gpu")
        up += sum(c for kind, c in kinds if kind in SWITCH_KINDS)
    return round(down / up, 6) if up else None


def diameter_hops(graph: nx.Graph) -> int:
    """Largest number of hops on a shortest path between two GPUs (NVLink hops included).

    GPUs with the same neighbours have the same distances, so one breadth-first search per distinct
    neighbourhood suffices; the searches run together, level by level, as sparse-matrix products.
    """
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    gpus = np.array([index[gpu_name(s)] for s in range(int(graph.graph["num_gpus"]))])
    reps = {}
    for g in gpus.tolist():
        reps.setdefault(frozenset(graph.neighbors(nodes[g])), g)
    rows, cols = zip(*((index[u], index[v]) for u, v in graph.edges()), strict=True)
    adj = csr_matrix((np.ones(2 * len(rows), dtype=np.float32), (rows + cols, cols + rows)),
                     shape=(len(nodes), len(nodes)))
    sources = np.array(list(reps.values()))
    diameter = 0
    for start in range(0, len(sources), 256):
        block = sources[start:start + 256]
        frontier = np.zeros((len(nodes), len(block)), dtype=np.float32)
        frontier[block, np.arange(len(block))] = 1.0
        seen = frontier > 0
        level = 0
        while not seen[gpus].all():
            frontier = ((adj @ frontier) > 0) & ~seen
            if not frontier.any():
                raise ValueError("GPUs are not connected")  # validate_graph rules this out
            frontier = frontier.astype(np.float32)
            seen |= frontier > 0
            level += 1
        diameter = max(diameter, level)
    return diameter


__all__ = ["access_oversubscription", "bisection_gbps", "diameter_hops", "summary"]
