"""Ideal fabrics: the non-blocking crossbar, and the reference ports that bound every fabric from below.

:func:`nonblocking` is a graph (a crossbar in place of the network) that tests and benchmarks replay over.
:func:`reference_ports` describes the *reference* of ``ideal_s`` (docs/report.md, "The reference"): the
servers' NVLink domains and their GPU ports exactly as built, the network replaced by a non-blocking core,
and every GPU free to reach that core through any NIC of its domain over NVLink (NCCL's PXN), so that one
reference holds for every preset, routing and anomaly of the same servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from topologies.errors import TopologyError
from topologies.schema import NVLINK_NODE_KINDS, SWITCH_KINDS, gpu_name

#: Name of the crossbar node of :func:`nonblocking`.
CROSSBAR = "xbar"


def nonblocking(graph: nx.Graph) -> nx.Graph:
    """The non-blocking counterpart of a topology: GPUs, NVSwitches and NVLinks kept; the network replaced.

    Every GPU's access links (GPU <-> network switch) become one link to a single crossbar node
    ``xbar`` (kind ``crossbar``) with their summed capacity and the largest of their latencies. Only the
    GPU ports can then be bottlenecks. (The simulator's reference for ``ideal_s`` is
    :func:`reference_ports`, which also lets a GPU use the other NICs of its server.)

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


@dataclass(frozen=True)
class ReferencePorts:
    """The GPU ports of a fabric's servers, per GPU slot (arrays of length ``num_gpus``).

    Attributes
    ----------
    domain : ndarray of int64
        NVLink domain of each GPU (a component of the GPU/NVSwitch graph over NVLink; a GPU without NVLink
        is a domain of its own). Traffic between two GPUs of one domain always takes NVLink.
    nvlink_gbps, net_gbps : ndarray of float64
        Summed capacity (per direction) of the GPU's NVLink links, and of its network access links (its NICs).
    nvlink_latency_us, net_latency_us : ndarray of float64
        The smallest latency of those links (0 where there are none).
    gpu_to_gpu_nvlink : ndarray of bool
        The GPU has an NVLink cable straight to another GPU (an NVLink path may then be a single link).
    """

    domain: np.ndarray
    nvlink_gbps: np.ndarray
    net_gbps: np.ndarray
    nvlink_latency_us: np.ndarray
    net_latency_us: np.ndarray
    gpu_to_gpu_nvlink: np.ndarray

    @property
    def num_gpus(self) -> int:
        return len(self.domain)


def reference_ports(graph: nx.Graph, num_gpus: int | None = None) -> ReferencePorts:
    """The GPU ports of ``graph`` as the reference fabric keeps them.

    Parameters
    ----------
    graph : networkx.Graph
        A topology (SPEC §4), as built: failed and degraded cables (which only lose capacity) keep their
        nominal capacity here.
    num_gpus : int, optional
        GPU slots ``gpu0 ..`` to describe (default: every ``gpu{i}`` node from 0 up).

    Returns
    -------
    ReferencePorts

    Raises
    ------
    TopologyError
        When ``gpu0`` .. ``gpu{num_gpus-1}`` are not all GPU nodes.

    Examples
    --------
    >>> from topologies import rail_only
    >>> ports = reference_ports(rail_only(16, gpus_per_server=8, link_gbps=400.0))
    >>> ports.domain.tolist() == [0] * 8 + [1] * 8, float(ports.net_gbps[0]), float(ports.nvlink_gbps[0])
    (True, 400.0, 3600.0)
    """
    kinds = nx.get_node_attributes(graph, "kind")
    if num_gpus is None:
        num_gpus = 0
        while kinds.get(gpu_name(num_gpus)) == "gpu":
            num_gpus += 1
    slot = {}
    for i in range(num_gpus):
        name = gpu_name(i)
        if kinds.get(name) != "gpu":
            raise TopologyError(f"{graph.graph.get('name', 'topology')}: no GPU node {name}")
        slot[name] = i
    nvl, net = np.zeros(num_gpus), np.zeros(num_gpus)
    nvl_lat, net_lat = np.full(num_gpus, np.inf), np.full(num_gpus, np.inf)
    direct = np.zeros(num_gpus, dtype=bool)
    nvgraph = nx.Graph()
    nvgraph.add_nodes_from(slot)
    for u, v, d in graph.edges(data=True):
        ku, kv = kinds.get(u), kinds.get(v)
        nvlink = ku in NVLINK_NODE_KINDS and kv in NVLINK_NODE_KINDS
        if nvlink:
            nvgraph.add_edge(u, v)
        cap = float(d["capacity_gbps"])
        lat = float(d.get("latency_us", 0.0))
        for end, other in ((u, kv), (v, ku)):
            i = slot.get(end)
            if i is None:
                continue
            if nvlink:
                nvl[i] += cap
                nvl_lat[i] = min(nvl_lat[i], lat)
                direct[i] |= other == "gpu"
            else:
                net[i] += cap
                net_lat[i] = min(net_lat[i], lat)
    domain = np.zeros(num_gpus, dtype=np.int64)
    for cid, comp in enumerate(sorted(nx.connected_components(nvgraph), key=lambda c: min(slot.get(n, 1 << 62) for n in c))):
        for n in comp:
            if n in slot:
                domain[slot[n]] = cid
    _, domain = np.unique(domain, return_inverse=True)  # dense ids over the GPUs' own domains
    return ReferencePorts(domain=domain.astype(np.int64), nvlink_gbps=nvl, net_gbps=net,
                          nvlink_latency_us=np.where(np.isfinite(nvl_lat), nvl_lat, 0.0),
                          net_latency_us=np.where(np.isfinite(net_lat), net_lat, 0.0), gpu_to_gpu_nvlink=direct)


__all__ = ["CROSSBAR", "ReferencePorts", "nonblocking", "reference_ports"]
