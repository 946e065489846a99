"""Rail fabrics: rail-optimized (DGX SuperPOD) and rail-only (no spine between rails)."""

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

#: Servers per scalable unit in the DGX H100 SuperPOD reference architecture.
SUPERPOD_SERVERS_PER_UNIT = 32


def rail_switch(unit: int, rail: int) -> str:
    """Name of the rail switch of rail ``rail`` in scalable unit ``unit``.

    Examples
    --------
    >>> rail_switch(1, 3)
    'su1_rail3'
    """
    return f"su{unit}_rail{rail}"


def rail_optimized(
    num_gpus: int | None = None,
    *,
    gpus_per_server: int = 8,
    servers_per_unit: int | None = None,
    num_units: int | None = None,
    num_spines: int | None = None,
    link_gbps: float = DEFAULT_LINK_GBPS,
    nvlink_gbps: float = DEFAULT_NVLINK_GBPS,
    latency_us: float = DEFAULT_LATENCY_US,
    nvlink_latency_us: float = DEFAULT_NVLINK_LATENCY_US,
    oversubscription: float = 1.0,
) -> nx.Graph:
    """A rail-optimized fabric: GPU ``local_rank`` r of every server of a scalable unit joins rail switch r.

    Servers are grouped into scalable units (SU) of ``servers_per_unit``; each SU has one rail switch per
    local rank (kind ``rail``, named ``su{u}_rail{r}``), and every rail switch of every SU joins every
    spine (kind ``spine``), so the spine tier connects both the rails and the units. Same-rail traffic
    inside an SU crosses one switch; anything else crosses rail - spine - rail (or takes NVLink to the
    right rail first with NCCL's PXN, ``Router(..., pxn=True)``).

    Parameters
    ----------
    num_gpus : int, optional
        GPUs (the last server may be partial). Default: ``num_units * servers_per_unit *
        gpus_per_server`` when both are given, else 128.
    gpus_per_server : int
        GPUs per server; also the number of rails.
    servers_per_unit : int, optional
        Servers per SU (rail-switch host ports). Default: 32 as in the DGX SuperPOD, or fewer when the
        job has fewer servers.
    num_units : int, optional
        Scalable units. Default: just enough for ``num_gpus``.
    num_spines : int, optional
        Spine switches. Default ``ceil(servers_per_unit / oversubscription)``: one ``link_gbps`` uplink
        from every rail switch to every spine at 1:1.
    link_gbps, nvlink_gbps, latency_us, nvlink_latency_us : float
        As in :func:`topologies.fat_tree`.
    oversubscription : float
        >= 1: host-facing to uplink capacity per rail switch. Each rail-spine link carries
        ``servers_per_unit * link_gbps / (oversubscription * num_spines)``.

    Returns
    -------
    networkx.Graph
        Kinds ``gpu``, ``nvswitch``, ``rail``, ``spine``; graph attributes add ``servers_per_unit``,
        ``num_units``, ``num_spines``, ``num_rails``.

    Raises
    ------
    TopologyError
        Bad parameters or fewer GPU slots than ``num_gpus``.

    References
    ----------
    .. [1] NVIDIA, "NVIDIA DGX SuperPOD Reference Architecture, featuring NVIDIA DGX H100 systems", 2023:
       rail-optimized InfiniBand compute fabric built from scalable units of 32 DGX H100.
    .. [2] NVIDIA, "Doubling all2all Performance with NVIDIA Collective Communication Library 2.12"
       (PXN), NVIDIA Technical Blog, 2022.

    Examples
    --------
    >>> g = rail_optimized(64)
    >>> sorted({d["rail"] for _, d in g.nodes(data=True) if d["kind"] == "rail"})
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    return _rail_fabric("rail_optimized", True, num_gpus, gpus_per_server, servers_per_unit, num_units,
                        num_spines, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us, oversubscription)


def rail_only(
    num_gpus: int | None = None,
    *,
    gpus_per_server: int = 8,
    servers_per_unit: int | None = None,
    num_units: int | None = None,
    num_spines: int | None = None,
    link_gbps: float = DEFAULT_LINK_GBPS,
    nvlink_gbps: float = DEFAULT_NVLINK_GBPS,
    latency_us: float = DEFAULT_LATENCY_US,
    nvlink_latency_us: float = DEFAULT_NVLINK_LATENCY_US,
    oversubscription: float = 1.0,
) -> nx.Graph:
    """A rail-only fabric: the rails of a rail-optimized fabric with no spine between rails.

    As :func:`rail_optimized`, but rail r of every SU joins only the spines of its own rail (named
    ``rail{r}_spine{j}``, attribute ``rail``), and with a single SU there are no spines at all. Each rail is
    an independent network; traffic between GPUs on different rails crosses the NVLink domain of the source
    (or destination) server to reach the right rail, as proposed for LLM training by Wang et al.

    Parameters
    ----------
    num_gpus, gpus_per_server, servers_per_unit, num_units, link_gbps, nvlink_gbps, latency_us, \
nvlink_latency_us, oversubscription
        As in :func:`rail_optimized`.
    num_spines : int, optional
        Spines *per rail* when there is more than one SU. Default ``ceil(servers_per_unit /
        oversubscription)``.

    Returns
    -------
    networkx.Graph
        Kinds ``gpu``, ``nvswitch``, ``rail`` and (several SUs) ``spine``.

    Raises
    ------
    TopologyError
        Bad parameters or fewer GPU slots than ``num_gpus``.

    References
    ----------
    .. [1] W. Wang, M. Ghobadi, K. Shakeri, Y. Zhang, N. Hasani, "Rail-only: A Low-Cost High-Performance
       Network for Training LLMs with Trillion Parameters", IEEE Hot Interconnects 2024 (arXiv:2307.12169).

    Examples
    --------
    >>> g = rail_only(64)
    >>> sum(1 for _, d in g.nodes(data=True) if d["kind"] == "spine")
    0
    """
    return _rail_fabric("rail_only", False, num_gpus, gpus_per_server, servers_per_unit, num_units,
                        num_spines, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us, oversubscription)


def _rail_fabric(where, shared_spines, num_gpus, gpus_per_server, servers_per_unit, num_units, num_spines,
                 link_gbps, nvlink_gbps, latency_us, nvlink_latency_us, oversubscription) -> nx.Graph:
    common = check_common(where, gpus_per_server, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us,
                          oversubscription)
    gps, over = common["gpus_per_server"], common["oversubscription"]
    if servers_per_unit is not None:
        servers_per_unit = check_int("servers_per_unit", servers_per_unit, 1, where)
    if num_units is not None:
        num_units = check_int("num_units", num_units, 1, where)
    if num_gpus is None:
        if servers_per_unit is not None and num_units is not None:
            num_gpus = servers_per_unit * num_units * gps
        else:
            num_gpus = DEFAULT_NUM_GPUS
    num_gpus = check_num_gpus(where, num_gpus)
    servers = math.ceil(num_gpus / gps)
    if servers_per_unit is None:
        per_unit = SUPERPOD_SERVERS_PER_UNIT if num_units is None else math.ceil(servers / num_units)
        servers_per_unit = min(per_unit, servers)
    if num_units is None:
        num_units = math.ceil(servers / servers_per_unit)
    if servers > num_units * servers_per_unit:
        raise TopologyError(f"{where} with {num_units} units of {servers_per_unit} servers x {gps} GPUs holds "
                            f"{num_units * servers_per_unit * gps} GPUs, fewer than num_gpus={num_gpus}")
    has_spines = shared_spines or num_units > 1
    if num_spines is None:
        num_spines = math.ceil(servers_per_unit / over)
    num_spines = check_int("num_spines", num_spines, 1, where)
    spines = (num_spines if shared_spines else num_spines * gps) if has_spines else 0
    check_size(where, num_gpus, num_gpus + (servers if gps > 1 else 0) + num_units * gps + spines,
               num_gpus * (2 if gps > 1 else 1) + (num_units * gps * num_spines if has_spines else 0),
               f"{num_units} units, {num_spines} spines, num_gpus={num_gpus}")
    params = dict(servers_per_unit=servers_per_unit, num_units=num_units, num_rails=gps,
                  num_spines=num_spines if has_spines else 0, **common)
    graph = new_graph(where, num_gpus, params)
    add_servers(graph, num_gpus, gps, common["nvlink_gbps"], common["nvlink_latency_us"])
    lat = common["latency_us"]
    for unit in range(num_units):
        for rail in range(gps):
            graph.add_node(rail_switch(unit, rail), kind="rail", unit=unit, rail=rail)
    for slot in range(num_gpus):
        server, rail = divmod(slot, gps)
        graph.add_edge(gpu_name(slot), rail_switch(server // servers_per_unit, rail), kind="access",
                       capacity_gbps=common["link_gbps"], latency_us=lat)
    if not has_spines:
        return graph
    up_gbps = servers_per_unit * common["link_gbps"] / (over * num_spines)
    for rail in range(gps):
        for j in range(num_spines):
            spine = f"spine{j}" if shared_spines else f"rail{rail}_spine{j}"
            if shared_spines:
                graph.add_node(spine, kind="spine")
            else:
                graph.add_node(spine, kind="spine", rail=rail)
            for unit in range(num_units):
                graph.add_edge(rail_switch(unit, rail), spine, kind="rail-spine", capacity_gbps=up_gbps,
                               latency_us=lat)
    return graph


__all__ = ["SUPERPOD_SERVERS_PER_UNIT", "rail_only", "rail_optimized", "rail_switch"]
