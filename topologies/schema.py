"""Every node, edge and graph attribute of a collsim topology, in one place (SPEC §4), and `validate_graph`.

A topology is an undirected :class:`networkx.Graph`; each edge is one full-duplex cable whose
``capacity_gbps`` holds in each direction separately.

Node attributes
---------------
``kind`` (str, always)
    One of :data:`NODE_KINDS`:

    ``gpu``       a GPU with its own network adapter (one NIC per GPU, as in DGX H100). Named ``gpu{i}``
                  where ``i`` is the GPU slot that global rank ``i`` runs on; slots are ``0..num_gpus-1``.
    ``nvswitch``  the NVLink switch of one server (its NVLink domain). Named ``nvs{s}``.
    ``leaf``      top-of-rack / edge switch (fat-tree "edge", leaf-spine "leaf").
    ``spine``     aggregation (fat-tree) or spine (leaf-spine, rail fabrics) switch.
    ``core``      fat-tree core switch.
    ``rail``      rail switch: connects GPU ``local_rank`` r of every server of a scalable unit.
    ``crossbar``  the single ideal switch of :func:`topologies.nonblocking` (the non-blocking reference).
``server`` (int, gpu and nvswitch)
    Server index; GPUs ``server * gpus_per_server .. + gpus_per_server - 1`` share it in the presets.
``local_rank`` (int, gpu)
    Index of the GPU inside its server, ``0..gpus_per_server-1``; in rail fabrics also its rail.
``pod`` (int, fat-tree leaf/spine), ``group`` (int, fat-tree core: it joins spine ``group`` of every pod),
``unit`` (int, rail switches: scalable unit), ``rail`` (int, rail switches and rail_only spines).

Edge attributes
---------------
``capacity_gbps`` (float > 0)  capacity per direction, 10^9 bit/s.
``latency_us`` (float >= 0)    one-way latency of the hop (cable + the switch it enters), microseconds.
``kind`` (str)                 one of :data:`EDGE_KINDS`:

    ``nvlink``      GPU <-> NVSwitch (or GPU <-> GPU): the NVLink domain.
    ``access``      GPU <-> its first network switch (leaf, rail or crossbar).
    ``leaf-spine``  leaf <-> spine (also fat-tree edge <-> aggregation).
    ``rail-spine``  rail switch <-> spine.
    ``spine-core``  fat-tree aggregation <-> core.
    ``fabric``      any other switch <-> switch cable (explicit YAML graphs).

Graph attributes
----------------
``name`` (str)             preset name or YAML file stem (``"<name>-nonblocking"`` for the reference).
``num_gpus`` (int)         number of GPU nodes.
``gpus_per_server`` (int)  GPUs per server (1: no NVLink domain, each GPU stands alone).
``preset`` (str)           the builder that made it (``"yaml"`` for explicit graphs).
Plus every builder parameter after sizing (``k``, ``oversubscription``, ``link_gbps``, ``nvlink_gbps``,
``latency_us``, ``nvlink_latency_us``, ``num_leaves``, ``num_spines``, ``servers_per_unit``, ...), and
``nonblocking=True`` on the reference fabric.

Routing tables and simulator state are never stored in the graph (see :mod:`topologies.routing`).
"""

from __future__ import annotations

import math
import re

import networkx as nx

from topologies.errors import TopologyError

#: Node kinds.
NODE_KINDS: tuple[str, ...] = ("gpu", "nvswitch", "leaf", "spine", "core", "rail", "crossbar")
#: Node kinds that are network switches (they forward network traffic; GPUs and NVSwitches do not).
SWITCH_KINDS: frozenset[str] = frozenset({"leaf", "spine", "core", "rail", "crossbar"})
#: Node kinds of an NVLink domain.
NVLINK_NODE_KINDS: frozenset[str] = frozenset({"gpu", "nvswitch"})
#: Edge kinds.
EDGE_KINDS: tuple[str, ...] = ("nvlink", "access", "leaf-spine", "rail-spine", "spine-core", "fabric")
#: Tier order, bottom to top (used for layouts and per-tier counts).
TIER_ORDER: tuple[str, ...] = ("nvswitch", "gpu", "leaf", "rail", "crossbar", "spine", "core")

#: Defaults shared by the builders.
DEFAULT_LINK_GBPS = 400.0  # one NDR InfiniBand / 400GbE port per GPU
DEFAULT_NVLINK_GBPS = 3600.0  # H100 NVLink 4: 900 GB/s bidirectional = 450 GB/s = 3600 Gbps per direction
DEFAULT_LATENCY_US = 1.0  # per network hop: switch traversal plus cable
DEFAULT_NVLINK_LATENCY_US = 0.5  # per NVLink hop (GPU -> NVSwitch)

_GPU_NAME = re.compile(r"gpu(0|[1-9][0-9]*)")


def gpu_name(slot: int) -> str:
    """Node name of GPU slot ``slot``.

    Examples
    --------
    >>> gpu_name(3)
    'gpu3'
    """
    return f"gpu{slot}"


def gpu_slot(name: str) -> int | None:
    """GPU slot of a node name ``gpu{i}``, or None if the name is not of that form.

    Examples
    --------
    >>> gpu_slot("gpu12"), gpu_slot("leaf0")
    (12, None)
    """
    match = _GPU_NAME.fullmatch(str(name))
    return int(match.group(1)) if match else None


def infer_edge_kind(kind_a: str, kind_b: str) -> str:
    """Edge kind implied by the kinds of its two ends (for YAML links without ``kind``).

    Examples
    --------
    >>> infer_edge_kind("gpu", "nvswitch"), infer_edge_kind("spine", "leaf"), infer_edge_kind("rail", "spine")
    ('nvlink', 'leaf-spine', 'rail-spine')
    """
    ends = {kind_a, kind_b}
    if ends <= NVLINK_NODE_KINDS:
        return "nvlink"
    if "gpu" in ends:
        return "access"
    if ends == {"leaf", "spine"}:
        return "leaf-spine"
    if ends == {"rail", "spine"}:
        return "rail-spine"
    if ends == {"spine", "core"}:
        return "spine-core"
    return "fabric"


def validate_graph(graph: nx.Graph, where: str = "topology") -> nx.Graph:
    """Check a topology against this schema; return it unchanged.

    Checks: known node and edge kinds; GPU names ``gpu0..gpu{n-1}`` with integer ``server`` and
    ``local_rank``; positive, finite capacities and non-negative latencies; all GPUs in one connected
    component; graph attributes ``name``, ``num_gpus``, ``gpus_per_server`` consistent with the nodes.

    Parameters
    ----------
    graph : networkx.Graph
        The topology.
    where : str
        Prefix of error messages (a preset name or a YAML file).

    Returns
    -------
    networkx.Graph
        ``graph`` itself.

    Raises
    ------
    TopologyError
        On the first violation, naming the node, edge or attribute.
    """
    if graph.is_directed() or graph.is_multigraph():
        raise TopologyError(f"{where}: a topology is an undirected networkx.Graph (one edge per cable)")
    slots = []
    for node, data in graph.nodes(data=True):
        kind = data.get("kind")
        if kind not in NODE_KINDS:
            raise TopologyError(f"{where}: node {node!r} has kind {kind!r}; known kinds: {', '.join(NODE_KINDS)}")
        if kind == "gpu":
            slot = gpu_slot(node)
            if slot is None:
                raise TopologyError(f"{where}: GPU node {node!r} must be named gpu<slot> (gpu0, gpu1, ...)")
            for key in ("server", "local_rank"):
                if not isinstance(data.get(key), int) or isinstance(data.get(key), bool) or data[key] < 0:
                    raise TopologyError(f"{where}: GPU {node!r} needs a non-negative int '{key}'")
            slots.append(slot)
    if not slots:
        raise TopologyError(f"{where}: no GPU nodes")
    slots.sort()
    if slots != list(range(len(slots))):
        missing = min(set(range(len(slots))) - set(slots))
        raise TopologyError(f"{where}: GPU slots must be 0..{len(slots) - 1}, but gpu{missing} is missing")
    for u, v, data in graph.edges(data=True):
        cap = data.get("capacity_gbps")
        if not _is_number(cap) or not math.isfinite(cap) or cap <= 0:
            raise TopologyError(f"{where}: link {u}-{v}: capacity_gbps must be a positive number, got {cap!r}")
        lat = data.get("latency_us")
        if not _is_number(lat) or not math.isfinite(lat) or lat < 0:
            raise TopologyError(f"{where}: link {u}-{v}: latency_us must be a number >= 0, got {lat!r}")
        if data.get("kind") not in EDGE_KINDS:
            raise TopologyError(f"{where}: link {u}-{v} has kind {data.get('kind')!r}; known: {', '.join(EDGE_KINDS)}")
    gpus = [gpu_name(s) for s in slots]
    component = nx.node_connected_component(graph, gpus[0])
    stray = next((g for g in gpus if g not in component), None)
    if stray is not None:
        raise TopologyError(f"{where}: {stray} is not connected to {gpus[0]}")
    attrs = graph.graph
    if not attrs.get("name"):
        raise TopologyError(f"{where}: graph attribute 'name' is missing")
    if attrs.get("num_gpus") != len(slots):
        raise TopologyError(f"{where}: graph attribute num_gpus={attrs.get('num_gpus')!r} but it has {len(slots)} GPUs")
    gps = attrs.get("gpus_per_server")
    if not isinstance(gps, int) or gps < 1:
        raise TopologyError(f"{where}: graph attribute gpus_per_server must be a positive int, got {gps!r}")
    return graph


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "DEFAULT_LATENCY_US",
    "DEFAULT_LINK_GBPS",
    "DEFAULT_NVLINK_GBPS",
    "DEFAULT_NVLINK_LATENCY_US",
    "EDGE_KINDS",
    "NODE_KINDS",
    "NVLINK_NODE_KINDS",
    "SWITCH_KINDS",
    "TIER_ORDER",
    "gpu_name",
    "gpu_slot",
    "infer_edge_kind",
    "validate_graph",
]
