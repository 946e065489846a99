"""Stream one NCCL debug-log file in large byte chunks and pull out what the reader needs.

Memory stays bounded: a file is read in ``CHUNK_BYTES`` pieces cut at the last newline. In each chunk the
lines become one Arrow binary array (zero-copy over the chunk); a substring test finds the COLL lines and
one RE2 test the rare Init / ring / TUNING / version lines. COLL lines in the standard layout are split
into fields positionally by Arrow kernels (no regex per line); every other COLL line (interleaved writes,
lines without a prefix, unusual layouts) goes through the forgiving per-line parser of
:mod:`traces.nccl_log_lines`. Both paths give the same fields (a test checks that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traces import nccl_log_lines as L
from traces.ingest_report import IngestReport
from traces.schema import TraceError

CHUNK_BYTES = 8 << 20
NO_TS = np.iinfo(np.int64).min
#: Columns of the COLL records a scan returns (numpy arrays of equal length).
COLL_FIELDS = ("line", "host", "pid", "tid", "ts_us", "op", "opc", "count", "dt", "root", "comm", "nranks",
               "grank")
_INT_FIELDS = ("line", "pid", "tid", "ts_us", "count", "dt", "root", "nranks", "grank")
_KNOWN_OPS = pa.array(list(L.NCCL_OPS), pa.string())


@dataclass
class FileScan:
    """Everything one file says: COLL columns plus the rare records (dicts), in line order."""

    path: str
    coll: dict[str, np.ndarray]
    inits: list[dict[str, Any]] = field(default_factory=list)
    rings: list[dict[str, Any]] = field(default_factory=list)
    tunings: list[dict[str, Any]] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    min_ts_us: int | None = None
    lines: int = 0
    nccl_lines: int = 0


def _empty_columns() -> dict[str, list]:
    return {name: [] for name in COLL_FIELDS}


def _finish_columns(parts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name in COLL_FIELDS:
        arrays = [np.asarray(p[name], dtype=np.int64 if name in _INT_FIELDS else object) for p in parts]
        if arrays:
            out[name] = np.concatenate(arrays)
        else:
            out[name] = np.empty(0, dtype=np.int64 if name in _INT_FIELDS else object)
    return out


def scan_file(path: Path, report: IngestReport, progress: Callable[[float], Any] | None = None) -> FileScan:
    """Read one NCCL log file.

    Parameters
    ----------
    path : Path
        The log file.
    report : IngestReport
        Unusable COLL lines are counted here (reason and first ``file:line``).
    progress : callable, optional
        Called with the bytes consumed after each chunk.

    Returns
    -------
    FileScan

    Raises
    ------
    TraceError
        When the file cannot be read or holds binary data.
    """
    scan = FileScan(path=str(path), coll={})
    parts: list[dict[str, Any]] = []
    line_base = 0
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; chunks must outlive the with-less loop
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with handle:
        rest = b""
        first = True
        while True:
            try:
                data = handle.read(CHUNK_BYTES)
            except OSError as exc:
                raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
            if first:
                _check_text(path, data)
                first = False
            if not data and not rest:
                break
            buf = rest + data
            if data:
                cut = buf.rfind(b"\n") + 1
                if cut == 0:  # no newline in a whole chunk: keep reading (one very long line)
                    rest = buf
                    continue
                buf, rest = buf[:cut], buf[cut:]
            else:
                rest = b""
            line_base += _scan_chunk(buf, line_base, scan, parts, report)
            if progress is not None:
                progress(len(buf))
            if not data:
                break
    scan.lines = line_base
    scan.coll = _finish_columns(parts)
    return scan


def _check_text(path: Path, head: bytes) -> None:
    # NCCL writes plain text: control bytes other than tab/CR/LF mean a binary file (core dump, Parquet).
    sample = np.frombuffer(head[:65536], dtype=np.uint8)
    control = ((sample < 32) & (sample != 9) & (sample != 10) & (sample != 13)).sum()
    if control > len(sample) // 100 and b"NCCL" not in head[:65536]:
        raise TraceError(f"{path}: not a text NCCL log (binary data)")


def _lines_array(buf: bytes) -> tuple[pa.Array, np.ndarray]:
    arr = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    if len(buf) and (len(ends) == 0 or ends[-1] != len(buf) - 1):
        ends = np.append(ends, len(buf))
    offsets = np.empty(len(ends) + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    offsets[-1] = min(offsets[-1], len(buf))
    # Line i spans [offsets[i], offsets[i+1]): its text plus the newline (stripped where it matters).
    lines = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(buf)]
    )
    return lines, ends


def _decode(value: bytes) -> str:
    return value.decode("utf-8", "replace").rstrip("\r\n")


def _scan_chunk(buf: bytes, line_base: int, scan: FileScan, parts: list, report: IngestReport) -> int:
    lines, _ = _lines_array(buf)
    n = len(lines)
    coll_mask = pc.match_substring(lines, L.COLL_MARK).to_numpy(zero_copy_only=False)
    coll_idx = np.flatnonzero(coll_mask)
    other_mask = pc.match_substring_regex(lines, L.OTHER_LINES_RE2).to_numpy(zero_copy_only=False)
    other_idx = np.flatnonzero(other_mask & ~coll_mask)
    if not scan.nccl_lines:  # only to tell "not an NCCL log" apart from "no COLL lines"
        scan.nccl_lines = int(pc.sum(pc.match_substring(lines, "NCCL")).as_py() or 0)
    for i in other_idx:
        _parse_other(_decode(lines[int(i)].as_py()), line_base + int(i) + 1, scan)
    if len(coll_idx):
        cols, failed = _fast_coll(lines.take(pa.array(coll_idx)), coll_idx + line_base + 1)
        if cols is not None:
            parts.append(cols)
        slow = _empty_columns()
        for j in failed:
            i = int(coll_idx[j])
            text = _decode(lines[i].as_py())
            rec = L.parse_coll_line(text)
            if rec is None and i + 1 < n:  # hard-wrapped mid-body: join the continuation line
                nxt = _decode(lines[i + 1].as_py())
                if nxt[:1].isspace():
                    rec = L.parse_coll_line(text.rstrip() + " " + nxt.strip())
            where = f"{scan.path}:{line_base + i + 1}"
            if rec is None:
                report.skip("malformed COLL line (fields missing or garbled)", where)
                continue
            _append_slow(slow, rec, line_base + i + 1)
        if slow["line"]:
            parts.append(slow)
    return n


def _append_slow(cols: dict[str, list], rec: L.CollLine, line: int) -> None:
    p = rec.prefix
    for name, value in (("line", line), ("host", p.host), ("pid", p.pid), ("tid", p.tid),
                        ("ts_us", NO_TS if p.ts_us is None else p.ts_us), ("op", rec.op), ("opc", rec.opc),
                        ("count", rec.count), ("dt", rec.dt), ("root", rec.root), ("comm", rec.comm),
                        ("nranks", rec.nranks), ("grank", rec.grank)):
        cols[name].append(value)


def _note_ts(scan: FileScan, ts: int | None) -> None:
    if ts is not None and (scan.min_ts_us is None or ts < scan.min_ts_us):
        scan.min_ts_us = ts


def _parse_other(text: str, line: int, scan: FileScan) -> None:
    m = L.VERSION_RE.search(text)
    if m:
        scan.versions.append(m["version"])
    m = L.INIT_RE.search(text)
    if m:
        prefix = L.parse_prefix_at(text, m.start())
        tail_end = text.find(" NCCL INFO ", m.end())
        tail = text[m.end(): tail_end if tail_end >= 0 else len(text)]
        cid = L.COMMID_RE.search(tail)
        local = L.LOCALRANKS_RE.search(tail)
        scan.inits.append({
            "line": line, "host": prefix.host, "pid": prefix.pid, "tid": prefix.tid,
            "ptr": m["ptr"].lower(), "rank": int(m["rank"]), "nranks": int(m["nranks"]),
            "dev": int(m["dev"]) if m["dev"] is not None else None,
            "comm_id": cid.group(1).lower() if cid else None,
            "local_ranks": int(local.group(1)) if local else None,
        })
        _note_ts(scan, prefix.ts_us)
        return
    m = L.RING_RE.search(text)
    if m:
        prefix = L.parse_prefix_at(text, m.start())
        scan.rings.append({
            "line": line, "host": prefix.host, "pid": prefix.pid, "tid": prefix.tid, "channel": int(m["ch"]),
            "ranks": [int(x) for x in m["ranks"].split()], "more": m["more"] is not None,
        })
        _note_ts(scan, prefix.ts_us)
        return
    m = L.TUNING_RE.search(text)
    if m:
        prefix = L.parse_prefix_at(text, m.start())
        scan.tunings.append({
            "line": line, "host": prefix.host, "pid": prefix.pid, "op": L.op_name(m["op"]) if m["op"] else None,
            "nbytes": int(m["nbytes"]), "algo": L.algo_name(m["algo"]), "proto": L.proto_name(m["proto"]),
        })
        _note_ts(scan, prefix.ts_us)


# --- the positional fast path ----------------------------------------------------------------------

#: token count -> (shift after recvbuff for `acc %p`, has `task/globalrank` suffix). Standard: 18 tokens
#: after ": opCount " (17 when the stream pointer is hard-wrapped away).
_LAYOUTS: dict[int, tuple[int, bool]] = {18: (0, False), 17: (0, False), 20: (2, False), 19: (2, False),
                                         22: (0, True), 24: (2, True)}


def _fast_coll(coll: pa.Array, line_nos: np.ndarray) -> tuple[dict[str, Any] | None, list[int]]:
    """Split standard COLL lines positionally; return their columns and the positions left to the slow path."""
    n = len(coll)
    try:
        text = pc.utf8_rtrim_whitespace(coll.cast(pa.large_string()))
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: let the forgiving path decode each line
        return None, list(range(n))
    halves = pc.split_pattern(text, L.COLL_MARK, max_splits=1)
    head = pc.list_element(halves, 0)
    body = pc.list_element(halves, 1)
    toks = pc.split_pattern(body, " ")
    ntok = pc.list_value_length(toks).to_numpy(zero_copy_only=False)
    values = toks.flatten()
    starts = toks.offsets.to_numpy()[:-1]

    hp = pc.split_pattern(head, " NCCL INFO ", max_splits=1, reverse=True)
    hp_len = pc.list_value_length(hp).to_numpy(zero_copy_only=False)
    ok = hp_len == 2
    hp_vals = hp.flatten()
    hp_starts = hp.offsets.to_numpy()[:-1]
    op = hp_vals.take(pa.array(np.where(ok, hp_starts + 1, hp_starts)))
    ok &= pc.is_in(op, value_set=_KNOWN_OPS).to_numpy(zero_copy_only=False)
    pre = hp_vals.take(pa.array(hp_starts))
    pp = pc.split_pattern(pre, " ", max_splits=2, reverse=True)
    pp_len = pc.list_value_length(pp).to_numpy(zero_copy_only=False)
    pp_vals = pp.flatten()
    pp_ends = pp.offsets.to_numpy()[1:]
    ok &= (pp_len == 2) | (pp_len == 3)
    hpt = pp_vals.take(pa.array(np.maximum(pp_ends - 2, 0)))
    outer_idx = np.where(pp_len == 3, pp_ends - 3, -1)

    out = {name: np.empty(n, dtype=np.int64 if name in _INT_FIELDS else object) for name in COLL_FIELDS}
    done = np.zeros(n, dtype=bool)
    for count, (shift, rccl) in _LAYOUTS.items():
        rows = np.flatnonzero(ok & (ntok == count))
        if not len(rows):
            continue
        base = starts[rows]

        def tok(k: int, base: np.ndarray = base) -> pa.Array:
            return values.take(pa.array(base + k))

        good = _all_equal(tok(1), "sendbuff") & _all_equal(tok(3), "recvbuff")
        s = shift
        if s:
            good &= _all_equal(tok(5), "acc")
        for k, word in ((5, "count"), (7, "datatype"), (9, "op"), (11, "root"), (13, "comm"), (16, "stream")):
            good &= _all_equal(tok(k + s), word)
        nr = tok(15 + s)
        good &= pc.starts_with(nr, "[nranks=").to_numpy(zero_copy_only=False)
        good &= pc.ends_with(nr, "]").to_numpy(zero_copy_only=False)
        if rccl:
            good &= _all_equal(tok(18 + s), "task") & _all_equal(tok(20 + s), "globalrank")
        rows, base = rows[good], base[good]
        if not len(rows):
            continue
        take = pa.array(base)
        try:
            nums = {
                "count": _ints(values, take, 6 + s), "dt": _ints(values, take, 8 + s),
                "root": _ints(values, take, 12 + s),
                "nranks": pc.cast(pc.utf8_slice_codeunits(values.take(pa.array(base + 15 + s)), 8, -1),
                                  pa.int64()).to_numpy(),
                "grank": _ints(values, take, 21 + s) if rccl else np.full(len(rows), -1, dtype=np.int64),
            }
        except pa.ArrowInvalid:  # a non-numeric field: the slow path reports it precisely
            continue
        for name, arr in nums.items():
            out[name][rows] = arr
        out["opc"][rows] = np.asarray(pc.utf8_lower(values.take(take)).to_pylist(), dtype=object)
        out["comm"][rows] = np.asarray(pc.utf8_lower(values.take(pa.array(base + 14 + s))).to_pylist(),
                                       dtype=object)
        done[rows] = True

    rows = np.flatnonzero(done)
    if len(rows):
        sel = pa.array(rows)
        out["op"][rows] = _decode_dict(op.take(sel))
        hosts, pids, tids, bad = _parse_hpt(hpt.take(sel))
        out["host"][rows], out["pid"][rows], out["tid"][rows] = hosts, pids, tids
        done[rows[bad]] = False
        outer = _take_nullable(pp_vals, outer_idx[rows])
        out["ts_us"][rows] = _timestamps(outer)
    out["line"][:] = line_nos
    rows = np.flatnonzero(done)
    cols = {name: arr[rows] for name, arr in out.items()}
    return cols, np.flatnonzero(~done).tolist()


def _all_equal(arr: pa.Array, word: str) -> np.ndarray:
    return pc.equal(arr, word).to_numpy(zero_copy_only=False)


def _ints(values: pa.Array, take: pa.Array, k: int) -> np.ndarray:
    idx = pa.array(take.to_numpy() + k)
    return pc.cast(values.take(idx), pa.int64()).to_numpy()


def _decode_dict(arr: pa.Array) -> np.ndarray:
    enc = pc.dictionary_encode(arr)
    names = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    return names[enc.indices.to_numpy()]


def _take_nullable(values: pa.Array, idx: np.ndarray) -> pa.Array:
    mask = idx < 0
    return values.take(pa.array(np.where(mask, 0, idx), mask=mask))


def _parse_hpt(hpt: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """host:pid:tid tokens (few distinct values) -> hosts, pids, tids, and a mask of unparseable rows."""
    enc = pc.dictionary_encode(hpt)
    uniq = enc.dictionary.to_pylist()
    hosts, pids, tids, bad = [], [], [], []
    for token in uniq:
        parts = token.rsplit(":", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            # A launcher tag glued before the host (Open MPI ``[1,4]<stdout>:host``) ends at a ':'.
            hosts.append(parts[0].rsplit(":", 1)[-1])
            pids.append(int(parts[1]))
            tids.append(int(parts[2]))
            bad.append(False)
        else:
            hosts.append("")
            pids.append(-1)
            tids.append(-1)
            bad.append(True)
    codes = enc.indices.to_numpy()
    return (np.asarray(hosts, dtype=object)[codes], np.asarray(pids, dtype=np.int64)[codes],
            np.asarray(tids, dtype=np.int64)[codes], np.asarray(bad, dtype=bool)[codes])


_POW10 = np.array([10 ** (6 - k) for k in range(7)], dtype=np.int64)


def _timestamps(outer: pa.Array) -> np.ndarray:
    """Microseconds since the epoch of each outer prefix's timestamp (NO_TS when it has none)."""
    n = len(outer)
    out = np.full(n, NO_TS, dtype=np.int64)
    if outer.null_count == n:
        return out
    enc = pc.dictionary_encode(outer)
    uniq = enc.dictionary
    if len(uniq) <= max(64, n // 8):  # launcher tags or coarse stamps: parse each distinct value once
        vals = np.array([NO_TS if (t := L.timestamp_us(s)) is None else t for s in uniq.to_pylist()],
                        dtype=np.int64)
        codes = enc.indices.to_numpy(zero_copy_only=False)
        present = ~pc.is_null(enc.indices).to_numpy(zero_copy_only=False)
        out[present] = vals[codes[present].astype(np.int64)]
        return out
    # One stamp per line (NCCL 2.26 `[%F %T.%6f] `, or an external logger's): vectorised fixed layout.
    clean = pc.utf8_trim(outer, "[]() ")
    secs = pc.strptime(pc.utf8_slice_codeunits(clean, 0, 19), format="%Y-%m-%d %H:%M:%S", unit="s",
                       error_is_null=True)
    rest = pc.utf8_slice_codeunits(clean, 19, 64)
    rest_ok = pc.match_substring_regex(rest, r"^([.,][0-9]{1,9})?$")
    frac = pc.utf8_slice_codeunits(rest, 1, 7)
    flen = pc.utf8_length(frac).to_numpy(zero_copy_only=False)
    good = (~pc.is_null(secs).to_numpy(zero_copy_only=False)) & rest_ok.to_numpy(zero_copy_only=False)
    good &= ~pc.is_null(outer).to_numpy(zero_copy_only=False)
    use_frac = pc.and_kleene(rest_ok, pc.greater(pc.utf8_length(frac), 0))
    frac_num = pc.cast(pc.if_else(pc.fill_null(use_frac, False), frac, "0"), pa.int64())
    sec_num = pc.cast(secs, pa.int64()).to_numpy(zero_copy_only=False)
    frac_us = np.nan_to_num(frac_num.to_numpy(zero_copy_only=False)).astype(np.int64) * _POW10[
        np.clip(np.nan_to_num(flen).astype(np.int64), 0, 6)]
    out[good] = np.nan_to_num(sec_num[good]).astype(np.int64) * 1_000_000 + frac_us[good]
    # Anything else with text (a launcher tag before the stamp, ...): the per-line parser.
    rest_rows = np.flatnonzero(~good & ~pc.is_null(outer).to_numpy(zero_copy_only=False))
    if len(rest_rows):
        texts = outer.take(pa.array(rest_rows)).to_pylist()
        out[rest_rows] = [NO_TS if (t := L.timestamp_us(s)) is None else t for s in texts]
    return out
