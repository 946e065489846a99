"""The 2-tier leaf-spine Clos with an oversubscription ratio at the leaves."""

from __future__ import annotations

import math

import networkx as nx

from topologies.builders.servers import (
    DEFAULT_NUM_GPUS,
    add_servers,
    check_common,
    check_int,
    check_num_gpus,
    check_size,
    new_graph,
)
from topologies.errors import TopologyError
from topologies.schema import (
    DEFAULT_LATENCY_US,
    DEFAULT_LINK_GBPS,
    DEFAULT_NVLINK_GBPS,
    DEFAULT_NVLINK_LATENCY_US,
    gpu_name,
)


def leaf_spine(
    num_gpus: int | None = None,
    *,
    gpus_per_server: int = 8,
    gpus_per_leaf: int | None = None,
    num_leaves: int | None = None,
    num_spines: int | None = None,
    radix: int = 64,
    link_gbps: float = DEFAULT_LINK_GBPS,
    nvlink_gbps: float = DEFAULT_NVLINK_GBPS,
    latency_us: float = DEFAULT_LATENCY_US,
    nvlink_latency_us: float = DEFAULT_NVLINK_LATENCY_US,
    oversubscription: float = 1.0,
) -> nx.Graph:
    """A 2-tier leaf-spine (folded Clos) fabric: every leaf joins every spine.

    Servers attach whole to a leaf (GPU ``i`` to leaf ``i // gpus_per_leaf``). Each leaf has
    ``gpus_per_leaf * link_gbps`` of host-facing capacity and ``oversubscription`` times less uplink
    capacity, split evenly over its links to the ``num_spines`` spines (each carries
    ``gpus_per_leaf * link_gbps / (oversubscription * num_spines)``, which is ``link_gbps`` with the
    default shape), so the ratio is exact for any real ``oversubscription``.

    Parameters
    ----------
    num_gpus : int, optional
        GPUs (the last server may be partial). Default: ``num_leaves * gpus_per_leaf`` if
        ``num_leaves`` is given, else 128.
    gpus_per_server : int
        GPUs per server sharing one NVSwitch node (1: no NVLink domain).
    gpus_per_leaf : int, optional
        Host ports per leaf. Default: the ``radix`` ports split host:uplink as ``oversubscription``:1
        (``floor(radix * o / (1 + o))``, 32 of 64 at 1:1) rounded down to whole servers; when all GPUs
        would fit on one leaf, half of the servers per leaf so that the spine tier is exercised.
    num_leaves : int, optional
        Leaves. Default: just enough for ``num_gpus``.
    num_spines : int, optional
        Spines. Default: ``ceil(gpus_per_leaf / oversubscription)`` (one ``link_gbps`` uplink each).
    radix : int
        Switch ports (64: a 51.2 Tb/s switch with 800G ports split into 2 x 400G, or a 64-port NDR
        switch); bounds the default shape and the number of leaves (each spine has ``radix`` ports).
    link_gbps, nvlink_gbps, latency_us, nvlink_latency_us : float
        As in :func:`topologies.fat_tree`.
    oversubscription : float
        >= 1: host-facing to uplink capacity per leaf.

    Returns
    -------
    networkx.Graph
        Kinds ``gpu``, ``nvswitch``, ``leaf``, ``spine``; graph attributes add ``gpus_per_leaf``,
        ``num_leaves``, ``num_spines``, ``radix``.

    Raises
    ------
    TopologyError
        Bad parameters, more leaves than ``radix`` spine ports, or fewer host ports than ``num_gpus``.

    References
    ----------
    .. [1] C. Clos, "A study of non-blocking switching networks", Bell System Technical Journal, 1953.
    .. [2] M. Alizadeh, T. Edsall, "On the data path performance of leaf-spine datacenter fabrics",
       IEEE Hot Interconnects 2013.

    Examples
    --------
    >>> g = leaf_spine(128, oversubscription=3.0)
    >>> g.graph["gpus_per_leaf"], g.graph["num_leaves"], g.graph["num_spines"]
    (48, 3, 16)
    """
    where = "leaf_spine"
    common = check_common(where, gpus_per_server, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us,
                          oversubscription)
    gps, over = common["gpus_per_server"], common["oversubscription"]
    radix = check_int("radix", radix, 2, where)
    if num_gpus is not None:
        num_gpus = check_num_gpus(where, num_gpus)
    if gpus_per_leaf is None:
        ports = math.floor(radix * over / (1 + over))
        gpus_per_leaf = ports // gps * gps
        if gpus_per_leaf == 0:
            raise TopologyError(f"{where}: a leaf of radix {radix} has {ports} host ports, less than one server "
                                f"of {gps} GPUs; raise radix or set gpus_per_leaf")
        wanted = num_gpus if num_gpus is not None else (None if num_leaves is not None else DEFAULT_NUM_GPUS)
        servers = math.ceil(wanted / gps) if wanted is not None else 0
        if num_leaves is None and wanted is not None and wanted <= gpus_per_leaf and servers >= 2:
            gpus_per_leaf = math.ceil(servers / 2) * gps
    gpus_per_leaf = check_int("gpus_per_leaf", gpus_per_leaf, 1, where)
    if gpus_per_leaf % gps:
        raise TopologyError(f"{where}: gpus_per_leaf={gpus_per_leaf} is not a multiple of gpus_per_server={gps}")
    if num_leaves is None:
        num_gpus = DEFAULT_NUM_GPUS if num_gpus is None else num_gpus
        num_leaves = math.ceil(num_gpus / gpus_per_leaf)
    num_leaves = check_int("num_leaves", num_leaves, 1, where)
    if num_gpus is None:
        num_gpus = num_leaves * gpus_per_leaf
    num_gpus = check_num_gpus(where, num_gpus)
    if num_gpus > num_leaves * gpus_per_leaf:
        raise TopologyError(f"{where} with {num_leaves} leaves of {gpus_per_leaf} GPUs holds "
                            f"{num_leaves * gpus_per_leaf} GPUs, fewer than num_gpus={num_gpus}")
    if num_leaves > radix:
        raise TopologyError(f"{where}: {num_leaves} leaves exceed the {radix} ports of a spine; raise radix, "
                            "gpus_per_leaf, or use fat_tree")
    if num_spines is None:
        num_spines = math.ceil(gpus_per_leaf / over)
    num_spines = check_int("num_spines", num_spines, 1, where)
    servers = -(-num_gpus // gps) if gps > 1 else 0
    check_size(where, num_gpus, num_gpus + servers + num_leaves + num_spines,
               num_gpus * (2 if gps > 1 else 1) + num_leaves * num_spines,
               f"{num_leaves} leaves, {num_spines} spines, num_gpus={num_gpus}")
    up_gbps = gpus_per_leaf * common["link_gbps"] / (over * num_spines)
    params = dict(gpus_per_leaf=gpus_per_leaf, num_leaves=num_leaves, num_spines=num_spines, radix=radix, **common)
    graph = new_graph(where, num_gpus, params)
    add_servers(graph, num_gpus, gps, common["nvlink_gbps"], common["nvlink_latency_us"])
    lat = common["latency_us"]
    graph.add_nodes_from((f"leaf{i}" for i in range(num_leaves)), kind="leaf")
    graph.add_nodes_from((f"spine{j}" for j in range(num_spines)), kind="spine")
    for slot in range(num_gpus):
        graph.add_edge(gpu_name(slot), f"leaf{slot // gpus_per_leaf}", kind="access",
                       capacity_gbps=common["link_gbps"], latency_us=lat)
    for i in range(num_leaves):
        for j in range(num_spines):
            graph.add_edge(f"leaf{i}", f"spine{j}", kind="leaf-spine", capacity_gbps=up_gbps, latency_us=lat)
    return graph


__all__ = ["leaf_spine"]
