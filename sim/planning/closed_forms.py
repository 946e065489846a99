"""Closed forms and nccl-tests' definitions: alpha-beta times on a non-blocking fabric, algbw, busbw.

References
----------
NVIDIA/nccl-tests ``doc/PERFORMANCE.md`` (algbw, busbw).
"""

from __future__ import annotations

import math

from sim.errors import SimError
from sim.planning.cost_model import supported_algos

__all__ = ["algbw_bytes_per_s", "busbw_bytes_per_s", "busbw_factor", "ideal_time_s", "nccltests_bytes"]


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
    AllReduce (nvls)        (n+1)/n · S / B  (one server: a GPU's      4
                            NVLink carries S/n per head + its own)
    AllGather, ReduceScat.  (n−1) · S_rank / B                         n−1
    AllGather, RS (pat)     (n−1) · S_rank / B                         ceil(log2 n)
    AllGather, RS (nvls)    n · S_rank / B                             2
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
    >>> ideal_time_s("AllReduce", 8e9, 8, 1e9, "nvls")
    9.0
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
    if op == "AllReduce" and algo == "nvls":
        return (n + 1) / n * nbytes / b + 4 * alpha_s
    if op == "AllReduce":
        return 2 * (n - 1) / n * nbytes / b + 2 * (n - 1) * alpha_s
    if op in ("AllGather", "ReduceScatter") and algo == "pat":
        return (n - 1) * nbytes / b + math.ceil(math.log2(n)) * alpha_s
    if op in ("AllGather", "ReduceScatter") and algo == "nvls":
        return n * nbytes / b + 2 * alpha_s
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
