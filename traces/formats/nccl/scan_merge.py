"""A file's scan put together: the chunks' COLL and TUNING parts joined into columns
(:func:`finish_columns`, :func:`finish_tunings`) and the scans of byte ranges joined in file order
(:func:`merge_scans`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traces.formats.nccl.records import (
    COLL_FIELDS,
    INT_FIELDS,
    TUNING_FIELDS,
    TUNING_INT,
    FileScan,
    note_ts,
)
from traces.ingest_report import IngestReport


def finish_tunings(parts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One array per TUNING field from the chunks' parts (empty arrays when there are none).

    Examples
    --------
    >>> sorted(finish_tunings([]))[:3], len(finish_tunings([])["line"])
    (['algo', 'host', 'line'], 0)
    """
    out: dict[str, np.ndarray] = {}
    for name in TUNING_FIELDS:
        dtype = np.int64 if name in TUNING_INT else object
        arrays = [np.asarray(p[name], dtype=dtype) for p in parts]
        out[name] = np.concatenate(arrays) if arrays else np.empty(0, dtype=dtype)
    return out


def finish_columns(parts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One array per COLL field from the chunks' parts; each part's column is dropped once joined, so the
    parts and the joined columns are never both held whole (memory)."""
    out: dict[str, np.ndarray] = {}
    for name in COLL_FIELDS:
        dtype = np.int64 if name in INT_FIELDS else object
        arrays = [np.asarray(p.pop(name), dtype=dtype) for p in parts]
        out[name] = (arrays[0] if len(arrays) == 1 else np.concatenate(arrays)) if arrays else np.empty(0, dtype=dtype)
        del arrays
    parts.clear()
    return out


TEXT_FIELDS = ("host", "op", "comm")


def merge_scans(path: str, results: list[tuple[FileScan, list[tuple[str, int, int]]]],
                report: IngestReport) -> FileScan:
    """Join range scans in file order, turning range line numbers into file line numbers."""
    out = FileScan(path=path, coll={})
    parts = []
    base = 0
    for scan, skips in results:
        col, scan.coll = scan.coll, {}  # taken over, not copied (memory)
        for name in TEXT_FIELDS:
            if isinstance(col[name], tuple):  # coded by a worker process
                codes, uniq = col[name]
                col[name] = np.asarray(uniq, dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)
        if base:
            col["line"] = col["line"] + base
        parts.append(col)
        for kind in (scan.inits, scan.rings):
            for rec in kind:
                rec["line"] += base
        tun = dict(scan.tunings)
        tun["line"] = tun["line"] + base
        out.tuning_parts.append(tun)
        out.inits += scan.inits
        out.rings += scan.rings
        out.versions += scan.versions
        for reason, line, n in skips:
            report.skip(reason, f"{path}:{line + base}", n)
        if scan.min_ts_us is not None:
            note_ts(out, scan.min_ts_us)
        out.nccl_lines += scan.nccl_lines
        base += scan.lines
    out.lines = base
    out.coll = finish_columns(parts)
    out.tunings = finish_tunings(out.tuning_parts)
    out.tuning_parts = []
    return out


__all__ = ["TEXT_FIELDS", "finish_columns", "finish_tunings", "merge_scans"]
