"""NCCL's cost model: algorithm/protocol choice and the per-step software latencies of plans.

Pure functions over a :class:`~sim.planning.cost_model.CostModel`:

1. ``choose_algorithm`` picks (algorithm, protocol) for ``algo="auto"`` the way NCCL's tuner does: it
   predicts ``time = latency + bytes / bandwidth`` for every enabled candidate
   (:func:`~sim.planning.cost_model.enabled_algos`) and takes the fastest.
2. ``ring_step_latency_s``, ``tree_hop_latency_s``, ``p2p_latency_s`` and ``algo_latency_s`` give the
   software latency a plan charges (``TransferPlan.delay_s``); ``wire_factor`` the bytes it puts on a link.

The constants are NCCL 2.23's (:mod:`sim.planning.nccl_tables`); the bandwidth half of the model is
:mod:`sim.planning.algo_bandwidth`. This module also re-exports the names that lived here before the
splits (the cost model, the algorithm bandwidth, chunking and the closed forms), so
``sim.planning.tuning.X`` keeps working for every public ``X``.

References
----------
NVIDIA/nccl ``src/graph/tuning.cc``, ``src/enqueue.cc`` (v2.23.4-1).
"""

from __future__ import annotations

import math

from sim.errors import SimError
from sim.planning.algo_bandwidth import algo_bandwidth_bytes_per_s, nccl_steps, proto_index
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
    NVLS_TREE_NET_LAT_US_2_29,
    P2P_LL_THRESHOLD_BYTES,
    PAT_LAT_BASE_US,
    PAT_LAT_PER_RANK_US,
    PAT_LOG_LAT_DIVISOR,
    PROTOS,
    TREE_CORRECTION,
)
from sim.planning.net_tuner import net_tuner_choice
from sim.planning.plan_latency import p2p_latency_s, tree_base_latency_s, tree_hop_latency_s, wire_factor
from sim.planning.search_channels import net_graph_channels

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
    "tree_correction",
    "tree_hop_latency_s",
    "wire_factor",
]


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
    p = proto_index(proto)
    if algo not in BASE_LAT_US:
        raise SimError(f"algorithm {algo!r} has no NCCL latency model ({', '.join(BASE_LAT_US)})")
    base = BASE_LAT_US[algo][p]
    intra = HW_LAT_US["nvlink"][algo][p]
    inter = _inter_latency_us(algo, p, nranks, nnodes, model, physical)
    log2_nodes = int(math.floor(math.log2(nnodes))) if nnodes >= 1 else 0
    if algo == "ring":
        nsteps, ninter = nccl_steps(op, nranks, nnodes)
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
    if algo == "tree":
        bw *= tree_correction(proto, size, model)
    lat = algo_latency_s(op, algo, proto, nranks, nnodes, model)
    lat *= _plateau(op, algo, proto, size, nranks, nnodes, model)
    return lat + size / bw


def tree_correction(proto: str, nbytes: float, model: CostModel | None = None) -> float:
    """NCCL's correction of its tree bandwidth at medium sizes (``treeCorrectionFactor``, ``tuning.cc``).

    "Trees are not perfectly sticking to the model for medium sizes": NCCL scales a tree AllReduce's
    bandwidth by a factor per protocol and power of two of ``nbytes / 64`` (64 B to 256 MiB; 1 beyond,
    or without ``model.tree_correction``).

    Examples
    --------
    >>> tree_correction("LL128", 1 << 20), tree_correction("Simple", 1 << 30)
    (0.6, 1.0)
    """
    model = model or DEFAULT_MODEL
    if not model.tree_correction:
        return 1.0
    idx = max((int(nbytes) >> 6).bit_length() - 1, 0)
    table = TREE_CORRECTION[proto]
    return float(table[idx]) if idx < len(table) else 1.0


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
        proto_index(proto)
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
    p = proto_index(proto)
    if nranks <= 1:
        return 0.0, 0.0
    base = BASE_LAT_US["ring"][p] * 1e-6
    size = nccl_nbytes(op, nbytes, nranks)
    total = algo_latency_s(op, "ring", proto, nranks, nnodes, model, physical=True)
    total *= _plateau(op, "ring", proto, size, nranks, nnodes, model)
    steps = 2 * (nranks - 1) if op == "AllReduce" else nranks - 1
    return base, max(total - base, 0.0) / steps
