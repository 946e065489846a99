"""COLL lines -> usable lines of known instances, one chunk of lines at a time (the reader's mapping steps).

The scan's COLL columns come as chunks (the whole file's columns, or the parts a
:class:`traces.formats.nccl.spill.PartStore` spilled), replayed in scan order twice:

1. :func:`survey` notes what needs every line before any line can be mapped: the (host, pid) pairs (for
   host fixing), the lines that cannot be used (unknown op name, one-sided op, unknown datatype, root
   outside the communicator: each reason with its count and first line, reported in the order of the
   whole-frame rules) and which processes use each pointer (for lines without a prefix).
2. :func:`map_lines` fixes hosts, places unprefixed lines, gives each line its communicator instance
   (instances are made in order of first appearance, as the rows of one frame would make them), keeps the
   per-pointer summaries communicator inference needs (sequences, ``[dev]``, RCCL ``globalrank``, host
   order) and puts each usable line into the :class:`traces.formats.nccl.spill.ProcessStore` of its process.

Positions are ``file << POS_SHIFT | line`` (:func:`traces.formats.nccl.comms.pos_key`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traces.arrays import factorize
from traces.formats.nccl import comms as C
from traces.formats.nccl.layout import NCCL_OPS
from traces.formats.nccl.output import combined_codes
from traces.formats.nccl.rows import OP_CODE
from traces.formats.nccl.spill import ProcessStore
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import NCCL_DTYPE_CODES

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["Mapped", "Survey", "map_lines", "report_unusable", "survey"]

#: Log op names whose ``root`` is a comm rank (the peer, for Send/Recv).
_ROOTED = ("Broadcast", "Reduce", "Gather", "Scatter", "Send", "Recv")
_ROOT_REASON = "root or peer outside the communicator ([nranks=])"
_AMBIGUOUS = "COLL line without a host:pid prefix and an ambiguous comm pointer"
#: pid given to the unnamed process of a file whose unprefixed lines use a pointer nothing else shows.
UNNAMED_PID = -2
_KNOWN_DT = np.array(sorted(NCCL_DTYPE_CODES), dtype=np.int64)

#: A chunk source: file index -> the file's COLL column chunks, in scan order.
Chunks = Callable[[int], Iterable[dict[str, np.ndarray]]]


def _first_of(codes: np.ndarray, k: int) -> np.ndarray:
    """Index of the first row of each code 0..k-1 (codes from a factorisation: every code occurs)."""
    first = np.zeros(k, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return first


#: A factorisation kept for the next pass: slot (file, column name) -> (the column, its codes, its values).
Factors = dict[tuple[int, str], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _factor(column: np.ndarray, factors: Factors | None = None, slot: tuple[int, str] | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Codes and values of a text column; ``factors[slot]`` keeps them for the other pass, which finds them
    when it gets the very same array (a file's columns in memory: both passes see them; a spilled chunk is
    read anew, and each slot keeps only its latest chunk). Text columns are factorised ~110 ms per 500k
    lines, so the second pass saves ~0.3 s on a 100 MB log."""
    if factors is not None and slot is not None:
        kept = factors.get(slot)
        if kept is not None and kept[0] is column:
            return kept[1], kept[2]
    codes, uniq = factorize(column, na_sentinel=False)
    codes, uniq = codes.astype(np.int64), np.asarray(uniq, dtype=object)
    if factors is not None and slot is not None:
        factors[slot] = (column, codes, uniq)
    return codes, uniq


@dataclass
class Survey:
    """What pass 1 learned from every line (see the module docstring)."""

    pairs: set[tuple[str, int]] = field(default_factory=set)
    ops: dict[str, list[int]] = field(default_factory=dict)  # op name -> [lines, first pos], first-seen order
    dts: dict[int, list[int]] = field(default_factory=dict)  # unknown datatype code -> [lines, first pos]
    bad_root: list[int] = field(default_factory=lambda: [0, -1])
    owners: dict[tuple[int, str], set[tuple[str, int]]] = field(default_factory=dict)  # raw hosts
    keep: list[np.ndarray] = field(default_factory=list)  # per chunk: usable lines
    lines: list[int] = field(default_factory=list)  # per file: COLL lines
    factors: Factors = field(default_factory=dict)  # text columns' codes, for pass 2 (see _factor)


def survey(n_files: int, chunks: Chunks) -> Survey:
    """Pass 1 over all chunks of all files, in order."""
    sv = Survey()
    for f in range(n_files):
        total = 0
        for ch in chunks(f):
            total += len(ch["line"])
            _survey_chunk(ch, f, sv)
        sv.lines.append(total)
    return sv


def _survey_chunk(ch: dict[str, np.ndarray], f: int, sv: Survey) -> None:
    n = len(ch["line"])
    if not n:
        sv.keep.append(np.zeros(0, dtype=bool))
        return
    pos = (np.int64(f) << C.POS_SHIFT) | ch["line"]
    host, pid = ch["host"], ch["pid"]
    hcodes, hosts = _factor(host, sv.factors, (f, "host"))
    pair = combined_codes(hcodes, pid)
    k = int(pair.max()) + 1
    first = _first_of(pair, k)
    sv.pairs.update(zip(hosts[hcodes[first]].tolist(), pid[first].tolist(), strict=True))
    ocodes, ops = _factor(ch["op"], sv.factors, (f, "op"))
    counts = np.bincount(ocodes, minlength=len(ops))
    for j, (op, at) in enumerate(zip(ops.tolist(), _first_of(ocodes, len(ops)).tolist(), strict=True)):
        sv.ops.setdefault(op, [0, int(pos[at])])[0] += int(counts[j])
    usable_op = np.array([NCCL_OPS.get(op) is not None for op in ops.tolist()], dtype=bool)[ocodes]
    dt = ch["dt"]
    bad_dt = usable_op & ~np.isin(dt, _KNOWN_DT)
    if bad_dt.any():
        at = np.flatnonzero(bad_dt)
        dcodes, dts = factorize(dt[at])
        for j, (d, a) in enumerate(zip(dts.tolist(), _first_of(dcodes, len(dts)).tolist(), strict=True)):
            sv.dts.setdefault(int(d), [0, int(pos[at[a]])])[0] += int((dcodes == j).sum())
    rooted = np.array([op in _ROOTED for op in ops.tolist()], dtype=bool)[ocodes]
    root, nranks = ch["root"], ch["nranks"]
    bad_root = usable_op & ~bad_dt & rooted & ((root < 0) | (root >= nranks))
    if bad_root.any():
        if sv.bad_root[0] == 0:
            sv.bad_root[1] = int(pos[np.argmax(bad_root)])
        sv.bad_root[0] += int(bad_root.sum())
    keep = usable_op & ~bad_dt & ~bad_root
    sv.keep.append(keep)
    named = keep & (pid >= 0)
    if named.any():
        at = np.flatnonzero(named)
        all_codes, all_ptrs = _factor(ch["comm"], sv.factors, (f, "comm"))
        ccodes, used = factorize(all_codes[at])  # the same codes as of ch["comm"][at], in its own order
        ptrs = all_ptrs[used]
        key = combined_codes(ccodes, hcodes[at], pid[at])
        first = _first_of(key, int(key.max()) + 1)
        for ptr, h, p in zip(ptrs[ccodes[first]].tolist(), hosts[hcodes[at][first]].tolist(),
                             pid[at][first].tolist(), strict=True):
            sv.owners.setdefault((f, ptr), set()).add((h, p))


def report_unusable(sv: Survey, where: Callable[[int], str], report: IngestReport) -> None:
    """Count the unusable lines as one frame's rules do: unknown op names (first-seen order), one-sided ops
    (NCCL_OPS order), unknown datatypes (first-seen order), then roots outside the communicator."""
    for op, (n, at) in sv.ops.items():
        if op not in NCCL_OPS:
            report.skip(f"unknown COLL op name {op!r}", where(at), n)
    for op in [k for k, v in NCCL_OPS.items() if v is None]:
        if op in sv.ops:
            n, at = sv.ops[op]
            report.skip(f"op {op} (NCCL 2.29+ one-sided) has no trace-schema equivalent", where(at), n)
    for dt, (n, at) in sv.dts.items():
        report.skip(f"unknown datatype code {dt}", where(at), n)
    if sv.bad_root[0]:
        report.skip(_ROOT_REASON, where(sv.bad_root[1]), sv.bad_root[0])


@dataclass
class Mapped:
    """What pass 2 gives: every instance (Init-line ones first, then new ones in order of first line) with
    its inference evidence set, the process of each instance, and the first line of each host."""

    instances: list[C.Instance]
    inst_proc: list[int]
    processes: list[tuple[str, int]]
    host_first: dict[str, int]
    rows: int = 0


@dataclass
class _State:
    by_key: dict[tuple[str, int, str], list[C.Instance]]
    instances: list[C.Instance]
    index_of: dict[int, int]
    key_base: dict[tuple[str, int, str], int] = field(default_factory=dict)  # key -> first instance index
    key_grank: dict[tuple[str, int, str], int] = field(default_factory=dict)
    key_hits: dict[tuple[str, int, str], set[int]] = field(default_factory=dict)
    bare_devs: dict[int, set[int]] = field(default_factory=dict)  # new instance -> [dev] seen
    bare_seq: dict[int, list[dict[str, np.ndarray]]] = field(default_factory=dict)
    proc_code: dict[tuple[str, int], int] = field(default_factory=dict)
    inst_proc: list[int] = field(default_factory=list)
    host_first: dict[str, int] = field(default_factory=dict)
    unresolved: list[int] = field(default_factory=lambda: [0, -1])
    rows: int = 0
    factors: Factors = field(default_factory=dict)  # the survey's text codes (see _factor)


def map_lines(n_files: int, chunks: Chunks, sv: Survey, inits: list[dict[str, Any]],
              fixed: dict[tuple[str, int], str], store: ProcessStore, where: Callable[[int], str],
              report: IngestReport) -> Mapped:
    """Pass 2 over all chunks (same order as :func:`survey`): usable lines into ``store`` by process."""
    by_key = C.build_instances(inits)
    instances = [i for insts in by_key.values() for i in insts]
    st = _State(by_key, instances, {id(i): k for k, i in enumerate(instances)}, factors=sv.factors)
    for i in instances:
        st.inst_proc.append(st.proc_code.setdefault(i.key[:2], len(st.proc_code)))
    owners: dict[tuple[int, str], set[tuple[str, int]]] = {}
    for (f, ptr), procs in sv.owners.items():
        owners[(f, ptr)] = {(fixed.get(hp, hp[0]), hp[1]) for hp in procs}
    for r in inits:
        owners.setdefault((r["pos"] >> C.POS_SHIFT, r["ptr"]), set()).add((r["host"], r["pid"]))
    anywhere: dict[str, set[tuple[str, int]]] = {}
    for (_, ptr), procs in owners.items():
        anywhere.setdefault(ptr, set()).update(procs)
    j = 0
    for f in range(n_files):
        for ch in chunks(f):
            keep = sv.keep[j]
            j += 1
            if keep.all():  # no copy of a chunk whose lines are all usable
                _map_chunk({k: v for k, v in ch.items() if k != "tid"}, f, st, fixed, owners, anywhere, store)
            elif keep.any():
                _map_chunk({k: v[keep] for k, v in ch.items() if k != "tid"}, f, st, fixed, owners, anywhere, store)
    sv.factors.clear()
    if st.unresolved[0]:
        report.skip(_AMBIGUOUS, where(st.unresolved[1]), st.unresolved[0])
    _finish(st)
    procs = sorted(st.proc_code, key=st.proc_code.__getitem__)
    return Mapped(st.instances, st.inst_proc, procs, st.host_first, st.rows)


def _map_chunk(c: dict[str, np.ndarray], f: int, st: _State, fixed: dict[tuple[str, int], str],
               owners: dict[tuple[int, str], set[tuple[str, int]]], anywhere: dict[str, set[tuple[str, int]]],
               store: ProcessStore) -> None:
    pos = (np.int64(f) << C.POS_SHIFT) | c.pop("line")
    host, pid, comm = c["host"], c["pid"], c["comm"]
    if fixed and len(pos):  # interleaved writes glued garbage onto a host name: the clean name of that pid
        hcodes, hosts = _factor(host, st.factors, (f, "host"))
        pair = combined_codes(hcodes, pid)
        first = _first_of(pair, int(pair.max()) + 1)
        new = np.empty(len(first), dtype=object)
        new[:] = [fixed.get(k, k[0]) for k in zip(hosts[hcodes[first]].tolist(), pid[first].tolist(), strict=True)]
        host = new[pair]
    lost = pid < 0
    if lost.any():
        host, pid = host.copy(), pid.copy()
        unresolved = np.zeros(len(pid), dtype=bool)
        at = np.flatnonzero(lost)
        pcodes, ptrs = _factor(comm[at])
        for k, ptr in enumerate(ptrs.tolist()):
            rows = at[pcodes == k]
            found = owners.get((f, ptr)) or anywhere.get(ptr, set())
            if len(found) == 1:
                host[rows], pid[rows] = next(iter(found))
            elif not found:  # a pointer no prefixed line shows: its lines are one process we cannot name
                host[rows], pid[rows] = "", UNNAMED_PID - f
            else:
                unresolved[rows] = True
        if unresolved.any():
            if not st.unresolved[0]:
                st.unresolved[1] = int(pos[np.argmax(unresolved)])
            st.unresolved[0] += int(unresolved.sum())
            ok = ~unresolved
            c = {k: v[ok] for k, v in c.items()}
            pos, host, pid, comm = pos[ok], host[ok], pid[ok], c["comm"]
    if not len(pos):
        return
    st.rows += len(pos)
    hcodes, hosts = _factor(host, st.factors, (f, "host"))
    hmin = np.full(len(hosts), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(hmin, hcodes, pos)
    for h, p in zip(hosts.tolist(), hmin.tolist(), strict=True):
        st.host_first[h] = min(st.host_first.get(h, p), p)
    ccodes, ptrs = _factor(comm, st.factors, (f, "comm"))
    key = combined_codes(hcodes, pid, ccodes)
    n_keys = int(key.max()) + 1
    first = _first_of(key, n_keys)
    kmin = np.full(n_keys, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(kmin, key, pos)
    keys = list(zip(hosts[hcodes[first]].tolist(), pid[first].tolist(), ptrs[ccodes[first]].tolist(), strict=True))
    base = np.empty(n_keys, dtype=np.int64)
    multi = []
    for k, kk in enumerate(keys):
        insts = st.by_key.get(kk)
        if insts is None:  # no Init line: one instance, made at the key's first line
            inst = C.Instance(key=kk, rank=None, nranks=int(c["nranks"][first[k]]), comm_id=None, dev=None,
                              local_ranks=None, start=int(kmin[k]), record_pos=[])
            insts = st.by_key[kk] = [inst]
            st.index_of[id(inst)] = len(st.instances)
            st.instances.append(inst)
            st.inst_proc.append(st.proc_code.setdefault(kk[:2], len(st.proc_code)))
        elif insts[0].rank is None:
            insts[0].start = min(insts[0].start, int(kmin[k]))
        base[k] = st.index_of[id(insts[0])]
        st.key_base.setdefault(kk, int(base[k]))
        if len(insts) > 1:
            multi.append(k)
        else:
            st.key_hits.setdefault(kk, set()).add(int(base[k]))
    inst = base[key]
    for k in multi:
        rows = np.flatnonzero(key == k)
        insts = st.by_key[keys[k]]
        starts = np.array([i.start for i in insts])
        which = np.clip(np.searchsorted(starts, pos[rows], side="right") - 1, 0, len(insts) - 1)
        ids = np.array([st.index_of[id(i)] for i in insts], dtype=np.int64)
        inst[rows] = ids[which]
        st.key_hits.setdefault(keys[k], set()).update(np.unique(ids[which]).tolist())
    grank = c["grank"]
    if (grank >= 0).any():
        at = np.flatnonzero(grank >= 0)
        uk, ua = np.unique(key[at], return_index=True)
        for k, a in zip(uk.tolist(), ua.tolist(), strict=True):
            st.key_grank.setdefault(keys[k], int(grank[at[a]]))
    _note_bare(c, pos, inst, st)
    ocodes, ops = _factor(c["op"], st.factors, (f, "op"))
    op = np.array([OP_CODE[NCCL_OPS[o]] for o in ops.tolist()], dtype=np.int64)[ocodes]
    proc = np.asarray(st.inst_proc, dtype=np.int64)[inst]
    cols = {"pos": pos, "inst": inst, "op": op, "opc": c["opc"], "count": c["count"], "dt": c["dt"],
            "root": c["root"], "nranks": c["nranks"], "ts_us": c["ts_us"]}
    if (proc == proc[0]).all():
        store.add(int(proc[0]), cols)
        return
    order = np.argsort(proc, kind="stable")
    cuts = np.flatnonzero(np.diff(proc[order])) + 1
    for idx in np.split(order, cuts):
        store.add(int(proc[idx[0]]), cols, idx)


def _note_bare(c: dict[str, np.ndarray], pos: np.ndarray, inst: np.ndarray, st: _State) -> None:
    """Keep the evidence of instances without Init line: their collectives and the ``[dev]`` they show."""
    bare = np.array([i.rank is None for i in st.instances], dtype=bool)[inst]
    if not bare.any():
        return
    at = np.flatnonzero(bare)
    dev = c["dev"][at]
    pair = combined_codes(inst[at], dev)
    first = _first_of(pair, int(pair.max()) + 1)
    for i, d in zip(inst[at][first].tolist(), dev[first].tolist(), strict=True):
        st.bare_devs.setdefault(i, set()).add(d)
    op = c["op"][at]
    coll = at[(op != "Send") & (op != "Recv")]
    if not len(coll):
        return
    order = np.argsort(inst[coll], kind="stable")
    coll = coll[order]
    cuts = np.flatnonzero(np.diff(inst[coll])) + 1
    for idx in np.split(coll, cuts):
        st.bare_seq.setdefault(int(inst[idx[0]]), []).append(
            {"pos": pos[idx], "opc": c["opc"][idx], "op": c["op"][idx], "count": c["count"][idx],
             "dt": c["dt"][idx], "root": c["root"][idx]})


def _finish(st: _State) -> None:
    """RCCL global ranks onto the instances their lines reached; sequences and ``[dev]`` of bare ones."""
    for kk, g in st.key_grank.items():
        for w in st.key_hits.get(kk, ()):
            st.instances[w].grank = g
    for w, devs in st.bare_devs.items():
        known = sorted(d for d in devs if d >= 0)  # a line without prefix shows no device
        st.instances[w].prefix_dev = known[0] if len(known) == 1 else -1
    for w, parts in st.bare_seq.items():
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        order = np.argsort(cols["pos"], kind="stable")
        st.instances[w].sequence = tuple(zip(*(cols[k][order].tolist() for k in ("opc", "op", "count", "dt", "root")),
                                             strict=True))
