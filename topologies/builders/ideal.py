"""The non-blocking reference fabric: the same servers, with every network port on one ideal crossbar."""

from __future__ import annotations

import networkx as nx

from topologies.schema import NVLINK_NODE_KINDS, SWITCH_KINDS

#: Name of the crossbar node of :func:`nonblocking`.
CROSSBAR = "xbar"


def nonblocking(graph: nx.Graph) -> nx.Graph:
    """The ideal counterpart of a topology: GPUs, NVSwitches and NVLinks kept; the network replaced.

    Every GPU's access links (GPU <-> network switch) become one link to a single crossbar node
    ``xbar`` (kind ``crossbar``) with their summed capacity and the largest of their latencies. Only the
    GPU ports can then be bottlenecks: this is the fabric of ``ideal_makespan_s`` (SPEC §6).

    Parameters
    ----------
    graph : networkx.Graph
        A topology (SPEC §4).

    Returns
    -------
    networkx.Graph
        A new graph; graph attributes copied, ``name`` suffixed ``-nonblocking``, ``nonblocking=True``.

    Examples
    --------
    >>> from topologies import leaf_spine
    >>> ideal = nonblocking(leaf_spine(32, oversubscription=4.0))
    >>> sorted({d["kind"] for _, d in ideal.nodes(data=True)})
    ['crossbar', 'gpu', 'nvswitch']
    """
    ideal = nx.Graph()
    ideal.graph.update(graph.graph)
    ideal.graph["name"] = f"{graph.graph.get('name', 'topology')}-nonblocking"
    ideal.graph["nonblocking"] = True
    ideal.add_nodes_from((n, d) for n, d in graph.nodes(data=True) if d.get("kind") in NVLINK_NODE_KINDS)
    ideal.add_node(CROSSBAR, kind="crossbar")
    for u, v, data in graph.edges(data=True):
        ku, kv = graph.nodes[u].get("kind"), graph.nodes[v].get("kind")
        if ku in NVLINK_NODE_KINDS and kv in NVLINK_NODE_KINDS:
            ideal.add_edge(u, v, **data)
        elif (ku == "gpu") != (kv == "gpu") and {ku, kv} & SWITCH_KINDS:
            gpu = u if ku == "gpu" else v
            if ideal.has_edge(gpu, CROSSBAR):
                link = ideal.edges[gpu, CROSSBAR]
                link["capacity_gbps"] += data["capacity_gbps"]
                link["latency_us"] = max(link["latency_us"], data["latency_us"])
            else:
                ideal.add_edge(gpu, CROSSBAR, kind="access", capacity_gbps=data["capacity_gbps"],
                               latency_us=data["latency_us"])
    return ideal


__all__ = ["CROSSBAR", "nonblocking"]
