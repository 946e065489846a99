"""What one NCCL log file says: the scan's records (:class:`FileScan`) and the per-line parsers that fill
them for the lines the chunk readers leave to them (COLL lines off the standard layouts, torn lines, and
the rare Init / ring / TUNING / version lines). Both chunk readers (:mod:`traces.formats.nccl.scan`,
:mod:`traces.formats.nccl.scan_numba`) call these, so every path gives the same records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traces.formats.nccl import kernel_numpy as F
from traces.formats.nccl import layout as L
from traces.formats.nccl import torn as T
from traces.ingest_report import IngestReport

__all__ = ["COLL_FIELDS", "INT_FIELDS", "NO_TS", "TUNING_FIELDS", "TUNING_INT", "FileScan", "append_record", "empty_columns",
           "note_ts", "parse_other", "parse_slow", "recover_torn"]

NO_TS = F.NO_TS
#: Columns of the COLL records a scan returns (numpy arrays of equal length).
COLL_FIELDS = ("line", "host", "pid", "tid", "dev", "ts_us", "op", "opc", "count", "dt", "root", "comm", "nranks",
               "grank")
#: ``opc`` is kept as the opCount's 64 bits in an int64 (only compared for equality): no string per row.
INT_FIELDS = ("line", "pid", "tid", "dev", "ts_us", "opc", "count", "dt", "root", "nranks", "grank")


@dataclass
class FileScan:
    """Everything one file says: COLL columns plus the rare records (dicts), in line order."""

    path: str
    coll: dict[str, np.ndarray]
    inits: list[dict[str, Any]] = field(default_factory=list)
    rings: list[dict[str, Any]] = field(default_factory=list)
    tunings: dict[str, np.ndarray] = field(default_factory=dict)  # TUNING_FIELDS columns
    tuning_parts: list[dict[str, Any]] = field(default_factory=list)  # while scanning
    versions: list[str] = field(default_factory=list)
    min_ts_us: int | None = None
    lines: int = 0
    nccl_lines: int = 0


#: Columns of the TUNING records (``op`` is the printed name or None).
TUNING_FIELDS = ("line", "host", "pid", "op", "nbytes", "algo", "proto")
TUNING_INT = ("line", "pid", "nbytes")


def empty_columns() -> dict[str, list]:
    """Empty lists for the COLL columns (the per-line parsers append to them)."""
    return {name: [] for name in COLL_FIELDS}


def recover_torn(lines: list[int], text_of: Callable[[int], str | None], known_hosts: Any, line_base: int,
                 scan: FileScan, slow: dict[str, list], report: IngestReport) -> tuple[set[int], dict[int, int]]:
    """Complete torn COLL lines among the interleaved ``lines`` of a chunk (:mod:`traces.formats.nccl.torn`):
    records go to ``slow``, heads without a tail are counted in ``report``. Returns the consumed tail lines
    and where each interleaved line's last segment starts."""
    return T.recover(lines, text_of, [h for h in known_hosts if h],
                     lambda rec, i: append_record(slow, rec, line_base + i + 1),
                     lambda i: report.skip(T.TORN_REASON, f"{scan.path}:{line_base + i + 1}"))


def parse_slow(text: str, nxt: str | None, line: int, scan: FileScan, slow: dict[str, list],
                report: IngestReport) -> None:
    """The forgiving per-line parser for a COLL line the fast path could not read (``nxt``: the next line).

    Every COLL mark in the text that gives no record is counted as malformed (a line holding two bodies, one
    of them garbled, loses nothing silently); a text without any mark (its marks were in the heads of torn
    lines, handled by :func:`recover_torn`) gives nothing and counts nothing.
    """
    marks = text.count(L.COLL_MARK)
    if not marks:
        return
    recs = L.parse_coll_lines(text)
    # Hard-wrapped mid-body: join the continuation, indented or not (copies from a web page lose the indent)
    # when it holds no COLL mark and no prefix of its own (then it is no line of another process).
    if not recs and nxt is not None and (nxt[:1].isspace() or (L.COLL_MARK not in nxt and " NCCL " not in nxt)):
        recs = L.parse_coll_lines(text.rstrip() + " " + nxt.strip())
    if len(recs) < marks:
        report.skip("malformed COLL line (fields missing or garbled)", f"{scan.path}:{line}", marks - len(recs))
    for rec in recs:
        append_record(slow, rec, line)


def append_record(cols: dict[str, list], rec: L.CollLine, line: int) -> None:
    p = rec.prefix
    for name, value in (("line", line), ("host", p.host), ("pid", p.pid), ("tid", p.tid), ("dev", p.dev),
                        ("ts_us", NO_TS if p.ts_us is None else p.ts_us), ("op", rec.op), ("opc", _opc_int(rec.opc)),
                        ("count", rec.count), ("dt", rec.dt), ("root", rec.root), ("comm", rec.comm),
                        ("nranks", rec.nranks), ("grank", rec.grank)):
        cols[name].append(value)


def _opc_int(text: str) -> int:
    """The opCount's 64 bits as a signed int64 value (what the fast path stores)."""
    value = int(text, 16) & ((1 << 64) - 1)
    return value - (1 << 64) if value >= 1 << 63 else value


def note_ts(scan: FileScan, ts: int | None) -> None:
    if ts is not None and (scan.min_ts_us is None or ts < scan.min_ts_us):
        scan.min_ts_us = ts


def parse_other(text: str, line: int, scan: FileScan) -> None:
    # Cheap substring guards first: most candidates are transport lines ("Channel 00/0 : 0[0] -> 1[1]").
    m = L.VERSION_RE.search(text) if "NCCL version" in text else None
    if m:
        scan.versions.append(m["version"])
    m = L.INIT_RE.search(text) if "anks " in text else None
    if m:
        prefix = L.parse_prefix_at(text, m.start())
        tail_end = text.find(" NCCL INFO ", m.end())
        tail = text[m.end(): tail_end if tail_end >= 0 else len(text)]
        cid = L.COMMID_RE.search(tail)
        local = L.LOCALRANKS_RE.search(tail)
        scan.inits.append({
            "line": line, "host": prefix.host, "pid": prefix.pid, "tid": prefix.tid,
            "ptr": L.pointer_text(m["ptr"]), "rank": int(m["rank"]), "nranks": int(m["nranks"]),
            "dev": int(m["dev"]) if m["dev"] is not None else None,
            "comm_id": cid.group(1).lower() if cid else None,
            "local_ranks": int(local.group(1)) if local else None,
        })
        note_ts(scan, prefix.ts_us)
        return
    m = L.RING_RE.search(text) if "Channel " in text and "->" not in text else None
    if m:
        prefix = L.parse_prefix_at(text, m.start())
        scan.rings.append({
            "line": line, "host": prefix.host, "pid": prefix.pid, "tid": prefix.tid, "channel": int(m["ch"]),
            "ranks": [int(x) for x in m["ranks"].split()], "more": m["more"] is not None,
        })
        note_ts(scan, prefix.ts_us)
        return
    # Every TUNING record of the line, each with its own nearest prefix: a line torn by another process's
    # write holds two (the positional reader reads one per " Bytes -> Algo " mark too).
    for m in L.TUNING_RE.finditer(text) if "Bytes -> Algo" in text else ():
        prefix = L.parse_prefix_at(text, m.start())
        scan.tuning_parts.append({
            "line": [line], "host": [prefix.host], "pid": [prefix.pid],
            "op": [L.op_name(m["op"]) if m["op"] else None], "nbytes": [int(m["nbytes"])],
            "algo": [L.algo_name(m["algo"])], "proto": [L.proto_name(m["proto"])],
        })
        note_ts(scan, prefix.ts_us)
