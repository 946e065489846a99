"""NCCL debug-log text (``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,COLL[,TUNING]``): reader and writer.

:func:`read_nccl_logs` turns many log files (one per rank, host or process, or all mixed) into one §3
trace; :func:`write_nccl_log` writes a trace back as log text that reads back to the same rows. The
pieces: :mod:`traces.formats.nccl.layout` (formats), :mod:`traces.formats.nccl.scan` (streaming, fast path),
:mod:`traces.formats.nccl.comms` (pointers -> communicators -> global ranks), :mod:`traces.formats.nccl.rows`
(groups, AllToAll folding, seq, TUNING), :mod:`traces.formats.nccl.writer`. Rules: ``docs/nccl_logs.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traces.formats.nccl import comms as C
from traces.formats.nccl.infer import align_on_opcount
from traces.formats.nccl.layout import NCCL_OPS
from traces.formats.nccl.output import CompactRows, combined_codes, disagreeing_codes
from traces.formats.nccl.rows import COLL, OP_CODE, RECV, SEND, apply_tuning, build_rows, object_frame
from traces.formats.nccl.scan import NO_TS, FileScan, scan_file, use_jit
from traces.formats.nccl.writer import write_nccl_log
from traces.ingest_report import IngestReport
from traces.schema import DTYPE_BYTES, NCCL_DTYPE_CODES, TraceError, new_metadata, validate

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
    jit = use_jit(sum(p.stat().st_size for p in paths if p.is_file()))
    for path in paths:
        scans.append(scan_file(path, report, progress, jit=jit))
        report.files.append(str(path))
    report.lines_read = sum(s.lines for s in scans)
    _check_inputs(paths, scans, report)
    compact = _assemble(scans, report)
    report.records = len(compact)
    report.set_agreement(*disagreeing_codes(compact.rows, compact.comm_name, compact.dt_name))
    compact.meta["notes"] = list(dict.fromkeys(report.notes))
    return compact, report


def _check_inputs(paths: list[Path], scans: list[FileScan], report: IngestReport) -> None:
    useful = [s for s in scans if s.nccl_lines or len(s.coll["line"])]
    if not useful:
        first = paths[0] if paths else "input"
        what = "empty file" if scans and scans[0].lines == 0 else "no NCCL log lines found"
        raise TraceError(f"{first}: {what}")
    for s in scans:
        if s not in useful:
            report.notes.append(f"{s.path}: {'empty file' if s.lines == 0 else 'no NCCL log lines'}")


def _coll_frame(scans: list[FileScan]) -> pd.DataFrame:
    frames = []
    for f, s in enumerate(scans):
        # object columns stay object (pandas 3 would turn them into Arrow strings, slow to iterate)
        cols = {k: v for k, v in s.coll.items() if k not in ("line", "tid")}  # not read later (memory)
        cols["pos"] = (np.int64(f) << C.POS_SHIFT) | np.asarray(s.coll["line"], dtype=np.int64)
        cols["file"] = np.full(len(cols["pos"]), f, dtype=np.int64)
        frames.append(object_frame(cols))
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _where(scans: list[FileScan], pos: int) -> str:
    return f"{scans[pos >> C.POS_SHIFT].path}:{pos & ((1 << C.POS_SHIFT) - 1)}"


def _skip_rows(df: pd.DataFrame, mask: np.ndarray, reason: str, scans: list[FileScan],
               report: IngestReport) -> pd.DataFrame:
    if mask.any():
        report.skip(reason, _where(scans, int(df["pos"].to_numpy()[mask][0])), int(mask.sum()))
        return df[~mask]
    return df


def _drop_unusable(c: pd.DataFrame, scans: list[FileScan], report: IngestReport) -> pd.DataFrame:
    # Decide per distinct op / dtype code (a handful), not per row.
    codes, names = pd.factorize(c["op"].to_numpy(dtype=object))
    names = list(names)
    for k, op in enumerate(names):
        if op not in NCCL_OPS:
            c, codes = _skip_code(c, codes, k, f"unknown COLL op name {op!r}", scans, report)
    for op in [k for k, v in NCCL_OPS.items() if v is None]:
        if op in names:
            c, codes = _skip_code(c, codes, names.index(op),
                                  f"op {op} (NCCL 2.29+ one-sided) has no trace-schema equivalent", scans, report)
    dts = pd.unique(c["dt"].to_numpy())
    for dt in [d for d in dts.tolist() if d not in NCCL_DTYPE_CODES]:
        c = _skip_rows(c, (c["dt"] == dt).to_numpy(), f"unknown datatype code {dt}", scans, report)
    # A root (rooted ops) or peer (Send/Recv) is a comm rank: outside [0, nranks) the line is damaged.
    rooted = np.isin(c["op"].to_numpy(dtype=object), ["Broadcast", "Reduce", "Gather", "Scatter", "Send", "Recv"])
    root, nranks = c["root"].to_numpy(), c["nranks"].to_numpy()
    return _skip_rows(c, rooted & ((root < 0) | (root >= nranks)), "root or peer outside the communicator "
                      "([nranks=])", scans, report)


def _skip_code(c: pd.DataFrame, codes: np.ndarray, k: int, reason: str, scans: list[FileScan],
               report: IngestReport) -> tuple[pd.DataFrame, np.ndarray]:
    mask = codes == k
    return _skip_rows(c, mask, reason, scans, report), codes[~mask]


def _assemble(scans: list[FileScan], report: IngestReport) -> CompactRows:
    notes = report.notes
    c = _coll_frame(scans)
    for s in scans:  # the frame holds the COLL columns now: do not keep two copies (peak memory)
        s.coll = {}
    inits = [dict(r, pos=C.pos_key(f, r["line"])) for f, s in enumerate(scans) for r in s.inits]
    # Interleaved writes can glue garbage onto a host name: map it back to the clean name of that pid.
    seen = c[["host", "pid"]].drop_duplicates() if len(c) else pd.DataFrame({"host": [], "pid": []})
    pairs = set(zip(seen["host"].tolist(), seen["pid"].tolist(), strict=True)) | {(r["host"], r["pid"]) for r in inits}
    fixed = C.fix_hosts(pairs)
    if fixed and len(c):
        key = pd.MultiIndex.from_arrays([c["host"], c["pid"]])
        new = pd.Series([fixed.get(k, k[0]) for k in seen.itertuples(index=False, name=None)],
                        index=pd.MultiIndex.from_frame(seen))
        c["host"] = new.reindex(key).to_numpy()
    for r in inits:
        r["host"] = fixed.get((r["host"], r["pid"]), r["host"])
    c = _drop_unusable(c, scans, report)
    c = _resolve_unprefixed(c, inits, scans, report)

    by_key = C.build_instances(inits)
    instances = [i for insts in by_key.values() for i in insts]
    index_of = {id(i): k for k, i in enumerate(instances)}
    row_inst = np.full(len(c), -1, dtype=np.int64)
    if len(c):
        for key, idx in c.groupby(["host", "pid", "comm"], sort=False).indices.items():
            key = (key[0], int(key[1]), key[2])
            insts = by_key.get(key)
            pos = c["pos"].to_numpy()[idx]
            if insts is None:
                inst = C.Instance(key=key, rank=None, nranks=int(c["nranks"].to_numpy()[idx[0]]), comm_id=None,
                                  dev=None, local_ranks=None, start=int(pos.min()), record_pos=[])
                insts = by_key[key] = [inst]
                index_of[id(inst)] = len(instances)
                instances.append(inst)
            base = index_of[id(insts[0])]
            if len(insts) == 1:
                row_inst[idx] = base
            else:
                starts = np.array([i.start for i in insts])
                which = np.clip(np.searchsorted(starts, pos, side="right") - 1, 0, len(insts) - 1)
                row_inst[idx] = [index_of[id(insts[w])] for w in which]
            if insts[0].rank is None:  # no Init line: the evidence for inferring its communicator
                C.note_sequence(insts[0], c, idx)
            granks = c["grank"].to_numpy()[idx]
            if (granks >= 0).any():
                for w in set(row_inst[idx].tolist()):
                    instances[w].grank = int(granks[granks >= 0][0])
    c["inst"] = row_inst
    C.set_identities(instances)
    evidence: dict[str, dict[str, Any]] = {}
    comms = C.group_instances(instances, notes, evidence)
    C.split_shared_identities(comms, notes)
    host_order = _host_order(c, inits)
    ranks, world_size, world = C.assign_global_ranks(comms, host_order, notes)
    members = C.comm_members(comms, ranks, world, world_size, notes)

    rows, comm_name = _rows(c, instances, ranks, notes)
    del c  # per-line data is no longer needed: only the rows go on (peak memory)
    unmatched = 0
    if len(rows):
        proc_code: dict[tuple[str, int], int] = {}
        inst_proc = np.array([proc_code.setdefault(i.key[:2], len(proc_code)) for i in instances], dtype=np.int64)
        unmatched = apply_tuning(rows, inst_proc[rows["inst"].to_numpy()], _tuning_columns(scans, proc_code, fixed))
    else:
        unmatched = sum(len(s.tunings["line"]) for s in scans)
        notes.append("no usable COLL lines (log with NCCL_DEBUG_SUBSYS=COLL to see collectives)")
    if unmatched:
        notes.append(f"{unmatched} TUNING line(s) matched no COLL line of their process")

    stamps = [s.min_ts_us for s in scans if s.min_ts_us is not None]
    if len(rows):
        ts = rows["ts_us"].to_numpy()
        if (ts != NO_TS).any():
            stamps.append(int(ts[ts != NO_TS].min()))
        base = min(stamps) if stamps else 0
        rows["t_start_s"] = np.where(ts == NO_TS, np.nan, (ts - base) / 1e6)
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
    host = np.array([i.key[0] for i in instances], dtype=object)  # the instance key holds the row's host
    dev = np.array([max(i.identity[2], -1) for i in instances], dtype=np.int64)
    return CompactRows(rows, comm_name, host, dev, _DT_NAME, meta)


def _tuning_columns(scans: list[FileScan], proc_code: dict[tuple[str, int], int],
                    fixed: dict[tuple[str, int], str]) -> dict[str, np.ndarray]:
    """All TUNING records as columns, with ``pos`` and ``proc`` (process code, -1 when unknown)."""
    parts = []
    for f, s in enumerate(scans):
        t = s.tunings
        if not len(t["line"]):
            continue
        # (host, pid) -> process code once per distinct pair (a few), not per line
        codes = combined_codes(pd.factorize(t["host"])[0], t["pid"])  # integer keys: no tuple per line
        first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
        uniq = zip(t["host"][first].tolist(), t["pid"][first].tolist(), strict=True)
        procs = np.array([proc_code.get((fixed.get(k, k[0]), int(k[1])), -1) for k in uniq], dtype=np.int64)
        parts.append({"pos": (np.int64(f) << C.POS_SHIFT) | t["line"], "proc": procs[codes], "op": t["op"],
                      "nbytes": t["nbytes"], "algo": t["algo"], "proto": t["proto"]})
    names = ("pos", "proc", "op", "nbytes", "algo", "proto")
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in names}


#: pid given to the unnamed process of a file whose unprefixed lines use a pointer nothing else shows.
_UNNAMED_PID = -2


def _resolve_unprefixed(c: pd.DataFrame, inits: list[dict[str, Any]], scans: list[FileScan],
                        report: IngestReport) -> pd.DataFrame:
    """Give COLL bodies printed without a prefix the process of the only one using that pointer in the file,
    else in all files; a pointer seen nowhere else is one unnamed process per file (host ``""``)."""
    lost = (c["pid"] < 0).to_numpy()
    if not lost.any():
        return c
    owners: dict[tuple[int, str], set[tuple[str, int]]] = {}
    for f, h, p, ptr in zip(c["file"][~lost], c["host"][~lost], c["pid"][~lost], c["comm"][~lost], strict=True):
        owners.setdefault((f, ptr), set()).add((h, p))
    for r in inits:
        owners.setdefault((r["pos"] >> C.POS_SHIFT, r["ptr"]), set()).add((r["host"], r["pid"]))
    anywhere: dict[str, set[tuple[str, int]]] = {}
    for (_, ptr), procs in owners.items():
        anywhere.setdefault(ptr, set()).update(procs)
    hosts, pids = c["host"].to_numpy().copy(), c["pid"].to_numpy().copy()
    unresolved = np.zeros(len(c), dtype=bool)
    files, ptrs = c["file"].to_numpy(), c["comm"].to_numpy()
    for i in np.flatnonzero(lost):
        found = owners.get((int(files[i]), ptrs[i])) or anywhere.get(ptrs[i], set())
        if len(found) == 1:
            hosts[i], pids[i] = next(iter(found))
        elif not found:  # a pointer no prefixed line shows: its lines are one process we cannot name
            hosts[i], pids[i] = "", _UNNAMED_PID - int(files[i])
        else:
            unresolved[i] = True
    c = c.assign(host=hosts, pid=pids)
    return _skip_rows(c, unresolved, "COLL line without a host:pid prefix and an ambiguous comm pointer",
                      scans, report)


def _host_order(c: pd.DataFrame, inits: list[dict[str, Any]]) -> dict[str, int]:
    first: dict[str, int] = {}
    for r in inits:
        first[r["host"]] = min(first.get(r["host"], r["pos"]), r["pos"])
    if len(c):
        for host, pos in c.groupby("host", sort=False)["pos"].min().items():
            first[host] = min(first.get(host, pos), int(pos))
    return {h: k for k, h in enumerate(sorted(first, key=first.__getitem__))}


def _rows(c: pd.DataFrame, instances: list[C.Instance], ranks: dict[tuple[str, int, int], int],
          notes: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Trace rows (text still as codes) and the comm name of each code.

    Rows are built one process at a time (every step of :func:`build_rows` stays inside one process: runs,
    groups and ``seq`` are per instance or rank), so the working set is one process's lines, not the file's.
    """
    comm_code, comm_name = pd.factorize(np.array([i.comm for i in instances], dtype=object), use_na_sentinel=False)
    comm_name = np.asarray(comm_name, dtype=object)
    if not len(c):
        return pd.DataFrame(), comm_name
    inst = c["inst"].to_numpy()
    # Integer codes through the row steps; text only for the final rows (object columns are slow to take).
    grank = np.array([ranks[i.identity] for i in instances], dtype=np.int64)
    nranks = np.array([i.nranks for i in instances], dtype=np.int64)
    dt_size = np.array([DTYPE_BYTES.get(n, 0) for n in _DT_NAME], dtype=np.int64)
    op_codes, op_names = pd.factorize(c["op"].to_numpy(dtype=object))
    op_of_code = np.array([OP_CODE[NCCL_OPS[o]] for o in op_names], dtype=np.int64)
    proc_code: dict[tuple[str, int], int] = {}
    inst_proc = np.array([proc_code.setdefault(i.key[:2], len(proc_code)) for i in instances], dtype=np.int64)
    line = {k: c[k].to_numpy() for k in ("pos", "opc", "count", "dt", "root", "nranks", "ts_us")}

    def columns(idx: np.ndarray) -> dict[str, np.ndarray]:
        # one process's lines: the derived columns are made per process, never for the whole file (memory)
        i, ops, dt = inst[idx], op_of_code[op_codes[idx]], line["dt"][idx]
        kind = np.select([ops == OP_CODE["Send"], ops == OP_CODE["Recv"]], [SEND, RECV], COLL).astype(np.int8)
        return {"pos": line["pos"][idx], "inst": i, "rank": grank[i], "comm": comm_code[i], "op": ops, "kind": kind,
                "opc": line["opc"][idx], "count": line["count"][idx], "dt": dt, "size": dt_size[dt],
                "root": line["root"][idx], "nranks": np.where(nranks[i] > 0, nranks[i], line["nranks"][idx]),
                "ts_us": line["ts_us"][idx]}

    procs = inst_proc[inst]
    order = np.argsort(procs, kind="stable")
    cuts = np.flatnonzero(np.diff(procs[order])) + 1
    del procs
    parts = [build_rows(columns(idx), frame=False) for idx in np.split(order, cuts)]
    del order
    joined = {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}
    del parts
    if len(proc_code) > 1:  # one order over all processes: rank, then line (as one build gives)
        by = np.lexsort((joined["pos"], joined["rank"]))
        for k in joined:  # one column at a time: never two copies of all rows (memory)
            joined[k] = joined[k][by]
        del by
    rows = object_frame(joined)
    del joined
    inferred = {int(comm_code[k]) for k, i in enumerate(instances) if i.inferred}
    if inferred and len(rows):
        pos = line["pos"]
        by_pos = np.argsort(pos, kind="stable")
        at = by_pos[np.searchsorted(pos[by_pos], rows["pos"].to_numpy())]
        seq, done = align_on_opcount(rows["comm"].to_numpy(), rows["rank"].to_numpy(), rows["pos"].to_numpy(),
                                     line["opc"][at], rows["kind"].to_numpy() == COLL,
                                     rows["seq"].to_numpy(), inferred)
        rows["seq"] = seq
        if done:
            notes.append(f"seq of {len(done)} inferred communicator(s) aligned on opCount (members' logs start "
                         "at different collectives)")
    return rows, comm_name


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
