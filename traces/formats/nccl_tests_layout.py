"""The lines of nccl-tests ``*_perf`` stdout, one at a time: launcher prefixes, column headers, rows, footers.

Pure functions used by :mod:`traces.formats.nccl_tests` (the table scanner) and
:mod:`traces.formats.nccl_tests_json`. Every layout nccl-tests has printed is described in
``docs/formats.md`` (section ``nccl-tests``), with the commit it comes from:

- v1 (2017-2018): ``#  bytes  N  type  op  time algbw busbw res ...``, the time in **ms** (``%7.3f``);
- v2.0 (2019) to v2.11: ``#  size  count  type  [redop]  [root]  time algbw busbw error ...`` per test;
- v2.13 on: one header for every test, ``size count type redop root time algbw busbw #wrong ...``
  (``cputime`` instead of ``time`` with ``-C 1``; a ``timestamp`` column with ``-S 1`` (v2.18.5);
  ``i_min i_max i_p99 i_cv%`` after each ``#wrong`` with ``-I 1`` (v2.19.2)).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["NCCLTESTS_DTYPES", "NCCLTESTS_OPS", "NCCLTESTS_UNSUPPORTED", "Layout", "clean_line", "failure_text",
           "footer", "new_sweep", "op_stem", "parse_header", "parse_rank", "parse_row", "row_inside", "row_like"]

#: nccl-tests binary stem -> SPEC §3 op (``sendrecv`` is a ring of Send/Recv pairs).
NCCLTESTS_OPS: dict[str, str] = {
    "all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
    "alltoall": "AllToAll", "broadcast": "Broadcast", "reduce": "Reduce", "sendrecv": "Send",
    "gather": "Gather", "scatter": "Scatter",
}
#: nccl-tests binaries whose pattern no SPEC §3 op holds (per-peer counts, a hypercube of sends).
NCCLTESTS_UNSUPPORTED: frozenset[str] = frozenset({"alltoallv", "hypercube"})
#: nccl-tests ``type`` names (every version, NCCL 1 compat names too) -> SPEC §3 dtype.
NCCLTESTS_DTYPES: dict[str, str] = {
    "int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32", "uint32": "uint32",
    "int64": "int64", "uint64": "uint64", "half": "fp16", "float16": "fp16", "float": "fp32",
    "float32": "fp32", "double": "fp64", "float64": "fp64", "bfloat16": "bf16", "f8e4m3": "fp8_e4m3",
    "f8e5m2": "fp8_e5m2",
}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# One launcher prefix at the start of a line; clean_line strips them until none is left (they stack, e.g.
# a kubectl timestamp before an mpirun tag). Open MPI / PRRTE tag, timestamp, detailed and full-name
# forms are bracket groups ending in "<stdout>:" (or stderr/stddiag), maybe after a ctime date (never text
# of a row: a row with tagged stderr glued to it must stay whole, to be counted); kubectl/docker logs -t:
# RFC 3339; srun -l: "0: "; MPICH/Intel MPI -l: "[0] "; pdsh/clush: "host: " or "10.0.0.7: "; Ray (SkyPilot's
# jobs): "(head, rank=0, pid=3808) " or "(pid=12) ", always with a pid= field.
_PREFIXES = (
    re.compile(r"^\s*(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?(?:\[[^\]\n]*\])+"
               r"<(?:stdout|stderr|stddiag)>:\s?"),
    re.compile(r"^\s*\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"),
    re.compile(r"^\s*\d+:\s"),
    re.compile(r"^\s*\[\d+\]\s"),
    re.compile(r"^\s*[A-Za-z0-9][\w.-]*:\s"),  # a host name or IP address (a row never has a colon)
    re.compile(r"^\s*\([^()\n]*\bpid=\d+[^()\n]*\)\s"),
)
_OP_NAME = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoallv|alltoall|broadcast|reduce|sendrecv|"
                      r"gather|scatter|hypercube)_perf")
# "#  Rank %2d Group %2d Pid %6d on %10s device %2d [bdf] name" (Group since v2.14, Pid since v2.0).
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[[^\]]*\]\s*(.*)$")
# The "#" is optional: pages that render saved logs as Markdown drop it (dstack's cluster examples).
_HEADER = re.compile(r"^#?\s*(?:size\s+count|bytes\s+N)\s+type\b")
# v1: "NCCL failure f.cu:12 '...'" / "Cuda failure ..."; v2.0 on: "host: Test NCCL failure f.cu:12 ...",
# " .. host pid 7: Test failure f.cu:12", "host: Test timeout (5s) f.cu:12"; v2.17.4 on: "# error: ..."
_FAILURE = re.compile(r"^(?:Cuda|NCCL) failure \S+:\d+|Test (?:NCCL |CUDA )?failure \S+:\d+|Test timeout \(\d+s\)|"
                      r"^# error: ")
_FOOTER = re.compile(r"^\s*#?\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)")
_TIME_COLS = ("time", "cputime")


@dataclass(frozen=True)
class Layout:
    """Where one header puts each value: token positions (out-of-place first, then in-place).

    Attributes
    ----------
    ncols : int
        Columns named by the header (a ``timestamp`` column counts as the two tokens it prints).
    time, algbw, busbw : tuple of int
        Positions of each measurement group's time (``time`` or ``cputime``), algbw and busbw.
    type_at, redop_at, root_at : int
        Positions of ``type``, the reduction op (``redop``/``op``) and ``root`` (-1: not printed).
    time_scale_us : float
        Microseconds per printed time unit (1000 for the v1 layout, which printed ms).
    """

    ncols: int
    time: tuple[int, ...]
    algbw: tuple[int, ...]
    busbw: tuple[int, ...]
    type_at: int
    redop_at: int
    root_at: int
    time_scale_us: float


def clean_line(raw: str) -> str:
    """``raw`` without colour codes, launcher prefixes and trailing blanks.

    Examples
    --------
    >>> clean_line("2026-01-02T03:04:05.123456789Z [1,0]<stdout>:#  size  count  type\\r")
    '#  size  count  type'
    >>> clean_line("node7:  12: \\x1b[32m     1024   256  float\\x1b[0m")
    '     1024   256  float'
    """
    line = _ANSI.sub("", raw) if "\x1b" in raw else raw
    for _ in range(6):  # stacked wrappers; a row or header never matches any prefix, so this stops
        for rx in _PREFIXES:
            m = rx.match(line)
            if m and m.end() < len(line):
                line = line[m.end():]
                break
        else:
            break
    return line.rstrip()


def op_stem(line: str) -> str | None:
    """The nccl-tests binary stem named on ``line`` (``# Collective test starting: all_gather_perf``).

    Examples
    --------
    >>> op_stem("# Collective test starting: reduce_scatter_perf_mpi"), op_stem("mpirun ./build/gather_perf -b 8")
    ('reduce_scatter', 'gather')
    """
    m = _OP_NAME.search(line)
    return m.group(1) if m else None


def parse_rank(line: str) -> tuple[int, int, str, int, str] | None:
    """(rank, group, host, device, GPU name) of a ``#  Rank`` line (group 0 before v2.14), else None.

    Examples
    --------
    >>> parse_rank("#  Rank  3 Group  1 Pid  4242 on     nodeA device  3 [0000:1b:00] NVIDIA H100 80GB HBM3")
    (3, 1, 'nodeA', 3, 'NVIDIA H100 80GB HBM3')
    >>> parse_rank("#   Rank  0 on     nodeA device  0 [0x07] Tesla V100-SXM2-16GB")
    (0, 0, 'nodeA', 0, 'Tesla V100-SXM2-16GB')
    """
    m = _RANK.match(line.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0), m.group(3), int(m.group(4)), m.group(5).strip()


def parse_header(line: str) -> Layout | None:
    """The :class:`Layout` of a column header line, else None.

    Raises
    ------
    ValueError
        A column header without one time, algbw and busbw column per measurement group.

    Examples
    --------
    >>> lay = parse_header("#  size  count  type  redop  root  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  #wrong")
    >>> lay.time, lay.busbw, lay.root_at, lay.ncols
    ((5, 9), (7, 11), 4, 13)
    >>> parse_header("#  bytes  N  type  op  time  algbw  busbw  res  time  algbw  busbw  res").time_scale_us
    1000.0
    """
    if not _HEADER.match(line):
        return None
    cols = line.lstrip("#").split()
    where = {c: [i for i, x in enumerate(cols) if x == c] for c in ("algbw", "busbw", "type", "root", "redop", "op")}
    times = tuple(i for i, x in enumerate(cols) if x in _TIME_COLS)
    if not times or len(where["algbw"]) != len(times) or len(where["busbw"]) != len(times):
        raise ValueError("nccl-tests column header without a time, algbw and busbw column per measurement")
    extra = 1 if "timestamp" in cols else 0  # "%Y-%m-%d %H:%M:%S" prints as two tokens
    redop = (where["redop"] or where["op"] or [-1])[0]
    return Layout(ncols=len(cols) + extra, time=times, algbw=tuple(where["algbw"]), busbw=tuple(where["busbw"]),
                  type_at=where["type"][0], redop_at=redop, root_at=(where["root"] or [-1])[0],
                  time_scale_us=1000.0 if cols[0] == "bytes" else 1.0)


_ROW_INSIDE = re.compile(r"(?:^|\s)\d+\s+\d+\s+(?:" + "|".join(NCCLTESTS_DTYPES) + r")\s+\S+\s+-?\d+\s+[\d.]")


def row_inside(line: str) -> bool:
    """True when a line that is not a row holds one behind text the reader does not know (an unknown
    launcher prefix): such a line is counted, not dropped.

    Examples
    --------
    >>> row_inside("<job 7> 1048576  262144  float  sum  -1  50.1  20.93  36.63  0")
    True
    >>> row_inside("node1:12:12 [0] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7")
    False
    """
    return bool(_ROW_INSIDE.search(line))


def row_like(toks: list[str]) -> bool:
    """True when ``toks`` start as a table row does: two integers (size and count).

    Examples
    --------
    >>> row_like("1024 256 flo".split()), row_like("8 more processes have sent help message".split())
    (True, False)
    """
    return len(toks) >= 2 and toks[0].isdigit() and toks[1].isdigit()


def _num(tok: str) -> float:
    try:
        return float(tok)
    except ValueError:  # "N/A" and the like
        return math.nan


def parse_row(lay: Layout, toks: list[str]) -> tuple[dict | None, str]:
    """One row read by its header's layout: (row, "") or (None, why it cannot be read), or (row, note) for a
    row cut short after its out-of-place values (a run killed mid-row, a trimmed file): those are read and
    what is missing of the in-place group is NaN.

    Examples
    --------
    >>> lay = parse_header("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong")
    >>> row, _ = parse_row(lay, "1024 256 float sum -1 10.5 0.10 0.18 N/A 1e+01 0.10 0.18 N/A".split())
    >>> row["time_us"], row["time_inplace_us"], row["busbw"]
    (10.5, 10.0, 0.18)
    >>> parse_row(lay, "1024 256 float sum -1 10.5 0.10".split())[1]
    'row cut short (fewer columns than its header)'
    >>> parse_row(lay, "1024 256 float sum -1 10.5 0.10 0.18 0 10.0".split())[0]["time_inplace_us"]
    10.0
    """
    note = ""
    if len(toks) < lay.ncols:
        if len(toks) <= max(lay.time[0], lay.algbw[0], lay.busbw[0], lay.type_at, lay.root_at):
            return None, "row cut short (fewer columns than its header)"
        note = "row cut short after its out-of-place values (read; the missing in-place values are NaN)"
        toks = toks + ["N/A"] * (lay.ncols - len(toks))
    if len(toks) > lay.ncols:
        return None, "row with more columns than its header (text glued to it)"
    if toks[lay.type_at] not in NCCLTESTS_DTYPES:
        return None, "unknown datatype"
    time_us = _num(toks[lay.time[0]]) * lay.time_scale_us
    algbw, busbw = _num(toks[lay.algbw[0]]), _num(toks[lay.busbw[0]])
    if not all(math.isfinite(v) and v >= 0 for v in (time_us, algbw, busbw)):
        return None, "row whose out-of-place time, algbw or busbw is not a number"
    root_tok = toks[lay.root_at] if lay.root_at >= 0 else "-1"
    two = len(lay.time) > 1
    return dict(size=int(toks[0]), count=int(toks[1]), type=toks[lay.type_at],
                redop=toks[lay.redop_at] if lay.redop_at >= 0 else "none",
                root=int(root_tok) if root_tok.lstrip("-").isdigit() else -1, time_us=time_us, algbw=algbw,
                busbw=busbw, time_inplace_us=_num(toks[lay.time[1]]) * lay.time_scale_us if two else math.nan,
                busbw_inplace=_num(toks[lay.busbw[1]]) if two else math.nan), note


def failure_text(line: str) -> bool:
    """True for nccl-tests' failure lines (``Test NCCL failure``, ``Test timeout``, ``# error: ...``).

    Examples
    --------
    >>> failure_text("node1: Test NCCL failure common.cu:1123 'unhandled system error'")
    True
    """
    return bool(_FAILURE.search(line))


def footer(line: str) -> tuple[str, float] | None:
    """(``"oob"`` or ``"avg_busbw"``, value) of a table footer line, else None.

    Examples
    --------
    >>> footer("# Avg bus bandwidth    : 66.2058 "), footer(" Out of bounds values : 3 FAILED")
    (('avg_busbw', 66.2058), ('oob', 3.0))
    """
    m = _FOOTER.match(line)
    if not m:
        return None
    return ("oob" if m.group(1).startswith("Out") else "avg_busbw"), _num(m.group(2))


def new_sweep(prev: dict | None, row: dict) -> bool:
    """True when ``row`` cannot continue the table of ``prev``: nccl-tests prints one header for every
    datatype (``-d all``), reduction (``-o all``), root (``-r -1``) and repeat (``-N``), so a table ends where
    one of them changes or the sizes start again (sizes never shrink within one sweep; they may repeat when
    rounding to 16-byte multiples leaves several sizes at one value).

    Examples
    --------
    >>> a = dict(type="float", redop="sum", root=-1, size=1024)
    >>> new_sweep(a, {**a, "size": 1024}), new_sweep(a, {**a, "size": 8}), new_sweep(a, {**a, "type": "half"})
    (False, True, True)
    """
    if prev is None:
        return True
    return (prev["type"], prev["redop"], prev["root"]) != (row["type"], row["redop"], row["root"]) or \
        row["size"] < prev["size"]
