"""Channels and chunks as NCCL sizes them (``enqueue.cc``, 2.23), and the plan-size budgets.

NCCL drops channels for small sizes, splits each channel's data into chunks of one or more FIFO steps,
and pipelines them; plans follow it, within budgets that keep the number of transfers bounded.
"""

from __future__ import annotations

import math

from sim.errors import SimError
from sim.planning.cost_model import nccl_nbytes
from sim.planning.nccl_tables import (
    DEFAULT_BUFF_BYTES,
    NCCL_STEPS,
    NVLS_CHANNELS,
    NVLS_CHUNK_BYTES,
    PROTOS,
    STEP_PAYLOAD_BYTES,
    THREAD_THRESHOLD,
    THREADS,
)

__all__ = [
    "DEFAULT_MAX_CHANNELS",
    "DEFAULT_MAX_CHUNKS",
    "DEFAULT_MAX_PIPELINE_TRANSFERS",
    "DEFAULT_MAX_TRANSFERS",
    "channels_for",
    "chunk_unit_bytes",
    "chunks_for",
    "nccl_chunk_bytes",
    "nvls_chunk_bytes",
    "pipeline_chunks",
]

#: Plans split a collective over at most this many channels unless told otherwise. One channel per GPU
#: of an 8-GPU server lets the per-channel ring rotation use every NIC once (see ``sim.planning.logical``).
DEFAULT_MAX_CHANNELS = 8
#: Plans split each channel's per-step data into at most this many pipelined chunks (plan size knob).
DEFAULT_MAX_CHUNKS = 4
#: Plans shrink chunks, then channels, to stay under this many transfers (the engine makes one flow each).
DEFAULT_MAX_TRANSFERS = 100_000
#: Trees, chains (Broadcast/Reduce), NVLS and PAT chunk as NCCL does: their critical path pays a pipeline
#: fill of (stages - 1) / chunks, so they need NCCL's chunk count (a ring's does not depend on it). Up to
#: this many transfers a plan has one transfer per edge and chunk; beyond it each edge becomes three
#: weighted pieces (head, body, tail: ``sim.planning.plan.assemble``) with the same critical path.
DEFAULT_MAX_PIPELINE_TRANSFERS = 4_096


def _check_proto(proto: str) -> None:
    if proto not in PROTOS:
        raise SimError(f"protocol {proto!r} is not one of: {', '.join(PROTOS)}")


def channels_for(op: str, algo: str, proto: str, nbytes: float, nranks: int,
                 max_channels: int = DEFAULT_MAX_CHANNELS) -> int:
    """Channels NCCL would use: drop channels while ``bytes < channels × threads × threshold``.

    Thresholds per channel: Simple 32 KiB, LL128 5 KiB, LL 4 KiB (× nranks on rings). Direct ops use
    one channel per peer pair. Trees run up to ``2 × max_channels``: NCCL runs every search channel
    twice, once per tree (``connect.cc``), so each NIC carries a channel of both trees
    (:func:`sim.planning.logical.rank_tree`).

    Examples
    --------
    >>> channels_for("AllReduce", "ring", "Simple", 100_000, 8)
    3
    >>> channels_for("AllReduce", "ring", "Simple", 1 << 30, 8)
    8
    >>> channels_for("AllReduce", "tree", "Simple", 1 << 30, 16)
    16
    """
    if max_channels < 1:
        raise SimError(f"max_channels {max_channels} must be >= 1")
    if algo == "direct":
        return 1
    p_thr = THREADS[proto] * THREAD_THRESHOLD[proto]
    if algo == "ring" and proto == "LL":
        p_thr *= nranks
    size = nccl_nbytes(op, nbytes, nranks)
    cap = 2 * max_channels if algo == "tree" else max_channels
    return int(max(1, min(cap, size // p_thr)))


def chunk_unit_bytes(proto: str, buff_bytes: int = DEFAULT_BUFF_BYTES) -> int:
    """Pipelining grain of a protocol: the payload of one NCCL FIFO step (bytes).

    Simple's step is ``NCCL_BUFFSIZE / NCCL_STEPS`` (``buff_bytes``, default 4 MiB: 512 KiB); LL and
    LL128 keep their own buffers (``NCCL_BUFFSIZE`` does not change them, ``src/init.cc``).

    Examples
    --------
    >>> chunk_unit_bytes("Simple"), chunk_unit_bytes("Simple", 8 << 20), chunk_unit_bytes("LL", 8 << 20)
    (524288, 1048576, 32768)
    """
    _check_proto(proto)
    if proto == "Simple":
        return int(buff_bytes) // NCCL_STEPS
    return STEP_PAYLOAD_BYTES[proto]


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
                     nnodes: int, buff_bytes: int = DEFAULT_BUFF_BYTES) -> float:
    """Payload of one NCCL chunk (bytes), as ``enqueue.cc`` (2.23) sizes it.

    One FIFO step of payload (``buffSize / NCCL_STEPS``: Simple 512 KiB at the default ``NCCL_BUFFSIZE``
    ``buff_bytes`` of 4 MiB, LL 32 KiB, LL128 576,000 B) times
    the chunk steps (ring Simple AllReduce/AllGather/ReduceScatter: 4; trees, Broadcast, Reduce: 1); tree
    LL128 halves it while a channel would get too few chunks (``nBytes / (nChannels * chunk) <
    nsteps * 64 / ppn`` down to 128 KiB, ``* 16`` down to 32 KiB, ``nsteps = 1 + log2(nNodes) + 0.1 ppn``).

    Examples
    --------
    >>> nccl_chunk_bytes("AllReduce", "tree", "Simple", 1 << 30, 8, 16, 2)
    524288
    >>> nccl_chunk_bytes("AllReduce", "ring", "Simple", 1 << 30, 8, 16, 2)
    2097152
    >>> nccl_chunk_bytes("AllReduce", "tree", "Simple", 1 << 30, 8, 16, 2, buff_bytes=8 << 20)
    1048576
    """
    chunk = chunk_unit_bytes(proto, buff_bytes)
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


def pipeline_chunks(ch_bytes: float, chunk_bytes: float, per_channel: int = 1, nchannels: int = 1,
                    max_transfers: int | None = None) -> int:
    """Chunks per channel of a tree or chain: NCCL's ``ceil(ch_bytes / chunk_bytes)``, at least 1.

    Plans no longer cap it (``assemble`` turns a long pipeline into three weighted pieces per edge whose
    critical path is the same); ``max_transfers`` still caps ``nchannels x per_channel x chunks`` when
    given.

    Examples
    --------
    >>> pipeline_chunks(64 << 20, 512 << 10)
    128
    >>> pipeline_chunks(64 << 20, 512 << 10, 30, 8, max_transfers=16_384)
    68
    """
    if max_transfers is not None and max_transfers < 1:
        raise SimError(f"max_pipeline_transfers {max_transfers} must be >= 1")
    if not chunk_bytes > 0:
        raise SimError(f"chunk_bytes {chunk_bytes} must be > 0")
    want = max(1, math.ceil(ch_bytes / chunk_bytes))
    if max_transfers is None:
        return int(want)
    return int(max(1, min(want, max_transfers // max(1, nchannels * per_channel))))


def nvls_chunk_bytes(algo: str, nbytes: float, nheads: int, nnodes: int, nchannels: int = NVLS_CHANNELS) -> int:
    """Payload of one NVLS / NVLSTree chunk of one head (bytes), as ``enqueue.cc`` (2.23) sizes it.

    ``NCCL_NVLS_CHUNKSIZE`` (128 KiB), 64 KiB for NVLSTree on 4 nodes or more, halved down to 16 KiB
    (NVLS) or 32 KiB (NVLSTree) while the op has too few chunks per channel and head
    (``concurrentOps = nChannels x nHeads``).

    Examples
    --------
    >>> nvls_chunk_bytes("nvls", 1 << 30, 8, 1)
    131072
    >>> nvls_chunk_bytes("nvls", 1 << 20, 8, 1)
    16384
    >>> nvls_chunk_bytes("nvls_tree", 1 << 30, 8, 4)
    65536
    """
    if algo not in ("nvls", "nvls_tree"):
        raise SimError(f"algorithm {algo!r} has no NVLS chunk size (nvls, nvls_tree)")
    chunk = NVLS_CHUNK_BYTES
    conc = max(int(nchannels), 1) * max(int(nheads), 1)
    steps = ((64, 65536), (8, 32768), (2, 16384)) if algo == "nvls" else ((16, 131072), (4, 65536), (1, 32768))
    if algo == "nvls_tree" and nnodes >= 4:
        chunk = 65536
    for mult, floor in steps:
        if nbytes < mult * conc * chunk and chunk > floor:
            chunk = floor
    return chunk
