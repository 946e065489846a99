"""NCCL debug-log text, one line at a time: the regular expressions and per-line parsers.

These are the slow, forgiving parsers. :mod:`traces.formats.nccl.scan` runs a vectorised fast path over the
standard COLL layout and hands every line it cannot read positionally to :func:`parse_coll_line`; the
rare line kinds (Init, ring, TUNING, version banner) are always parsed here. Format strings are those of
``docs/nccl_logs.md`` (NCCL 2.4 to 2.30).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

#: NCCL op names as printed -> schema op (None: a known NCCL op the schema does not hold).
NCCL_OPS: dict[str, str | None] = {
    "AllReduce": "AllReduce",
    "AllGather": "AllGather",
    "ReduceScatter": "ReduceScatter",
    "Broadcast": "Broadcast",
    "Reduce": "Reduce",
    "Send": "Send",
    "Recv": "Recv",
    "AlltoAll": "AllToAll",  # 2.28+
    "AllToAll": "AllToAll",
    "Gather": "Gather",  # 2.28+
    "Scatter": "Scatter",  # 2.28+
    "PutSignal": None,  # 2.29+ one-sided ops
    "Signal": None,
    "WaitSignal": None,
}
#: Longest names first, so a name glued to garbage (interleaved writes) resolves to its longest suffix.
_OPS_BY_LENGTH = sorted(NCCL_OPS, key=len, reverse=True)

#: The COLL body, anywhere in a line (interleaved writes put it mid-line). ``acc %p`` is a third-party
#: field, ``task``/``globalrank`` RCCL's suffix; the stream pointer may be hard-wrapped onto the next line.
COLL_RE = re.compile(
    r"(?P<op>[A-Za-z]+): opCount (?P<opc>[0-9a-fA-F]+) sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+)"
    r"(?: acc \S+)? count (?P<count>-?\d+) datatype (?P<dt>-?\d+) op (?P<redop>-?\d+) root (?P<root>-?\d+)"
    r" comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\](?: stream(?: (?P<stream>\S+))?)?"
    r"(?: task (?P<task>-?\d+) globalrank (?P<grank>-?\d+))?"
)
#: ``host:pid:tid [dev] NCCL INFO `` ending right where a body starts, or followed by one bracketed rank tag
#: (``NCCL INFO [2] AllReduce: opCount ...``: a build that tags its COLL lines, NVIDIA/nccl#1352; NCCL itself
#: never prints one there, so the tag is not read, only stepped over). RCCL of 2019 printed microseconds since
#: the epoch after ``[dev]`` (``[1] 1558545003174220 NCCL INFO``, ROCm/rtg_tracer): read as the line's time.
PREFIX_END_RE = re.compile(r"(?P<host>[^\s:]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\](?: (?P<usec>\d{1,19}))?"
                           r" NCCL INFO(?: \[\d+\])?\s*$")
#: The same prefix anywhere (for Init, ring and TUNING lines, whose body follows it).
PREFIX_RE = re.compile(r"(?P<host>[^\s:]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\](?: (?P<usec>\d{1,19}))?"
                       r" NCCL INFO ")
#: ``%F %T`` with optional subseconds, bracketed (NCCL 2.26) or bare (external loggers).
TIMESTAMP_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")

#: Init lines of every version: 2.4 ``comm %p rank %d nranks %d cudaDev %d nvmlDev %d``, 2.5+ ``busId``,
#: 2.16+ ``commId``, 2.20+ ``nRanks ... localRanks %d``; Destroy lines carry the same head.
INIT_RE = re.compile(
    r"comm (?P<ptr>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>\d+) n[rR]anks (?P<nranks>\d+)"
    r"(?: cudaDev (?P<dev>-?\d+))?"
)
COMMID_RE = re.compile(r"\bcommId (0x[0-9a-fA-F]+)")
LOCALRANKS_RE = re.compile(r"\blocalRanks (\d+)")
#: Ring lines: ``Channel %02d/%02d :`` (2.5+, padded up to 2.22, compact with ``...`` from 2.23) and
#: ``Channel %02d :`` (2.4). Only digits may follow: connection lines (``0[1] -> 1[0] via``) do not match.
RING_RE = re.compile(r"Channel (?P<ch>\d+)(?:/(?P<nch>\d+))? :(?P<ranks>(?: +\d+)*)(?P<more> *\.\.\.)?\s*$")
#: TUNING: 2.20-2.22 ``%ld Bytes -> Algo %d proto %d time %f``; 2.23 with ``%s: `` before; 2.24+ names.
TUNING_RE = re.compile(
    r"(?:(?P<op>[A-Za-z]+): )?(?P<nbytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
)
VERSION_RE = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
#: Cheap test (RE2-compatible) for the rare lines parsed here; COLL lines are found by substring.
OTHER_LINES_RE2 = (
    r" n[rR]anks \d| Bytes -> Algo |Channel [0-9]+(/[0-9]+)? :[ 0-9]*( *\.\.\.)?\s*$|NCCL version"
)

#: Numeric algorithm/protocol ids (2.20-2.23) -> the names NCCL 2.24+ prints (``ncclAlgoToString``).
ALGO_NAMES = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTO_NAMES = ("LL", "LL128", "SIMPLE")

COLL_MARK = ": opCount "


@dataclass(frozen=True)
class Prefix:
    """What the ``host:pid:tid [dev]`` prefix and any outer timestamp of a line say."""

    host: str
    pid: int
    tid: int
    ts_us: int | None
    dev: int = -1  # the ``[dev]`` of the prefix: the thread's current CUDA device


NO_PREFIX = Prefix("", -1, -1, None)


def timestamp_us(text: str) -> int | None:
    """Microseconds since the Unix epoch of the last ``%F %T[.f]`` timestamp in ``text``, else None.

    The last one is NCCL's own (2.26 ``[%F %T] ``) when an outer logger added another before it.

    Examples
    --------
    >>> timestamp_us("[1970-01-01 00:00:01.5] ")
    1500000
    """
    matches = TIMESTAMP_RE.findall(text)
    if not matches:
        return None
    y, mo, d, h, mi, s, frac = matches[-1]
    try:
        secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    micros = int((frac or "0")[:6].ljust(6, "0"))
    return secs * 1_000_000 + micros


def parse_prefix_before(line: str, end: int) -> Prefix:
    """Parse the prefix that ends exactly at ``end`` (where a body starts); NO_PREFIX when there is none."""
    m = PREFIX_END_RE.search(line, 0, end)
    if m is None:
        return NO_PREFIX
    return Prefix(m["host"], int(m["pid"]), int(m["tid"]), _time_of(line, m), int(m["dev"]))


def _time_of(line: str, m: re.Match[str]) -> int | None:
    """The line's time (µs): an outer timestamp before the prefix, else RCCL's microseconds after ``[dev]``."""
    outer = timestamp_us(line[: m.start()])
    return outer if outer is not None or m["usec"] is None else int(m["usec"])


def op_name(raw: str) -> str | None:
    """Resolve a printed op name, or the longest known name it ends with (garbage glued before it)."""
    if raw in NCCL_OPS:
        return raw
    for name in _OPS_BY_LENGTH:
        if raw.endswith(name):
            return name
    return None


@dataclass
class CollLine:
    """One COLL line's fields, as logged (no mapping yet)."""

    prefix: Prefix
    op: str | None  # printed NCCL op name (None: unknown)
    opc: str
    count: int
    dt: int
    root: int
    comm: str
    nranks: int
    grank: int


def parse_coll_lines(line: str) -> list[CollLine]:
    """Parse every COLL body in one line (interleaved writes can hold two); [] when none can be read.

    Examples
    --------
    >>> (c,) = parse_coll_lines("h:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 "
    ...                         "count 4 datatype 7 op 0 root 0 comm 0x9 [nranks=2] stream 0x3")
    >>> (c.prefix.host, c.op, c.count, c.comm)
    ('h', 'AllReduce', 4, '0x9')
    """
    out = []
    mark = line.find(COLL_MARK)
    while mark >= 0:
        # The op name is a word ending at the mark; start the match there (no scan over the line).
        start = mark
        while start > 0 and line[start - 1].isalpha():
            start -= 1
        m = COLL_RE.match(line, start)
        if m is not None:
            op = op_name(m["op"])
            op_start = m.end("op") - len(op) if op else m.start()
            out.append(CollLine(
                prefix=parse_prefix_before(line, op_start),
                op=op if op else m["op"],
                opc=format(int(m["opc"], 16), "x"),
                count=int(m["count"]),
                dt=int(m["dt"]),
                root=int(m["root"]),
                comm=pointer_text(m["comm"]),
                nranks=int(m["nranks"]),
                grank=int(m["grank"]) if m["grank"] is not None else -1,
            ))
        mark = line.find(COLL_MARK, mark + len(COLL_MARK))
    return out


def pointer_text(text: str) -> str:
    """``%p`` text in one canonical form (lower case, no leading zeros) so both parsers agree."""
    try:
        return f"0x{int(text, 16):x}" if text.lower().startswith("0x") else text.lower()
    except ValueError:
        return text.lower()


def parse_prefix_at(line: str, pos: int) -> Prefix:
    """Parse the nearest prefix before ``pos`` (for Init/ring/TUNING bodies); NO_PREFIX when none."""
    best = None
    for m in PREFIX_RE.finditer(line, 0, pos):
        best = m
    if best is None:
        return Prefix("", -1, -1, timestamp_us(line[:pos]))
    return Prefix(best["host"], int(best["pid"]), int(best["tid"]), _time_of(line, best), int(best["dev"]))


def algo_name(token: str) -> str:
    """An algorithm as NCCL 2.24+ names it, from a name or a 2.20-2.23 numeric id."""
    if token.isdigit():
        i = int(token)
        return ALGO_NAMES[i] if i < len(ALGO_NAMES) else token
    return token.upper()


def proto_name(token: str) -> str:
    """A protocol as NCCL 2.24+ names it, from a name or a numeric id."""
    if token.isdigit():
        i = int(token)
        return PROTO_NAMES[i] if i < len(PROTO_NAMES) else token
    return token.upper()


__all__ = ["ALGO_NAMES", "COLL_MARK", "COLL_RE", "COMMID_RE", "INIT_RE", "LOCALRANKS_RE", "NCCL_OPS",
    "NO_PREFIX", "OTHER_LINES_RE2", "PREFIX_END_RE", "PREFIX_RE", "PROTO_NAMES", "RING_RE", "TIMESTAMP_RE",
    "TUNING_RE", "VERSION_RE", "CollLine", "Prefix", "algo_name", "op_name", "parse_coll_lines",
    "parse_prefix_at", "parse_prefix_before", "pointer_text", "proto_name", "timestamp_us"]
