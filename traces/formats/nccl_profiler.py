"""NCCL profiler plugin (example plugin, NCCL 2.23+) Chrome-trace JSON -> §3 rows.

The example plugin writes ``${NCCL_PROFILE_DUMP_FILE}-<host>-<tid>.txt``: a JSON array of async ``b``/``e``
events, one per line, terminated by ``{}]``. Rows come from the ``COLL`` and ``P2P`` events:

- ``COLL`` ``b``: ``name`` = function, ``args`` = ``{SeqNum, CommHash, Rank, Count, Datatype, Algorithm,
  Protocol, nChannels}`` (``Datatype`` is an int in 2.23, a name such as ``ncclFloat32`` later);
- ``P2P`` ``b``: ``args`` = ``{CommHash, Rank, Peer, Count, Datatype, nChannels}``;
- the ``e`` event with the same category and ``id`` closes it: ``duration_s`` = end - begin.

``Rank``/``Peer`` are comm ranks; a process's global rank is its rank in the largest communicator (see
:class:`traces.readers.RankMap`). A communicator's size is not recorded: it is the number of comm ranks
seen for its hash (ranks and peers), so every rank's file should be given. A root is only known from the
``COLL_API`` event of the same function that precedes the ``COLL`` event (when the event mask kept it),
else 0. Times are the plugin's microseconds; each process's clock starts at its own init, so times from
different processes are only roughly aligned.

Real files are not always strict JSON (some versions print ``"Stream": 0x7f..`` or ``"datatype":
ncclFloat32`` unquoted): such bare words are quoted before parsing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from traces.formats.common import Progress, RankMap, RowSink, as_int, finish_frame
from traces.formats.files import json_start, read_text
from traces.formats.jsonstream import Bad, iter_objects
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import NCCL_DTYPE_CODES, P2P_OPS, ROOTED_OPS, dtype_name

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

_OPS = {
    "AllReduce": "AllReduce", "AllGather": "AllGather", "ReduceScatter": "ReduceScatter",
    "Broadcast": "Broadcast", "Reduce": "Reduce", "AllToAll": "AllToAll", "AlltoAll": "AllToAll",
    "Send": "Send", "Recv": "Recv", "Gather": "Gather", "Scatter": "Scatter",
}
_CATS = ('"cat": "COLL"', '"cat": "P2P"', '"cat": "GROUP"', '"cat": "PROXY"', '"cat": "COLL_API"',
         '"cat": "GROUP_API"', '"cat": "KERNEL_LAUNCH"', '"cat": "P2P_API"', '"cat": "NET"', '"cat": "GPU"')
_BARE = re.compile(r'(:\s*)(0x[0-9a-fA-F]+|\(nil\)|[A-Za-z_][A-Za-z0-9_]*)(\s*[,}\]])')


def looks_like_nccl_profiler(head: str) -> bool:
    """True for the example profiler plugin's output: JSON ``b``/``e`` events with NCCL categories, in an
    array or not (a file cut at its start, or events copied out of one, has no leading ``[``).

    Examples
    --------
    >>> looks_like_nccl_profiler('[\\n{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0}')
    True
    >>> looks_like_nccl_profiler('{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0},')
    True
    """
    text = head.lstrip()
    compact = re.sub(r'"\s*:\s*"', '": "', text[:65536])
    return (json_start(text) and '"traceEvents"' not in compact and any(c in compact for c in _CATS)
            and re.search(r'"ph":\s*"[be]"', compact) is not None)


def _quote_bare(line: str) -> str:
    def fix(match: re.Match[str]) -> str:
        word = match.group(2)
        if word in ("true", "false", "null"):
            return match.group(0)
        return f'{match.group(1)}"{word}"{match.group(3)}'

    return _BARE.sub(fix, line)


def _events(path: Path, report: IngestReport) -> list[tuple[int, dict[str, Any]]]:
    """(line number, event) pairs: every JSON object of the file (bare words quoted where needed); a
    truncated tail, malformed events, elision lines (``...``) and stray text are skipped and counted."""
    out = []
    reasons = {"truncated": "truncated last event (plugin stopped mid-write)", "malformed": "malformed JSON event",
               "stray": "text that is no JSON event (elision or stray characters)"}
    for number, event in iter_objects(read_text(path), repair=_quote_bare):
        if isinstance(event, Bad):
            report.lines_read += 1
            report.skip(reasons[event.reason], f"{path}:{number}")
        elif isinstance(event, dict) and event:  # the closing ``{}`` is no event
            report.lines_read += 1
            out.append((number, event))
    return out


def _dtype(value: Any) -> str | None:
    code = as_int(value)
    try:
        if code is not None and code in NCCL_DTYPE_CODES:
            return dtype_name(code)
        return dtype_name(str(value))
    except Exception:  # noqa: BLE001 - any unknown name is a skipped record, counted below
        return None


def read_nccl_profiler(paths: list[Path], *, strict: bool = False, progress: Progress = None
                       ) -> tuple[pd.DataFrame, IngestReport]:
    """Read the example NCCL profiler plugin's trace files (one per process) into one §3 frame.

    Parameters
    ----------
    paths : list of Path
        The plugin's dump files of one job.
    strict : bool
        Raise on the first skipped record instead of counting it.
    progress : callable, optional
        Called with each file's size in bytes once it is read.

    Returns
    -------
    (pandas.DataFrame, IngestReport)

    Raises
    ------
    TraceError
        Malformed JSON, naming the file and line.
    """
    report = IngestReport()
    ops: list[dict[str, Any]] = []
    sizes: dict[str, int] = {}
    for path in paths:
        report.files.append(str(path))
        events = _events(path, report)
        ends: dict[tuple[Any, Any, Any], float] = {}
        for _, e in events:
            if e.get("ph") == "e" and e.get("cat") in ("COLL", "P2P") and isinstance(e.get("ts"), int | float):
                ends.setdefault((e.get("pid"), e.get("cat"), e.get("id")), float(e["ts"]))
        last_api_root: dict[str, int] = {}
        for index, (number, e) in enumerate(events):
            cat, ph = e.get("cat"), e.get("ph")
            args = e.get("args") or {}
            if cat == "COLL_API" and ph == "b":
                root = as_int(args.get("root"))
                if root is not None:
                    last_api_root[str(e.get("name"))] = root
                continue
            if cat not in ("COLL", "P2P") or ph != "b":
                continue
            where = f"{path}:{number}"
            name = str(e.get("name", ""))
            op = _OPS.get(name)
            if op is None or (cat == "P2P") != (op in P2P_OPS):
                report.skip(f"op not in the schema ({name})", where)
                continue
            comm, crank, count = args.get("CommHash"), as_int(args.get("Rank")), as_int(args.get("Count"))
            dtype = _dtype(args.get("Datatype"))
            if comm is None or crank is None or count is None or dtype is None:
                report.skip("event without CommHash, Rank, Count or a known Datatype", where)
                continue
            comm = str(comm)
            peer = as_int(args.get("Peer")) if cat == "P2P" else None
            if cat == "P2P" and (peer is None or peer < 0):
                report.skip(f"{op} without a peer", where)
                continue
            sizes[comm] = max(sizes.get(comm, 0), crank + 1, (peer or 0) + 1)
            t_us = float(e["ts"]) if isinstance(e.get("ts"), int | float) else math.nan
            end = ends.get((e.get("pid"), cat, e.get("id")))
            ops.append(dict(proc=(path.name, e.get("pid")), comm=comm, crank=crank, op=op, count=count,
                            dtype=dtype, peer=peer, where=where, t_us=t_us, order=index,
                            duration_s=(end - t_us) / 1e6 if end is not None and end >= t_us else math.nan,
                            root=last_api_root.pop(name, None) if op in ROOTED_OPS else None,
                            algo=str(args.get("Algorithm", "")), proto=str(args.get("Protocol", ""))))
        if progress is not None:
            progress(path.stat().st_size)
    ranks = RankMap.build(((o["proc"], o["comm"], o["crank"]) for o in ops), sizes)
    sink = RowSink()
    for o in ops:
        rank = ranks.global_rank(o["proc"], o["comm"], o["crank"])
        nranks = sizes[o["comm"]]
        if rank is None or o["comm"] in ranks.unknown:
            report.skip("comm rank cannot be mapped to a global rank (files of other ranks missing?)", o["where"])
            continue
        root = -1
        if o["op"] in P2P_OPS:
            root = o["peer"]
        elif o["op"] in ROOTED_OPS:
            root = o["root"] if o["root"] is not None and 0 <= o["root"] < nranks else 0
        sink.add(rank=rank, comm=o["comm"], op=o["op"], count=o["count"], dtype=o["dtype"], nranks=nranks,
                 root=root, t_us=o["t_us"], duration_s=o["duration_s"], algo=o["algo"], proto=o["proto"],
                 peer=ranks.members[o["comm"]][o["peer"]] if o["op"] in P2P_OPS else -1, order=o["order"])
    report.notes.append("NCCL profiler plugin: communicator sizes are the comm ranks seen; global rank = rank in "
                        f"the largest communicator ({ranks.world_comm or 'none'}); per-process clocks")
    report.raise_if_strict(strict)
    comms = {c: m for c, m in ranks.members.items() if c not in ranks.unknown}
    return finish_frame(sink, comms=comms, world_size=ranks.world_size or None, source="nccl-profiler",
                        report=report, gpus_per_node=None), report


__all__ = ["looks_like_nccl_profiler", "read_nccl_profiler"]
