"""Figures that describe a topology: counts per tier, bisection bandwidth, oversubscription, diameter.

Every figure is computed from one set of arrays read off the graph in a single pass (:class:`EdgeArrays`):
node kinds and servers, and each cable's two ends, capacity and kind. Per-edge Python work over networkx
views cost ~10 s on the 65,536-GPU fat-tree; the array form costs well under one
(``benchmarks/bench_topologies.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from topologies.schema import SWITCH_KINDS, TIER_ORDER, gpu_name

__all__ = ["EdgeArrays", "access_oversubscription", "bisection_gbps", "diameter_hops", "edge_arrays", "summary"]

_INT32_MAX = 2**31 - 1
#: Breadth-first searches run together, one bit each: 64 per uint64 word, this many words per batch.
_BFS_WORDS = 16


@dataclass(frozen=True)
class EdgeArrays:
    """A topology as arrays: nodes ``0..n-1`` in graph order, cables ``0..m-1`` in edge order."""

    nodes: list
    kind: np.ndarray  # node kind (str objects)
    server: np.ndarray  # node ``server`` attribute, -1 where absent
    u: np.ndarray  # cable ends (node indices)
    v: np.ndarray
    capacity_gbps: np.ndarray
    edge_kind: np.ndarray  # cable kind (str objects)
    gpus: np.ndarray  # node index of GPU slot 0..num_gpus-1

    @property
    def is_switch(self) -> np.ndarray:
        """Per node: its kind is a network switch (:data:`topologies.schema.SWITCH_KINDS`)."""
        return np.isin(self.kind, list(SWITCH_KINDS))


def edge_arrays(graph: nx.Graph) -> EdgeArrays:
    """Read ``graph`` into :class:`EdgeArrays` in one pass over its nodes and one over its edges.

    Examples
    --------
    >>> from topologies import fat_tree
    >>> a = edge_arrays(fat_tree(4, gpus_per_server=4))
    >>> len(a.nodes), len(a.u), a.kind[a.gpus[0]]
    (40, 64, 'gpu')
    """
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    data = [(d.get("kind"), d.get("server", -1)) for _, d in graph.nodes(data=True)]
    kind = np.array([k for k, _ in data], dtype=object)
    server = np.array([s if isinstance(s, int | np.integer) else -1 for _, s in data], dtype=np.int64)
    edges = [(index[a], index[b], d["capacity_gbps"], d.get("kind", "")) for a, b, d in graph.edges(data=True)]
    u = np.fromiter((e[0] for e in edges), dtype=np.int64, count=len(edges))
    v = np.fromiter((e[1] for e in edges), dtype=np.int64, count=len(edges))
    cap = np.fromiter((e[2] for e in edges), dtype=float, count=len(edges))
    edge_kind = np.array([e[3] for e in edges], dtype=object)
    num_gpus = int(graph.graph.get("num_gpus", int((kind == "gpu").sum())))
    gpus = np.array([index[gpu_name(s)] for s in range(num_gpus)], dtype=np.int64)
    return EdgeArrays(nodes, kind, server, u, v, cap, edge_kind, gpus)


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
    arrays = edge_arrays(graph)
    kinds = Counter(arrays.kind.tolist())
    tiers = {k: kinds[k] for k in TIER_ORDER if kinds.get(k)}
    tiers.update({k: v for k, v in kinds.items() if k not in tiers})
    links: dict[str, dict] = {}
    for kind in dict.fromkeys(arrays.edge_kind.tolist()):  # first-seen order, as the edges come
        mask = arrays.edge_kind == kind
        links[kind] = {"count": int(mask.sum()), "capacity_gbps": float(arrays.capacity_gbps[mask].sum())}
    bisection = bisection_gbps(graph, arrays)
    injection = float(_gpu_network_gbps(arrays).sum()) / 2
    return {
        "name": graph.graph.get("name"),
        "preset": graph.graph.get("preset"),
        "num_gpus": len(arrays.gpus),
        "gpus_per_server": graph.graph.get("gpus_per_server"),
        "servers": len(np.unique(arrays.server[arrays.gpus])),
        "tiers": tiers,
        "links": links,
        "bisection_gbps": bisection,
        "bisection_ratio": round(bisection / injection, 6) if bisection is not None and injection else None,
        "oversubscription": graph.graph.get("oversubscription"),
        "access_oversubscription": access_oversubscription(graph, arrays),
        "diameter_hops": diameter_hops(graph, arrays),
        "parameters": {k: v for k, v in graph.graph.items()
                       if k not in {"name", "preset", "num_gpus", "gpus_per_server", "oversubscription"}},
    }


def _per_node(arrays: EdgeArrays, u_mask: np.ndarray, v_mask: np.ndarray) -> np.ndarray:
    """Per node: summed capacity of its cables whose far end is selected (``u_mask``/``v_mask`` per cable)."""
    n = len(arrays.nodes)
    cap = arrays.capacity_gbps
    return (np.bincount(arrays.u, weights=np.where(v_mask, cap, 0.0), minlength=n)
            + np.bincount(arrays.v, weights=np.where(u_mask, cap, 0.0), minlength=n))


def _gpu_network_gbps(arrays: EdgeArrays) -> np.ndarray:
    """Per GPU slot: capacity of its cables to network switches (not NVLink)."""
    switch = arrays.is_switch
    return _per_node(arrays, switch[arrays.u], switch[arrays.v])[arrays.gpus]


def bisection_gbps(graph: nx.Graph, arrays: EdgeArrays | None = None) -> float | None:
    """Capacity per direction of the minimum cut between the two halves of the servers in slot order.

    The first ``servers // 2`` servers (their GPUs) against the rest: with the presets' numbering this cuts
    fat-trees between pods, leaf-spines between leaves and rail fabrics between units, the usual bisection
    of these designs. Computed as a maximum flow (scipy) on integer capacities (1 Mbps units, coarser for
    fabrics above about 2 Pbps of GPU capacity).

    Parameters
    ----------
    graph : networkx.Graph
        A topology.
    arrays : EdgeArrays, optional
        ``edge_arrays(graph)`` when the caller has it already.

    Returns
    -------
    float or None
        Gbps; None with a single server.

    Examples
    --------
    >>> from topologies import leaf_spine
    >>> bisection_gbps(leaf_spine(num_gpus=16, gpus_per_leaf=4, gpus_per_server=4, link_gbps=100.0))
    800.0
    """
    a = edge_arrays(graph) if arrays is None else arrays
    gpu_servers = a.server[a.gpus]
    servers = np.unique(gpu_servers)
    if len(servers) < 2:
        return None
    first = np.isin(gpu_servers, servers[: len(servers) // 2])
    n = len(a.nodes)
    everything = np.ones(len(a.u), dtype=bool)
    total = _per_node(a, everything, everything)[a.gpus]  # every cable of a GPU, NVLink included
    source, sink = n, n + 1
    src = np.concatenate([a.u, a.v, np.where(first, source, a.gpus)])
    dst = np.concatenate([a.v, a.u, np.where(first, a.gpus, sink)])
    cap_arr = np.concatenate([a.capacity_gbps, a.capacity_gbps, total])
    # integer capacities (scipy): the flow is bounded by what the source can send, which must fit int32
    bound = max(cap_arr.max(), total.sum())
    scale = min(1000.0, 10.0 ** np.floor(np.log10(_INT32_MAX / max(1.0, bound))))  # decimal: exact for round Gbps
    matrix = csr_matrix((np.maximum(1, np.round(cap_arr * scale)).astype(np.int32), (src, dst)), shape=(n + 2, n + 2))
    matrix.sum_duplicates()
    return round(float(maximum_flow(matrix, source, sink).flow_value) / scale, 3)


def access_oversubscription(graph: nx.Graph, arrays: EdgeArrays | None = None) -> float | None:
    """GPU-facing over uplink capacity, summed over the switches that GPUs attach to; None without uplinks.

    Examples
    --------
    >>> from topologies import leaf_spine
    >>> access_oversubscription(leaf_spine(num_gpus=16, gpus_per_leaf=4, gpus_per_server=4, oversubscription=2))
    2.0
    """
    a = edge_arrays(graph) if arrays is None else arrays
    gpu, switch = a.kind == "gpu", a.is_switch
    down = _per_node(a, gpu[a.u], gpu[a.v])
    up = _per_node(a, switch[a.u], switch[a.v])
    attached = switch & (down > 0)
    down_gbps, up_gbps = float(down[attached].sum()), float(up[attached].sum())
    return round(down_gbps / up_gbps, 6) if up_gbps else None


def diameter_hops(graph: nx.Graph, arrays: EdgeArrays | None = None) -> int:
    """Largest number of hops on a shortest path between two GPUs (NVLink hops included).

    GPUs with the same neighbours have the same distances, so one breadth-first search per distinct
    neighbourhood suffices. The searches run together, one bit of a uint64 word each (1,024 at a time):
    a level is one gather of the neighbours' words and one OR per node.

    Examples
    --------
    >>> from topologies import fat_tree, leaf_spine
    >>> diameter_hops(fat_tree(4, gpus_per_server=4)), diameter_hops(leaf_spine(num_gpus=16, gpus_per_leaf=4, gpus_per_server=4))
    (6, 4)
    """
    a = edge_arrays(graph) if arrays is None else arrays
    n = len(a.nodes)
    order = np.argsort(np.concatenate([a.u, a.v]), kind="stable")
    indices = np.concatenate([a.v, a.u])[order]  # neighbours, grouped by node (CSR)
    degree = np.bincount(a.u, minlength=n) + np.bincount(a.v, minlength=n)
    indptr = np.concatenate([[0], np.cumsum(degree)])
    reps = {}
    for g in a.gpus.tolist():
        reps.setdefault(frozenset(indices[indptr[g]:indptr[g + 1]].tolist()), g)
    sources = np.array(list(reps.values()), dtype=np.int64)
    # neighbour tables per degree: a level is then one gather and one OR-reduction along rows per degree
    tables = []
    for d in np.unique(degree[degree > 0]).tolist():
        members = np.flatnonzero(degree == d)
        tables.append((members, indices[indptr[members][:, None] + np.arange(d)]))
    diameter = 0
    for start in range(0, len(sources), 64 * _BFS_WORDS):
        diameter = max(diameter, _bfs_levels(sources[start:start + 64 * _BFS_WORDS], tables, n, a.gpus))
    return diameter


def _bfs_levels(sources: np.ndarray, tables: list[tuple[np.ndarray, np.ndarray]], n: int,
                targets: np.ndarray) -> int:
    """Levels until a breadth-first search from each of ``sources`` has reached every one of ``targets``.

    ``tables``: per node degree ``d``, the nodes of that degree and their ``d`` neighbours (a matrix).
    """
    words = (len(sources) + 63) // 64
    bit = np.arange(len(sources))
    frontier = np.zeros((n, words), dtype=np.uint64)
    np.bitwise_or.at(frontier, (sources, bit // 64), np.left_shift(np.uint64(1), (bit % 64).astype(np.uint64)))
    full = np.bitwise_or.reduce(frontier, axis=0)  # the bits in use
    seen = frontier.copy()
    level = 0
    while not (seen[targets] == full).all():
        reached = np.zeros_like(frontier)
        for members, neighbours in tables:
            reached[members] = np.bitwise_or.reduce(frontier[neighbours], axis=1)
        frontier = reached & ~seen
        if not frontier.any():
            raise ValueError("GPUs are not connected")  # validate_graph rules this out
        seen |= frontier
        level += 1
    return level
