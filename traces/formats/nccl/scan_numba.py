"""The compiled chunk reader's side of a scan: the kernel (numba's JIT of :mod:`traces.formats.nccl.kernel_numba`,
or the same functions built ahead of time, :mod:`traces.formats.nccl.kernel_aot`) runs on chunks, and its arrays
become the same columns and records the numpy path of :mod:`traces.formats.nccl.scan` produces (odd lines
still go to the same per-line parsers). The JIT kernel releases the GIL and runs in threads ahead of the
caller; the ahead-of-time one holds it and runs on the calling thread."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np

from traces.arrays import factorize, unique
from traces.formats.nccl import kernel_cols as J
from traces.formats.nccl import layout as L
from traces.formats.nccl import torn as T
from traces.formats.nccl.kernel_cols import distinct_spans
from traces.formats.nccl.kernel_numpy import text_timestamps
from traces.formats.nccl.records import (
    NO_TS,
    FileScan,
    empty_columns,
    note_ts,
    parse_other,
    parse_slow,
    recover_torn,
)
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: Threads running the compiled kernel ahead of the thread that builds the columns (it releases the GIL).
KERNEL_THREADS = 2


def scan_chunks(chunks: Iterator[bytes], scan: FileScan, parts: list, report: IngestReport,
                progress: Callable[[float], Any] | None, kernel: ModuleType | None = None,
                threads: int | None = None) -> int:
    """Scan chunks with the compiled kernel, up to ``threads`` chunks ahead in threads, so the kernel's
    passes over the next chunks run while this thread turns chunk k's arrays into columns (memory: at most
    ``threads + 1`` chunks in flight).

    Parameters
    ----------
    kernel : module, optional
        What provides ``scan_chunk``, ``span_hashes`` and ``spans_equal``: :mod:`traces.formats.nccl.kernel_numba`
        (the default) or the module :func:`traces.formats.nccl.kernel_aot.load` returns.
    threads : int, optional
        Kernel threads; default ``KERNEL_THREADS`` for the JIT kernel, 0 (this thread) for any other
        (one that holds the GIL gains nothing from threads).

    Returns
    -------
    int
        The lines in all chunks; columns go to ``parts``, rare records and TUNING columns to ``scan``.
    """
    if kernel is None:
        from traces.formats.nccl import kernel_numba as kernel
    if threads is None:
        threads = KERNEL_THREADS if kernel.__name__.endswith("kernel_numba") else 0
    line_base = 0
    if not threads:
        for buf in chunks:
            line_base += _columns(buf, kernel.scan_chunk(np.frombuffer(buf, dtype=np.uint8)), line_base, scan,
                                  parts, report, kernel)
            if progress is not None:
                progress(len(buf))
        return line_base
    pending: deque[tuple[bytes, Future]] = deque()
    with ThreadPoolExecutor(threads) as pool:
        for buf in chunks:
            pending.append((buf, pool.submit(kernel.scan_chunk, np.frombuffer(buf, dtype=np.uint8))))
            if len(pending) > threads:
                done, fut = pending.popleft()
                line_base += _columns(done, fut.result(), line_base, scan, parts, report, kernel)
                if progress is not None:
                    progress(len(done))
        while pending:
            done, fut = pending.popleft()
            line_base += _columns(done, fut.result(), line_base, scan, parts, report, kernel)
            if progress is not None:
                progress(len(done))
    return line_base


def _columns(buf: bytes, kernel_out: tuple, line_base: int, scan: FileScan, parts: list,
             report: IngestReport, kernel: ModuleType) -> int:
    """What :func:`traces.formats.nccl.scan_numpy.scan_chunk` does, from the compiled kernel's arrays for
    ``buf`` (same fields, same rules). Returns the chunk's line count."""
    if not scan.nccl_lines:
        scan.nccl_lines = buf.count(b"NCCL")
    a = np.frombuffer(buf, dtype=np.uint8)
    coll, u64, tun, others, n_lines = kernel_out
    ok = coll[:, J.C_OK] == 1
    if ok.any():
        c, words = coll[ok], u64[ok]
        ccodes, comms = factorize(words[:, 1])
        parts.append({
            "line": c[:, J.C_LINE] + line_base + 1,
            "host": _text_column(kernel, a, buf, c[:, J.C_HS], c[:, J.C_HE]), "pid": c[:, J.C_PID].copy(),
            "tid": c[:, J.C_TID].copy(), "dev": c[:, J.C_DEV].copy(),
            "ts_us": _stamps(buf, c[:, J.C_TS], c[:, J.C_OS], c[:, J.C_OE]).copy(),
            "op": J.OP_NAMES[c[:, J.C_OP]], "opc": words[:, 0].view(np.int64).copy(), "count": c[:, J.C_COUNT].copy(),
            "dt": c[:, J.C_DT].copy(), "root": c[:, J.C_ROOT].copy(),
            "comm": np.array([f"0x{int(v):x}" for v in comms], dtype=object)[ccodes],
            "nranks": c[:, J.C_NRANKS].copy(), "grank": c[:, J.C_GRANK].copy(),
        })  # columns copied out: a view would keep the kernel's whole (lines x 18) matrix alive (memory)
    slow = empty_columns()
    bad = coll[~ok][:, [J.C_LINE, J.C_LS, J.C_LE]]
    # Lines with two prefixes or more (the kernel flags them) may be torn: their heads are completed first.
    cand = np.concatenate([bad[:, 0], others[:, 0]])
    inter = [int(i) for i, ls, le in np.concatenate([bad, others]).tolist() if buf.count(T.INFO.encode(), ls, le) >= 2]
    consumed: set[int] = set()
    rest: dict[int, int] = {}
    if inter and len(cand):
        text_of = _line_reader(buf)
        hosts = unique(parts[-1]["host"]) if ok.any() else ()
        consumed, rest = recover_torn(sorted(set(inter)), text_of, hosts, line_base, scan, slow, report)
    for line, ls, le in bad.tolist():
        if line in consumed:
            continue
        nxt = None
        if line + 1 < n_lines and line + 1 not in consumed:
            nl = buf.find(b"\n", le)
            stop = buf.find(b"\n", nl + 1)
            nxt = buf[nl + 1: stop if stop >= 0 else len(buf)].decode("utf-8", "replace").rstrip("\r")
        text = buf[ls:le].decode("utf-8", "replace").rstrip("\r")
        parse_slow(text[rest.get(line, 0):], nxt, line_base + line + 1, scan, slow, report)
    if slow["line"]:
        parts.append(slow)
    tok = tun[:, J.T_OK] == 1
    if tok.any():
        t = tun[tok]
        op = np.where(t[:, J.T_OP] >= 0, J.OP_NAMES[np.maximum(t[:, J.T_OP], 0)], None)
        scan.tuning_parts.append({
            "line": t[:, J.T_LINE] + line_base + 1,
            "host": _text_column(kernel, a, buf, t[:, J.T_HS], t[:, J.T_HE]), "pid": t[:, J.T_PID], "op": op,
            "nbytes": t[:, J.T_NBYTES],
            "algo": _text_column(kernel, a, buf, t[:, J.T_AS], t[:, J.T_AE], lambda u: L.algo_name(u.decode())),
            "proto": _text_column(kernel, a, buf, t[:, J.T_PS], t[:, J.T_PE], lambda u: L.proto_name(u.decode())),
        })
        ts = _stamps(buf, t[:, J.T_TS], t[:, J.T_OS], t[:, J.T_OE])
        ts = ts[ts != NO_TS]
        if len(ts):
            note_ts(scan, int(ts.min()))
    # TUNING lines the kernel read come back among the others only when they hold two prefixes (for the
    # torn-line search above): not to be read twice.
    read = set(tun[tok][:, J.T_LINE].tolist()) if tok.any() else set()
    for line, ls, le in others.tolist():
        if line in consumed or line in read:
            continue
        parse_other(buf[ls:le].decode("utf-8", "replace").rstrip("\r"), line_base + line + 1, scan)
    return n_lines


def _line_reader(buf: bytes) -> Callable[[int], str | None]:
    """Line index -> text of a chunk (None past its end), for the few lines the torn-line search reads."""
    ends = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
    if len(buf) and (not len(ends) or ends[-1] != len(buf) - 1):
        ends = np.append(ends, len(buf))

    def text_of(k: int) -> str | None:
        if k >= len(ends):
            return None
        start = int(ends[k - 1]) + 1 if k else 0
        return buf[start: int(ends[k])].decode("utf-8", "replace").rstrip("\r")

    return text_of


def _text_column(kernel: ModuleType, a: np.ndarray, buf: bytes, start: np.ndarray, end: np.ndarray,
                 convert: Callable[[bytes], Any] = lambda u: u.decode("utf-8", "replace")) -> np.ndarray:
    """Object column of ``convert(span)`` for the spans [start, end) of the chunk, converted once per value."""
    codes, uniq = distinct_spans(kernel, a, buf, np.ascontiguousarray(start), np.ascontiguousarray(end))
    return np.array([convert(u) for u in uniq], dtype=object)[codes]


def _stamps(buf: bytes, ts: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The kernel's timestamps, with outer texts it could not read (``start >= 0``) parsed once per distinct text."""
    rest = np.flatnonzero(start >= 0)
    if not len(rest):
        return ts
    ts = ts.copy()
    ts[rest] = text_timestamps(buf, start[rest], end[rest])
    return ts


__all__ = ["KERNEL_THREADS", "scan_chunks"]
