"""NCCL's cost model: algorithm/protocol choice, per-step software latencies, and closed forms.

Three uses, all pure functions:

1. ``choose_algorithm`` picks (algorithm, protocol) for ``algo="auto"`` the way NCCL's tuner does: it
   predicts ``time = latency + bytes / bandwidth`` for every candidate and takes the fastest.
2. ``ring_step_latency_s``, ``tree_hop_latency_s`` and ``p2p_latency_s`` give the software latency a plan
   charges per step (``TransferPlan.delay_s``).
3. ``ideal_time_s`` (alpha-beta closed forms) and the nccl-tests ``algbw`` / ``busbw`` definitions used
   by the result tables.

The constants are those of NCCL 2.23 (v2.23.4-1) (``src/graph/tuning.cc``) for H100-class GPUs (SM90) on x86/Intel
hosts, as summarised in ``docs/performance.md`` §1 of the shared design notes. Latencies are in
microseconds inside the tables (as NCCL writes them) and in seconds at every public boundary.

Bandwidths in this module are bytes per second. ``CostModel`` holds the per-GPU bandwidths NCCL's
topology search would find: ``intra_bw_bytes_per_s`` (NVLink) and ``inter_bw_bytes_per_s`` (the GPU's
NIC).

References
----------
NVIDIA/nccl ``src/graph/tuning.cc`` (2.19), ``src/enqueue.cc`` (channel and thread thresholds);
NVIDIA/nccl-tests ``doc/PERFORMANCE.md`` (algbw, busbw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.errors import SimError

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
    "nccl_chunk_bytes",
    "pipeline_chunks",
    "ideal_time_s",
    "nccl_nbytes",
    "nccltests_bytes",
    "p2p_latency_s",
    "parse_nccl_list",
    "predict_time_s",
    "ring_step_latency_s",
    "supported_algos",
    "tree_hop_latency_s",
    "wire_factor",
]

PROTOS: tuple[str, ...] = ("LL", "LL128", "Simple")
ALGOS: tuple[str, ...] = ("ring", "tree", "direct")

#: Plans split a collective over at most this many channels unless told otherwise. One channel per GPU
#: of an 8-GPU server lets the per-channel ring rotation use every NIC once (see ``sim.planning.logical``).
DEFAULT_MAX_CHANNELS = 8
#: Plans split each channel's per-step data into at most this many pipelined chunks (plan size knob).
DEFAULT_MAX_CHUNKS = 4
#: Plans shrink chunks, then channels, to stay under this many transfers (the engine makes one flow each).
DEFAULT_MAX_TRANSFERS = 100_000
#: Trees and chains (Broadcast/Reduce) chunk as NCCL does, up to this many transfers per plan: their
#: critical path pays a pipeline fill of (hops - 1) / chunks, so they need NCCL's chunk count (a ring's
#: does not depend on it), and this bounds the plan instead of ``DEFAULT_MAX_CHUNKS``.
DEFAULT_MAX_PIPELINE_TRANSFERS = 16_384

_P = {p: i for i, p in enumerate(PROTOS)}

# --- NCCL 2.23 constants (src/graph/tuning.cc, v2.23.4-1; µs; GB/s), indexed [LL, LL128, Simple] -------
_BASE_LAT_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
_HW_LAT_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
#: GPU generations of NCCL's tables (compute-capability index).
ARCHS: tuple[str, ...] = ("volta", "ampere", "hopper")
# Per-channel bandwidth caps (GB/s) per generation for 1 / 2 / >2 nodes.
_RING_LL128_MAX_PER_CH = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 36.7)}
_TREE_LL128_MAX_PER_CH = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 29.0)}
_TREE_MAX_PER_CH = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0)}
# LL bandwidth caps (GB/s): one node by GPU generation, several nodes by CPU vendor (Intel / AMD row).
_LL_MAX_SINGLE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0}
_LL_MAX_BW = {"intel": (39.0, 20.4), "amd": (22.5, 19.0)}
# NCCL's measured correction of tree bandwidth for medium sizes, by floor(log2(bytes / 64)).
_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
# enqueue.cc: NCCL drops channels while bytes < nChannels * nThreads * threshold.
_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
_THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
# Payload of one NCCL FIFO step: Simple 4 MiB buffer / 8 steps; LL 8 data bytes per 16-byte line;
# LL128 120 of every 128 bytes. Plans use it as the pipelining grain.
_STEP_PAYLOAD_BYTES = {"Simple": 512 * 1024, "LL": 32 * 1024, "LL128": 576_000}
_P2P_LL_THRESHOLD_BYTES = 16384  # NCCL_P2P_LL_THRESHOLD: p2p uses LL up to this size


@dataclass(frozen=True)
class CostModel:
    """The machine NCCL's tuner sees.

    Parameters
    ----------
    intra_bw_bytes_per_s : float
        Per-GPU NVLink bandwidth (one direction). Default: H100 NVLink4, 450 GB/s.
    inter_bw_bytes_per_s : float
        Per-GPU network bandwidth (one direction). Default: one 400 Gb/s NIC per GPU, 50 GB/s.
    nchannels : int
        NCCL's channel count, which scales the per-channel bandwidth caps (16 on an 8-NIC H100 node).
    cpu : str
        ``"intel"`` or ``"amd"``: NCCL's per-step network overhead (1 or 2 µs) and LL caps.
    arch : str
        GPU generation of NCCL's per-channel tables: ``volta``, ``ampere``, ``hopper`` (Blackwell has no
        row in 2.23; ``topologies.hardware`` maps b200 to hopper).
    ll128 : bool
        Whether LL128 is enabled (NCCL enables it on NVLink-connected Volta/Ampere/Hopper).
    tree_correction : bool
        Apply NCCL's empirical tree-bandwidth correction for medium sizes.
    plateau_factor : float
        Multiplier of the latency of large multi-node ring/Simple AllReduce (NCCL: 1.4 on SM80+, 1.9 on
        older GPUs; ``performance.md`` quotes the older 1.9).
    nvlink_efficiency, nic_efficiency : float
        Payload share of the NVLink / NIC line rate NCCL reaches (``topologies.hardware``; 1 = line rate).
    protocol_overhead : bool
        Charge each protocol's wire bytes in plans (LL 16 per 8 of payload, LL128 128 per 120) and the
        efficiencies above (on with a hardware preset; off keeps the alpha-beta closed forms exact).
    net_latency_us : float
        Latency the net plugin reports (``ncclNetProperties.latency``), added to every inter-node step
        (twice for Simple), as NCCL's tuner does.
    algos, protos : tuple of str, optional
        The algorithms / protocols the tuner may pick (``NCCL_ALGO`` / ``NCCL_PROTO``); ``None`` allows
        all. See :func:`parse_nccl_list`.
    """

    intra_bw_bytes_per_s: float = 450e9
    inter_bw_bytes_per_s: float = 50e9
    nchannels: int = 16
    cpu: str = "intel"
    arch: str = "hopper"
    ll128: bool = True
    tree_correction: bool = True
    plateau_factor: float = 1.4
    algos: tuple[str, ...] | None = None
    protos: tuple[str, ...] | None = None
    nvlink_efficiency: float = 1.0
    nic_efficiency: float = 1.0
    protocol_overhead: bool = False
    net_latency_us: float = 0.0

    def __post_init__(self) -> None:
        if not (self.intra_bw_bytes_per_s > 0 and self.inter_bw_bytes_per_s > 0):
            raise SimError("cost model: bandwidths must be positive")
        if self.nchannels < 1:
            raise SimError(f"cost model: nchannels {self.nchannels} must be >= 1")
        if self.cpu not in _LL_MAX_BW:
            raise SimError(f"cost model: cpu {self.cpu!r} is not one of: intel, amd")
        if self.arch not in ARCHS:
            raise SimError(f"cost model: arch {self.arch!r} is not one of: {', '.join(ARCHS)}")
        for name in ("nvlink_efficiency", "nic_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise SimError(f"cost model: {name} {getattr(self, name)} must be in (0, 1]")
        if not self.net_latency_us >= 0:
            raise SimError(f"cost model: net_latency_us {self.net_latency_us} must be >= 0")
        for name, allowed, known in (("algos", self.algos, ALGOS), ("protos", self.protos, PROTOS)):
            if allowed is not None and (not allowed or any(a not in known for a in allowed)):
                raise SimError(f"cost model: {name} {allowed!r} must name some of: {', '.join(known)}")

    @property
    def net_overhead_us(self) -> float:
        """NCCL's per-step network post overhead on this CPU (µs)."""
        return 1.0 if self.cpu == "intel" else 2.0


_DEFAULT_MODEL = CostModel()
_NCCL_NAMES = {"ring": "ring", "tree": "tree", "direct": "direct", "ll": "LL", "ll128": "LL128",
               "simple": "Simple"}


def parse_nccl_list(text: str | None, kind: str) -> tuple[str, ...] | None:
    """An ``NCCL_ALGO`` / ``NCCL_PROTO`` value as the tuple of allowed names (``None``: all allowed).

    Case-insensitive, comma-separated; a leading ``^`` excludes the listed names instead, as NCCL reads
    them. Names NCCL has but collsim does not plan (NVLS, NVLSTree, CollNet*, PAT) are refused.

    Parameters
    ----------
    text : str or None
        The value (``"Ring,Tree"``, ``"^LL"``); empty or ``None`` allows all.
    kind : {"algo", "proto"}

    Returns
    -------
    tuple of str or None

    Raises
    ------
    SimError
        An unknown name, or a list that allows nothing.

    Examples
    --------
    >>> parse_nccl_list("ring", "algo")
    ('ring',)
    >>> parse_nccl_list("^LL", "proto")
    ('LL128', 'Simple')
    """
    if kind not in ("algo", "proto"):
        raise SimError(f"kind {kind!r} is not one of: algo, proto")
    if text is None or not str(text).strip():
        return None
    known = ALGOS if kind == "algo" else PROTOS
    raw = str(text).strip()
    exclude = raw.startswith("^")
    names = []
    for item in filter(None, (x.strip() for x in raw.lstrip("^").split(","))):
        name = _NCCL_NAMES.get(item.lower())
        if name is None or name not in known:
            raise SimError(f"NCCL_{kind.upper()} {raw!r}: {item!r} is not one of: {', '.join(known)}")
        names.append(name)
    out = tuple(k for k in known if (k in names) != exclude)
    if not out:
        raise SimError(f"NCCL_{kind.upper()} {raw!r} allows no {kind}")
    return out


def _check_proto(proto: str) -> int:
    if proto not in _P:
        raise SimError(f"protocol {proto!r} is not one of: {', '.join(PROTOS)}")
    return _P[proto]


def _node_index(nnodes: int) -> int:
    return 0 if nnodes <= 1 else 1 if nnodes == 2 else 2


def supported_algos(op: str) -> tuple[str, ...]:
    """Algorithms collsim plans for ``op`` (NCCL's tree exists for AllReduce only).

    Examples
    --------
    >>> supported_algos("AllReduce")
    ('ring', 'tree')
    >>> supported_algos("AllToAll")
    ('direct',)
    """
    if op == "AllReduce":
        return ("ring", "tree")
    if op in ("AllGather", "ReduceScatter", "Broadcast", "Reduce"):
        return ("ring",)
    if op in ("AllToAll", "Send", "Recv", "Gather", "Scatter"):
        return ("direct",)
    raise SimError(f"op {op!r} has no collective algorithm")


def nccl_nbytes(op: str, nbytes: float, nranks: int) -> float:
    """Bytes NCCL's tuner uses for an op whose trace row says ``nbytes``.

    NCCL sizes AllGather and ReduceScatter by the whole array (per-rank bytes × ranks); every other
    op by the row's bytes.

    Examples
    --------
    >>> nccl_nbytes("AllGather", 1024, 8)
    8192
    """
    return nbytes * nranks if op in ("AllGather", "ReduceScatter") else nbytes


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


def algo_bandwidth_bytes_per_s(op: str, algo: str, proto: str, nranks: int, nnodes: int,
                               model: CostModel | None = None) -> float:
    """NCCL's algorithm bandwidth (bytes/s) before the size-dependent tree correction.

    busBw = per-GPU bandwidth with protocol efficiency and per-channel caps, then
    algbw = busBw × n/nsteps (ring) or × 1/2 (tree). ``0`` means the combination is disabled.

    Examples
    --------
    Single-node ring AllReduce, Simple, 8 GPUs at 450 GB/s: 450 × 8/14 GB/s.

    >>> round(algo_bandwidth_bytes_per_s("AllReduce", "ring", "Simple", 8, 1) / 1e9, 2)
    257.14
    """
    model = model or _DEFAULT_MODEL
    p = _check_proto(proto)
    if proto == "LL128" and not model.ll128:
        return 0.0
    ni = _node_index(nnodes)
    nch = model.nchannels
    ppn = nranks / max(nnodes, 1)
    arch = model.arch
    ll_max = (_LL_MAX_SINGLE[arch] if ni == 0 else _LL_MAX_BW[model.cpu][ni - 1]) * 1e9
    if algo == "ring":
        bus = _ring_busbw(model, nnodes, ppn)
        if p == 0:
            bus = min(ll_max, bus * 0.5)
        elif p == 1:
            bus = min(bus * 0.92, nch * _RING_LL128_MAX_PER_CH[arch][ni] * 1e9)
        nsteps, _ = _nccl_steps(op, nranks, nnodes)
        return bus * nranks / nsteps
    if algo == "tree":
        if op != "AllReduce":
            return 0.0
        bus = min(_tree_busbw(model, nnodes, ppn) * 0.92, nch * _TREE_MAX_PER_CH[arch][ni] * 1e9)
        if p == 0:
            bus = min(bus / 3.8, ll_max)
        elif p == 1:
            bus = min(bus * (7 / 9 if nnodes <= 1 else 120 / 128), nch * _TREE_LL128_MAX_PER_CH[arch][ni] * 1e9)
        return bus * 0.5
    raise SimError(f"algorithm {algo!r} has no NCCL bandwidth model (ring, tree)")


def algo_latency_s(op: str, algo: str, proto: str, nranks: int, nnodes: int,
                   model: CostModel | None = None) -> float:
    """NCCL's latency of one collective (seconds): base + per-step hardware latencies.

    Ring: ``base + (nsteps − nInter)·intra + nInter·inter`` (intra raised to the network overhead on
    multi-node rings); Broadcast/Reduce: ``base + nsteps·lat`` with the tree's Simple latency (NCCL's
    "chunk latency"); tree: ``base + 2((ppn − 1)·intra + log2(nNodes)·inter)``.

    Examples
    --------
    2 nodes × 8 GPUs, ring AllReduce, Simple: 8.4 + (30 − 2)·3.4 + 2·14 = 131.6 µs.

    >>> round(algo_latency_s("AllReduce", "ring", "Simple", 16, 2) * 1e6, 1)
    131.6
    """
    model = model or _DEFAULT_MODEL
    p = _check_proto(proto)
    if algo not in _BASE_LAT_US:
        raise SimError(f"algorithm {algo!r} has no NCCL latency model (ring, tree)")
    base = _BASE_LAT_US[algo][p]
    intra = _HW_LAT_US["nvlink"][algo][p]
    # with one GPU per node the latencies are fully exposed: NCCL charges the tree's network latency;
    # then the net plugin's reported latency, once more for Simple's flush (tuning.cc 2.23)
    one_ppn = nnodes > 1 and nranks == nnodes
    inter = _HW_LAT_US["net"]["tree" if one_ppn else algo][p]
    inter += model.net_latency_us * (2.0 if proto == "Simple" else 1.0)
    if algo == "ring":
        nsteps, ninter = _nccl_steps(op, nranks, nnodes)
        link = "nvlink" if nnodes <= 1 else "net"
        if op in ("Broadcast", "Reduce"):
            lat = _HW_LAT_US[link]["tree" if proto == "Simple" else "ring"][p]
            return (base + nsteps * lat) * 1e-6
        if nnodes > 1:
            overhead = model.net_overhead_us * (3.0 if proto == "Simple" else 1.0)
            intra = max(intra, overhead)
        ninter = min(ninter, nsteps)
        return (base + (nsteps - ninter) * intra + ninter * inter) * 1e-6
    ppn = nranks // max(nnodes, 1)
    log2_nodes = int(math.floor(math.log2(nnodes))) if nnodes >= 1 else 0
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
    model = model or _DEFAULT_MODEL
    if algo not in supported_algos(op) or algo == "direct":
        return math.inf
    bw = algo_bandwidth_bytes_per_s(op, algo, proto, nranks, nnodes, model)
    if bw <= 0:
        return math.inf
    size = nccl_nbytes(op, nbytes, nranks)
    if algo == "tree" and model.tree_correction:
        log_size = int(size) >> 6
        idx = max(log_size.bit_length() - 1, 0)
        if idx < len(_TREE_CORRECTION[proto]):
            bw *= _TREE_CORRECTION[proto][idx]
    lat = algo_latency_s(op, algo, proto, nranks, nnodes, model)
    lat *= _plateau(op, algo, proto, size, nranks, nnodes, model)
    return lat + size / bw


def choose_algorithm(op: str, nbytes: float, nranks: int, nnodes: int, algo: str = "auto",
                     proto: str | None = None, model: CostModel | None = None) -> tuple[str, str]:
    """(algorithm, protocol) NCCL would use for this op and size.

    ``algo="auto"`` tries every supported algorithm; a named algorithm the op does not support falls
    back to ``auto`` (NCCL has one algorithm for most ops). ``proto=None`` picks the fastest protocol.
    Direct ops (AllToAll, Send/Recv, Gather/Scatter) use LL up to 16 KiB, else Simple (NCCL's p2p rule).

    Raises
    ------
    SimError
        Unknown op, algorithm or protocol.

    Examples
    --------
    >>> choose_algorithm("AllReduce", 1 << 30, 8, 1)
    ('ring', 'Simple')
    >>> choose_algorithm("AllToAll", 1 << 20, 8, 1)
    ('direct', 'Simple')
    """
    model = model or _DEFAULT_MODEL
    algos = supported_algos(op)
    if algo not in ("auto", *ALGOS):
        raise SimError(f"algo {algo!r} is not one of: auto, ring, tree, direct")
    if proto is not None:
        _check_proto(proto)
    allowed_protos = model.protos or PROTOS
    if algos == ("direct",):
        if proto is None:
            proto = "LL" if nbytes <= _P2P_LL_THRESHOLD_BYTES and "LL" in allowed_protos else "Simple"
        return "direct", proto
    if algo == "auto" and model.algos is not None:
        # NCCL_ALGO narrows the tuner's choice; an op none of whose algorithms is allowed keeps its own
        algo = next((a for a in algos if a in model.algos), "auto")
        if sum(a in model.algos for a in algos) > 1:
            algo = "auto"
            algos = tuple(a for a in algos if a in model.algos)
    candidates = algos if algo == "auto" or algo not in algos else (algo,)
    if nranks <= 1:
        return candidates[0] if "ring" not in candidates else "ring", proto or "Simple"
    protos = (proto,) if proto is not None else allowed_protos
    best: tuple[float, str, str] | None = None
    for a in candidates:
        for p in protos:
            t = predict_time_s(op, nbytes, nranks, nnodes, a, p, model)
            if best is None or t < best[0]:
                best = (t, a, p)
    assert best is not None
    if math.isinf(best[0]):  # every protocol disabled (LL128 forced off): fall back to Simple
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
    model = model or _DEFAULT_MODEL
    p = _check_proto(proto)
    if nranks <= 1:
        return 0.0, 0.0
    base = _BASE_LAT_US["ring"][p] * 1e-6
    size = nccl_nbytes(op, nbytes, nranks)
    total = algo_latency_s(op, "ring", proto, nranks, nnodes, model)
    total *= _plateau(op, "ring", proto, size, nranks, nnodes, model)
    steps = 2 * (nranks - 1) if op == "AllReduce" else nranks - 1
    return base, max(total - base, 0.0) / steps


_WIRE = {"LL": 2.0, "LL128": 128.0 / 120.0, "Simple": 1.0}


def wire_factor(proto: str, inter_node: bool, model: CostModel | None = None) -> float:
    """Wire bytes per payload byte of a transfer: the protocol's lines and the link's efficiency.

    1 unless ``model.protocol_overhead``; then LL 16/8, LL128 128/120, Simple 1, divided by the NVLink
    or NIC efficiency.

    Examples
    --------
    >>> wire_factor("LL", True)
    1.0
    >>> wire_factor("LL", True, CostModel(protocol_overhead=True, nic_efficiency=0.5))
    4.0
    """
    p = _check_proto(proto)
    model = model or _DEFAULT_MODEL
    if not model.protocol_overhead:
        return 1.0
    eff = model.nic_efficiency if inter_node else model.nvlink_efficiency
    return _WIRE[PROTOS[p]] / eff


def tree_hop_latency_s(proto: str, inter_node: bool) -> float:
    """Per-hop latency of a tree plan (seconds): NCCL's tree latency per NVLink or network hop.

    Examples
    --------
    >>> round(tree_hop_latency_s("LL", True) * 1e6, 2)
    5.0
    """
    p = _check_proto(proto)
    return _HW_LAT_US["net" if inter_node else "nvlink"]["tree"][p] * 1e-6


def tree_base_latency_s(proto: str) -> float:
    """Base (launch) latency of a tree collective (seconds)."""
    return _BASE_LAT_US["tree"][_check_proto(proto)] * 1e-6


def p2p_latency_s(proto: str = "Simple", inter_node: bool = True) -> float:
    """Software latency of one direct transfer (Send/Recv, all-to-all pair): one ring base + one step.

    NCCL has no published p2p model; this charges what one ring step costs: the ring's base latency
    plus one hardware step on the link type. Defaults: Simple over the network, 8.4 + 14 µs.

    Examples
    --------
    >>> round(p2p_latency_s() * 1e6, 1)
    22.4
    """
    p = _check_proto(proto)
    return (_BASE_LAT_US["ring"][p] + _HW_LAT_US["net" if inter_node else "nvlink"]["ring"][p]) * 1e-6


# --- channels and chunks ----------------------------------------------------------------------------

def channels_for(op: str, algo: str, proto: str, nbytes: float, nranks: int,
                 max_channels: int = DEFAULT_MAX_CHANNELS) -> int:
    """Channels NCCL would use: drop channels while ``bytes < channels × threads × threshold``.

    Thresholds per channel: Simple 32 KiB, LL128 5 KiB, LL 4 KiB (× nranks on rings). Direct ops use
    one channel per peer pair.

    Examples
    --------
    >>> channels_for("AllReduce", "ring", "Simple", 100_000, 8)
    3
    >>> channels_for("AllReduce", "ring", "Simple", 1 << 30, 8)
    8
    """
    if max_channels < 1:
        raise SimError(f"max_channels {max_channels} must be >= 1")
    if algo == "direct":
        return 1
    p_thr = _THREADS[proto] * _THREAD_THRESHOLD[proto]
    if algo == "ring" and proto == "LL":
        p_thr *= nranks
    size = nccl_nbytes(op, nbytes, nranks)
    return int(max(1, min(max_channels, size // p_thr)))


def chunk_unit_bytes(proto: str) -> int:
    """Pipelining grain of a protocol: the payload of one NCCL FIFO step (bytes)."""
    _check_proto(proto)
    return _STEP_PAYLOAD_BYTES[proto]


def chunks_for(step_bytes: float, proto: str, max_chunks: int = DEFAULT_MAX_CHUNKS,
               chunk_bytes: float | None = None) -> int:
    """Chunks a channel splits each step's data into: ``ceil(step_bytes / grain)``, 1 .. max_chunks.

    Examples
    --------
    >>> chunks_for(16 * 1024, "Simple")
    1
    >>> chunks_for(64 << 20, "Simple")
    4
    """
    if max_chunks < 1:
        raise SimError(f"max_chunks {max_chunks} must be >= 1")
    unit = chunk_unit_bytes(proto) if chunk_bytes is None else float(chunk_bytes)
    if unit <= 0:
        raise SimError(f"chunk_bytes {chunk_bytes} must be > 0")
    return int(max(1, min(max_chunks, math.ceil(step_bytes / unit))))


def nccl_chunk_bytes(op: str, algo: str, proto: str, nbytes: float, nchannels: int, nranks: int,
                     nnodes: int) -> float:
    """Payload of one NCCL chunk (bytes), as ``enqueue.cc`` (2.23) sizes it.

    One FIFO step of payload (``buffSize / NCCL_STEPS``: Simple 512 KiB, LL 32 KiB, LL128 576,000 B) times
    the chunk steps (ring Simple AllReduce/AllGather/ReduceScatter: 4; trees, Broadcast, Reduce: 1); tree
    LL128 halves it while a channel would get too few chunks (``nBytes / (nChannels * chunk) <
    nsteps * 64 / ppn`` down to 128 KiB, ``* 16`` down to 32 KiB, ``nsteps = 1 + log2(nNodes) + 0.1 ppn``).

    Examples
    --------
    >>> nccl_chunk_bytes("AllReduce", "tree", "Simple", 1 << 30, 8, 16, 2)
    524288
    >>> nccl_chunk_bytes("AllReduce", "ring", "Simple", 1 << 30, 8, 16, 2)
    2097152
    """
    _check_proto(proto)
    chunk = _STEP_PAYLOAD_BYTES[proto]
    if algo == "ring" and proto == "Simple" and op in ("AllReduce", "AllGather", "ReduceScatter"):
        chunk *= 4  # ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2 (collectives.h)
    if algo == "tree" and proto == "LL128":
        nodes = max(int(nnodes), 1)
        ppn = nranks / nodes
        nsteps = 1 + int(math.floor(math.log2(nodes))) + 0.1 * ppn
        size = nccl_nbytes(op, nbytes, nranks)
        while size // (nchannels * chunk) < nsteps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while size // (nchannels * chunk) < nsteps * 16 / ppn and chunk > 32768:
            chunk //= 2
    return chunk


def pipeline_chunks(ch_bytes: float, chunk_bytes: float, per_channel: int, nchannels: int,
                    max_transfers: int = DEFAULT_MAX_PIPELINE_TRANSFERS) -> int:
    """Chunks per channel of a tree or chain: ``ceil(ch_bytes / chunk_bytes)``, at least 1, at most what
    keeps ``nchannels x per_channel x chunks`` within ``max_transfers``.

    Examples
    --------
    >>> pipeline_chunks(64 << 20, 512 << 10, 30, 8)
    68
    """
    if max_transfers < 1:
        raise SimError(f"max_pipeline_transfers {max_transfers} must be >= 1")
    if not chunk_bytes > 0:
        raise SimError(f"chunk_bytes {chunk_bytes} must be > 0")
    want = max(1, math.ceil(ch_bytes / chunk_bytes))
    return int(max(1, min(want, max_transfers // max(1, nchannels * per_channel))))


# --- closed forms and nccl-tests definitions ----------------------------------------------------------

def ideal_time_s(op: str, nbytes: float, n: int, bandwidth_bytes_per_s: float, algo: str = "auto", *,
                 alpha_s: float = 0.0, chunks: int | None = None, split_bytes=None) -> float:
    """Alpha-beta time of one collective on a non-blocking fabric where every GPU sends and receives at
    ``bandwidth_bytes_per_s`` (full duplex).

    ``nbytes`` follows the trace (AllGather: per-rank send bytes; ReduceScatter: per-rank receive bytes;
    AllToAll: bytes to each peer). ``alpha_s`` is charged once per step on the critical path.

    ======================  =========================================  ==========
    op (algo)               bandwidth term                             steps
    ======================  =========================================  ==========
    AllReduce (ring)        2(n−1)/n · S / B                           2(n−1)
    AllReduce (tree)        2 · S / B  (NCCL's tree: algbw = busbw/2)   2·log2(n)
    AllGather, ReduceScat.  (n−1) · S_rank / B                         n−1
    Broadcast, Reduce       S / B · (1 + (n−2)/chunks)                 n−1
    AllToAll                max row/column sum off the diagonal / B    1
    Send, Recv              S / B                                      1
    Gather, Scatter         (n−1) · S / B                              1
    ======================  =========================================  ==========

    ``chunks=None`` means perfectly pipelined (Broadcast/Reduce: S/B).

    Examples
    --------
    >>> ideal_time_s("AllReduce", 8e9, 8, 1e9)
    14.0
    >>> ideal_time_s("AllGather", 1e9, 4, 1e9, alpha_s=1e-6)
    3.000003
    """
    import numpy as np

    if bandwidth_bytes_per_s <= 0:
        raise SimError("bandwidth must be positive")
    if n <= 1 or (nbytes <= 0 and split_bytes is None):
        return 0.0
    b = float(bandwidth_bytes_per_s)
    if algo == "auto":
        algo = supported_algos(op)[0]
    if op == "AllReduce" and algo == "tree":
        return 2.0 * nbytes / b + 2 * math.ceil(math.log2(n)) * alpha_s
    if op == "AllReduce":
        return 2 * (n - 1) / n * nbytes / b + 2 * (n - 1) * alpha_s
    if op in ("AllGather", "ReduceScatter"):
        return (n - 1) * nbytes / b + (n - 1) * alpha_s
    if op in ("Broadcast", "Reduce"):
        fill = 0.0 if chunks is None else (n - 2) / chunks
        return nbytes / b * (1.0 + fill) + (n - 1) * alpha_s
    if op == "AllToAll":
        if split_bytes is None:
            return (n - 1) * nbytes / b + alpha_s
        m = np.array(split_bytes, dtype=np.float64)
        np.fill_diagonal(m, 0.0)
        return float(max(m.sum(axis=1).max(), m.sum(axis=0).max())) / b + alpha_s
    if op in ("Send", "Recv"):
        return nbytes / b + alpha_s
    if op in ("Gather", "Scatter"):
        return (n - 1) * nbytes / b + alpha_s
    raise SimError(f"op {op!r} has no closed form")


def nccltests_bytes(op: str, nbytes: float, n: int) -> float:
    """The ``S`` nccl-tests divides by time: the whole array for AllGather/ReduceScatter/AllToAll/
    Gather/Scatter (per-rank trace bytes × n), the buffer otherwise.

    Examples
    --------
    >>> nccltests_bytes("AllGather", 100, 4)
    400
    """
    return nbytes * n if op in ("AllGather", "ReduceScatter", "AllToAll", "Gather", "Scatter") else nbytes


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' busbw/algbw factor.

    AllReduce ``2(n−1)/n``; AllGather, ReduceScatter, AllToAll, Gather, Scatter ``(n−1)/n``; Broadcast,
    Reduce, Send, Recv ``1``.

    Examples
    --------
    >>> busbw_factor("AllReduce", 8)
    1.75
    """
    if n <= 0:
        raise SimError(f"nranks {n} must be positive")
    if op == "AllReduce":
        return 2.0 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AllToAll", "Gather", "Scatter"):
        return (n - 1) / n
    if op in ("Broadcast", "Reduce", "Send", "Recv"):
        return 1.0
    raise SimError(f"op {op!r} has no busbw factor")


def algbw_bytes_per_s(op: str, nbytes: float, n: int, time_s: float) -> float:
    """nccl-tests algbw = S / t, with S from :func:`nccltests_bytes` (``nan`` when t <= 0)."""
    return nccltests_bytes(op, nbytes, n) / time_s if time_s > 0 else math.nan


def busbw_bytes_per_s(op: str, nbytes: float, n: int, time_s: float) -> float:
    """nccl-tests busbw = algbw × :func:`busbw_factor`.

    Examples
    --------
    Ring AllReduce of S at its alpha-beta time has busbw equal to the link rate:

    >>> t = ideal_time_s("AllReduce", 1e9, 8, 50e9)
    >>> round(busbw_bytes_per_s("AllReduce", 1e9, 8, t) / 1e9, 6)
    50.0
    """
    return algbw_bytes_per_s(op, nbytes, n, time_s) * busbw_factor(op, n)
