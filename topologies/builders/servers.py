"""What every builder shares: argument checks, the servers (GPUs + NVSwitch), the graph attributes."""

from __future__ import annotations

import math

import networkx as nx

from topologies.errors import TopologyError
from topologies.schema import gpu_name

#: GPUs built when neither ``num_gpus`` nor a shape is given.
DEFAULT_NUM_GPUS = 128
#: Size limits of a topology, checked before anything is built (docs/limits.md): a fat-tree of 65,536 GPUs
#: (k=64) builds in ~4 s and ~250 MB; routing and replay need several times that.
MAX_GPUS = 65_536
MAX_NODES = 250_000
MAX_LINKS = 1_000_000


def check_int(name: str, value, minimum: int = 1, where: str = "topology") -> int:
    """``value`` as an int >= ``minimum``, or a TopologyError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{where}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise TopologyError(f"{where}: {name} must be >= {minimum}, got {value}")
    return value


def check_float(name: str, value, minimum: float = 0.0, strict: bool = True, where: str = "topology") -> float:
    """``value`` as a finite float > ``minimum`` (>= when not ``strict``), or a TopologyError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TopologyError(f"{where}: {name} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        raise TopologyError(f"{where}: {name} must be {'>' if strict else '>='} {minimum:g}, got {value:g}")
    return float(value)


def check_common(where: str, gpus_per_server, link_gbps, nvlink_gbps, latency_us, nvlink_latency_us,
                 oversubscription) -> dict:
    """Check the parameters every builder takes; return them normalised."""
    return dict(
        gpus_per_server=check_int("gpus_per_server", gpus_per_server, 1, where),
        link_gbps=check_float("link_gbps", link_gbps, 0.0, True, where),
        nvlink_gbps=check_float("nvlink_gbps", nvlink_gbps, 0.0, True, where),
        latency_us=check_float("latency_us", latency_us, 0.0, False, where),
        nvlink_latency_us=check_float("nvlink_latency_us", nvlink_latency_us, 0.0, False, where),
        oversubscription=check_float("oversubscription", oversubscription, 1.0, False, where),
    )


def check_num_gpus(where: str, num_gpus) -> int:
    """``num_gpus`` checked: a positive int up to :data:`MAX_GPUS` (the last server may be partly filled)."""
    num_gpus = check_int("num_gpus", num_gpus, 1, where)
    if num_gpus > MAX_GPUS:
        raise TopologyError(f"{where}: num_gpus={num_gpus} is above the limit of {MAX_GPUS:,} GPUs per topology "
                            "(docs/limits.md)")
    return num_gpus


def check_size(where: str, gpus: int, nodes: int, links: int, shape: str) -> None:
    """Refuse a topology larger than the limits before it is built.

    Parameters
    ----------
    where : str
        Preset name or file, for the message.
    gpus, nodes, links : int
        What the shape would build (Python ints: no overflow however large the parameters).
    shape : str
        The parameters that give that size, for the message (``"k=1000"``).

    Raises
    ------
    TopologyError
        Naming the count over its limit.

    Examples
    --------
    >>> check_size("fat_tree", 16, 36, 48, "k=4")
    >>> check_size("fat_tree", 32, 1_250_000_000_032, 2 * 10**8, "k=1000000")
    Traceback (most recent call last):
    ...
    topologies.errors.TopologyError: fat_tree with k=1000000 would have 1,250,000,000,032 nodes, above the limit of 250,000 (docs/limits.md)
    """
    for what, count, limit in (("GPUs", gpus, MAX_GPUS), ("nodes", nodes, MAX_NODES), ("links", links, MAX_LINKS)):
        if count > limit:
            raise TopologyError(f"{where} with {shape} would have {count:,} {what}, above the limit of {limit:,} "
                                "(docs/limits.md)")


def too_small(where: str, capacity: int, num_gpus: int, shape: str) -> TopologyError:
    """The error for a fabric that cannot hold the requested GPUs."""
    return TopologyError(f"{where} with {shape} holds {capacity} GPUs, fewer than num_gpus={num_gpus}")


def new_graph(name: str, num_gpus: int, params: dict) -> nx.Graph:
    """An empty graph with the SPEC graph attributes: ``name``, ``preset``, ``num_gpus`` and ``params``."""
    graph = nx.Graph()
    graph.graph.update(name=name, preset=name, num_gpus=num_gpus, **params)
    return graph


def add_servers(graph: nx.Graph, num_gpus: int, gpus_per_server: int, nvlink_gbps: float,
                nvlink_latency_us: float) -> None:
    """Add GPUs ``gpu0..`` grouped in servers, each server's GPUs joined by one NVSwitch node ``nvs{s}``.

    GPU ``i`` is on server ``i // gpus_per_server`` with ``local_rank = i % gpus_per_server``; when
    ``num_gpus`` is not a multiple, the last server holds the remainder. With one GPU per server there is
    no NVLink domain and no NVSwitch node.
    """
    for slot in range(num_gpus):
        server, local = divmod(slot, gpus_per_server)
        graph.add_node(gpu_name(slot), kind="gpu", server=server, local_rank=local)
    if gpus_per_server == 1:
        return
    for slot in range(num_gpus):
        server = slot // gpus_per_server
        graph.add_node(f"nvs{server}", kind="nvswitch", server=server)
        graph.add_edge(gpu_name(slot), f"nvs{server}", kind="nvlink", capacity_gbps=nvlink_gbps,
                       latency_us=nvlink_latency_us)


__all__ = [
    "DEFAULT_NUM_GPUS",
    "add_servers",
    "check_common",
    "check_float",
    "check_int",
    "check_num_gpus",
    "new_graph",
    "too_small",
]
