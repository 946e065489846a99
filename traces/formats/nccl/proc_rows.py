"""Trace rows from the mapped COLL lines, one process at a time: in memory (:func:`process_rows`) or written
to a :class:`traces.formats.nccl.rowstore.RowStore` with each process's TUNING match
(:func:`spilled_process_rows`), then the steps across processes on spilled rows (:func:`finish_spilled`).

Every step of :func:`traces.formats.nccl.rows.build_rows` stays inside one process (runs, groups and ``seq``
are per instance or rank), so the working set is one process's lines, not the file's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from traces.arrays import factorize
from traces.formats.nccl.infer import align_on_opcount
from traces.formats.nccl.lines import Mapped
from traces.formats.nccl.rows import COLL, OP_CODE, RECV, SEND, build_rows, copy_tuning, match_tuning
from traces.formats.nccl.rowstore import RowStore, SpilledRows
from traces.formats.nccl.scan import NO_TS
from traces.formats.nccl.spill import ProcessStore, SpilledTunings
from traces.schema import DTYPE_BYTES, NCCL_DTYPE_CODES

#: NCCL datatype code -> schema dtype name ("" for codes the schema lacks; such lines are skipped earlier).
DT_NAME = np.array([NCCL_DTYPE_CODES.get(k, "") for k in range(max(NCCL_DTYPE_CODES) + 1)], dtype=object)


def row_builder(mapped: Mapped, ranks: dict[tuple[str, int, int], int]
             ) -> tuple[Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]], np.ndarray, set[int]]:
    """The row builder of one process's lines, the comm name of each code, and the inferred comms' codes."""
    instances = mapped.instances
    comm_code, comm_name = factorize(np.array([i.comm for i in instances], dtype=object), na_sentinel=False)
    comm_name = np.asarray(comm_name, dtype=object)
    # Integer codes through the row steps; text only for the final rows (object columns are slow to take).
    grank = np.array([ranks[i.identity] for i in instances], dtype=np.int64)
    nranks = np.array([i.nranks for i in instances], dtype=np.int64)
    dt_size = np.array([DTYPE_BYTES.get(n, 0) for n in DT_NAME], dtype=np.int64)
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


def process_rows(store: ProcessStore, mapped: Mapped, ranks: dict[tuple[str, int, int], int],
                 notes: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Trace rows as columns (text still as codes) and the comm name of each code.

    Rows are built one process at a time from its lines in ``store`` (every step of :func:`build_rows`
    stays inside one process: runs, groups and ``seq`` are per instance or rank), so the working set is one
    process's lines, not the file's.
    """
    build, comm_name, inferred = row_builder(mapped, ranks)
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


def spilled_process_rows(store: ProcessStore, mapped: Mapped, ranks: dict[tuple[str, int, int], int],
                         notes: list[str], tunings: SpilledTunings, folder: Path
                         ) -> tuple[RowStore, np.ndarray, set[int], int, int | None]:
    """:func:`process_rows` and the TUNING match of each process, its rows written to a :class:`RowStore`.

    Returns the store, comm names, inferred comm codes, TUNING lines matched by no row, and the earliest
    timestamp of the rows.
    """
    build, comm_name, inferred = row_builder(mapped, ranks)
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


def finish_spilled(rows: SpilledRows, inferred: set[int], notes: list[str]) -> None:
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


__all__ = ["DT_NAME", "finish_spilled", "process_rows", "row_builder", "spilled_process_rows"]
