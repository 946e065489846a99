"""NCCL's algorithm bandwidth: busBw per algorithm and protocol, converted to algbw.

The bandwidth half of NCCL's cost model (``time = latency + bytes / bandwidth``):
:func:`algo_bandwidth_bytes_per_s` and the protocol/step helpers it shares with
:mod:`sim.planning.tuning` (:func:`proto_index`, :func:`nccl_steps`). Constants are NCCL 2.23's
(:mod:`sim.planning.nccl_tables`), NVLS also 2.28's; ``sim.planning.tuning`` re-exports
:func:`algo_bandwidth_bytes_per_s`.

References
----------
NVIDIA/nccl ``src/graph/tuning.cc`` (v2.23.4-1, v2.28.3-1).
"""

from __future__ import annotations

from sim.errors import SimError
from sim.planning.cost_model import DEFAULT_MODEL, CostModel
from sim.planning.nccl_tables import (
    LL_MAX_BW,
    LL_MAX_SINGLE,
    NVLS_ALGBW_RATIO,
    NVLS_EFFICIENCY_2_28,
    NVLS_TREE_MAX_PER_CH,
    PAT_BUS_FACTOR,
    PAT_BUS_FACTOR_2_24,
    PROTOS,
    RING_LL128_MAX_PER_CH,
    TREE_LL128_MAX_PER_CH,
    TREE_MAX_PER_CH,
    WIRE_BYTES_PER_PAYLOAD,
)
from sim.planning.search_channels import graph_channels, tree_pattern_factor

__all__ = ["algo_bandwidth_bytes_per_s", "nccl_steps", "proto_index", "tree_kernel_busbw", "tree_kernel_factor"]

_P = {p: i for i, p in enumerate(PROTOS)}


def proto_index(proto: str) -> int:
    """Index of a protocol in NCCL's tables (LL 0, LL128 1, Simple 2).

    Parameters
    ----------
    proto : str
        ``"LL"``, ``"LL128"`` or ``"Simple"``.

    Returns
    -------
    int
        The protocol's column in :mod:`sim.planning.nccl_tables`.

    Raises
    ------
    SimError
        Unknown protocol.

    Examples
    --------
    >>> proto_index("Simple")
    2
    """
    if proto not in _P:
        raise SimError(f"protocol {proto!r} is not one of: {', '.join(PROTOS)}")
    return _P[proto]


def _node_index(nnodes: int) -> int:
    return 0 if nnodes <= 1 else 1 if nnodes == 2 else 2


def nccl_steps(op: str, nranks: int, nnodes: int) -> tuple[int, int]:
    """NCCL's (nsteps, nInterSteps) of a ring collective (tuning.cc, 2.23).

    Parameters
    ----------
    op : str
        Collective name (``"AllReduce"``, ``"AllGather"``, ...).
    nranks, nnodes : int
        Ranks and servers of the communicator.

    Returns
    -------
    tuple of int
        Steps of the ring and how many of them cross the network.

    Examples
    --------
    >>> nccl_steps("AllReduce", 16, 2)
    (30, 2)
    """
    if op == "AllReduce":
        return 2 * (nranks - 1), (2 * (nnodes - 1) if nnodes > 1 else 0)
    if op in ("AllGather", "ReduceScatter"):
        return nranks - 1, nnodes - 1
    return nranks, nnodes


def _ring_busbw(model: CostModel, nnodes: int, ppn: float) -> float:
    # NCCL's busBw is nChannels x the graph's per-channel bandwidth. A multi-node ring's channels leave
    # each server from different GPUs, so together they use every NIC of the server (ppn NICs of the
    # per-GPU rate) and the search caps the per-channel speed at the network's (bwIntra = bwInter).
    if nnodes <= 1:
        return model.intra_bw_bytes_per_s
    return min(model.intra_bw_bytes_per_s, max(ppn, 1.0) * model.inter_bw_bytes_per_s)


def _tree_busbw(model: CostModel, nnodes: int, ppn: float) -> float:
    # Trees' channels also spread over the server's NICs; NCCL raises a tree's intra speed up to twice
    # the inter speed when it spans <= 2 nodes (each node talks to one peer node per tree).
    if nnodes <= 1:
        return model.intra_bw_bytes_per_s
    nic = max(ppn, 1.0) * model.inter_bw_bytes_per_s
    return min(model.intra_bw_bytes_per_s, (2.0 if nnodes == 2 else 1.0) * nic)


def _nvls_busbw(model: CostModel, nnodes: int, ppn: float) -> float:
    # NCCL's NVLS graph: one channel per head GPU; the search charges the head 2 units of NVLink and every
    # other GPU 1 in each direction, so nChannels x bw = NVLink x ppn / (ppn + 1) (the data path: a GPU's
    # link carries S / ppn for each head's reduction plus its own head's multicast). Across nodes each head
    # has its GPU's NIC; NVLSTree halves the network share beyond two nodes (interior tree nodes).
    intra = model.intra_bw_bytes_per_s * ppn / (ppn + 1.0)
    if nnodes <= 1:
        return intra
    inter = ppn * model.inter_bw_bytes_per_s * (1.0 if nnodes <= 2 else 0.5)
    return min(intra, inter)


def _nvls_algbw_2_28(op: str, algo: str, model: CostModel, nranks: int, nnodes: int, ppn: float) -> float:
    # NCCL 2.28's NVLS model (tuning.cc, v2.28.3-1): per NVLS channel (one per head) the search's intra
    # speed, here continuous as in _nvls_busbw (a head is charged 2 units, every other GPU 1), x the
    # generation's efficiency x (nCh - 1) / nCh, x 2 for AllReduce; NVLSTree also takes the head's NIC (x 2
    # on <= 2 nodes) and the kernel's per-channel ceiling; AllReduce converts as a ring (nRanks / nsteps).
    arch = model.gpu_arch or model.arch
    nch = max(ppn, 1.0)
    intra = model.intra_bw_bytes_per_s / (ppn + 1.0) * NVLS_EFFICIENCY_2_28.get(arch, 0.0) * (nch - 1) / nch
    intra *= 2.0 if op == "AllReduce" else (ppn - 1) / ppn
    bw = intra
    if algo == "nvls_tree":
        inter = model.inter_bw_bytes_per_s * (2.0 if nnodes <= 2 else 1.0)
        cap = NVLS_TREE_MAX_PER_CH.get(arch, (0.0, 0.0))[0 if nnodes <= 2 else 1] * 1e9
        bw = min(intra, inter, cap)
    bus = nch * bw
    return bus * nranks / (2.0 * (nranks - 1)) if op == "AllReduce" else bus


def algo_bandwidth_bytes_per_s(op: str, algo: str, proto: str, nranks: int, nnodes: int,
                               model: CostModel | None = None) -> float:
    """NCCL's algorithm bandwidth (bytes/s) before the size-dependent tree correction.

    busBw = per-GPU bandwidth with protocol efficiency and per-channel caps (scaled by the search's
    channel count, :func:`net_graph_channels`, across servers), the tree pattern's 0.85 where NCCL's
    search builds that pattern, then algbw = busBw × n/nsteps (ring), × 1/2 (tree), × 5/6 (NVLS,
    NVLSTree); PAT and NVLS AllGather/ReduceScatter keep busBw (PAT × 0.85). ``0`` means the
    combination is disabled (NVLS and PAT are Simple only).

    Examples
    --------
    Single-node ring AllReduce, Simple, 8 GPUs at 450 GB/s: 450 × 8/14 GB/s.

    >>> round(algo_bandwidth_bytes_per_s("AllReduce", "ring", "Simple", 8, 1) / 1e9, 2)
    257.14

    NVLS on the same node: 450 × 8/9 × 5/6 GB/s.

    >>> round(algo_bandwidth_bytes_per_s("AllReduce", "nvls", "Simple", 8, 1) / 1e9, 2)
    333.33

    Tree Simple on 10 x 8 H100s with 400 Gb/s NICs: 8 search channels x 36.0 GB/s (Hopper, > 2 nodes)
    caps the 0.92 x 400 GB/s, then the tree pattern's 0.85 and the tree's 1/2.

    >>> round(algo_bandwidth_bytes_per_s("AllReduce", "tree", "Simple", 80, 10) / 1e9, 2)
    122.4

    NVLSTree there as NCCL 2.28+ models it: 8 heads x min(370.8/9 x 0.85 x 7/8 x 2, 47, 45.5) x 80/158.

    >>> m = CostModel(intra_bw_bytes_per_s=370.8e9, inter_bw_bytes_per_s=47e9, nccl_version=(2, 29))
    >>> round(algo_bandwidth_bytes_per_s("AllReduce", "nvls_tree", "Simple", 80, 10, m) / 1e9, 2)
    184.3
    """
    model = model or DEFAULT_MODEL
    p = proto_index(proto)
    if proto == "LL128" and not model.ll128:
        return 0.0
    ni = _node_index(nnodes)
    ppn = nranks / max(nnodes, 1)
    nch = graph_channels(model, nnodes, ppn)
    arch = model.arch
    ll_max = (LL_MAX_SINGLE[arch] if ni == 0 else LL_MAX_BW[model.cpu][ni - 1]) * 1e9
    if algo == "ring":
        bus = _ring_busbw(model, nnodes, ppn)
        if p == 0:
            bus = min(ll_max, bus * 0.5)
        elif p == 1:
            bus = min(bus * 0.92, nch * RING_LL128_MAX_PER_CH[arch][ni] * 1e9)
        nsteps, _ = nccl_steps(op, nranks, nnodes)
        return bus * nranks / nsteps
    if algo == "tree":
        if op != "AllReduce":
            return 0.0
        return tree_kernel_busbw(model, proto, nnodes, ppn) * tree_pattern_factor(model, nnodes, ppn) * 0.5
    if algo in ("nvls", "nvls_tree"):
        if proto != "Simple":
            return 0.0
        if model.nccl_version >= (2, 28):
            return _nvls_algbw_2_28(op, algo, model, nranks, nnodes, ppn)
        bus = _nvls_busbw(model, nnodes, ppn)
        return bus * NVLS_ALGBW_RATIO if op == "AllReduce" else bus
    if algo == "pat":
        if proto != "Simple" or op not in ("AllGather", "ReduceScatter"):
            return 0.0
        return _tree_busbw(model, nnodes, ppn) * (PAT_BUS_FACTOR_2_24 if model.nccl_version >= (2, 24)
                                                  else PAT_BUS_FACTOR)
    raise SimError(f"algorithm {algo!r} has no NCCL bandwidth model (ring, tree, nvls, nvls_tree, pat)")


def tree_kernel_busbw(model: CostModel, proto: str, nnodes: int, ppn: float) -> float:
    """NCCL's bus bandwidth of a tree AllReduce before the tree pattern's factor (bytes/s).

    ``tuning.cc`` (v2.23.4-1, unchanged to v2.29): the tree graph's ``nChannels x bw``, then
    ``min(busBw x 0.92, nChannels x perChMaxTreeBw)`` for every protocol, then LL ``min(busBw / 3.8,
    llMaxBw)``, LL128 ``min(busBw x (7/9 on one node, else 120/128), nChannels x perChMaxTreeLL128Bw)``.

    Parameters
    ----------
    model : CostModel
        The cost model (rates, GPU generation, CPU vendor).
    proto : str
        ``"LL"``, ``"LL128"`` or ``"Simple"``.
    nnodes : int
        Servers of the communicator.
    ppn : float
        GPUs per server.

    Returns
    -------
    float
        Bus bandwidth, bytes/s.

    Examples
    --------
    Two servers of 8 A100s (NVLink 240 GB/s, 16 x 100 Gb/s NICs: 16 search channels): the NVLink graph x
    0.92; with 8 H100s and 8 NICs across 4+ servers the ceiling binds, 8 x 36.0 (Simple), 8 x 29.0 (LL128).

    >>> a100 = CostModel(arch="ampere", intra_bw_bytes_per_s=240e9, inter_bw_bytes_per_s=23.5e9, nics_per_gpu=2)
    >>> round(tree_kernel_busbw(a100, "Simple", 2, 8) / 1e9, 1)
    220.8
    >>> h100 = CostModel(intra_bw_bytes_per_s=370.8e9, inter_bw_bytes_per_s=47e9)
    >>> [round(tree_kernel_busbw(h100, p, 8, 8) / 1e9, 1) for p in ("Simple", "LL128")]
    [288.0, 232.0]
    """
    p = proto_index(proto)
    ni = _node_index(nnodes)
    nch = graph_channels(model, nnodes, ppn)
    arch = model.arch
    bus = min(_tree_busbw(model, nnodes, ppn) * 0.92, nch * TREE_MAX_PER_CH[arch][ni] * 1e9)
    if p == 0:
        ll_max = (LL_MAX_SINGLE[arch] if ni == 0 else LL_MAX_BW[model.cpu][ni - 1]) * 1e9
        return min(bus / 3.8, ll_max)
    if p == 1:
        return min(bus * (7 / 9 if nnodes <= 1 else 120 / 128), nch * TREE_LL128_MAX_PER_CH[arch][ni] * 1e9)
    return bus


def tree_kernel_factor(model: CostModel, proto: str, nranks: int, nnodes: int) -> float:
    """Factor (>= 1) on a tree plan's bytes: the tree kernel's efficiency, which the flows do not have.

    A tree plan moves its payload at the links' rate less the protocol's own lines (LL 8 of 16 bytes,
    LL128 120 of 128: :data:`~sim.planning.nccl_tables.WIRE_BYTES_PER_PAYLOAD`), i.e. at the tree
    graph's bandwidth x that fraction. NCCL's tree kernel delivers :func:`tree_kernel_busbw`: 0.92 of the
    graph (every protocol), LL a further 1/3.8 where the lines give 1/2, and per-channel ceilings
    (``perChMaxTreeBw``, ``perChMaxTreeLL128Bw``). The ratio is a property of the kernel, as the
    NVLSTree ceiling is (:func:`sim.planning.nvls.nvls_tree_kernel_factor`), so every leg of the plan
    carries it. The tree pattern's 0.85 is not in it: it describes the graph (a channel's network traffic
    through one GPU), which the plan builds itself. 1 without ``model.protocol_overhead`` (no hardware
    preset: the closed forms stay exact) or with fewer than two ranks.

    Parameters
    ----------
    model : CostModel
        The cost model.
    proto : str
        The tree's protocol.
    nranks, nnodes : int
        Ranks and servers of the communicator.

    Returns
    -------
    float
        Multiplier of the tree plan's bytes.

    Examples
    --------
    >>> a100 = CostModel(arch="ampere", intra_bw_bytes_per_s=240e9, inter_bw_bytes_per_s=23.5e9,
    ...                  nics_per_gpu=2, protocol_overhead=True)
    >>> round(tree_kernel_factor(a100, "Simple", 16, 2), 4), tree_kernel_factor(CostModel(), "Simple", 16, 2)
    (1.087, 1.0)
    """
    if not model.protocol_overhead or nranks < 2:
        return 1.0
    ppn = nranks / max(nnodes, 1)
    plan_bus = _tree_busbw(model, nnodes, ppn) / WIRE_BYTES_PER_PAYLOAD[PROTOS[proto_index(proto)]]
    return max(1.0, plan_bus / tree_kernel_busbw(model, proto, nnodes, ppn))
