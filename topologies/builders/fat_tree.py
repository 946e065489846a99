"""The 3-tier k-ary fat-tree (Al-Fares et al., SIGCOMM 2008)."""

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


def smallest_k(num_gpus: int) -> int:
    """Smallest even ``k >= 2`` whose fat-tree holds ``num_gpus`` hosts (``k**3 / 4 >= num_gpus``).

    Examples
    --------
    >>> smallest_k(16), smallest_k(17), smallest_k(8192)
    (4, 6, 32)
    """
    k = max(2, 2 * math.ceil(round((4 * num_gpus) ** (1 / 3), 9) / 2))
    while k**3 // 4 < num_gpus:
        k += 2
    while k > 2 and (k - 2) ** 3 // 4 >= num_gpus:
        k -= 2
    return k


def fat_tree(
    k: int | None = None,
    *,
    num_gpus: int | None = None,
    gpus_per_server: int = 8,
    link_gbps: float = DEFAULT_LINK_GBPS,
    nvlink_gbps: float = DEFAULT_NVLINK_GBPS,
    latency_us: float = DEFAULT_LATENCY_US,
    nvlink_latency_us: float = DEFAULT_NVLINK_LATENCY_US,
    oversubscription: float = 1.0,
) -> nx.Graph:
    """The 3-tier k-ary fat-tree with one network port per GPU.

    ``k`` pods, each with ``k/2`` edge switches (kind ``leaf``) and ``k/2`` aggregation switches (kind
    ``spine``); ``(k/2)**2`` core switches. Edge switch ``j`` of pod ``p`` serves ``k/2`` GPUs and joins
    every aggregation switch of its pod; core switch ``g*(k/2)+i`` (``group`` g) joins aggregation switch
    ``g`` of every pod. GPU ``i`` attaches to edge switch ``i // (k/2)``; servers of ``gpus_per_server``
    consecutive GPUs share one NVSwitch.

    Parameters
    ----------
    k : int, optional
        Switch radix, even and >= 2; the fabric has ``k**3/4`` host ports. Default: the smallest even ``k``
        holding ``num_gpus``.
    num_gpus : int, optional
        GPUs to attach; ports fill in order and spare ports stay empty (the last server may be partial).
        Default: as many whole servers as ``k`` holds, or 128 when ``k`` is not given either.
    gpus_per_server : int
        GPUs per server sharing one NVSwitch node (1: no NVLink domain).
    link_gbps, nvlink_gbps : float
        Capacity per direction of a network port and of one GPU's NVLink (H100: 3600).
    latency_us, nvlink_latency_us : float
        One-way latency of a network hop and of an NVLink hop.
    oversubscription : float
        >= 1. Edge-to-aggregation and aggregation-to-core links carry ``link_gbps / oversubscription``, so
        each edge switch has ``oversubscription`` times more host-facing than uplink capacity (the
        aggregation tier stays 1:1).

    Returns
    -------
    networkx.Graph
        With the attributes of :mod:`topologies.schema`; graph attributes add ``k``.

    Raises
    ------
    TopologyError
        Odd or too small ``k``, non-positive capacities, ``oversubscription < 1``, or ``num_gpus`` larger
        than ``k**3/4``.

    References
    ----------
    .. [1] M. Al-Fares, A. Loukissas, A. Vahdat, "A Scalable, Commodity Data Center Network Architecture",
       SIGCOMM 2008.

    Examples
    --------
    >>> g = fat_tree(4, gpus_per_server=4)
    >>> g.graph["num_gpus"], sum(1 for _, d in g.nodes(data=True) if d["kind"] == "core")
    (16, 4)
    """
    where = "fat_tree"
    common = check_common(where, gpus_per_server, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us,
                          oversubscription)
    gps = common["gpus_per_server"]
    if k is None:
        num_gpus = check_num_gpus(where, DEFAULT_NUM_GPUS if num_gpus is None else num_gpus)
        k = smallest_k(num_gpus)
    else:
        k = check_int("k", k, 2, where)
        if k % 2:
            raise TopologyError(f"{where}: k must be even, got k={k}")
        check_size(where, 0, 5 * k * k // 4, 0, f"k={k}")  # the switches alone, before sizing from k**3
        hosts = k**3 // 4
        if num_gpus is None:
            num_gpus = hosts // gps * gps or hosts  # whole servers when at least one fits
        num_gpus = check_num_gpus(where, num_gpus)
        if num_gpus > hosts:
            raise TopologyError(f"{where} with k={k} holds {hosts} GPUs, fewer than num_gpus={num_gpus}")
    half = k // 2
    servers = -(-num_gpus // gps) if gps > 1 else 0
    check_size(where, num_gpus, num_gpus + servers + 5 * half * k // 2, num_gpus * (2 if gps > 1 else 1) + 2 * k * half * half,
               f"k={k}, num_gpus={num_gpus}")
    graph = new_graph(where, num_gpus, dict(k=k, **common))
    add_servers(graph, num_gpus, gps, common["nvlink_gbps"], common["nvlink_latency_us"])
    up_gbps = common["link_gbps"] / common["oversubscription"]
    lat = common["latency_us"]
    for pod in range(k):
        for j in range(half):
            graph.add_node(f"leaf{pod * half + j}", kind="leaf", pod=pod)
            graph.add_node(f"spine{pod * half + j}", kind="spine", pod=pod)
    for group in range(half):
        for i in range(half):
            graph.add_node(f"core{group * half + i}", kind="core", group=group)
    for slot in range(num_gpus):
        graph.add_edge(gpu_name(slot), f"leaf{slot // half}", kind="access",
                       capacity_gbps=common["link_gbps"], latency_us=lat)
    for pod in range(k):
        for j in range(half):
            for a in range(half):
                graph.add_edge(f"leaf{pod * half + j}", f"spine{pod * half + a}", kind="leaf-spine",
                               capacity_gbps=up_gbps, latency_us=lat)
        for group in range(half):
            for i in range(half):
                graph.add_edge(f"spine{pod * half + group}", f"core{group * half + i}", kind="spine-core",
                               capacity_gbps=up_gbps, latency_us=lat)
    return graph


__all__ = ["fat_tree", "smallest_k"]
