"""nccl-tests ``*_perf`` output as a trace (``--format nccl-tests``): the stdout text, or the JSON file of ``-J``.

Reads what people save from ``all_reduce_perf`` and friends, in every layout nccl-tests has printed (v1's
``bytes N`` tables in ms to v2.19's per-iteration columns; ``docs/formats.md`` section ``nccl-tests`` has the
table of layouts and wrappers, :mod:`traces.formats.nccl_tests_layout` reads the lines) under any launcher's
line prefixes (mpirun tags and timestamps, srun ``-l``, pdsh/clush, kubectl/docker timestamps, ANSI colours,
CRLF). Several tables per file: each after its column header; the operation comes from the last ``*_perf``
name before it; one header's rows split into tables where the datatype, reduction, root or the size sweep
starts again (``-d all``, ``-o all``, ``-r -1``, ``-N``). The ranks come from the ``#  Rank N ... on HOST
device D`` lines (which also give GPUs per server and the GPU name; with ``NCCL_TESTS_SPLIT`` only rank 0's
group), else an ``nranks N`` token (NCCL INFO lines), else the rows' busbw/algbw ratio.

Nothing is dropped silently: a row that cannot be read (cut short, glued to other text, outside a table, of
a test no trace op holds) and a failure line are counted in the ingest report with their first place
(``--strict`` refuses them); a footer whose average busbw the rows do not give back, or a failed data
check, becomes a note.

Every table row becomes one op on all its ranks whose ``duration_s`` is the measured out-of-place time;
each table has its own communicator ``t{k}``. ``attrs["collsim"]["nccl_tests"]`` keeps each table as
printed (op, ranks, servers, sizes, times, busbw out-of-place and in-place) for ``simrun validate``.

References
----------
NVIDIA/nccl-tests ``src/common.cu``, ``src/util.cu`` (the table layout), ``doc/PERFORMANCE.md`` (busbw factors).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from traces.formats.nccl_tests_json import looks_like_nccl_tests_json, parse_json_tables
from traces.formats.nccl_tests_layout import (
    NCCLTESTS_DTYPES,
    NCCLTESTS_OPS,
    NCCLTESTS_UNSUPPORTED,
    clean_line,
    failure_text,
    footer,
    new_sweep,
    op_stem,
    parse_header,
    parse_rank,
    parse_row,
    row_inside,
    row_like,
)
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, TraceError, new_metadata, normalize

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["NCCLTESTS_DTYPES", "NCCLTESTS_OPS", "looks_like_nccl_tests", "op_counts", "parse_tables",
           "read_nccl_tests", "tables_to_trace"]

_NRANKS = re.compile(r"\bnranks\s+(\d+)")
_PER_RANK = ("AllGather", "ReduceScatter", "AllToAll", "Gather", "Scatter")
_ROOTED = ("Broadcast", "Reduce", "Gather", "Scatter")


def op_counts(op: str, size_bytes: int, elem_bytes: int, nranks: int) -> tuple[int, int]:
    """(printed count, trace count) of one nccl-tests row of ``size_bytes``.

    nccl-tests prints the whole array's size for AllGather, ReduceScatter, AllToAll, Gather and Scatter, a
    multiple of the ranks; the trace (SPEC §3) counts per rank (AllGather and Gather send, ReduceScatter and
    Scatter receive) or per peer (AllToAll). Other ops: the buffer.

    Examples
    --------
    >>> op_counts("AllGather", 1000, 4, 8)
    (248, 31)
    >>> op_counts("AllReduce", 1000, 4, 8)
    (250, 250)
    """
    if elem_bytes <= 0 or nranks <= 0:
        raise TraceError("element size and ranks must be positive")
    count = int(size_bytes) // int(elem_bytes)
    if op in _PER_RANK:
        per = count // nranks
        return per * nranks, per
    return count, count


def looks_like_nccl_tests(head: str) -> bool:
    """True when the text holds an nccl-tests column header (``#  size  count  type ...``) or is ``-J`` JSON.

    Examples
    --------
    >>> looks_like_nccl_tests("#       size         count      type   redop    root     time   algbw")
    True
    """
    if looks_like_nccl_tests_json(head):
        return True
    for line in head.splitlines()[:5000]:
        try:
            if parse_header(clean_line(line)):
                return True
        except ValueError:
            return True  # a header reading would refuse: the reader says why
    return False


def _factor_ranks(op: str, algbw: float, busbw: float) -> int | None:
    """Ranks implied by nccl-tests' busbw factor (None when the op's factor is 1 or the values are rounded away)."""
    if not (algbw > 0 and busbw > 0):
        return None
    f = busbw / algbw
    if op == "AllReduce" and f < 1.999:
        return max(2, round(2 / (2 - f)))
    if op in _PER_RANK and f < 0.999:
        return max(2, round(1 / (1 - f)))
    return None


def _half_unit(v: float) -> float:
    """Half the last printed digit of a busbw (getFloatStr, width 6: 2 decimals below 1000, then 1, then 0,
    then one digit of an exponent form such as ``1e+06``; older versions' %6.2f is only finer)."""
    if v < 999.995:
        return 0.005
    if v < 9999.95:
        return 0.05
    if v < 999999.5:
        return 0.5
    return 0.5 * 10 ** math.floor(math.log10(v))


def _check_footer(kind: str, value: float, block: list[dict], where: str, report: IngestReport) -> None:
    """Note a footer the rows above it do not agree with (``Avg bus bandwidth`` is the mean of every busbw
    printed under the header, out-of-place and in-place; a difference means rows missing or altered)."""
    if kind == "oob":
        if value > 0:
            report.notes.append(f"{where}: nccl-tests found {value:g} wrong values (data check FAILED)")
        return
    vals = [v for t in block for r in t["rows"] for v in (r["busbw"], r["busbw_inplace"]) if math.isfinite(v)]
    if not vals or not math.isfinite(value):
        return
    tol = max(_half_unit(v) for v in vals) + 1e-5 * abs(value)  # the footer is %g: 6 digits
    mean = sum(vals) / len(vals)
    if abs(mean - value) > tol:
        report.notes.append(f"{where}: the rows above average {mean:.6g} GB/s busbw but the footer says {value:g} "
                            "(rows missing or altered?)")


def parse_tables(text: str, where: str = "input") -> tuple[list[dict], IngestReport]:
    """Every nccl-tests table in ``text`` (stdout text or ``-J`` JSON).

    Returns
    -------
    list of dict
        Per table: ``op``, ``stem``, ``dtype``, ``nranks``, ``gpus_per_node``, ``nodes``, ``gpu``, ``line`` (of
        its header, or of its first row when one header holds several tables), ``rows`` (dicts of ``size``,
        ``count``, ``time_us``, ``algbw``, ``busbw``, ``time_inplace_us``, ``busbw_inplace``, ``root``, ``redop``,
        ``line``).
    IngestReport

    Raises
    ------
    TraceError
        A table whose operation or ranks cannot be told, or an unreadable column header, naming the file
        and line.

    Examples
    --------
    >>> txt = ["# all_reduce_perf", "#  size count type redop root time algbw busbw #wrong",
    ...        "  8  2  float  sum  -1  9.5  0.50  0.75  0", "  16  4  float  sum  -1  9.6  1.0"]
    >>> tables, report = parse_tables("\\n".join(txt), "f.txt")
    >>> [r["size"] for r in tables[0]["rows"]], report.examples
    ([8], {'row cut short (fewer columns than its header)': 'f.txt:4'})
    """
    if looks_like_nccl_tests_json(text[:65536]):
        raw, report = parse_json_tables(text, where)
        return [_finish_table(t, where, report) for t in raw], report
    report = IngestReport()
    tables: list[dict] = []
    stem: str | None = None
    ranks: dict[tuple[str, int], tuple] = {}
    used = False
    hint: int | None = None
    lay = current = None
    block: list[dict] = []
    head = dict(stem="", line=0)
    cut: list[str] = []  # rows read although cut short after their out-of-place values
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        report.lines_read += 1
        line = clean_line(raw_line)
        at = f"{where}:{lineno}"
        toks = line.split()
        if not row_like(toks):  # rows are most lines: they skip the other kinds' tests
            rank = parse_rank(line) if line.startswith("#") else None
            if rank:
                if used:  # a new run's rank list: the previous run's tables are over
                    lay, current, ranks, used = None, None, {}, False
                # keyed by (host, device): with several processes each prints its own rank numbers
                ranks[(rank[2], rank[3])] = rank
                continue
            try:
                layout, bad = parse_header(line), ""
            except ValueError as exc:
                layout, bad = None, str(exc)
            if layout is not None or bad:
                if stem is None:
                    raise TraceError(f"{at}: nccl-tests table without its operation (no *_perf name or "
                                     "'Collective test starting' line before it)")
                if bad:
                    raise TraceError(f"{at}: {bad}")
                lay, current, block, used = layout, None, [], True
                head = dict(stem=stem, line=lineno, ranks=dict(ranks), hint=hint)
                continue
            end = footer(line)
            if end is not None:  # the table is over; its block stays for the next footer line
                if block:
                    _check_footer(end[0], end[1], block, at, report)
                    block = [] if end[0] == "avg_busbw" else block
                lay = current = None
                continue
            if failure_text(line):
                report.skip("nccl-tests failure line (the run stopped there)", at)
                lay = current = None
                continue
            name = op_stem(line)
            if name:
                if lay is not None and name != head["stem"]:
                    lay = current = None
                stem = name
            m = _NRANKS.search(line)
            if m:
                hint = int(m.group(1))
            if not line.startswith("#") and row_inside(line):
                report.skip("row behind a line prefix the reader does not know", at)
            continue  # comments, NCCL INFO/WARN lines, launcher chatter between rows
        if lay is None:
            report.skip("row outside a table (no column header before it)", at)
            continue
        if head["stem"] in NCCLTESTS_UNSUPPORTED:
            report.skip(f"row of {head['stem']}_perf (no trace op holds its pattern)", at)
            continue
        row, why = parse_row(lay, toks)
        if row is None:
            report.skip(why, at)
            continue
        if why:
            cut.append(at)
        row["line"] = lineno
        if new_sweep(current["rows"][-1] if current else None, row):
            current = {"stem": head["stem"], "op": NCCLTESTS_OPS[head["stem"]], "rows": [], "ranks": head["ranks"],
                       "nranks_hint": head["hint"], "dtype": NCCLTESTS_DTYPES[row["type"]],
                       "line": head["line"] if not block else lineno}
            block.append(current)
            tables.append(current)
        current["rows"].append(row)
    if cut:
        report.notes.append(f"{len(cut)} row(s) cut short after their out-of-place values, read with NaN for the "
                            f"missing in-place values (first at {cut[0]})")
    return [_finish_table(t, where, report) for t in tables], report


def _finish_table(t: dict, where: str, report: IngestReport) -> dict:
    """The table's ranks, servers and GPU from its rank lines (rank 0's group only), else hints."""
    ranks = list(t["ranks"].values())
    groups = sorted({r[1] for r in ranks})
    if len(groups) > 1:  # NCCL_TESTS_SPLIT: one communicator per group, all running at once
        first = min(ranks)[1]
        ranks = [r for r in ranks if r[1] == first]
        note = (f"{where}:{t['line']}: {len(groups)} rank groups (NCCL_TESTS_SPLIT) ran at once; the trace holds "
                f"group {first}'s communicator ({len(ranks)} ranks) only")
        if note not in report.notes:
            report.notes.append(note)
    hosts = [r[2] for r in ranks]
    nranks = len(ranks) or t["nranks_hint"]
    if not nranks:
        big = max(t["rows"], key=lambda r: r["size"])
        nranks = _factor_ranks(t["op"], big["algbw"], big["busbw"])
    if not nranks:
        raise TraceError(f"{where}:{t['line']}: cannot tell the ranks of this {t['stem']}_perf table (no '# Rank' "
                         "lines, no 'nranks N', and its busbw factor is 1)")
    per_host = {h: hosts.count(h) for h in hosts}
    gpn = max(per_host.values()) if per_host else None
    for r in t["rows"]:
        r.pop("type", None)
    # each rank's host and device, where the rank lines number the table's ranks 0..n-1 once each (SPEC §3:
    # host "" and device -1 only when unknown)
    place = {r[0]: (r[2], r[3]) for r in ranks}
    if sorted(place) != list(range(int(nranks))) or len(place) != len(ranks):
        place = {}
    return dict(op=t["op"], stem=t["stem"], dtype=t["dtype"], nranks=int(nranks), gpus_per_node=gpn,
                nodes=len(per_host) or None, gpu=next((r[4] for r in ranks if r[4]), ""), line=t["line"],
                rows=t["rows"], place=place)


def read_nccl_tests(paths: list[Path], *, strict: bool = False, progress=None) -> tuple[pd.DataFrame, IngestReport]:
    """Read nccl-tests output files into one trace (see the module docstring).

    Raises
    ------
    TraceError
        An unreadable file, a table whose operation or ranks cannot be told, or (strict) a skipped row.
    """
    from traces.formats.files import read_text

    report = IngestReport()
    tables = []
    for path in paths:
        text = read_text(path)
        found, rep = parse_tables(text, str(path))
        for t in found:
            t["file"] = str(path)
        tables += found
        report.merge(rep)
        report.files.append(str(path))
        if progress is not None:
            progress(path.stat().st_size)
    report.raise_if_strict(strict)
    if not tables:
        why = "; ".join(f"{n} {reason} (first at {report.examples[reason]})"
                        for reason, n in report.skipped.most_common())
        raise TraceError(f"{', '.join(map(str, paths))}: no nccl-tests table found" + (f" ({why})" if why else ""))
    frame, meta = tables_to_trace(tables)
    report.records = len(frame)
    return normalize(frame, meta), report


def tables_to_trace(tables: list[dict]) -> tuple[pd.DataFrame, dict]:
    """The rows of every table as trace rows (one op per size on ``t{k}``) and the trace metadata."""
    rows = []
    comms = {}
    for k, t in enumerate(tables):
        comm, n = f"t{k}", t["nranks"]
        comms[comm] = list(range(n))
        elem = DTYPE_BYTES[t["dtype"]]
        for seq, r in enumerate(t["rows"]):
            _, count = op_counts(t["op"], r["size"], elem, n)
            base = dict(comm=comm, seq=seq, count=count, dtype=t["dtype"], bytes=count * elem, nranks=n,
                        t_start_s=math.nan, duration_s=r["time_us"] * 1e-6, host="", device=-1,
                        context=f"nccl-tests {t['stem']} size={r['size']}", algo="", proto="", group=-1)
            for rank in range(n):
                host, device = t.get("place", {}).get(rank, ("", -1))
                base["host"], base["device"] = host, device
                if t["op"] == "Send":
                    rows.append({**base, "rank": rank, "op": "Send", "root": (rank + 1) % n, "group": seq})
                    rows.append({**base, "rank": rank, "op": "Recv", "root": (rank - 1) % n, "group": seq})
                else:
                    root = r["root"] if t["op"] in _ROOTED and 0 <= r["root"] < n else \
                        (0 if t["op"] in _ROOTED else -1)
                    rows.append({**base, "rank": rank, "op": t["op"], "root": root})
    world = max(t["nranks"] for t in tables)
    gpn = next((t["gpus_per_node"] for t in tables if t["gpus_per_node"]), min(world, 8))
    summary = [{k: t[k] for k in ("op", "stem", "dtype", "nranks", "gpus_per_node", "nodes", "gpu", "line")}
               | {"file": t.get("file", ""), "comm": f"t{k}",
                  **{c: [r[c] for r in t["rows"]] for c in ("size", "time_us", "algbw", "busbw", "busbw_inplace",
                                                          "time_inplace_us")}}
               for k, t in enumerate(tables)]
    meta = new_metadata(world, comms, "nccl-tests", int(gpn), nccl_tests=summary)
    return pd.DataFrame(rows), meta
