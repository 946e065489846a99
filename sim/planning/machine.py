"""The machine a communicator runs on, read from a SPEC §4 topology: the server of each rank and the
:class:`~sim.planning.cost_model.CostModel` NCCL's tuner would see there (link rates, hardware presets,
``NCCL_ALGO`` / ``NCCL_PROTO`` graph attributes, NVLink SHARP)."""

from __future__ import annotations

import numpy as np

from sim.errors import SimError
from sim.planning import p2p, tuning
from sim.planning.nccl_tables import (
    NVLS_ARCHS,
    RING_SEARCH_MAX_CHANNELS,
    SM90_SPEED_ARRAY_INTRA,
    SPEED_ARRAY_INTRA,
)

__all__ = ["graph_cost_model", "graph_machine", "graph_nccl_version", "has_nvswitch", "ring_search_intra"]

_I64 = np.int64


def has_nvswitch(graph, node: str) -> bool:
    """Whether GPU ``node`` reaches an NVSwitch over one NVLink (the NVLS data path needs one).

    Examples
    --------
    >>> import networkx as nx
    >>> g = nx.Graph()
    >>> g.add_node("gpu0", kind="gpu"); g.add_node("nvs0", kind="nvswitch")
    >>> g.add_edge("gpu0", "nvs0", kind="nvlink")
    >>> has_nvswitch(g, "gpu0")
    True
    """
    return any(graph.nodes[v].get("kind") == "nvswitch" for v in graph.neighbors(node))


def ring_search_intra(total_gbs: float, arch: str) -> tuple[int, float]:
    """(channels, GB/s per channel) of the ring NCCL's topology search finds inside one NVSwitch server.

    ``search.cc`` (v2.23.4-1), for a GPU whose NVLinks carry ``total_gbs`` (NCCL's credit, e.g. 18 x 20.6
    on H100): pass 1 tries the speeds of ``speedArrayIntra`` (``sm90SpeedArrayIntra`` on Hopper and later)
    from the fastest, each giving ``floor(total / speed)`` channels (at most 16), keeps the best
    ``channels x speed`` and stops once the next speed is at most 0.49 of the best one's or the total is
    reached; ``ncclTopoDupChannels`` then doubles the channels and halves the speed when the speed is at
    least 25 GB/s (on sm90, not when it is below 50 with more than 4 channels); pass 2 raises the speed
    while the channels still fit.

    Examples
    --------
    >>> ring_search_intra(18 * 20.6, "hopper")
    (12, 30.0)
    >>> ring_search_intra(12 * 20.0, "ampere")
    (12, 20.0)
    """
    speeds = SM90_SPEED_ARRAY_INTRA if arch in NVLS_ARCHS else SPEED_ARRAY_INTRA
    best_n, best_s = 0, 0.0
    for i, speed in enumerate(speeds):
        if speed > total_gbs:
            continue
        n = min(RING_SEARCH_MAX_CHANNELS, int(total_gbs // speed + 1e-9))
        if n * speed > best_n * best_s:
            best_n, best_s = n, speed
        if best_n * best_s >= total_gbs - 1e-9:
            break
        if i + 1 < len(speeds) and speeds[i + 1] / best_s <= 0.49:
            break
    if best_n == 0:
        return 1, float(total_gbs)
    n, speed = best_n, best_s
    sm90 = arch in NVLS_ARCHS
    if speed >= 25.0 and not (sm90 and speed < 50.0 and n > 4):
        dup = min(2 * n, RING_SEARCH_MAX_CHANNELS)
        speed /= -(-dup // n)
        n = dup
    for faster in sorted(s for s in speeds if s > speed):
        if n * faster > total_gbs + 1e-9:
            break
        speed = faster
    return n, float(speed)


def graph_machine(graph, ranks) -> tuple[np.ndarray, tuning.CostModel]:
    """Servers of the ranks and the cost model (per-GPU NVLink / network rates) of a SPEC §4 topology.

    Raises
    ------
    SimError
        A rank with no ``gpu{rank}`` node.
    """
    ranks = np.asarray(ranks, dtype=_I64).reshape(-1)
    servers = []
    nvswitch = True
    for r in ranks:
        node = f"gpu{int(r)}"
        if node not in graph:
            raise SimError(f"topology {graph.graph.get('name', '')!r} has no node {node} for rank {int(r)}")
        servers.append(int(graph.nodes[node].get("server", int(r))))
        nvswitch = nvswitch and has_nvswitch(graph, node)
    intra = inter = 0.0
    node = f"gpu{int(ranks[0])}"
    for _, _, data in graph.edges(node, data=True):
        gbps = float(data.get("capacity_gbps", 0.0))
        if data.get("kind") == "nvlink":
            intra += gbps
        else:
            inter += gbps
    return np.array(servers, dtype=_I64), graph_cost_model(graph, intra, inter, nvswitch=nvswitch)


def graph_cost_model(graph, intra_gbps: float = 0.0, inter_gbps: float = 0.0, *,
                     nvswitch: bool = False) -> tuning.CostModel:
    """The :class:`~sim.planning.tuning.CostModel` of a topology's GPUs.

    Link rates come from the caller (per-GPU NVLink and network Gb/s; 0 keeps the H100 defaults); the
    graph attributes ``nccl_algo`` / ``nccl_proto`` (``NCCL_ALGO`` / ``NCCL_PROTO`` syntax, set by
    ``simrun bench --algo/--proto``), else the fabric's NCCL environment (``topologies.hardware``),
    restrict the tuner. NVLS is enabled when every GPU hangs off an NVSwitch (``nvswitch``), the GPU
    generation has NVLink SHARP (sm90+: the ``gpu=`` preset's arch, Hopper without a preset), as NCCL's
    NVLS search requires, and the fabric does not say ``nvls=off`` (``NCCL_NVLS_ENABLE=0``). With
    ``nccl_max_nchannels`` (``NCCL_MAX_NCHANNELS``) NVLink carries at most that many channels of the
    per-channel speed of NCCL's ring search (:func:`ring_search_intra`): the NVLink efficiency drops to
    ``min(1, channels x speed / NCCL's credit)`` of its value (every NVLink transfer of the
    communicator; the network side is not capped).

    Examples
    --------
    >>> import networkx as nx
    >>> g = nx.Graph(nccl_proto="Simple")
    >>> graph_cost_model(g, 3600, 400).protos
    ('Simple',)
    """
    default = tuning.CostModel()
    attrs = graph.graph
    hw = attrs.get("hardware") or {}
    nv_eff, nic_eff = float(hw.get("nvlink_efficiency", 1.0)), float(hw.get("nic_efficiency", 1.0))
    arch = str(hw.get("arch", "hopper"))
    intra = intra_gbps * 1e9 / 8 if intra_gbps > 0 else default.intra_bw_bytes_per_s
    inter = inter_gbps * 1e9 / 8 if inter_gbps > 0 else default.inter_bw_bytes_per_s
    if hw.get("nccl_max_nchannels"):
        credit_gbs = intra * nv_eff / 1e9
        nch, speed = ring_search_intra(credit_gbs, arch)
        nch = min(nch, int(hw["nccl_max_nchannels"]))
        nv_eff *= min(1.0, nch * speed / credit_gbs)
    return tuning.CostModel(
        # the tuner sees the bandwidth NCCL's topology search credits (line rate x efficiency)
        intra_bw_bytes_per_s=intra * nv_eff, inter_bw_bytes_per_s=inter * nic_eff,
        nvlink_efficiency=nv_eff, nic_efficiency=nic_eff, protocol_overhead="gpu" in hw or "nic" in hw,
        net_latency_us=float(hw.get("net_latency_us", 0.0)),
        net_phys_latency_us=(float(hw["net_phys_latency_us"]) if "net_phys_latency_us" in hw else None),
        net_phys_simple_extra_us=float(hw.get("net_phys_simple_extra_us", 0.0)),
        net_tuner=hw.get("net_tuner"),
        nics_per_gpu=int(hw.get("nics_per_gpu", 1)),
        arch={"blackwell": "hopper"}.get(arch, arch),
        gpu_arch=arch if "gpu" in hw else None,
        # the tuner's tables are 2.23's unless the fabric names its library (topologies.hardware)
        nccl_version=p2p.parse_nccl_version(hw.get("nccl_version", "2.23"))[:2],
        nvls=bool(nvswitch) and arch in NVLS_ARCHS and bool(hw.get("nvls", True)),
        # NCCL_BUFFSIZE of the run's profile (topologies.hardware): the Simple step of trees and chains
        simple_buff_bytes=int(hw.get("nccl_buffsize", default.simple_buff_bytes)),
        algos=tuning.parse_nccl_list(attrs.get("nccl_algo") or hw.get("nccl_algo"), "algo"),
        protos=(tuning.parse_nccl_list(attrs.get("nccl_proto") or hw.get("nccl_proto"), "proto")
                or _hardware_protos(attrs)))


def graph_nccl_version(graph) -> tuple[int, int, int]:
    """The NCCL version a fabric runs (its ``nccl_version`` attribute, ``topologies.hardware``; default
    NCCL's current release, :data:`sim.planning.p2p.CURRENT_NCCL_VERSION`): it sets the p2p channels
    per network peer (:mod:`sim.planning.p2p`).

    Examples
    --------
    >>> import networkx as nx
    >>> graph_nccl_version(nx.Graph(hardware={"nccl_version": "2.23.4"})), graph_nccl_version(nx.Graph())
    ((2, 23, 4), (2, 29, 7))
    """
    hw = (graph.graph.get("hardware") or {}) if graph is not None else {}
    return p2p.parse_nccl_version(hw.get("nccl_version"))


def _hardware_protos(attrs) -> tuple[str, ...] | None:
    # a transport that allows only some protocols (topologies.hardware: EFA, TCPXO run Simple only)
    protos = (attrs.get("hardware") or {}).get("protos")
    return tuple(protos) if protos else None


