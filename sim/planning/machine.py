"""The machine a communicator runs on, read from a SPEC §4 topology: the server of each rank and the
:class:`~sim.planning.cost_model.CostModel` NCCL's tuner would see there (link rates, hardware presets,
``NCCL_ALGO`` / ``NCCL_PROTO`` graph attributes, NVLink SHARP)."""

from __future__ import annotations

import numpy as np

from sim.errors import SimError
from sim.planning import tuning
from sim.planning.nccl_tables import NVLS_ARCHS

__all__ = ["graph_cost_model", "graph_machine", "has_nvswitch"]

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
    graph attributes ``nccl_algo`` / ``nccl_proto`` (``NCCL_ALGO`` / ``NCCL_PROTO`` syntax) restrict the
    tuner. NVLS is enabled when every GPU hangs off an NVSwitch (``nvswitch``) and the GPU generation
    has NVLink SHARP (sm90+: the ``gpu=`` preset's arch, Hopper without a preset), as NCCL's NVLS search
    requires.

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
    return tuning.CostModel(
        # the tuner sees the bandwidth NCCL's topology search credits (line rate x efficiency)
        intra_bw_bytes_per_s=intra * nv_eff, inter_bw_bytes_per_s=inter * nic_eff,
        nvlink_efficiency=nv_eff, nic_efficiency=nic_eff, protocol_overhead=bool(hw),
        net_latency_us=float(hw.get("net_latency_us", 0.0)),
        arch={"blackwell": "hopper"}.get(arch, arch), nvls=bool(nvswitch) and arch in NVLS_ARCHS,
        algos=tuning.parse_nccl_list(attrs.get("nccl_algo"), "algo"),
        protos=tuning.parse_nccl_list(attrs.get("nccl_proto"), "proto") or _hardware_protos(attrs))


def _hardware_protos(attrs) -> tuple[str, ...] | None:
    # a transport that allows only some protocols (topologies.hardware: EFA, TCPXO run Simple only)
    protos = (attrs.get("hardware") or {}).get("protos")
    return tuple(protos) if protos else None


