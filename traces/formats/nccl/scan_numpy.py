"""The numpy chunk reader's side of a scan (the twin of :mod:`traces.formats.nccl.scan_numba`): one chunk's
COLL and TUNING lines read positionally by :mod:`traces.formats.nccl.kernel_numpy`, lines that may be torn
recovered, every other COLL line and the rare Init / ring / version lines given to the per-line parsers.
"""

from __future__ import annotations

import numpy as np

from traces.arrays import unique
from traces.formats.nccl import kernel_numpy as F
from traces.formats.nccl import layout as L
from traces.formats.nccl import torn as T
from traces.formats.nccl.records import (
    COLL_FIELDS,
    NO_TS,
    TUNING_FIELDS,
    FileScan,
    empty_columns,
    note_ts,
    parse_other,
    parse_slow,
    recover_torn,
)
from traces.ingest_report import IngestReport


def scan_chunk(buf: bytes, line_base: int, scan: FileScan, parts: list, report: IngestReport) -> int:
    """Read one chunk of complete lines into ``scan`` with the numpy path.

    Parameters
    ----------
    buf : bytes
        The chunk (whole lines).
    line_base : int
        Lines of the file before the chunk (line numbers in records and skips are 1-based file lines).
    scan : FileScan
        Receives the TUNING parts, Init / ring / version records and the earliest timestamp.
    parts : list
        Receives the chunk's COLL column parts (the positional ones, then those of the per-line parser).
    report : IngestReport
        Unusable lines are counted here.

    Returns
    -------
    int
        Lines in the chunk.
    """
    if not scan.nccl_lines:  # only to tell "not an NCCL log" apart from "no COLL lines"
        scan.nccl_lines = buf.count(b"NCCL")
    ch = F.Chunk(buf)
    marks = ch.find(L.COLL_MARK.encode(), 4)
    coll_lines = np.empty(0, dtype=np.int64)
    info = ch.line_of(ch.find(T.INFO.encode(), 8))
    inter = np.unique(info[1:][info[1:] == info[:-1]])  # lines with two prefixes or more: maybe torn
    slow = empty_columns()
    consumed: set[int] = set()
    rest: dict[int, int] = {}
    if len(marks):
        cols, ok = F.coll_fields(ch, marks)
        ok &= ~np.isin(cols["line"], inter)
        coll_lines = cols["line"]
        if ok.any():
            part = {name: cols[name][ok] for name in COLL_FIELDS if name != "line"}
            part["line"] = cols["line"][ok] + line_base + 1
            parts.append(part)
        if len(inter):
            consumed, rest = recover_torn(inter.tolist(), lambda k: ch.line_text(k) if k < len(ch.ends) else None,
                                          unique(cols["host"][ok]), line_base, scan, slow, report)
        for i in np.unique(cols["line"][~ok]).tolist():
            if i in consumed:
                continue
            nxt = ch.line_text(i + 1) if i + 1 < len(ch.ends) and i + 1 not in consumed else None
            parse_slow(ch.line_text(i)[rest.get(i, 0):], nxt, line_base + i + 1, scan, slow, report)
    elif len(inter):
        consumed, rest = recover_torn(inter.tolist(), lambda k: ch.line_text(k) if k < len(ch.ends) else None, (),
                                      line_base, scan, slow, report)
    if slow["line"]:
        parts.append(slow)
    tmarks = ch.find(b" Bytes -> Algo ", 8)
    tuning_lines = np.empty(0, dtype=np.int64)
    if len(tmarks):
        tcols, tok = F.tuning_fields(ch, tmarks)
        # A line with two marks (torn by another process's write) goes whole to the per-line parser, which
        # reads each of its records once, as the compiled reader does: reading one mark here and leaving the
        # other would drop it, since lines read here are not parsed again.
        lines_seen, mark_counts = np.unique(tcols["line"], return_counts=True)
        tok &= ~np.isin(tcols["line"], lines_seen[mark_counts > 1])
        if tok.any():
            part = {name: tcols[name][tok] for name in TUNING_FIELDS}
            tuning_lines = part["line"]
            part["line"] = tuning_lines + line_base + 1
            scan.tuning_parts.append(part)
            ts = tcols["ts_us"][tok]
            ts = ts[ts != NO_TS]
            if len(ts):
                note_ts(scan, int(ts.min()))
    others = np.concatenate([ch.find(b"anks ", 2), ch.find(b"Channel ", 0), ch.find(b"NCCL version", 5),
                             tmarks])
    if len(others):
        cand = np.unique(ch.line_of(others))
        cand = cand[~np.isin(cand, coll_lines) & ~np.isin(cand, tuning_lines)]
        for i in cand.tolist():
            if i in consumed:
                continue
            parse_other(ch.line_text(i), line_base + i + 1, scan)
    return len(ch.ends)


__all__ = ["scan_chunk"]
