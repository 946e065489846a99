"""NCCL's cost model: algorithm/protocol choice and the per-step software latencies of plans.

Pure functions over a :class:`~sim.planning.cost_model.CostModel`:

1. ``choose_algorithm`` picks (algorithm, protocol) for ``algo="auto"`` the way NCCL's tuner does: it
   predicts ``time = latency + bytes / bandwidth`` for every enabled candidate
   (:func:`~sim.planning.cost_model.enabled_algos`) and takes the fastest.
2. ``ring_step_latency_s``, ``tree_hop_latency_s``, ``p2p_latency_s`` and ``algo_latency_s`` give the
   software latency a plan charges (``TransferPlan.delay_s``); ``wire_factor`` the bytes it puts on a link.

The constants are NCCL 2.23's (:mod:`sim.planning.nccl_tables`). This module also re-exports the names
that lived here before the split (the cost model, chunking and the closed forms), so
``sim.planning.tuning.X`` keeps working for every public ``X``.

References
----------
NVIDIA/nccl ``src/graph/tuning.cc``, ``src/enqueue.cc`` (v2.23.4-1).
"""

from __future__ import annotations

import math

from sim.errors import SimError
from sim.planning.chunking import (
    DEFAULT_MAX_CHANNELS,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_MAX_PIPELINE_TRANSFERS,
    DEFAULT_MAX_TRANSFERS,
    channels_for,
    chunk_unit_bytes,
    chunks_for,
    nccl_chunk_bytes,
    nvls_chunk_bytes,
    pipeline_chunks,
)
from sim.planning.closed_forms import (
    algbw_bytes_per_s,
    busbw_bytes_per_s,
    busbw_factor,
    ideal_time_s,
    nccltests_bytes,
)
from sim.planning.cost_model import (
    DEFAULT_MODEL,
    CostModel,
    enabled_algos,
    nccl_nbytes,
    parse_nccl_list,
    supported_algos,
)
from sim.planning.nccl_tables import (
    ALGOS,
    ARCHS,
    BASE_LAT_US,
    HW_LAT_US,
    LL_MAX_BW,
    LL_MAX_SINGLE,
    NVLS_ALGBW_RATIO,
    NVLS_EFFICIENCY_2_28,
    NVLS_TREE_MAX_PER_CH,
    NVLS_TREE_NET_LAT_US_2_29,
    P2P_LL_THRESHOLD_BYTES,
    PAT_BUS_FACTOR,
    PAT_BUS_FACTOR_2_24,
    PAT_LAT_BASE_US,
    PAT_LAT_PER_RANK_US,
    PAT_LOG_LAT_DIVISOR,
    PROTOS,
    RING_LL128_MAX_PER_CH,
    TREE_CORRECTION,
    TREE_LL128_MAX_PER_CH,
    TREE_MAX_PER_CH,
)
from sim.planning.net_tuner import net_tuner_choice
from sim.planning.plan_latency import p2p_latency_s, tree_base_latency_s, tree_hop_latency_s, wire_factor
from sim.planning.search_channels import graph_channels, net_graph_channels, tree_pattern_factor

__all__ = [
    "ALGOS",
    "ARCHS",
    "PROTOS",
    "CostModel",
    "DEFAULT_MAX_CHANNELS",
    "DEFAULT_MAX_CHUNKS",
    "DEFAULT_MAX_PIPELINE_TRANSFERS",
    "DEFAULT_MAX_TRANSFERS",
    "algbw_bytes_per_s",
    "algo_bandwidth_bytes_per_s",
    "algo_latency_s",
    "busbw_bytes_per_s",
    "busbw_factor",
    "channels_for",
    "choose_algorithm",
    "chunk_unit_bytes",
    "chunks_for",
    "enabled_algos",
    "ideal_time_s",
    "nccl_chunk_bytes",
    "nccl_nbytes",
    "nccltests_bytes",
    "net_graph_channels",
    "nvls_chunk_bytes",
    "p2p_latency_s",
    "parse_nccl_list",
    "pipeline_chunks",
    "predict_time_s",
    "ring_step_latency_s",
    "supported_algos",
    "tree_base_latency_s",
    "tree_hop_latency_s",
    "wire_factor",
]

_P = {p: i for i, p in enumerate(PROTOS)}


def _check_proto(proto: str) -> int:
    if proto not in _P:
        raise SimError(f"protocol {proto!r} is not one of: {', '.join(PROTOS)}")
    return _P[proto]


def _node_index(nnodes: int) -> int:
    return 0 if nnodes <= 1 else 1 if nnodes == 2 else 2


def _nccl_steps(op: str, nranks: int, nnodes: int) -> tuple[int, int]:
    """NCCL's (nsteps, nInterSteps) of a ring collective (tuning.cc, 2.23)."""
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
    p = _check_proto(proto)
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
        nsteps, _ = _nccl_steps(op, nranks, nnodes)
        return bus * nranks / nsteps
    if algo == "tree":
        if op != "AllReduce":
            return 0.0
        bus = min(_tree_busbw(model, nnodes, ppn) * 0.92, nch * TREE_MAX_PER_CH[arch][ni] * 1e9)
        if p == 0:
            bus = min(bus / 3.8, ll_max)
        elif p == 1:
            bus = min(bus * (7 / 9 if nnodes <= 1 else 120 / 128), nch * TREE_LL128_MAX_PER_CH[arch][ni] * 1e9)
        return bus * tree_pattern_factor(model, nnodes, ppn) * 0.5
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


def _inter_latency_us(algo: str, p: int, nranks: int, nnodes: int, model: CostModel,
                      physical: bool = False) -> float:
    # with one GPU per node the latencies are fully exposed: NCCL charges the tree's network latency;
    # then the net plugin's reported latency, once more for Simple's flush (tuning.cc 2.23), or, for a
    # plan, the transport's physical latency (CostModel.net_step_latency_us)
    one_ppn = nnodes > 1 and nranks == nnodes
    inter = HW_LAT_US["net"]["tree" if one_ppn else algo][p]
    if algo == "nvls_tree" and not one_ppn and model.nccl_version >= (2, 29):
        inter = NVLS_TREE_NET_LAT_US_2_29
    return inter + model.net_step_latency_us(PROTOS[p], physical)


def algo_latency_s(op: str, algo: str, proto: str, nranks: int, nnodes: int,
                   model: CostModel | None = None, physical: bool = False) -> float:
    """NCCL's latency of one collective (seconds): base + per-step hardware latencies.

    ``physical=True`` gives the latency a plan pays: the network steps add the transport's physical
    latency instead of the one the net plugin reports to NCCL's tuner (they differ on EFA).

    Ring: ``base + (nsteps − nInter)·intra + nInter·inter`` (intra raised to the network overhead on
    multi-node rings); Broadcast/Reduce: ``base + nsteps·lat`` with the tree's Simple latency (NCCL's
    "chunk latency"); tree: ``base + 2((ppn − 1)·intra + log2(nNodes)·inter)``; NVLS: ``intra`` (25 µs);
    NVLSTree: ``intra + 2·log2(nNodes)·inter``; PAT: ``8 + log2(nNodes)·inter/3.5 + 2.8·nRanks``.

    Examples
    --------
    2 nodes × 8 GPUs, ring AllReduce, Simple: 8.4 + (30 − 2)·3.4 + 2·14 = 131.6 µs.

    >>> round(algo_latency_s("AllReduce", "ring", "Simple", 16, 2) * 1e6, 1)
    131.6
    >>> round(algo_latency_s("AllReduce", "nvls_tree", "Simple", 16, 2) * 1e6, 1)
    53.0
    """
    model = model or DEFAULT_MODEL
    p = _check_proto(proto)
    if algo not in BASE_LAT_US:
        raise SimError(f"algorithm {algo!r} has no NCCL latency model ({', '.join(BASE_LAT_US)})")
    base = BASE_LAT_US[algo][p]
    intra = HW_LAT_US["nvlink"][algo][p]
    inter = _inter_latency_us(algo, p, nranks, nnodes, model, physical)
    log2_nodes = int(math.floor(math.log2(nnodes))) if nnodes >= 1 else 0
    if algo == "ring":
        nsteps, ninter = _nccl_steps(op, nranks, nnodes)
        link = "nvlink" if nnodes <= 1 else "net"
        if op in ("Broadcast", "Reduce"):
            lat = HW_LAT_US[link]["tree" if proto == "Simple" else "ring"][p]
            return (base + nsteps * lat) * 1e-6
        if nnodes > 1:
            overhead = model.net_overhead_us * (3.0 if proto == "Simple" else 1.0)
            intra = max(intra, overhead)
        ninter = min(ninter, nsteps)
        return (base + (nsteps - ninter) * intra + ninter * inter) * 1e-6
    if algo == "nvls":
        return (intra + (inter if nnodes > 1 else 0.0)) * 1e-6
    if algo == "nvls_tree":
        return (base + intra + 2 * log2_nodes * inter) * 1e-6
    if algo == "pat":
        return (PAT_LAT_BASE_US + log2_nodes * inter / PAT_LOG_LAT_DIVISOR + nranks * PAT_LAT_PER_RANK_US) * 1e-6
    if algo != "tree":
        raise SimError(f"algorithm {algo!r} has no NCCL latency model in collsim")
    ppn = nranks // max(nnodes, 1)
    return (base + 2 * ((ppn - 1) * intra + log2_nodes * inter)) * 1e-6


def _plateau(op: str, algo: str, proto: str, nbytes: float, nranks: int, nnodes: int,
             model: CostModel) -> float:
    if (algo == "ring" and proto == "Simple" and nnodes > 1 and op == "AllReduce"
            and nbytes / (model.nchannels * nranks) >= 64):
        return model.plateau_factor
    return 1.0


def predict_time_s(op: str, nbytes: float, nranks: int, nnodes: int, algo: str, proto: str,
                   model: CostModel | None = None) -> float:
    """NCCL's predicted time of one collective: ``latency + nccl_bytes / bandwidth`` (seconds).

    ``nbytes`` follows the trace (per-rank bytes for AllGather/ReduceScatter). Returns ``inf`` when the
    combination is disabled.

    Examples
    --------
    >>> t = predict_time_s("AllReduce", 1 << 30, 8, 1, "ring", "Simple")
    >>> round(t * 1e3, 3)  # 8.4 + 14·3.4 µs + 1 GiB / (450e9·8/14)
    4.232
    """
    model = model or DEFAULT_MODEL
    if algo not in supported_algos(op) or algo == "direct":
        return math.inf
    bw = algo_bandwidth_bytes_per_s(op, algo, proto, nranks, nnodes, model)
    if bw <= 0:
        return math.inf
    size = nccl_nbytes(op, nbytes, nranks)
    if algo == "tree" and model.tree_correction:
        log_size = int(size) >> 6
        idx = max(log_size.bit_length() - 1, 0)
        if idx < len(TREE_CORRECTION[proto]):
            bw *= TREE_CORRECTION[proto][idx]
    lat = algo_latency_s(op, algo, proto, nranks, nnodes, model)
    lat *= _plateau(op, algo, proto, size, nranks, nnodes, model)
    return lat + size / bw


def choose_algorithm(op: str, nbytes: float, nranks: int, nnodes: int, algo: str = "auto",
                     proto: str | None = None, model: CostModel | None = None) -> tuple[str, str]:
    """(algorithm, protocol) NCCL would use for this op and size.

    ``algo="auto"`` tries every algorithm NCCL enables here (:func:`enabled_algos`: the op's, on this
    machine, after ``NCCL_ALGO``), unless the net plugin's tuner (``model.net_tuner``,
    :mod:`sim.planning.net_tuner`) picks an enabled combination first; a named algorithm that is not enabled falls back to ``auto``, as NCCL
    ignores an ``NCCL_ALGO`` it cannot run. ``proto=None`` picks the fastest protocol. Direct ops
    (AllToAll, Send/Recv, Gather/Scatter) use LL up to 16 KiB, else Simple (NCCL's p2p rule).

    Raises
    ------
    SimError
        Unknown op, algorithm or protocol.

    Examples
    --------
    >>> choose_algorithm("AllReduce", 1 << 30, 8, 1)
    ('ring', 'Simple')
    >>> choose_algorithm("AllReduce", 1 << 30, 8, 1, model=CostModel(nvls=True))
    ('nvls', 'Simple')
    >>> choose_algorithm("AllToAll", 1 << 20, 8, 1)
    ('direct', 'Simple')
    """
    model = model or DEFAULT_MODEL
    if algo not in ("auto", *ALGOS):
        raise SimError(f"algo {algo!r} is not one of: auto, {', '.join(ALGOS)}")
    if proto is not None:
        _check_proto(proto)
    allowed_protos = model.protos or PROTOS
    if supported_algos(op) == ("direct",):
        if proto is None:
            proto = "LL" if nbytes <= P2P_LL_THRESHOLD_BYTES and "LL" in allowed_protos else "Simple"
        return "direct", proto
    if nranks <= 1:
        return "ring", proto or "Simple"
    enabled = enabled_algos(op, nranks, nnodes, model)
    candidates = (algo,) if algo in enabled else enabled
    protos = (proto,) if proto is not None else allowed_protos
    plugin = net_tuner_choice(model.net_tuner, op, nbytes, nranks, nnodes)
    if plugin is not None and plugin[0] in candidates and plugin[1] in protos:
        # the net plugin's tuner fills NCCL's cost table first; it applies where NCCL enables its choice
        return plugin
    best: tuple[float, str, str] | None = None
    for a in candidates:
        for p in protos:
            t = predict_time_s(op, nbytes, nranks, nnodes, a, p, model)
            if best is None or t < best[0]:
                best = (t, a, p)
    assert best is not None
    if math.isinf(best[0]):  # every protocol disabled (LL128 forced off, NVLS with LL): Simple
        return best[1], "Simple"
    return best[1], best[2]


# --- per-step software latency of plans ----------------------------------------------------------

def ring_step_latency_s(op: str, proto: str, nranks: int, nnodes: int, nbytes: float = 0.0,
                        model: CostModel | None = None) -> tuple[float, float]:
    """(base_s, per_step_s) of a ring-family plan, spread so its critical path pays NCCL's latency.

    A ring plan's critical path crosses ``steps`` hops (AllReduce ``2(n−1)``, AllGather/ReduceScatter
    ``n−1``, Broadcast/Reduce chain ``n−1``); every step pays ``per_step_s`` and the first one also
    ``base_s``, so the path totals :func:`algo_latency_s` (× NCCL's plateau factor where it applies).

    Examples
    --------
    >>> base, step = ring_step_latency_s("AllReduce", "Simple", 8, 1)
    >>> round(base * 1e6, 1), round(step * 1e6, 1)
    (8.4, 3.4)
    """
    model = model or DEFAULT_MODEL
    p = _check_proto(proto)
    if nranks <= 1:
        return 0.0, 0.0
    base = BASE_LAT_US["ring"][p] * 1e-6
    size = nccl_nbytes(op, nbytes, nranks)
    total = algo_latency_s(op, "ring", proto, nranks, nnodes, model, physical=True)
    total *= _plateau(op, "ring", proto, size, nranks, nnodes, model)
    steps = 2 * (nranks - 1) if op == "AllReduce" else nranks - 1
    return base, max(total - base, 0.0) / steps
