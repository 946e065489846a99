"""NCCL's own constants, per algorithm, protocol and GPU generation (data only, no logic).

Everything here is copied as numbers from NCCL 2.23 (v2.23.4-1): ``src/graph/tuning.cc`` (latencies,
bandwidth caps, the tree correction, the NVLS and PAT refinements), ``src/enqueue.cc`` (thread
thresholds, chunk sizes), ``src/transport/nvls.cc`` (``NCCL_NVLS_NCHANNELS``, ``NCCL_NVLS_CHUNKSIZE``)
and ``src/include/collectives.h``. Latencies are in microseconds and bandwidths in GB/s, as NCCL writes
them; protocol-indexed tuples are ``(LL, LL128, Simple)``.

Algorithm names are collsim's lower-case spellings of NCCL's ``NCCL_ALGO`` values (:data:`NCCL_ALGO_NAMES`),
plus ``direct``, collsim's name for point-to-point patterns (AllToAll, Send/Recv, Gather/Scatter).
"""

from __future__ import annotations

__all__ = [
    "ALGOS",
    "ARCHS",
    "BASE_LAT_US",
    "COLLECTIVE_ALGOS",
    "DEFAULT_BUFF_BYTES",
    "HW_LAT_US",
    "LL_MAX_BW",
    "LL_MAX_SINGLE",
    "MAX_BUFF_BYTES",
    "MIN_BUFF_BYTES",
    "NCCL_ALGO_NAMES",
    "NCCL_PROTO_NAMES",
    "NCCL_STEPS",
    "NVLS_ALGBW_RATIO",
    "NVLS_ARCHS",
    "NVLS_CHANNELS",
    "NVLS_CHUNK_BYTES",
    "NVLS_MIN_LOCAL_GPUS",
    "NVLS_EFFICIENCY_2_28",
    "NVLS_TREE_MAX_PER_CH",
    "NVLS_TREE_NET_LAT_US_2_29",
    "PAT_BUS_FACTOR_2_24",
    "PAT_BUS_FACTOR",
    "PAT_LAT_BASE_US",
    "PAT_LAT_PER_RANK_US",
    "PAT_LOG_LAT_DIVISOR",
    "P2P_LL_THRESHOLD_BYTES",
    "PROTOS",
    "RING_LL128_MAX_PER_CH",
    "RING_SEARCH_MAX_CHANNELS",
    "SM90_SPEED_ARRAY_INTER",
    "SM90_SPEED_ARRAY_INTRA",
    "SPEED_ARRAY_INTER",
    "SPEED_ARRAY_INTRA",
    "STEP_PAYLOAD_BYTES",
    "THREADS",
    "THREAD_THRESHOLD",
    "TREE_CORRECTION",
    "TREE_LL128_MAX_PER_CH",
    "TREE_MAX_PER_CH",
    "TREE_PATTERN_FACTOR",
    "WIRE_BYTES_PER_PAYLOAD",
]

PROTOS: tuple[str, ...] = ("LL", "LL128", "Simple")
#: NCCL 2.2x's collective algorithms (``NCCL_ALGO``), in collsim's spelling.
COLLECTIVE_ALGOS: tuple[str, ...] = ("ring", "tree", "nvls", "nvls_tree", "pat", "collnet_direct",
                                     "collnet_chain")
#: Every algorithm a plan may carry: NCCL's, then ``direct`` (point-to-point patterns).
ALGOS: tuple[str, ...] = (*COLLECTIVE_ALGOS, "direct")
#: ``NCCL_ALGO`` / ``NCCL_PROTO`` spellings (case-insensitive) -> collsim's names.
NCCL_ALGO_NAMES: dict[str, str] = {
    "ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree", "nvls_tree": "nvls_tree",
    "pat": "pat", "collnetdirect": "collnet_direct", "collnet_direct": "collnet_direct",
    "collnetchain": "collnet_chain", "collnet_chain": "collnet_chain", "direct": "direct"}
NCCL_PROTO_NAMES: dict[str, str] = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}

#: GPU generations of NCCL's tables (compute-capability index; Blackwell uses Hopper's rows in 2.23).
ARCHS: tuple[str, ...] = ("volta", "ampere", "hopper")
#: Generations whose NVSwitch does NVLink SHARP (CUDA multicast): sm90 and later (search.cc refuses
#: the NVLS graph below compute capability 9.0).
NVLS_ARCHS: frozenset[str] = frozenset({"hopper", "blackwell"})
#: ``ncclNvlsInit``: NVLS is off when the node has this many GPUs or fewer (2).
NVLS_MIN_LOCAL_GPUS = 3

# --- latencies (tuning.cc baseLat / hwLat) ------------------------------------------------------------
BASE_LAT_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
    "pat": (0.0, 0.0, 0.0)}
HW_LAT_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0.0, 0.0, 3.7),
               "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 0.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0.0, 0.0, 3.7),
            "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
            "pat": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0.0, 0.0, 31.0),
            "collnet_chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 14.0),
            "pat": (0.0, 0.0, 0.0)},
}
# --- topology search (search.cc, v2.23.4-1): per-channel speeds tried for a graph inside one node ------
#: ``speedArrayIntra`` / ``sm90SpeedArrayIntra`` (GB/s per channel), tried from the fastest down.
SPEED_ARRAY_INTRA: tuple[float, ...] = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SM90_SPEED_ARRAY_INTRA: tuple[float, ...] = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
#: ``speedArrayInter`` / ``sm90SpeedArrayInter`` (GB/s per channel): the speeds tried for a graph that
#: leaves the node through its NICs (``system->nodes[NET].count > 0``).
SPEED_ARRAY_INTER: tuple[float, ...] = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0,
                                        4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SM90_SPEED_ARRAY_INTER: tuple[float, ...] = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                                             3.0, 2.4, 1.2, 0.24, 0.12)
#: ``ringGraph->maxChannels = MAXCHANNELS / 2`` (init.cc, MAXCHANNELS 32).
RING_SEARCH_MAX_CHANNELS = 16

#: PAT latency: 8 us base + log2(nNodes) x (inter latency / 3.5) + nRanks x 2.8 us (tuning.cc).
PAT_LAT_BASE_US = 8.0
PAT_LOG_LAT_DIVISOR = 3.5
PAT_LAT_PER_RANK_US = 2.8

# --- bandwidth caps (GB/s) per generation, for 1 / 2 / >2 nodes ------------------------------------------
RING_LL128_MAX_PER_CH = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 36.7)}
TREE_LL128_MAX_PER_CH = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 29.0)}
TREE_MAX_PER_CH = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0)}
# LL bandwidth caps: one node by GPU generation, several nodes by CPU vendor (2 nodes, > 2 nodes).
LL_MAX_SINGLE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0}
LL_MAX_BW = {"intel": (39.0, 20.4), "amd": (22.5, 19.0)}
#: Tree graphs of pattern ``NCCL_TOPO_PATTERN_TREE`` (all of a channel's NIC traffic through one GPU):
#: bus bandwidth x 0.85 (tuning.cc). The search falls back to that pattern on sm90+ when the balanced tree
#: (the NIC shared by two GPUs) finds no path, and always with one GPU per node (search.cc).
TREE_PATTERN_FACTOR = 0.85
#: NVLS / NVLSTree: algorithm bandwidth = the NVLS graph's bus bandwidth x 5/6 (tuning.cc "ratio").
NVLS_ALGBW_RATIO = 5.0 / 6.0
#: The NVLSTree kernel's ceiling per NVLS channel (bus GB/s; 2 nodes, > 2 nodes), by GPU generation:
#: ``perChMaxNVLSTreeBws`` of NCCL 2.28's ``tuning.cc`` (v2.28.3-1; 2.23 has no such row). The kernel it
#: describes is 2.23's (``all_reduce.h``'s NVLS_TREE warp split is the same in v2.23.4-1 and v2.28.3-1),
#: so it bounds what NVLSTree delivers on every version the suite's tables ran.
NVLS_TREE_MAX_PER_CH: dict[str, tuple[float, float]] = {"hopper": (57.7, 45.5), "blackwell": (96.0, 43.8)}
#: PAT: bus bandwidth x 0.85 (tuning.cc).
PAT_BUS_FACTOR = 0.85

# --- what later versions changed (``nccl_version``; v2.24.3-1 ... v2.29.2-1) --------------------------------
#: PAT's bus bandwidth factor from 2.24 on (0.85 in 2.23).
PAT_BUS_FACTOR_2_24 = 0.75
#: ``nvlsEfficiency`` of 2.28's NVLS / NVLSTree model, by generation: the NVLS graph's per-channel
#: ``bwIntra x efficiency x (nCh - 1) / nCh``, x 2 for AllReduce ("pipelines two operations"), x
#: ``(ppn - 1) / ppn`` otherwise; NVLSTree also takes ``bwInter`` (x 2 on <= 2 nodes) and
#: :data:`NVLS_TREE_MAX_PER_CH`, and its bus bandwidth converts to algorithm bandwidth as a ring's
#: (``nRanks / nsteps``; 2.23: x 5/6 of ``nChannels x min(bwIntra, bwInter)``, bwInter halved beyond two nodes).
NVLS_EFFICIENCY_2_28: dict[str, float] = {"hopper": 0.85, "blackwell": 0.74}
#: NVLSTree's network hop latency from 2.29 on (``hwLat[NET][NVLS_TREE][Simple]``; 14 us before).
NVLS_TREE_NET_LAT_US_2_29 = 20.9
# NCCL's measured correction of tree bandwidth for medium sizes, by floor(log2(bytes / 64)).
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}

# --- channels, chunks, protocols ---------------------------------------------------------------------------
# enqueue.cc: NCCL drops channels while bytes < nChannels * nThreads * threshold.
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
# Payload of one NCCL FIFO step: Simple 4 MiB buffer / 8 steps; LL 8 data bytes per 16-byte line;
# LL128 120 of every 128 bytes. Plans use it as the pipelining grain.
STEP_PAYLOAD_BYTES = {"Simple": 512 * 1024, "LL": 32 * 1024, "LL128": 576_000}
#: FIFO steps per connection (``NCCL_STEPS``, ``src/include/device.h``).
NCCL_STEPS = 8
#: ``NCCL_BUFFSIZE`` default (``DEFAULT_BUFFSIZE``, ``src/init.cc``): the Simple buffer, 8 steps of 512 KiB.
#: The variable sets only the Simple buffer (LL / LL128 have their own, ``NCCL_LL_BUFFSIZE`` ...).
DEFAULT_BUFF_BYTES = 1 << 22
#: The range collsim accepts for ``NCCL_BUFFSIZE`` (NCCL takes any int64; outside this a step is under
#: 8 KiB or over 128 MiB, which no platform profile sets).
MIN_BUFF_BYTES, MAX_BUFF_BYTES = 1 << 16, 1 << 30
#: NCCL_NVLS_NCHANNELS (16) and NCCL_NVLS_CHUNKSIZE (128 KiB): NVLS runs 16 channels of 128 KiB chunks per head.
NVLS_CHANNELS = 16
NVLS_CHUNK_BYTES = 128 * 1024
P2P_LL_THRESHOLD_BYTES = 16384  # NCCL_P2P_LL_THRESHOLD: p2p uses LL up to this size
#: Wire bytes per payload byte of each protocol: LL 16 per 8, LL128 128 per 120, Simple 1.
WIRE_BYTES_PER_PAYLOAD = {"LL": 2.0, "LL128": 128.0 / 120.0, "Simple": 1.0}
