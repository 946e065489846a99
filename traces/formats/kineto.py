"""PyTorch profiler (Kineto) Chrome-trace JSON -> §3 rows.

One row per collective call of the traced rank:

- **New format** (PyTorch ≥ 2.0 with NCCL metadata): each ``record_param_comms`` CPU event with a
  ``Collective name`` arg. Its args give the op, ``In/Out msg nelems``, ``dtype``, ``Group size``, the
  process group (``Process Group Name`` -> ``comm``; ``Process Group Ranks``, else ``Global rank
  start/stride``, else ``distributedInfo.pg_config`` -> members) and ``In/Out split size`` (uneven
  all-to-all). ``Rank`` is what PyTorch passed as the call's rank: the root of rooted ops, the peer of
  Send/Recv.
- **Old format** (``record_param_comms`` without args): each CPU ``nccl:<op>`` user annotation, whose
  ``Input Dims``/``Input type`` give the element count and dtype. The communicator is not recorded: the
  whole world is assumed, except that an AllGather/ReduceScatter's group size is recovered from the
  output/input ratio of its enclosing ``c10d::`` op (a contiguous block of ranks is then assumed).

The global rank and world size come from ``distributedInfo``. ``t_start_s`` is the CPU issue time;
``duration_s`` is the GPU time of the NCCL kernel(s) the call launched (linked through the launch's
``correlation``, or the kernel's ``External id``), NaN when the kernel was not captured.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
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
from traces.formats.files import load_json
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, P2P_OPS, ROOTED_OPS, TraceError

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_NCCL_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)


def looks_like_kineto(head: str) -> bool:
    """True for a Kineto / PyTorch profiler trace: a JSON object with ``traceEvents``.

    Examples
    --------
    >>> looks_like_kineto('{"schemaVersion": 1, "traceEvents": [')
    True
    >>> looks_like_kineto('[{"name": "AllReduce", "ph": "b"}')
    False
    """
    return head.lstrip().startswith("{") and '"traceEvents"' in head


def read_kineto(paths: list[Path], *, strict: bool = False, progress: Progress = None
                ) -> tuple[pd.DataFrame, IngestReport]:
    """Read Kineto traces (one file per rank) into one §3 frame.

    Parameters
    ----------
    paths : list of Path
        Kineto JSON files, normally one per rank of one job (their process groups are matched by name).
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
        Malformed JSON, a file that is not a Kineto trace, or one whose rank is unknown.
    """
    report = IngestReport()
    sink = RowSink()
    ignored = Ignored()
    comms: dict[str, list[int]] = {}
    world_sizes: list[int] = []
    t0_candidates: list[float] = []
    for path in paths:
        data = load_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
            raise TraceError(f"{path}: not a Kineto trace (no 'traceEvents' list)")
        report.files.append(str(path))
        t0 = _read_one(path, data, sink, comms, world_sizes, report, ignored)
        if t0 is not None:
            t0_candidates.append(t0)
        if progress is not None:
            progress(path.stat().st_size)
    ignored.to_notes(report)
    report.raise_if_strict(strict)
    world = max(world_sizes) if world_sizes else None
    return finish_frame(sink, comms=comms, world_size=world, source="kineto", report=report,
                        t0_us=min(t0_candidates) if t0_candidates else None), report


def _read_one(path: Path, data: dict[str, Any], sink: RowSink, comms: dict[str, list[int]],
              world_sizes: list[int], report: IngestReport, ignored: Ignored) -> float | None:
    """Add one rank's rows; return the trace's first timestamp (µs) on the shared clock."""
    events = _well_typed(path, [e for e in data["traceEvents"] if isinstance(e, dict)], report)
    info = data.get("distributedInfo") or {}
    if not isinstance(info, dict):
        raise TraceError(f"{path}: 'distributedInfo' must be a JSON object, got {type(info).__name__}")
    rank = as_int(info.get("rank"))
    if rank is None:
        raise TraceError(f"{path}: no 'distributedInfo.rank': cannot tell which rank this trace is")
    world = as_int(info.get("world_size"))
    if world is None:
        world = rank + 1
        report.notes.append(f"{path.name}: no distributedInfo.world_size; world size taken as the largest "
                            "rank seen + 1")
    world_sizes.append(world)
    pg_config = {str(pg.get("pg_name")): pg for pg in info.get("pg_config") or [] if isinstance(pg, dict)}
    # Kineto's ts are microseconds from baseTimeNanoseconds when that key is present.
    base_us = float(data.get("baseTimeNanoseconds") or 0) / 1000.0
    times = [float(e["ts"]) for e in events if isinstance(e.get("ts"), int | float)]
    kernels = _KernelIndex(events)

    records = [e for e in events if e.get("name") == "record_param_comms" and e.get("ph") == "X"]
    rich = [e for e in records if "Collective name" in (e.get("args") or {})]
    if rich:
        bare = len(records) - len(rich)
        if bare:
            report.skip("record_param_comms event without collective metadata", f"{path}", bare)
        for i, event in enumerate(rich):
            _add_record(path, i, event, rank, pg_config, base_us, kernels, sink, comms, report, ignored)
    else:
        annotations = [e for e in events if e.get("cat") == "user_annotation"
                       and str(e.get("name", "")).startswith("nccl:") and e.get("ph") == "X"]
        enclosing = _Enclosing([e for e in events if e.get("cat") == "cpu_op"
                                and str(e.get("name", "")).startswith("c10d::")])
        for i, event in enumerate(annotations):
            _add_annotation(path, i, event, rank, world, base_us, kernels, enclosing, sink, comms, report,
                            ignored)
        if not annotations and kernels.n_nccl:
            report.skip("NCCL kernel with no collective metadata in the trace", f"{path}", kernels.n_nccl)
        if annotations:
            report.notes.append(f"{path.name}: old Kineto format (no process-group metadata); communicators "
                                "assumed to be the whole world or contiguous rank blocks")
    return min(times) + base_us if times else None


def _well_typed(path: Path, events: list[dict[str, Any]], report: IngestReport) -> list[dict[str, Any]]:
    """The events whose fields the reader uses have their types: ``ts`` a finite number, ``dur`` a finite
    number >= 0, ``args`` an object, ``name`` / ``cat`` / ``ph`` strings (each when present). The others are
    counted as skipped (the first one named), never read half-way.

    Examples
    --------
    >>> r = IngestReport()
    >>> [e["ts"] for e in _well_typed(Path("t.json"), [{"ts": 1}, {"ts": "abc"}, {"args": [1]}], r)]
    [1]
    >>> dict(r.skipped), r.lines_read
    ({'Kineto event with a field of the wrong type (ts, dur, args, name, cat or ph)': 2}, 3)
    """
    def number(v: Any, low: float = -math.inf) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= low

    good = []
    for i, e in enumerate(events):
        if (("ts" not in e or number(e["ts"])) and ("dur" not in e or number(e["dur"], 0.0))
                and isinstance(e.get("args", {}), dict | type(None))
                and all(isinstance(e.get(k, ""), str) for k in ("name", "cat", "ph"))):
            good.append(e)
        else:
            report.skip("Kineto event with a field of the wrong type (ts, dur, args, name, cat or ph)",
                        f"{path}:event#{i}")
    report.lines_read += len(events)
    return good


class _KernelIndex:
    """NCCL kernels of one trace, found from a CPU event's ``External id``."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.by_corr: dict[int, dict[str, Any]] = {}
        self.by_ext: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self.launch_corrs: dict[int, list[int]] = defaultdict(list)
        self.n_nccl = 0
        # Old traces give launches their own External id: they are found by time on the CPU thread.
        self.launches: dict[tuple[Any, Any], list[tuple[float, int]]] = defaultdict(list)
        for e in events:
            args = e.get("args") or {}
            cat = e.get("cat")
            if cat == "kernel" and (_NCCL_KERNEL.search(str(e.get("name", ""))) or "Collective name" in args):
                self.n_nccl += 1
                corr = as_int(args.get("correlation"))
                if corr is not None:
                    self.by_corr[corr] = e
                ext = as_int(args.get("External id"))
                if ext is not None:
                    self.by_ext[ext].append(e)
            elif cat in _LAUNCH_CATS:
                ext, corr = as_int(args.get("External id")), as_int(args.get("correlation"))
                if ext is not None and corr is not None:
                    self.launch_corrs[ext].append(corr)
                if corr is not None and isinstance(e.get("ts"), int | float):
                    self.launches[(e.get("pid"), e.get("tid"))].append((float(e["ts"]), corr))
        for lst in self.launches.values():
            lst.sort()

    def find(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        ext = as_int((event.get("args") or {}).get("External id"))
        if ext is not None:
            found = [self.by_corr[c] for c in self.launch_corrs.get(ext, ()) if c in self.by_corr]
            if found:
                return found
            found = self.by_ext.get(ext, [])
            if found:
                return found
        lst = self.launches.get((event.get("pid"), event.get("tid")), [])
        if not lst or not isinstance(event.get("ts"), int | float):
            return []
        start = float(event["ts"])
        end = start + float(event.get("dur", 0.0))
        lo = bisect.bisect_left(lst, (start, -1))
        hi = bisect.bisect_right(lst, (end, 1 << 62))
        return [self.by_corr[c] for _, c in lst[lo:hi] if c in self.by_corr]

    def timing(self, event: dict[str, Any]) -> tuple[float, int]:
        """(GPU seconds spanned by the NCCL kernels the CPU event launched, device) or (NaN, -1)."""
        found = self.find(event)
        if not found:
            return math.nan, -1
        device = as_int((found[0].get("args") or {}).get("device"))
        if len(found) == 1:  # the kernel's own dur: no loss from subtracting large timestamps
            span_us = float(found[0].get("dur", 0.0))
        else:
            start = min(float(k["ts"]) for k in found)
            span_us = max(float(k["ts"]) + float(k.get("dur", 0.0)) for k in found) - start
        return span_us / 1e6, -1 if device is None else device


class _Enclosing:
    """Finds the ``c10d::`` CPU op that encloses an event on the same thread."""

    def __init__(self, ops: list[dict[str, Any]]) -> None:
        self.by_thread: dict[tuple[Any, Any], list[tuple[float, float, dict[str, Any]]]] = defaultdict(list)
        for op in ops:
            if isinstance(op.get("ts"), int | float):
                end = float(op["ts"]) + float(op.get("dur", 0.0))
                self.by_thread[(op.get("pid"), op.get("tid"))].append((float(op["ts"]), end, op))
        for lst in self.by_thread.values():
            lst.sort(key=lambda item: item[0])

    def find(self, event: dict[str, Any]) -> dict[str, Any] | None:
        lst = self.by_thread.get((event.get("pid"), event.get("tid")), [])
        ts = float(event.get("ts", 0.0))
        end = ts + float(event.get("dur", 0.0))
        i = bisect.bisect_right([item[0] for item in lst], ts)
        for start, stop, op in reversed(lst[:i]):
            if start <= ts and stop >= end:
                return op
        return None


def _members(args: dict[str, Any], pg: dict[str, Any] | None, nranks: int) -> list[int] | None:
    ranks = parse_int_list(args.get("Process Group Ranks"))
    if ranks and len(ranks) == nranks:
        return ranks
    if pg is not None:
        ranks = parse_int_list(pg.get("ranks"))
        if ranks and len(ranks) == nranks:
            return ranks
    start, stride = as_int(args.get("Global rank start")), as_int(args.get("Global rank stride"))
    if start is not None and stride is not None and stride > 0:
        return [start + stride * i for i in range(nranks)]
    return None


def _add_record(path: Path, index: int, event: dict[str, Any], rank: int, pg_config: dict[str, dict[str, Any]],
                base_us: float, kernels: _KernelIndex, sink: RowSink, comms: dict[str, list[int]],
                report: IngestReport, ignored: Ignored) -> None:
    args = event.get("args") or {}
    where = f"{path}:record_param_comms#{index}"
    name = str(args.get("Collective name"))
    op = torch_op(name)
    if op is None:
        ignored.add(name, where)
        return
    dtype = torch_dtype(str(args.get("dtype", "")))
    if dtype is None:
        report.skip(f"dtype not in the schema ({args.get('dtype')})", where)
        return
    # ``Process Group Name`` (PyTorch 2.2+); some builds record only the numeric ``Process Group ID``, which is
    # the ``uid`` (and default ``pg_name``) of the group in ``distributedInfo.pg_config``.
    pg_name = str(args.get("Process Group Name", ""))
    if not pg_name and as_int(args.get("Process Group ID")) is not None:
        pg_id = as_int(args.get("Process Group ID"))
        pg_name = next((name for name, pg in pg_config.items() if as_int(pg.get("uid")) == pg_id), str(pg_id))
    nranks = as_int(args.get("Group size")) or as_int((pg_config.get(pg_name) or {}).get("pg_size"))
    if not nranks:
        report.skip("collective without a group size", where)
        return
    members = _members(args, pg_config.get(pg_name), nranks)
    comm = f"pg:{pg_name}" if pg_name else f"pg:size{nranks}"
    if members is None:
        report.skip("process group members unknown", where)
        return
    if rank not in members:
        report.skip("traced rank is not a member of the collective's process group", where)
        return
    comms.setdefault(comm, members)
    in_n, out_n = as_int(args.get("In msg nelems")) or 0, as_int(args.get("Out msg nelems")) or 0
    count = torch_count(op, in_n, out_n, nranks)
    split = ()
    if op == "AllToAll":
        split = split_bytes_of(parse_int_list(args.get("In split size")), in_n, nranks, DTYPE_BYTES[dtype])
        if split:
            count = sum(split) // DTYPE_BYTES[dtype] // nranks
    root, peer = -1, -1
    call_rank = as_int(args.get("Rank"))
    if op in ROOTED_OPS:
        root = call_rank if call_rank is not None and 0 <= call_rank < nranks else 0
        if call_rank is None:
            report.notes.append(f"{path.name}: root of {op} not recorded; root 0 assumed")
    elif op in P2P_OPS:
        if call_rank is None or not 0 <= call_rank < nranks:
            report.skip(f"{op} without its peer rank", where)
            return
        root, peer = call_rank, members[call_rank]
    duration_s, device = kernels.timing(event)
    desc = str(args.get("Process Group Description", ""))
    sink.add(rank=rank, comm=comm, op=op, count=count, dtype=dtype, nranks=nranks, root=root,
             t_us=float(event["ts"]) + base_us, duration_s=duration_s, device=device,
             context=f"pg_desc={desc}" if desc and desc != "undefined" else "", split_bytes=split, peer=peer,
             order=index)


def _product(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    out = 1
    for d in dims:
        out *= d
    return out


def _add_annotation(path: Path, index: int, event: dict[str, Any], rank: int, world: int, base_us: float,
                    kernels: _KernelIndex, enclosing: _Enclosing, sink: RowSink, comms: dict[str, list[int]],
                    report: IngestReport, ignored: Ignored) -> None:
    args = event.get("args") or {}
    where = f"{path}:{event.get('name')}#{index}"
    name = str(event.get("name"))
    op = torch_op(name)
    if op is None:
        ignored.add(name, where)
        return
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    total = _product(dims[0]) if dims else None
    dtype = torch_dtype(str(types[0])) if types else None
    if total is None or dtype is None:
        # A profile taken without record_shapes=True has neither (HTA's df_index_resolver trace).
        report.skip("nccl annotation without input shape or dtype (profiled without record_shapes=True?)",
                    where)
        return
    if op in ROOTED_OPS | P2P_OPS:
        # The old format records neither the root nor the peer: such ops cannot be placed.
        report.skip(f"old-format {op} without root/peer", where)
        return
    nranks = world
    parent = enclosing.find(event)
    if parent is not None and op in ("AllGather", "ReduceScatter"):
        pdims = (parent.get("args") or {}).get("Input Dims") or []
        sizes = [_product(d) for d in pdims[:2]]
        if len(sizes) == 2 and all(sizes) and sizes[0] and sizes[1]:
            big, small = max(sizes), min(sizes)  # type: ignore[type-var]
            if big % small == 0 and 1 <= big // small <= world:
                nranks = big // small
    if nranks == world:
        comm, members = "world", list(range(world))
    else:
        start = rank // nranks * nranks
        comm, members = f"block{nranks}:{start}", list(range(start, start + nranks))
    comms.setdefault(comm, members)
    if op == "AllGather":
        count = total
    else:  # the annotation's input is the whole buffer: per-rank / per-peer counts divide it
        count = total // nranks if op in ("ReduceScatter", "AllToAll") else total
    duration_s, device = kernels.timing(event)
    sink.add(rank=rank, comm=comm, op=op, count=count, dtype=dtype, nranks=nranks,
             t_us=float(event["ts"]) + base_us, duration_s=duration_s, device=device, order=index)


__all__ = ["looks_like_kineto", "read_kineto"]
