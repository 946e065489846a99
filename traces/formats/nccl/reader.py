"""NCCL debug-log text (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,COLL[,TUNING]``): reader and writer.

:func:`read_nccl_logs` turns many log files (one per rank, host or process, or all mixed) into one §3
trace; :func:`write_nccl_log` writes a trace back as log text that reads back to the same rows. The
pieces: :mod:`traces.formats.nccl.layout` (formats), :mod:`traces.formats.nccl.scan` (streaming, fast path),
:mod:`traces.formats.nccl.comms` (pointers -> communicators -> global ranks), :mod:`traces.formats.nccl.rows`
(groups, AllToAll folding, seq, TUNING), :mod:`traces.formats.nccl.writer`. Rules: ``docs/nccl_logs.md``.
This module is the API and the assembly; the rows per process are :mod:`traces.formats.nccl.proc_rows`, the
TUNING records :mod:`traces.formats.nccl.tuning_records`, the Init-side metadata
:mod:`traces.formats.nccl.init_meta`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from traces.formats.common import inputs_text
from traces.formats.files import compression_of
from traces.formats.nccl import comms as C
from traces.formats.nccl.init_meta import gpus_per_node, host_dev, order_hosts, ring_metadata
from traces.formats.nccl.lines import map_lines, report_unusable, survey
from traces.formats.nccl.output import CompactRows
from traces.formats.nccl.proc_rows import DT_NAME, finish_spilled, process_rows, spilled_process_rows
from traces.formats.nccl.rows import (
    apply_tuning,
)
from traces.formats.nccl.rowstore import SpilledRows
from traces.formats.nccl.scan import NO_TS, FileScan, scan_file, use_jit
from traces.formats.nccl.spill import (
    PartStore,
    ProcessStore,
    TuningStore,
    hand_over,
    should_spill,
    spill_folder,
)
from traces.formats.nccl.tuning_records import spill_tunings, tuning_columns
from traces.formats.nccl.writer import write_nccl_log
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import TraceError, new_metadata, validate

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does
_DETECT_RE = re.compile(r"NCCL (?:INFO|WARN|TRACE|CALL)\b|\w+: opCount [0-9a-fA-F]+ sendbuff |^NCCL version \d",
                        re.MULTILINE)


def looks_like_nccl_log(head: str) -> bool:
    """Tell NCCL debug-log text from other formats, on the first ~64 KiB of a file.

    Examples
    --------
    >>> looks_like_nccl_log("node1:123:456 [0] NCCL INFO Bootstrap : Using eth0\\n")
    True
    >>> looks_like_nccl_log('{"traceEvents": []}')
    False
    """
    return _DETECT_RE.search(head) is not None


def read_nccl_logs(
    paths: list[Path], *, strict: bool = False, progress: Callable[[float], Any] | None = None
) -> tuple[pd.DataFrame, IngestReport]:
    """Read NCCL debug logs into one §3 trace.

    Parameters
    ----------
    paths : list of Path
        Log files: one per rank, host or process, or all mixed.
    strict : bool
        Raise on the first kind of COLL line that could not be used (else count it in the report).
    progress : callable, optional
        Called with the bytes consumed after each chunk read.

    Returns
    -------
    (pandas.DataFrame, IngestReport)
        The trace (metadata in ``df.attrs["collsim"]``: ``world_size``, ``gpus_per_node``, ``comms``,
        ``source="nccl-log"``, ``notes``, and ``rings``/``rings_partial``/``nccl_version`` when the logs
        show them) and what was read and skipped.

    Raises
    ------
    TraceError
        A file that cannot be read, holds binary data, or no input with any NCCL line; with ``strict``,
        any unusable COLL line.

    Examples
    --------
    >>> df, report = read_nccl_logs([Path("rank0.log"), Path("rank1.log")])  # doctest: +SKIP
    >>> report.summary()  # doctest: +SKIP
    'read 2 file(s), 1200 line(s): 1000 trace row(s), nothing skipped'
    """
    compact, report = scan_nccl_logs(paths, progress=progress)
    df = compact.frame()
    try:
        df = validate(df, collectives=False)  # checked in full by write_trace / read_trace
    except TraceError as exc:  # the row numbers are the frame's: name the input files too (as finish_frame)
        raise TraceError(f"{inputs_text(report)}: {exc}") from None
    df.attrs["collsim"] = compact.meta
    report.raise_if_strict(strict)
    return df, report


def scan_nccl_logs(paths: list[Path], *, progress: Callable[[float], Any] | None = None
                   ) -> tuple[CompactRows, IngestReport]:
    """Read NCCL debug logs into compact rows (text as codes) and the report, for a writer that streams
    them out a block at a time (:func:`read_nccl_logs` makes one frame of them).

    Returns
    -------
    (CompactRows, IngestReport)
        The rows in final order with the metadata, and what was read and skipped (members' agreement
        checked; ``strict`` is the caller's: :meth:`IngestReport.raise_if_strict`).

    Raises
    ------
    TraceError
        As :func:`read_nccl_logs`.
    """
    report = IngestReport()
    paths = [Path(p) for p in paths]
    scans: list[FileScan] = []
    sizes = [(p.stat().st_size, compression_of(p) is not None) for p in paths if p.is_file()]
    jit = use_jit(sum(n for n, _ in sizes))
    with spill_folder(should_spill(sizes)) as folder:  # removed at the end, also on an error
        stores = None if folder is None else []
        tuning_stores = None if folder is None else []
        for f, path in enumerate(paths):
            store = None if folder is None else PartStore(folder, f"file{f}")
            tuning = None if folder is None else TuningStore(folder, f"file{f}")
            scans.append(scan_file(path, report, progress, jit=jit, parts=store, tunings=tuning))
            if stores is not None:
                stores.append(store)
                tuning_stores.append(tuning)
            report.files.append(str(path))
        report.lines_read = sum(s.lines for s in scans)
        compact = _assemble(scans, stores, folder, report, tuning_stores)
    report.records = len(compact)
    report.set_agreement(*compact.agreement())
    compact.meta["notes"] = list(dict.fromkeys(report.notes))
    return compact, report


def _check_inputs(paths: list[Path], scans: list[FileScan], coll_lines: list[int], report: IngestReport) -> None:
    useful = [s for s, n in zip(scans, coll_lines, strict=True) if s.nccl_lines or n]
    if not useful:
        first = paths[0] if paths else "input"
        what = "empty file" if scans and scans[0].lines == 0 else "no NCCL log lines found"
        raise TraceError(f"{first}: {what}")
    for s in scans:
        if s not in useful:
            report.notes.append(f"{s.path}: {'empty file' if s.lines == 0 else 'no NCCL log lines'}")


def _where(scans: list[FileScan], pos: int) -> str:
    return f"{scans[pos >> C.POS_SHIFT].path}:{pos & ((1 << C.POS_SHIFT) - 1)}"


def _assemble(scans: list[FileScan], stores: list[PartStore] | None, folder: Path | None,
              report: IngestReport, tuning_stores: list[TuningStore] | None = None) -> CompactRows:
    """Map the COLL lines (two passes over the chunks, :mod:`traces.formats.nccl.lines`), build the rows
    one process at a time, then TUNING, timestamps and metadata."""
    notes = report.notes

    def chunks(f: int) -> Iterator[dict[str, np.ndarray]]:
        if stores is not None:
            yield from stores[f].chunks()
        else:
            yield scans[f].coll

    def taken(f: int) -> Iterator[dict[str, np.ndarray]]:  # the last pass over a file in memory frees it
        if stores is not None:
            yield from stores[f].chunks()
        else:
            coll, scans[f].coll = scans[f].coll, {}
            yield coll

    def where(pos: int) -> str:
        return _where(scans, pos)

    inits = [dict(r, pos=C.pos_key(f, r["line"])) for f, s in enumerate(scans) for r in s.inits]
    sv = survey(len(scans), chunks)
    _check_inputs([Path(s.path) for s in scans], scans, sv.lines, report)
    # Interleaved writes can glue garbage onto a host name: map it back to the clean name of that pid.
    fixed = C.fix_hosts(sv.pairs | {(r["host"], r["pid"]) for r in inits})
    for r in inits:
        r["host"] = fixed.get((r["host"], r["pid"]), r["host"])
    report_unusable(sv, where, report)
    store = ProcessStore(folder)
    mapped = map_lines(len(scans), taken, sv, inits, fixed, store, where, report)
    for part_store in stores or ():  # replayed for the last time: only the per-process files are needed now
        part_store.drop()
    del sv
    instances = mapped.instances
    C.set_identities(instances)
    evidence: dict[str, dict[str, Any]] = {}
    comms = C.group_instances(instances, notes, evidence)
    C.split_shared_identities(comms, notes)
    host_order = order_hosts(mapped.host_first, inits)
    ranks, world_size, world = C.assign_global_ranks(comms, host_order, notes)
    members = C.comm_members(comms, ranks, world, world_size, notes)

    proc_code = {p: k for k, p in enumerate(mapped.processes)}
    # spilled: the TUNING records go to one file per process, read back with that process's rows
    tunings = (tuning_columns(scans, proc_code, fixed) if tuning_stores is None else
               spill_tunings(tuning_stores, proc_code, fixed, folder))
    n_tunings = (len(tunings["pos"]) if tuning_stores is None else sum(len(t) for t in tuning_stores))
    stamps = [s.min_ts_us for s in scans if s.min_ts_us is not None]
    if folder is None:
        rows, comm_name = process_rows(store, mapped, ranks, notes)
        n_rows = len(rows["pos"]) if rows else 0
        if n_rows:
            inst_proc = np.asarray(mapped.inst_proc, dtype=np.int64)
            unmatched = apply_tuning(rows, inst_proc[rows["inst"]], tunings)
            ts = rows["ts_us"]
            if (ts != NO_TS).any():
                stamps.append(int(ts[ts != NO_TS].min()))
            rows["t_start_s"] = np.where(ts == NO_TS, np.nan, (ts - (min(stamps) if stamps else 0)) / 1e6)
    else:
        spilled, comm_name, inferred, unmatched, ts_min = spilled_process_rows(store, mapped, ranks, notes, tunings, folder)
        if ts_min is not None:
            stamps.append(ts_min)
        out = SpilledRows(spilled, comm_name, *host_dev(instances), DT_NAME, {}, min(stamps) if stamps else 0)
        hand_over(out, folder)  # its files stay until the rows are written
        n_rows = len(out)
        finish_spilled(out, inferred, notes)
    if not n_rows:
        unmatched = n_tunings
        notes.append("no usable COLL lines (log with NCCL_DEBUG_SUBSYS=COLL to see collectives)")
    if unmatched:
        notes.append(f"{unmatched} TUNING line(s) matched no COLL line of their process")
    extra: dict[str, Any] = {"notes": notes}
    if evidence:
        extra["comm_inference"] = evidence
    rings, partial = ring_metadata(scans, instances, members, notes)
    if rings:
        extra["rings"] = rings
        extra["rings_partial"] = partial
    versions = list(dict.fromkeys(v for s in scans for v in s.versions))
    if versions:
        extra["nccl_version"] = versions[0]
        if len(versions) > 1:
            notes.append(f"several NCCL versions in the logs: {', '.join(versions)}")
    meta = new_metadata(world_size, members, "nccl-log", gpus_per_node=gpus_per_node(instances), **extra)
    if folder is None:
        return CompactRows(rows if n_rows else {}, comm_name, *host_dev(instances), DT_NAME, meta)
    out.meta = meta
    return out


__all__ = ["looks_like_nccl_log", "read_nccl_logs", "scan_nccl_logs", "write_nccl_log"]
