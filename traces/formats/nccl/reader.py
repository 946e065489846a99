"""NCCL debug-log text (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,COLL[,TUNING]``): reader and writer.

:func:`read_nccl_logs` turns many log files (one per rank, host or process, or all mixed) into one §3
trace; :func:`write_nccl_log` writes a trace back as log text that reads back to the same rows. The
pieces: :mod:`traces.formats.nccl.layout` (formats), :mod:`traces.formats.nccl.scan` (streaming, fast path),
:mod:`traces.formats.nccl.comms` (pointers -> communicators -> global ranks), :mod:`traces.formats.nccl.rows`
(groups, AllToAll folding, seq, TUNING), :mod:`traces.formats.nccl.writer`. Rules: ``docs/nccl_logs.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from traces.arrays import factorize
from traces.formats.files import compression_of
from traces.formats.nccl import comms as C
from traces.formats.nccl.infer import align_on_opcount
from traces.formats.nccl.lines import Mapped, map_lines, report_unusable, survey
from traces.formats.nccl.output import CompactRows, combined_codes
from traces.formats.nccl.rows import (
    COLL,
    OP_CODE,
    RECV,
    SEND,
    apply_tuning,
    build_rows,
    copy_tuning,
    match_tuning,
)
from traces.formats.nccl.rowstore import RowStore, SpilledRows
from traces.formats.nccl.scan import NO_TS, FileScan, scan_file, use_jit
from traces.formats.nccl.spill import (
    Codes,
    PartStore,
    ProcessStore,
    SpilledTunings,
    TuningStore,
    hand_over,
    should_spill,
    spill_folder,
)
from traces.formats.nccl.writer import write_nccl_log
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, NCCL_DTYPE_CODES, TraceError, new_metadata, validate

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["looks_like_nccl_log", "read_nccl_logs", "scan_nccl_logs", "write_nccl_log"]

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
    df = validate(df, collectives=False)  # checked in full by write_trace / read_trace
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
    host_order = _host_order(mapped.host_first, inits)
    ranks, world_size, world = C.assign_global_ranks(comms, host_order, notes)
    members = C.comm_members(comms, ranks, world, world_size, notes)

    proc_code = {p: k for k, p in enumerate(mapped.processes)}
    # spilled: the TUNING records go to one file per process, read back with that process's rows
    tunings = (_tuning_columns(scans, proc_code, fixed) if tuning_stores is None else
               _spill_tunings(tuning_stores, proc_code, fixed, folder))
    n_tunings = (len(tunings["pos"]) if tuning_stores is None else sum(len(t) for t in tuning_stores))
    stamps = [s.min_ts_us for s in scans if s.min_ts_us is not None]
    if folder is None:
        rows, comm_name = _rows(store, mapped, ranks, notes)
        n_rows = len(rows["pos"]) if rows else 0
        if n_rows:
            inst_proc = np.asarray(mapped.inst_proc, dtype=np.int64)
            unmatched = apply_tuning(rows, inst_proc[rows["inst"]], tunings)
            ts = rows["ts_us"]
            if (ts != NO_TS).any():
                stamps.append(int(ts[ts != NO_TS].min()))
            rows["t_start_s"] = np.where(ts == NO_TS, np.nan, (ts - (min(stamps) if stamps else 0)) / 1e6)
    else:
        spilled, comm_name, inferred, unmatched, ts_min = _spilled_rows(store, mapped, ranks, notes, tunings, folder)
        if ts_min is not None:
            stamps.append(ts_min)
        out = SpilledRows(spilled, comm_name, *_host_dev(instances), _DT_NAME, {}, min(stamps) if stamps else 0)
        hand_over(out, folder)  # its files stay until the rows are written
        n_rows = len(out)
        _finish_spilled(out, inferred, notes)
    if not n_rows:
        unmatched = n_tunings
        notes.append("no usable COLL lines (log with NCCL_DEBUG_SUBSYS=COLL to see collectives)")
    if unmatched:
        notes.append(f"{unmatched} TUNING line(s) matched no COLL line of their process")
    extra: dict[str, Any] = {"notes": notes}
    if evidence:
        extra["comm_inference"] = evidence
    rings, partial = _rings(scans, instances, members, notes)
    if rings:
        extra["rings"] = rings
        extra["rings_partial"] = partial
    versions = list(dict.fromkeys(v for s in scans for v in s.versions))
    if versions:
        extra["nccl_version"] = versions[0]
        if len(versions) > 1:
            notes.append(f"several NCCL versions in the logs: {', '.join(versions)}")
    meta = new_metadata(world_size, members, "nccl-log", gpus_per_node=_gpus_per_node(instances), **extra)
    if folder is None:
        return CompactRows(rows if n_rows else {}, comm_name, *_host_dev(instances), _DT_NAME, meta)
    out.meta = meta
    return out


def _host_dev(instances: list[C.Instance]) -> tuple[np.ndarray, np.ndarray]:
    """Host and device of each instance code (the instance key holds the row's host)."""
    host = np.array([i.key[0] for i in instances], dtype=object)
    return host, np.array([max(i.identity[2], -1) for i in instances], dtype=np.int64)


def _tuning_part(f: int, t: dict[str, np.ndarray], proc_code: dict[tuple[str, int], int],
                 fixed: dict[tuple[str, int], str]) -> dict[str, np.ndarray]:
    """TUNING records of file ``f`` as columns, with ``pos`` and ``proc`` (process code, -1 when unknown)."""
    # (host, pid) -> process code once per distinct pair (a few), not per line
    codes = combined_codes(factorize(t["host"])[0], t["pid"])  # integer keys: no tuple per line
    first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    uniq = zip(t["host"][first].tolist(), t["pid"][first].tolist(), strict=True)
    procs = np.array([proc_code.get((fixed.get(k, k[0]), int(k[1])), -1) for k in uniq], dtype=np.int64)
    return {"pos": (np.int64(f) << C.POS_SHIFT) | t["line"], "proc": procs[codes], "op": t["op"],
            "nbytes": t["nbytes"], "algo": t["algo"], "proto": t["proto"]}


_TUNED = ("pos", "proc", "op", "nbytes", "algo", "proto")


def _tuning_columns(scans: list[FileScan], proc_code: dict[tuple[str, int], int],
                    fixed: dict[tuple[str, int], str]) -> dict[str, np.ndarray]:
    """All TUNING records as columns (:func:`_tuning_part`)."""
    parts = [_tuning_part(f, s.tunings, proc_code, fixed) for f, s in enumerate(scans) if len(s.tunings["line"])]
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in _TUNED}


def _spill_tunings(stores: list[TuningStore], proc_code: dict[tuple[str, int], int],
                   fixed: dict[tuple[str, int], str], folder: Path) -> SpilledTunings:
    """Replay each file's spilled TUNING records (a block at a time) into one file per process."""
    text = {name: Codes() for name in ("op", "algo", "proto")}
    by_proc = ProcessStore(folder, fields=_TUNED, name="tuning")
    for f, store in enumerate(stores):
        for t in store.chunks():
            part = _tuning_part(f, t, proc_code, fixed)
            for name, codes in text.items():
                part[name] = codes.encode(part[name])
            order = np.argsort(part["proc"], kind="stable")
            cuts = np.flatnonzero(np.diff(part["proc"][order])) + 1
            for idx in np.split(order, cuts):
                by_proc.add(int(part["proc"][idx[0]]), part, idx)
    return SpilledTunings(by_proc, text)


def _host_order(host_first: dict[str, int], inits: list[dict[str, Any]]) -> dict[str, int]:
    first = dict(host_first)
    for r in inits:
        first[r["host"]] = min(first.get(r["host"], r["pos"]), r["pos"])
    return {h: k for k, h in enumerate(sorted(first, key=first.__getitem__))}


def _builder(mapped: Mapped, ranks: dict[tuple[str, int, int], int]
             ) -> tuple[Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]], np.ndarray, set[int]]:
    """The row builder of one process's lines, the comm name of each code, and the inferred comms' codes."""
    instances = mapped.instances
    comm_code, comm_name = factorize(np.array([i.comm for i in instances], dtype=object), na_sentinel=False)
    comm_name = np.asarray(comm_name, dtype=object)
    # Integer codes through the row steps; text only for the final rows (object columns are slow to take).
    grank = np.array([ranks[i.identity] for i in instances], dtype=np.int64)
    nranks = np.array([i.nranks for i in instances], dtype=np.int64)
    dt_size = np.array([DTYPE_BYTES.get(n, 0) for n in _DT_NAME], dtype=np.int64)
    inferred = {int(comm_code[k]) for k, i in enumerate(instances) if i.inferred}

    def build(line: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        i, ops, dt = line["inst"], line["op"], line["dt"]
        kind = np.select([ops == OP_CODE["Send"], ops == OP_CODE["Recv"]], [SEND, RECV], COLL).astype(np.int8)
        out = build_rows({"pos": line["pos"], "inst": i, "rank": grank[i], "comm": comm_code[i], "op": ops,
                          "kind": kind, "opc": line["opc"], "count": line["count"], "dt": dt, "size": dt_size[dt],
                          "root": line["root"], "nranks": np.where(nranks[i] > 0, nranks[i], line["nranks"]),
                          "ts_us": line["ts_us"]}, frame=False)
        if inferred:  # the opCount of each row's line, to align seq of inferred communicators on
            by_pos = np.argsort(line["pos"], kind="stable")
            out["opc"] = line["opc"][by_pos[np.searchsorted(line["pos"][by_pos], out["pos"])]]
        return out

    return build, comm_name, inferred


def _rows(store: ProcessStore, mapped: Mapped, ranks: dict[tuple[str, int, int], int],
          notes: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Trace rows as columns (text still as codes) and the comm name of each code.

    Rows are built one process at a time from its lines in ``store`` (every step of :func:`build_rows`
    stays inside one process: runs, groups and ``seq`` are per instance or rank), so the working set is one
    process's lines, not the file's.
    """
    build, comm_name, inferred = _builder(mapped, ranks)
    if not mapped.rows:
        return {}, comm_name
    parts = [build(store.take(p)) for p in store.processes()]
    joined = {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}
    del parts
    if len(mapped.processes) > 1:  # one order over all processes: rank, then line (as one build gives)
        by = np.lexsort((joined["pos"], joined["rank"]))
        for k in joined:  # one column at a time: never two copies of all rows (memory)
            joined[k] = joined[k][by]
        del by
    opc = joined.pop("opc", None)
    rows = joined
    if inferred and len(rows["pos"]):
        seq, done = align_on_opcount(rows["comm"], rows["rank"], rows["pos"], opc, rows["kind"] == COLL,
                                     rows["seq"], inferred)
        rows["seq"] = seq
        if done:
            notes.append(f"seq of {len(done)} inferred communicator(s) aligned on opCount (members' logs start "
                         "at different collectives)")
    return rows, comm_name


def _spilled_rows(store: ProcessStore, mapped: Mapped, ranks: dict[tuple[str, int, int], int], notes: list[str],
                  tunings: SpilledTunings, folder: Path) -> tuple[RowStore, np.ndarray, set[int], int, int | None]:
    """:func:`_rows` and the TUNING match of each process, its rows written to a :class:`RowStore`.

    Returns the store, comm names, inferred comm codes, TUNING lines matched by no row, and the earliest
    timestamp of the rows.
    """
    build, comm_name, inferred = _builder(mapped, ranks)
    rows = RowStore(folder)
    procs = store.processes()
    unmatched = tunings.unknown(procs)
    ts_min = None
    for p in procs:
        part = build(store.take(p))
        part["algo"], part["proto"], missed = match_tuning(part, np.full(len(part["pos"]), p, dtype=np.int64),
                                                            tunings.take(p))
        unmatched += missed
        ts = part["ts_us"][part["ts_us"] != NO_TS]
        if len(ts):
            ts_min = int(ts.min()) if ts_min is None else min(ts_min, int(ts.min()))
        rows.add(part)
        del part
    return rows, comm_name, inferred, unmatched, ts_min


def _finish_spilled(rows: SpilledRows, inferred: set[int], notes: list[str]) -> None:
    """The steps across processes on gathered columns: seq of inferred comms aligned on opCount, then each
    TUNING choice copied to the other members of its collective."""
    done: list[int] = []
    for code in sorted(inferred) if len(rows) else ():  # one inferred comm at a time (a gather of all rows grew)
        c = rows.gather(("comm", "rank", "pos", "opc", "kind", "seq"), comm=code)
        seq, aligned = align_on_opcount(c["comm"], c["rank"], c["pos"], c["opc"], c["kind"] == COLL, c["seq"], {code})
        changed = np.flatnonzero(seq != c["seq"])
        rows.patch_rows("seq", c["row"][changed], seq[changed])
        done += aligned
        del c, seq
    if done:
        notes.append(f"seq of {len(done)} inferred communicator(s) aligned on opCount (members' logs start "
                     "at different collectives)")
    # The TUNING copy is within one collective: one bucket of collectives at a time, only changed rows
    # written back (a gather of every row grew with the file).
    k = rows.buckets() if len(rows) else 0
    for b in range(k):
        c = rows.gather(("kind", "comm", "seq", "algo", "proto"), (b, k) if k > 1 else None)
        if "row" not in c:
            c["row"] = np.arange(len(rows), dtype=np.int64)
        before = c["algo"].copy()
        if (before != 0).any():
            copy_tuning(c["kind"] == COLL, c["comm"], c["seq"], c["algo"], c["proto"], unknown=0)
            changed = np.flatnonzero(c["algo"] != before)
            rows.patch_rows("algo", c["row"][changed], c["algo"][changed])
            rows.patch_rows("proto", c["row"][changed], c["proto"][changed])
        del c, before


#: NCCL datatype code -> schema dtype name ("" for codes the schema lacks; such lines are skipped earlier).
_DT_NAME = np.array([NCCL_DTYPE_CODES.get(k, "") for k in range(max(NCCL_DTYPE_CODES) + 1)], dtype=object)


def _gpus_per_node(instances: list[C.Instance]) -> int:
    per_host: dict[str, set[tuple[int, int]]] = {}
    local = 0
    for inst in instances:
        if inst.host:
            per_host.setdefault(inst.host, set()).add(inst.identity[1:])
        local = max(local, inst.local_ranks or 0)
    return max([local, 1, *(len(v) for v in per_host.values())])


def _rings(scans: list[FileScan], instances: list[C.Instance], members: dict[str, list[int]],
           notes: list[str]) -> tuple[dict[str, list[list[int]]], dict[str, list[int]]]:
    """Attach ring lines (printed by comm rank 0 during init) to the nearest rank-0 instance of the process."""
    found: dict[str, dict[int, tuple[list[int], bool]]] = {}
    lost = 0
    for f, s in enumerate(scans):
        for r in s.rings:
            pos = C.pos_key(f, r["line"])
            top = max(r["ranks"], default=-1)
            cands = [i for i in instances if i.key[:2] == (r["host"], r["pid"]) and i.rank == 0
                     and i.nranks > top and i.record_pos]
            if not cands:
                lost += 1
                continue
            inst = min(cands, key=lambda i: min(abs(p - pos) for p in i.record_pos))
            glob = members[inst.comm]
            ring = [glob[x] for x in r["ranks"]]
            partial = r["more"] or len(r["ranks"]) < inst.nranks
            found.setdefault(inst.comm, {}).setdefault(r["channel"], (ring, partial))
    if lost:
        notes.append(f"{lost} ring line(s) could not be tied to a communicator (no rank-0 Init line nearby)")
    rings = {comm: [chs[k][0] for k in sorted(chs)] for comm, chs in found.items()}
    partial = {comm: [j for j, k in enumerate(sorted(chs)) if chs[k][1]] for comm, chs in found.items()}
    if any(partial.values()):
        notes.append("some ring lines are cut (20-rank limit up to NCCL 2.22, '...' from 2.23): "
                     "metadata rings_partial lists them; no rank was invented")
    return rings, {k: v for k, v in partial.items() if v}
