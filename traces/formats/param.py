"""PARAM comms traces and PyTorch Execution Traces -> §3 rows (format name ``param``).

**PARAM basic comms trace** (``facebookresearch/param``, ``commsTraceReplay``): one JSON list per rank,
``<rank>.json``; each record has ``comms`` (``all_reduce``, ``all_gather_base``, ``all_to_allv``, ``send``,
``wait``, ``barrier``, ...), ``in_msg_size``/``out_msg_size`` in **elements**, ``dtype`` (torch names),
and optionally ``startTime_ns``, ``world_size``, ``pg_id``, ``global_ranks``, ``root`` (a global rank),
``in_split``/``out_split`` and ``src_rank``/``dst_rank`` (global ranks). The rank is the file name's last
number, or a record's ``rank`` key.

**PyTorch Execution Trace**: see :mod:`traces.formats.pytorch_et`. Both kinds are accepted under ``param``, one
kind per call.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from traces.formats.common import (
    Ignored,
    Progress,
    RowSink,
    as_int,
    finish_frame,
    parse_int_list,
    split_bytes_of,
    torch_count,
    torch_dtype,
    torch_op,
)
from traces.formats.files import json_start, load_json
from traces.formats.pytorch_et import looks_like_et, read_et_file
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, P2P_OPS, ROOTED_OPS, TraceError

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

_DIGITS = re.compile(r"(\d+)")


def looks_like_param_basic(head: str) -> bool:
    """True for a PARAM basic comms trace: a JSON list of records with a ``comms`` key.

    Examples
    --------
    >>> looks_like_param_basic('[{"comms": "all_reduce", "in_msg_size": 4}]')
    True
    """
    text = head.lstrip()
    return text.startswith("[") and json_start(text) and re.search(r'"comms"\s*:', text) is not None and '"ph"' not in text


def looks_like_param(head: str) -> bool:
    """True for either kind read by :func:`read_param` (PARAM basic trace or PyTorch ET)."""
    return looks_like_param_basic(head) or looks_like_et(head)


def read_param(paths: list[Path], *, strict: bool = False, progress: Progress = None
               ) -> tuple[pd.DataFrame, IngestReport]:
    """Read PARAM basic comms traces or PyTorch Execution Traces (one file per rank).

    Parameters
    ----------
    paths : list of Path
        One JSON file per rank, all of one kind.
    strict : bool
        Raise on the first skipped collective record instead of counting it.
    progress : callable, optional
        Called with each file's size in bytes once it is read.

    Returns
    -------
    (pandas.DataFrame, IngestReport)

    Raises
    ------
    TraceError
        Malformed JSON, an unknown layout, both kinds mixed, or a rank that cannot be told.
    """
    report = IngestReport()
    sink = RowSink()
    ignored = Ignored()
    comms: dict[str, list[int]] = {}
    kinds: set[str] = set()
    sizes: list[int] = []
    loaded = []
    for path in paths:
        data = load_json(path)
        kind = "et" if isinstance(data, dict) and "nodes" in data else "basic" if isinstance(data, list) else None
        if kind is None:
            raise TraceError(f"{path}: neither a PARAM comms trace (a JSON list) nor an execution trace "
                             "(an object with 'nodes')")
        kinds.add(kind)
        if len(kinds) > 1:
            raise TraceError(f"{path}: PARAM basic traces and execution traces mixed in one ingest")
        loaded.append((path, data))
        report.files.append(str(path))
    world_hint = len(paths)
    for path, data in loaded:
        if isinstance(data, dict):
            largest = read_et_file(path, data, sink, comms, report, ignored, world_hint)
        else:
            largest = _read_basic(path, data, sink, comms, report, ignored, world_hint)
        if largest:
            sizes.append(largest)
        if progress is not None:
            progress(path.stat().st_size)
    ignored.to_notes(report)
    report.raise_if_strict(strict)
    ranks = [r["rank"] for r in sink.rows]
    world = max(sizes + [m + 1 for v in comms.values() for m in v] + [r + 1 for r in ranks] + [world_hint])
    source = "pytorch-et" if kinds == {"et"} else "param-comms"
    if kinds == {"et"}:
        report.notes.append("execution traces hold no timestamps: t_start_s and duration_s are NaN")
    return finish_frame(sink, comms=comms, world_size=world, source=source, report=report), report


def _file_rank(path: Path, records: list[Any]) -> int:
    for rec in records:
        if isinstance(rec, dict) and as_int(rec.get("rank")) is not None:
            return int(as_int(rec.get("rank")))  # type: ignore[arg-type]
    digits = _DIGITS.findall(path.stem)
    if digits:
        return int(digits[-1])
    raise TraceError(f"{path}: cannot tell the rank of this PARAM trace (name it <rank>.json)")


def _read_basic(path: Path, records: list[Any], sink: RowSink, comms: dict[str, list[int]],
                report: IngestReport, ignored: Ignored, world_hint: int) -> int:
    rank = _file_rank(path, records)
    report.lines_read += len(records)
    largest = 0
    for index, rec in enumerate(records):
        where = f"{path}:record {index}"
        if not isinstance(rec, dict) or "comms" not in rec:
            report.skip("record without 'comms'", where)
            continue
        name = str(rec["comms"])
        op = torch_op(name)
        if op is None:
            ignored.add(name, where)
            continue
        dtype = torch_dtype(str(rec.get("dtype", "")))
        if dtype is None:
            report.skip(f"dtype not in the schema ({rec.get('dtype')})", where)
            continue
        members = parse_int_list(rec.get("global_ranks")) or []
        world = as_int(rec.get("world_size"))
        if not members:
            size = world or world_hint
            members = list(range(size))
        nranks = len(members)
        largest = max(largest, nranks)
        if rank not in members:
            report.skip("traced rank is not in the record's global_ranks", where)
            continue
        pg = as_int(rec.get("pg_id"))
        comm = f"pg:{pg if pg is not None else 0}"
        if comms.setdefault(comm, members) != members:
            comm = f"{comm}:{'-'.join(map(str, members))}" if nranks <= 16 else f"{comm}:n{nranks}@{members[0]}"
            comms.setdefault(comm, members)
        in_n, out_n = as_int(rec.get("in_msg_size")) or 0, as_int(rec.get("out_msg_size")) or 0
        count = torch_count(op, in_n, out_n, nranks)
        split: tuple[int, ...] = ()
        if op == "AllToAll":
            # PARAM splits are element counts per peer.
            split = split_bytes_of(parse_int_list(rec.get("in_split")), in_n, nranks, DTYPE_BYTES[dtype])
            if split:
                count = sum(split) // DTYPE_BYTES[dtype] // nranks
        root, peer = -1, -1
        if op in ROOTED_OPS:
            root_global = as_int(rec.get("root"))
            root = members.index(root_global) if root_global in members else 0
            if root_global not in members:
                report.notes.append(f"{path.name}: {op} without a usable root; comm rank 0 assumed")
        elif op in P2P_OPS:
            peer = as_int(rec.get("dst_rank") if op == "Send" else rec.get("src_rank"))  # type: ignore[assignment]
            if peer is None or peer not in members:
                report.skip(f"{op} without its peer rank", where)
                continue
            root = members.index(peer)
        t_ns = rec.get("startTime_ns")
        t_us = float(t_ns) / 1000.0 if isinstance(t_ns, int | float) else math.nan
        markers = rec.get("markers")
        context = ";".join(map(str, markers)) if isinstance(markers, list) and markers else ""
        sink.add(rank=rank, comm=comm, op=op, count=count, dtype=dtype, nranks=nranks, root=root, t_us=t_us,
                 context=context, split_bytes=split, peer=peer, order=index)
    return largest


__all__ = ["looks_like_param", "looks_like_param_basic", "read_param"]
