"""Positional, vectorised reading of standard COLL and TUNING lines straight from a chunk's bytes.

The COLL format string is fixed (``docs/nccl_logs.md``), so once the positions of the spaces of a chunk
are known (one numpy pass), token k of every COLL body is a pair of array lookups, and numbers are read
from a (rows x digits) matrix of bytes. No regex runs per line. Rows whose layout is not exactly one of the
known ones (interleaved writes, missing prefix, odd tokens) are flagged, and the caller parses those with
the forgiving per-line parser; both paths give the same fields. The chunk's byte operations are
:mod:`traces.formats.nccl.chunk_bytes`, the outer timestamps :mod:`traces.formats.nccl.chunk_stamps`
(re-exported here).

Examples
--------
>>> max(LAYOUTS) + 1 == SPACE_WINDOW  # the chunk's windows hold one space more than the longest layout
True
"""

from __future__ import annotations

import re

import numpy as np

from traces.formats.nccl import layout as L
from traces.formats.nccl.chunk_bytes import PAD, SPACE_WINDOW, Chunk, distinct_tokens
from traces.formats.nccl.chunk_stamps import NO_TS, outer_timestamps, text_timestamps
from traces.lazy import lazy_module

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does
_OP_BYTES = {name.encode(): name for name in L.NCCL_OPS}
#: token count after ": opCount " -> (shift for ` acc %p`, has RCCL ` task %d globalrank %d`).
LAYOUTS: dict[int, tuple[int, bool]] = {18: (0, False), 17: (0, False), 20: (2, False), 19: (2, False),
                                        22: (0, True), 24: (2, True)}
#: Spaces read per COLL body: one more than the longest layout has, to tell "too many tokens" (the width
#: of the chunk's space windows, :data:`traces.formats.nccl.chunk_bytes.SPACE_WINDOW`).
_WINDOW = SPACE_WINDOW


def coll_fields(ch: Chunk, marks: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Read the COLL lines whose ``": opCount "`` is at ``marks``.

    Returns
    -------
    (columns, ok)
        ``columns`` holds ``line`` (0-based index in the chunk), ``host``, ``pid``, ``tid``, ``ts_us``,
        ``op``, ``opc``, ``count``, ``dt``, ``root``, ``comm``, ``nranks``, ``grank`` for every mark;
        only rows with ``ok`` are valid, the rest need the per-line parser.
    """
    n = len(marks)
    li = ch.line_of(marks)
    start, end = ch.line_bounds(li)
    ok = np.ones(n, dtype=bool)
    if n > 1:  # two bodies in one line (interleaved writes): per-line parser
        dup = np.zeros(n, dtype=bool)
        dup[1:] = li[1:] == li[:-1]
        dup[:-1] |= dup[1:]
        ok &= ~dup
    body = marks + len(L.COLL_MARK)
    # ": opCount " holds spaces at +1 and +9, so the first space of the body is 2 after the mark's first.
    # The body's spaces are then read as one (rows x window) block: one cache-friendly gather per row
    # instead of a random lookup per token.
    k1 = np.searchsorted(ch.sp, marks)
    last = max(len(ch.sp) - 1, 0)
    spaces = ch.sp_windows[k1 + 2]  # padding lies past every line end: never inside
    inside = spaces < end[:, None]
    nsp = inside.sum(axis=1)
    ntok = nsp + 1
    cols = {name: np.zeros(n, dtype=np.int64) for name in ("count", "dt", "root", "nranks", "grank")}
    cols["grank"][:] = -1
    opc = np.zeros(n, dtype=np.uint64)
    comm_start = np.zeros(n, dtype=np.int64)  # the comm pointer's hex digits [comm_start, comm_end)
    comm_end = np.zeros(n, dtype=np.int64)
    layout_ok = np.zeros(n, dtype=bool)
    for count, (shift, rccl) in LAYOUTS.items():
        rows = np.flatnonzero(ok & (ntok == count))
        if not len(rows):
            continue
        b, sp, e = body[rows], spaces[rows], end[rows]
        nt = count - 1  # spaces inside the body for this layout

        def tok(k: int, b=b, sp=sp, e=e, nt=nt):
            return (b if k == 0 else sp[:, k - 1] + 1), (sp[:, k] if k < nt else e)

        # Layout = token count plus every keyword in place, byte for byte (a damaged keyword is not a
        # standard line: the per-line parser decides), and numbers checked digit by digit below.
        words = [(1, b"sendbuff"), (3, b"recvbuff"), *([(5, b"acc")] if shift else []),
                 *((k + shift, w) for k, w in ((5, b"count"), (7, b"datatype"), (9, b"op"), (11, b"root"),
                                               (13, b"comm"), (16, b"stream"))),
                 *([(18 + shift, b"task"), (20 + shift, b"globalrank")] if rccl else [])]
        good = np.ones(len(rows), dtype=bool)
        for k, w in words:
            good &= ch.equals(*tok(k), w)
        for name, k, width in (("count", 6, 18), ("dt", 8, 4), ("root", 12, 9)):
            value, valid = ch.decimal(*tok(k + shift), width)
            cols[name][rows] = value
            good &= valid
        s, e2 = tok(15 + shift)
        good &= ch.equals(s, s + 8, b"[nranks=") & (ch.arr[np.maximum(e2 - 1, 0)] == 93)
        value, valid = ch.decimal(s + 8, e2 - 1, 9)
        cols["nranks"][rows] = value
        good &= valid
        value, valid = ch.hexnum(*tok(0))
        opc[rows] = value
        good &= valid
        s, e2 = tok(14 + shift)
        good &= ch.equals(s, s + 2, b"0x")
        comm_start[rows], comm_end[rows] = s + 2, e2
        if rccl:
            value, valid = ch.decimal(*tok(21 + shift), 9)
            cols["grank"][rows] = value
            good &= valid
        layout_ok[rows] = good
    ok &= layout_ok
    # The op name is the word ending at the mark, right after " NCCL INFO ".
    k = k1 - 1
    op_start = np.maximum(np.where(k >= 0, ch.sp[np.clip(k, 0, last)] + 1, 0), start) if len(ch.sp) else start
    op = _op_names(ch, op_start, marks)
    ok &= op != None  # noqa: E711 - elementwise test on an object array
    # A process uses a few comm pointers: parse each distinct one once (no per-row hex arithmetic).
    codes, uniq = distinct_tokens(ch, comm_start, comm_end)
    ptr = np.array([_pointer(u) for u in uniq], dtype=object)
    comm = ptr[codes] if n else np.empty(0, dtype=object)
    ok &= comm != None  # noqa: E711
    prefix = prefix_fields(ch, op_start, start, k1 - 3)
    ok &= prefix.pop("ok")
    cols.update(prefix)
    cols["op"] = op
    cols["line"] = li
    cols["opc"] = opc.view(np.int64)  # compared for equality only: no text needed
    cols["comm"] = comm
    return cols, ok


_OP_OF_BYTES: dict[bytes, str] = dict(_OP_BYTES)
_HEX_DIGITS = re.compile(rb"[0-9a-fA-F]{1,16}")


def _op_names(ch: Chunk, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The NCCL op name exactly in each [start, end), or None (looked up once per distinct token)."""
    codes, uniq = distinct_tokens(ch, start, end)
    names = np.array([_OP_OF_BYTES.get(u) for u in uniq], dtype=object)
    return names[codes] if len(start) else np.empty(0, dtype=object)


def _pointer(digits: bytes) -> str | None:
    """``0x`` + 1 to 16 hex digits in the canonical form of :func:`nccl_log_lines.pointer_text`, else None."""
    return f"0x{int(digits, 16):x}" if _HEX_DIGITS.fullmatch(digits) else None


def prefix_fields(ch: Chunk, body_start: np.ndarray, line_start: np.ndarray,
                  k: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """host, pid, tid and outer timestamp of lines whose NCCL body starts at ``body_start``.

    ``ok`` is False where the body is not preceded by ``host:pid:tid [dev] NCCL INFO ``. ``k``, when the
    caller knows it, is the index in ``ch.sp`` of the space that starts ``" NCCL INFO "``.
    """
    n = len(body_start)
    info = body_start - len(" NCCL INFO ")
    ok = ch.equals(info, body_start, b" NCCL INFO ") & (
        info > line_start)
    if k is None:
        k = np.searchsorted(ch.sp, info)
    ok &= (k >= 0) & (ch.sp[np.clip(k, 0, max(len(ch.sp) - 1, 0))] == info) if len(ch.sp) else ok & False
    s1 = ch.sp[np.clip(k - 1, 0, len(ch.sp) - 1)]
    ok &= (k >= 1) & (s1 >= line_start) & (ch.arr[np.minimum(s1 + 1, ch.n)] == 91)
    s2 = np.where(k >= 2, ch.sp[np.clip(k - 2, 0, len(ch.sp) - 1)], -1)
    has_outer = s2 >= line_start
    hpt_start = np.where(has_outer, s2 + 1, line_start)
    codes, uniq = distinct_tokens(ch, hpt_start, s1)
    hosts, pids, tids, bad = [], [], [], []
    for token in uniq:
        parts = token.decode("utf-8", "replace").rsplit(":", 2)
        good = len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit()
        # A launcher tag glued before the host (Open MPI ``[1,4]<stdout>:host``) ends at a ':'.
        hosts.append(parts[0].rsplit(":", 1)[-1] if good else "")
        pids.append(int(parts[1]) if good else -1)
        tids.append(int(parts[2]) if good else -1)
        bad.append(not good)
    ok &= ~np.asarray(bad, dtype=bool)[codes] if n else ok
    # ``[dev]``: the thread's current CUDA device (-1 when not a plain number)
    dev, dev_ok = ch.decimal(s1 + 2, info - 1, 6)
    dev_ok &= ch.arr[np.clip(info - 1, 0, ch.n)] == 93
    out = {
        "dev": np.where(dev_ok, dev, -1).astype(np.int64),
        "host": np.asarray(hosts, dtype=object)[codes] if n else np.empty(0, dtype=object),
        "pid": np.asarray(pids, dtype=np.int64)[codes] if n else np.empty(0, dtype=np.int64),
        "tid": np.asarray(tids, dtype=np.int64)[codes] if n else np.empty(0, dtype=np.int64),
        "ts_us": np.full(n, NO_TS, dtype=np.int64),
        "ok": ok,
    }
    rows = np.flatnonzero(has_outer & ok)
    if len(rows):
        out["ts_us"][rows] = outer_timestamps(ch, line_start[rows], s2[rows])
    return out


def tuning_fields(ch: Chunk, marks: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """TUNING lines whose ``" Bytes -> Algo "`` is at ``marks`` (all three versions), as columns.

    Returns
    -------
    (columns, ok)
        ``line`` (0-based in the chunk), ``host``, ``pid``, ``op`` (printed name or None), ``nbytes``,
        ``algo``, ``proto``, ``ts_us``; only rows with ``ok`` are valid (the rest need the per-line parser).
    """
    li = ch.line_of(marks)
    start, end = ch.line_bounds(li)
    last = max(len(ch.sp) - 1, 0)
    k = np.searchsorted(ch.sp, marks) - 1  # the space before the byte count
    nb_start = np.where(k >= 0, ch.sp[np.clip(k, 0, last)] + 1, start)
    nbytes, ok = ch.decimal(np.maximum(nb_start, start), marks)
    k2 = k - 1
    op_start = np.where(k2 >= 0, ch.sp[np.clip(k2, 0, last)] + 1, start)
    named = (op_start >= start) & (ch.arr[np.maximum(nb_start - 2, 0)] == 58)  # "%s: " before
    body = np.where(named, op_start, nb_start)
    prefix = prefix_fields(ch, body, start)
    ok &= prefix["ok"]
    op = _op_names(ch, op_start, nb_start - 2)
    ok &= ~named | (op != None)  # noqa: E711 - garbage glued to the name: per-line parser
    op[~named] = None
    # "<algo> proto <proto>" after the mark, single spaces, each name \w+ (else the per-line parser).
    a0 = marks + len(" Bytes -> Algo ")
    ka = np.searchsorted(ch.sp, a0)
    sp = ch.sp[np.minimum(ka[:, None] + np.arange(3), last)] if len(ch.sp) else np.zeros((len(marks), 3), np.int64)
    inside = (ka[:, None] + np.arange(3) <= last) & (sp < end[:, None])
    ok &= inside[:, 0] & inside[:, 1] & ch.equals(sp[:, 0] + 1, sp[:, 1], b"proto")
    p_end = np.where(inside[:, 2], sp[:, 2], end)
    algo = _names(ch, a0, sp[:, 0], ok, L.algo_name)
    proto = _names(ch, sp[:, 1] + 1, p_end, ok, L.proto_name)
    ok &= (algo != None) & (proto != None)  # noqa: E711
    cols = {"line": li, "host": prefix["host"], "pid": prefix["pid"], "op": op, "nbytes": nbytes,
            "algo": algo, "proto": proto, "ts_us": prefix["ts_us"]}
    return cols, ok


_WORD = re.compile(rb"\w+")


def _names(ch: Chunk, start: np.ndarray, end: np.ndarray, ok: np.ndarray, name) -> np.ndarray:
    """``name(token)`` for the word token in each [start, end) of the ``ok`` rows, else None (once per distinct
    token)."""
    out = np.full(len(start), None, dtype=object)
    rows = np.flatnonzero(ok & (end > start))
    if not len(rows):
        return out
    codes, uniq = distinct_tokens(ch, start[rows], end[rows])
    names = np.array([name(u.decode()) if _WORD.fullmatch(u) else None for u in uniq], dtype=object)
    out[rows] = names[codes]
    return out


__all__ = ["Chunk", "LAYOUTS", "NO_TS", "PAD", "coll_fields", "distinct_tokens", "outer_timestamps",
           "prefix_fields", "text_timestamps", "tuning_fields"]
