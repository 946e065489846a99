"""The JSON file nccl-tests writes with ``-J FILE.json`` (since v2.18.5, ``src/util.cu``, file version 3).

Its ``results`` list holds one record per printed row (``size``, ``count``, ``type``, ``redop``, ``root``,
``out_of_place`` and ``in_place`` objects of ``time`` or ``cpu_time``, ``alg_bw``, ``bus_bw``, ``nwrong``);
the operation comes from ``args[0]`` (the ``*_perf`` binary), the ranks from ``config.devices``. The records
become the same tables as the text reader's (:func:`traces.formats.nccl_tests.parse_tables`).
"""

from __future__ import annotations

import json
import math

from traces.formats.nccl_tests_layout import (
    NCCLTESTS_DTYPES,
    NCCLTESTS_OPS,
    NCCLTESTS_UNSUPPORTED,
    new_sweep,
    op_stem,
)
from traces.ingest_report import IngestReport
from traces.schema import TraceError

__all__ = ["looks_like_nccl_tests_json", "parse_json_tables"]


def looks_like_nccl_tests_json(head: str) -> bool:
    """True for the start of an nccl-tests ``-J`` file: an object whose ``args`` name a ``*_perf`` binary.

    Examples
    --------
    >>> looks_like_nccl_tests_json('{"version":3,"start_time":"2026-01-01 00:00:00","args":["./all_reduce_perf"]')
    True
    >>> looks_like_nccl_tests_json('{"traceEvents": []}')
    False
    """
    start = head.lstrip()[:4096]
    return start.startswith("{") and '"start_time"' in start and '"args"' in start and op_stem(start) is not None


def _num(v) -> float:
    try:
        return float(v)  # nccl-tests writes NaN as the string "nan"
    except (TypeError, ValueError):
        return math.nan


def _measure(rec: dict, key: str) -> tuple[float, float, float]:
    """(time_us, algbw, busbw) of the ``out_of_place`` / ``in_place`` object (NaN where absent)."""
    m = rec.get(key)
    if not isinstance(m, dict):
        return math.nan, math.nan, math.nan
    return _num(m.get("time", m.get("cpu_time"))), _num(m.get("alg_bw")), _num(m.get("bus_bw"))


def parse_json_tables(text: str, where: str) -> tuple[list[dict], IngestReport]:
    """The tables of one nccl-tests JSON file, before their ranks are counted (``ranks`` keyed by host and
    device as the text reader keys them).

    Raises
    ------
    TraceError
        Text that is not one JSON object (a run killed while writing it), or no ``*_perf`` name in ``args``.

    Examples
    --------
    >>> doc = ('{"start_time": "", "args": ["all_gather_perf"], "config": {"devices": []}, "results": '
    ...        '[{"size": 64, "count": 2, "type": "float", "redop": "none", "root": "    -1", '
    ...        '"out_of_place": {"time": 9.0, "alg_bw": 0.01, "bus_bw": 0.005, "nwrong": 0}, "in_place": null}]}')
    >>> tables, _ = parse_json_tables(doc, "r.json")
    >>> tables[0]["op"], tables[0]["rows"][0]["time_us"]
    ('AllGather', 9.0)
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}:{exc.lineno}: nccl-tests JSON output is cut short or not JSON ({exc.msg}, "
                         f"column {exc.colno})") from None
    args = doc.get("args") if isinstance(doc, dict) else None
    stem = op_stem(str(args[0])) if isinstance(args, list) and args else None
    if stem is None:
        raise TraceError(f"{where}: nccl-tests JSON output without a *_perf binary in its 'args'")
    report = IngestReport(lines_read=text.count("\n") + 1)
    config = doc.get("config") or {}
    ranks = {}
    for d in config.get("devices") or []:
        try:
            ranks[(str(d["hostname"]), int(d["device"]))] = (int(d["rank"]), int(d.get("group", 0)), str(d["hostname"]),
                                                            int(d["device"]), str(d.get("device_info", "")).strip())
        except (KeyError, TypeError, ValueError):
            report.skip("device record without rank, hostname or device", f"{where}: config.devices")
    tables: list[dict] = []
    current = None
    for k, rec in enumerate(doc.get("results") or []):
        at = f"{where}: results[{k}]"
        if stem in NCCLTESTS_UNSUPPORTED:
            report.skip(f"row of {stem}_perf (no trace op holds its pattern)", at)
            continue
        if not isinstance(rec, dict) or str(rec.get("type")) not in NCCLTESTS_DTYPES:
            report.skip("unknown datatype", at)
            continue
        t_us, algbw, busbw = _measure(rec, "out_of_place")
        t_in, _, busbw_in = _measure(rec, "in_place")
        try:
            size, count = int(rec["size"]), int(rec["count"])
            root = int(str(rec.get("root", "-1")).strip())
        except (KeyError, TypeError, ValueError):
            report.skip("result record without integer size, count or root", at)
            continue
        if not all(math.isfinite(v) and v >= 0 for v in (t_us, algbw, busbw)):
            report.skip("row whose out-of-place time, algbw or busbw is not a number", at)
            continue
        row = dict(size=size, count=count, type=str(rec["type"]), redop=str(rec.get("redop", "none")), root=root,
                   time_us=t_us, algbw=algbw, busbw=busbw, time_inplace_us=t_in, busbw_inplace=busbw_in, line=k)
        if new_sweep(current["rows"][-1] if current else None, row):
            current = {"stem": stem, "op": NCCLTESTS_OPS[stem], "rows": [], "ranks": ranks, "nranks_hint": None,
                       "dtype": NCCLTESTS_DTYPES[row["type"]], "line": 1}
            tables.append(current)
        current["rows"].append(row)
    return tables, report
