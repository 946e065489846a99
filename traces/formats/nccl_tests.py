"""nccl-tests ``*_perf`` stdout as a trace (``--format nccl-tests``).

Reads the text people save from ``all_reduce_perf`` and friends: with mpirun ``--tag-output`` prefixes
(``[1,0]<stdout>:``) or srun ``-l`` labels (``0: ``), with out-of-place and in-place columns (the older
layout without ``root`` too), and several tables in one file (each after its column header; the operation
comes from the last ``*_perf`` name or ``Collective test starting`` line before it). The ranks come from
the ``#  Rank N ... on HOST device D`` lines (which also give GPUs per server and the GPU name), else an
``nranks N`` token (NCCL INFO lines), else the rows' busbw/algbw ratio (nccl-tests' factor, e.g.
2(n-1)/n for AllReduce).

Every table row becomes one op on all its ranks whose ``duration_s`` is the measured out-of-place time;
each table has its own communicator ``t{k}``. ``attrs["collsim"]["nccl_tests"]`` keeps each table as
printed (op, ranks, servers, sizes, times, busbw out-of-place and in-place) for ``simrun validate``.

References
----------
NVIDIA/nccl-tests ``src/common.cu`` (the table layout), ``doc/PERFORMANCE.md`` (busbw factors).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, TraceError, new_metadata, normalize

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["NCCLTESTS_DTYPES", "NCCLTESTS_OPS", "looks_like_nccl_tests", "op_counts", "parse_tables",
           "read_nccl_tests"]

#: nccl-tests binary stem -> SPEC §3 op (``sendrecv`` is a ring of Send/Recv pairs).
NCCLTESTS_OPS: dict[str, str] = {
    "all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
    "alltoall": "AllToAll", "broadcast": "Broadcast", "reduce": "Reduce", "sendrecv": "Send",
}
#: nccl-tests ``type`` names -> SPEC §3 dtype.
NCCLTESTS_DTYPES: dict[str, str] = {
    "int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32", "uint32": "uint32",
    "int64": "int64", "uint64": "uint64", "half": "fp16", "float16": "fp16", "float": "fp32",
    "float32": "fp32", "double": "fp64", "float64": "fp64", "bfloat16": "bf16", "f8e4m3": "fp8_e4m3",
    "f8e5m2": "fp8_e5m2",
}
_PREFIX = re.compile(r"^\s*(?:\([^()]*\)\s+)?(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\d+:\s)")  # (Ray/SkyPilot label)
_OP_NAME = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)_perf")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_NRANKS = re.compile(r"\bnranks\s+(\d+)")
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\b")  # "#" optional: docs that render logs drop it


def op_counts(op: str, size_bytes: int, elem_bytes: int, nranks: int) -> tuple[int, int]:
    """(printed count, trace count) of one nccl-tests row of ``size_bytes``.

    nccl-tests prints the whole array's count for AllGather, ReduceScatter and AllToAll, a multiple of the
    ranks; the trace (SPEC §3) counts per rank (AllGather send, ReduceScatter receive) or per peer
    (AllToAll). Other ops: the buffer.

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
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        per = count // nranks
        return per * nranks, per
    return count, count


def looks_like_nccl_tests(head: str) -> bool:
    """True when the text holds an nccl-tests column header (``#  size  count  type ...``).

    Examples
    --------
    >>> looks_like_nccl_tests("#       size         count      type   redop    root     time   algbw")
    True
    """
    return any(_HEADER.match(_strip(line)) for line in head.splitlines()[:5000])


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).rstrip()


def _float(tok: str) -> float:
    try:
        return float(tok)
    except ValueError:
        return math.nan


def _factor_ranks(op: str, algbw: float, busbw: float) -> int | None:
    """Ranks implied by nccl-tests' busbw factor (None when the op's factor is 1 or the values are rounded away)."""
    if not (algbw > 0 and busbw > 0):
        return None
    f = busbw / algbw
    if op == "AllReduce" and f < 1.999:
        return max(2, round(2 / (2 - f)))
    if op in ("AllGather", "ReduceScatter", "AllToAll") and f < 0.999:
        return max(2, round(1 / (1 - f)))
    return None


def parse_tables(text: str, where: str = "input") -> tuple[list[dict], IngestReport]:
    """Every nccl-tests table in ``text``.

    Returns
    -------
    list of dict
        Per table: ``op``, ``dtype``, ``nranks``, ``gpus_per_node``, ``nodes``, ``gpu``, ``line`` (of its
        header), ``rows`` (dicts of ``size``, ``count``, ``time_us``, ``algbw``, ``busbw``,
        ``time_inplace_us``, ``busbw_inplace``, ``root``).
    IngestReport

    Raises
    ------
    TraceError
        A table whose operation or ranks cannot be told, naming the file and line.
    """
    report = IngestReport()
    tables: list[dict] = []
    op_name: str | None = None
    ranks: dict[tuple[str, int], tuple[str, int, str]] = {}
    used = False
    nranks_hint: int | None = None
    current: dict | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        report.lines_read += 1
        line = _strip(raw)
        m = _OP_NAME.search(line)
        if m and not line.lstrip().startswith(("#  Rank", "# Rank")):
            if current is not None and m.group(1) != current["stem"]:
                current = None
            op_name = m.group(1)
        m = _RANK.match(line.strip())
        if m:
            if used:  # a new run's rank list: the previous run's tables are over
                current, ranks, used = None, {}, False
            # keyed by (host, device): with several processes each prints its own rank numbers
            ranks[(m.group(2), int(m.group(3)))] = (m.group(2), int(m.group(3)), m.group(4).strip())
            continue
        m = _NRANKS.search(line)
        if m:
            nranks_hint = int(m.group(1))
        if _HEADER.match(line):
            cols = line.lstrip("#").split()
            if op_name is None:
                raise TraceError(f"{where}:{lineno}: nccl-tests table without its operation (no *_perf name or "
                                 "'Collective test starting' line before it)")
            current = {"stem": op_name, "op": NCCLTESTS_OPS[op_name], "cols": cols, "line": lineno, "rows": [],
                       "ranks": dict(ranks), "nranks_hint": nranks_hint, "dtype": None}
            tables.append(current)
            used = True
            continue
        if current is None or not line.strip() or line.lstrip().startswith("#"):
            continue
        toks = line.split()
        if not toks[0].isdigit():
            if toks[0].lower().startswith(("nccl", "[", "(")) or ":" in toks[0]:
                continue  # NCCL INFO / WARN lines between rows, an unmarked "(B) (elements)" units line
            current = None
            continue
        row = _parse_row(current["cols"], toks)
        if row is None:
            report.skip("row that does not match its column header", f"{where}:{lineno}")
            continue
        dtype = NCCLTESTS_DTYPES.get(row.pop("type"))
        if dtype is None:
            report.skip("unknown datatype", f"{where}:{lineno}")
            continue
        current["dtype"] = current["dtype"] or dtype
        row["line"] = lineno
        current["rows"].append(row)
    out = []
    for t in tables:
        if not t["rows"]:
            report.notes.append(f"{where}:{t['line']}: table of {t['stem']}_perf has no rows")
            continue
        out.append(_finish_table(t, where))
    return out, report


def _parse_row(cols: list[str], toks: list[str]) -> dict | None:
    """One row by the header's columns: out-of-place then in-place time/algbw/busbw."""
    if len(toks) < 7:
        return None
    idx = {c: [i for i, x in enumerate(cols) if x == c] for c in ("time", "algbw", "busbw", "root", "type")}
    if not idx["time"] or not idx["type"]:
        return None
    try:
        size, count = int(toks[0]), int(toks[1])
    except ValueError:
        return None

    def at(name: str, k: int) -> float:
        pos = idx[name]
        return _float(toks[pos[k]]) if len(pos) > k and pos[k] < len(toks) else math.nan

    root = int(toks[idx["root"][0]]) if idx["root"] and idx["root"][0] < len(toks) and \
        toks[idx["root"][0]].lstrip("-").isdigit() else -1
    return dict(size=size, count=count, type=toks[idx["type"][0]], root=root, time_us=at("time", 0),
                algbw=at("algbw", 0), busbw=at("busbw", 0), time_inplace_us=at("time", 1),
                busbw_inplace=at("busbw", 1))


def _finish_table(t: dict, where: str) -> dict:
    ranks = t["ranks"]
    hosts = [h for h, _, _ in ranks.values()]
    nranks = len(ranks) or t["nranks_hint"]
    if not nranks:
        big = max(t["rows"], key=lambda r: r["size"])
        nranks = _factor_ranks(t["op"], big["algbw"], big["busbw"])
    if not nranks:
        raise TraceError(f"{where}:{t['line']}: cannot tell the ranks of this {t['stem']}_perf table (no '# Rank' "
                         "lines, no 'nranks N', and its busbw factor is 1)")
    per_host = {h: hosts.count(h) for h in hosts}
    gpn = max(per_host.values()) if per_host else None
    return dict(op=t["op"], stem=t["stem"], dtype=t["dtype"], nranks=int(nranks), gpus_per_node=gpn,
                nodes=len(per_host) or None, gpu=next((g for _, _, g in ranks.values() if g), ""), line=t["line"],
                rows=t["rows"])


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
        raise TraceError(f"{', '.join(map(str, paths))}: no nccl-tests table found")
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
                if t["op"] == "Send":
                    rows.append({**base, "rank": rank, "op": "Send", "root": (rank + 1) % n, "group": seq})
                    rows.append({**base, "rank": rank, "op": "Recv", "root": (rank - 1) % n, "group": seq})
                else:
                    root = r["root"] if t["op"] in ("Broadcast", "Reduce") and 0 <= r["root"] < n else \
                        (0 if t["op"] in ("Broadcast", "Reduce") else -1)
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
