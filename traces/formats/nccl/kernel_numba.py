"""Compiled (numba) reading of one chunk of NCCL log text: every line classified and the standard COLL and
TUNING lines read: one flat pass over the bytes notes where each line's marks are, then only the lines
holding one are read (by the field readers of :mod:`traces.formats.nccl.kernel_fields`).

The rules are those of the numpy positional path (:mod:`traces.formats.nccl.kernel_numpy`): the same token layouts,
the same prefix, the same outer timestamps. A line that does not fit them exactly is flagged, and the
caller hands it to the forgiving per-line parser, as before. Text fields come back as byte spans plus a
64-bit hash, so the caller builds one Python string per distinct value, never one per row.

numba compiles these functions on first use and caches the machine code on disk (``cache=True``), so only
the first run after an install pays the compile time.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

# The matrices' columns and the op codes live in a module without numba, for the ahead-of-time build
# (traces.formats.nccl.kernel_aot), whose callers never import numba; re-exported here.
from traces.formats.nccl.kernel_cols import (  # noqa: F401
    C_COLS,
    C_COUNT,
    C_DEV,
    C_DT,
    C_GRANK,
    C_HE,
    C_HS,
    C_LE,
    C_LINE,
    C_LS,
    C_NRANKS,
    C_OE,
    C_OK,
    C_OP,
    C_OS,
    C_PID,
    C_ROOT,
    C_TID,
    C_TS,
    NO_TS,
    OP_LIST,
    OP_NAMES,
    T_AE,
    T_AS,
    T_COLS,
    T_DEV,
    T_HE,
    T_HS,
    T_LE,
    T_LINE,
    T_LS,
    T_NBYTES,
    T_OE,
    T_OK,
    T_OP,
    T_OS,
    T_PE,
    T_PID,
    T_PS,
    T_TID,
    T_TS,
)
from traces.formats.nccl.kernel_cols import distinct_spans as spans_of
from traces.formats.nccl.kernel_fields import (  # noqa: F401 - the tables re-exported
    KW_LEN,
    KW_MAT,
    MAX_TOK,
    OP_LEN,
    OP_MAT,
    is_at,
    read_coll,
    read_tuning,
)

_COLL_MARK = np.frombuffer(b": opCount ", dtype=np.uint8)
_TUNING_MARK = np.frombuffer(b" Bytes -> Algo ", dtype=np.uint8)
_INFO = np.frombuffer(b" NCCL INFO ", dtype=np.uint8)
_ANKS = np.frombuffer(b"anks ", dtype=np.uint8)
_CHANNEL = np.frombuffer(b"Channel ", dtype=np.uint8)
_VERSION = np.frombuffer(b"NCCL version", dtype=np.uint8)
#: Byte -> what it may start: 1 newline, 2 ": opCount ", 3 "Bytes -> Algo " (after a space), 4 the 'k' of
#: "anks ", 5 "Channel ", 6 the 'v' of "NCCL version", 7 the 'F' of " NCCL INFO " (two in a line: maybe a
#: line torn by another process's write, which the caller reads with the per-line parsers).
_TRIGGER = np.zeros(256, dtype=np.uint8)
for _c, _k in ((b"\n", 1), (b":", 2), (b"B", 3), (b"k", 4), (b"C", 5), (b"v", 6), (b"F", 7)):
    _TRIGGER[_c[0]] = _k



@njit(cache=True, nogil=True)
def scan_chunk(a):
    """Classify every line of a chunk of complete lines and read the standard COLL and TUNING lines.

    Parameters
    ----------
    a : numpy.ndarray of uint8
        The chunk's bytes.

    Returns
    -------
    (coll, coll_u64, tuning, others, n_lines)
        ``coll``: int64 rows (``C_*`` columns) of the lines holding ``": opCount "``, ``C_OK`` 0 where the
        per-line parser must read the line (not one standard body); ``coll_u64``: opCount and comm pointer
        of each row as uint64; ``tuning``: int64 rows (``T_*`` columns) of the lines holding
        ``" Bytes -> Algo "``; ``others``: (line, start, end) of the lines the rare-line parser must see
        (Init, ring, version candidates, TUNING lines not read here); ``n_lines``: lines in the chunk.
    """
    n = len(a)
    n_lines = 0
    for j in range(n):
        if a[j] == 10:
            n_lines += 1
    if n and a[n - 1] != 10:
        n_lines += 1
    # One flat pass over the bytes with a lookup table (tight, branch-light), noting per line where the
    # marks are; then the per-line work touches only the lines that hold one.
    line_end = np.empty(n_lines, dtype=np.int64)
    coll_at = np.full(n_lines, -1, dtype=np.int64)
    tun_at = np.full(n_lines, -1, dtype=np.int64)
    # 1: second COLL mark, 2: second TUNING mark, 4: rare-line literal, 16: one " NCCL INFO ", 8: a second one
    flags = np.zeros(n_lines, dtype=np.uint8)
    line = 0
    for j in range(n):
        k = _TRIGGER[a[j]]
        if k == 0:
            continue
        if k == 1:
            line_end[line] = j
            line += 1
        elif k == 2:
            if is_at(a, j, _COLL_MARK):
                if coll_at[line] < 0:
                    coll_at[line] = j
                else:
                    flags[line] |= 1
        elif k == 3:
            if is_at(a, j - 1, _TUNING_MARK):
                if tun_at[line] < 0:
                    tun_at[line] = j - 1
                else:
                    flags[line] |= 2
        elif k == 4:
            if is_at(a, j - 2, _ANKS):
                flags[line] |= 4
        elif k == 5:
            if is_at(a, j, _CHANNEL):
                flags[line] |= 4
        elif k == 6:
            if is_at(a, j - 5, _VERSION):
                flags[line] |= 4
        elif k == 7:
            if is_at(a, j - 8, _INFO):
                flags[line] |= 8 if flags[line] & 16 else 16
    if line < n_lines:
        line_end[line] = n
    nc = nt = no = 0
    for line in range(n_lines):
        if coll_at[line] >= 0:
            nc += 1
        if tun_at[line] >= 0:
            nt += 1
        if coll_at[line] < 0 and (tun_at[line] >= 0 or flags[line] & 12):
            no += 1
    coll = np.empty((nc, C_COLS), dtype=np.int64)
    u64 = np.zeros((nc, 2), dtype=np.uint64)
    tuning = np.empty((nt, T_COLS), dtype=np.int64)
    others = np.empty((no, 3), dtype=np.int64)
    scratch = np.empty(2 * MAX_TOK, dtype=np.int64)
    nc = nt = no = 0
    for line in range(n_lines):
        cm = coll_at[line]
        tm = tun_at[line]
        if cm < 0 and tm < 0 and not flags[line] & 12:
            continue
        ls = line_end[line - 1] + 1 if line else 0
        le = line_end[line]
        if le > ls and a[le - 1] == 13:
            le -= 1
        tuning_ok = False
        if tm >= 0:
            tuning[nt, T_LINE] = line
            tuning[nt, T_LS] = ls
            tuning[nt, T_LE] = le
            tuning_ok = (not flags[line] & 2) and read_tuning(a, ls, le, tm, tuning, nt)
            tuning[nt, T_OK] = tuning_ok
            nt += 1
        if cm >= 0:
            coll[nc, C_LINE] = line
            coll[nc, C_LS] = ls
            coll[nc, C_LE] = le
            coll[nc, C_OK] = (not flags[line] & 9) and read_coll(a, ls, le, cm, coll, u64, nc, scratch)
            nc += 1
        elif not tuning_ok or flags[line] & 8:
            others[no, 0] = line
            others[no, 1] = ls
            others[no, 2] = le
            no += 1
    return coll[:nc], u64[:nc], tuning[:nt], others[:no], n_lines


@njit(cache=True, nogil=True)
def span_hashes(a, start, end):
    """FNV-1a 64-bit hash of each byte span [start, end) of ``a`` (empty spans hash alike)."""
    out = np.empty(len(start), dtype=np.uint64)
    for i in range(len(start)):
        h = np.uint64(14695981039346656037)
        for j in range(start[i], end[i]):
            h = (h ^ np.uint64(a[j])) * np.uint64(1099511628211)
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def spans_equal(a, s1, e1, s2, e2):
    """True when every span [s1, e1) holds the same bytes as the span [s2, e2) of the same row."""
    for i in range(len(s1)):
        if e1[i] - s1[i] != e2[i] - s2[i]:
            return False
        for j in range(e1[i] - s1[i]):
            if a[s1[i] + j] != a[s2[i] + j]:
                return False
    return True


def distinct_spans(a: np.ndarray, buf: bytes, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Codes and distinct byte strings of the spans [start, end) of a chunk (one Python object per value),
    hashed by this module's :func:`span_hashes` (:func:`traces.formats.nccl.kernel_cols.distinct_spans`).

    Examples
    --------
    >>> buf = b"ab cd ab"
    >>> codes, uniq = distinct_spans(np.frombuffer(buf, np.uint8), buf, np.array([0, 3, 6]), np.array([2, 5, 8]))
    >>> codes.tolist(), uniq
    ([0, 1, 0], [b'ab', b'cd'])
    """
    return spans_of(sys.modules[__name__], a, buf, start, end)


__all__ = ["C_COLS", "C_COUNT", "C_DEV", "C_DT", "C_GRANK", "C_HE", "C_HS", "C_LE", "C_LINE", "C_LS",
    "C_NRANKS", "C_OE", "C_OK", "C_OP", "C_OS", "C_PID", "C_ROOT", "C_TID", "C_TS", "KW_LEN", "KW_MAT",
    "NO_TS", "OP_LEN", "OP_LIST", "OP_MAT", "OP_NAMES", "T_AE", "T_AS", "T_COLS", "T_DEV", "T_HE", "T_HS",
    "T_LE", "T_LINE", "T_LS", "T_NBYTES", "T_OE", "T_OK", "T_OP", "T_OS", "T_PE", "T_PID", "T_PS", "T_TID",
    "T_TS", "distinct_spans", "scan_chunk", "span_hashes", "spans_equal"]
