"""NCCL Inspector JSON Lines (NCCL 2.28+, ``plugins/profiler/inspector``) -> §3 rows.

Each line is one completed op of one communicator as seen by one rank:
``{"header": {id, comm_name, rank, n_ranks, nnodes}, "metadata": {hostname, pid, ...},
"coll_perf": {coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_algo?, coll_proto?, ...}}``, or
``p2p_perf`` with ``{p2p, p2p_sn, p2p_peer, p2p_msg_size_bytes, p2p_exec_time_us}``. Lines with
``dump_stats`` carry ring-buffer drop counts (reported in the notes).

Mapping: ``comm`` = ``header.id`` (the comm hash), ``nranks`` = ``n_ranks``, ``host`` = ``metadata.hostname``,
``duration_s`` = exec time. The Inspector records bytes but no datatype: ``dtype`` is ``int8`` and
``count`` the message bytes. Only comm ranks are recorded; a process's global rank is its rank in the
largest communicator (see :class:`traces.readers.RankMap`). There is no issue time unless the verbose
``event_trace_ts.coll_start_ts`` is present; ``seq`` follows ``coll_sn``/``p2p_sn`` order. Ops smaller
than ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (8192 by default) are absent from the output.

The Prometheus variant (``NCCL_INSPECTOR_PROM_DUMP=1``) holds aggregated metrics, not ops: detection names
it and refuses it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from traces.formats.common import Progress, RankMap, RowSink, as_int, finish_frame
from traces.formats.files import read_text
from traces.formats.jsonstream import Bad, iter_objects
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import P2P_OPS, ROOTED_OPS

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: Inspector function names (``ncclFuncToString``) -> schema ops.
_OPS = {
    "AllReduce": "AllReduce", "AllGather": "AllGather", "ReduceScatter": "ReduceScatter",
    "Broadcast": "Broadcast", "Reduce": "Reduce", "All2All": "AllToAll", "AllToAll": "AllToAll",
    "AlltoAll": "AllToAll", "Send": "Send", "Recv": "Recv", "Gather": "Gather", "Scatter": "Scatter",
}
_PROM = re.compile(r"^(# (HELP|TYPE) nccl_\w+|nccl_\w+\{[^}]*\}\s+\S+)", re.MULTILINE)


def looks_like_inspector(head: str) -> bool:
    """True for Inspector output: JSON objects (one per line, pretty-printed, or in an array) whose first
    one has ``header`` and an op or stats key.

    Examples
    --------
    >>> looks_like_inspector('{"header":{"id":"0x1","rank":0,"n_ranks":2},"coll_perf":{"coll":"AllReduce"}}')
    True
    >>> looks_like_inspector('[\\n  {\\n    "header": {"id": "0x1"},\\n    "coll_perf": {"coll": "AllReduce"}')
    True
    """
    text = head.lstrip().lstrip("[").lstrip()
    if not text.startswith("{"):
        return False
    first = text[:16384]
    return ('"header"' in first and '"traceEvents"' not in first
            and any(k in first for k in ('"coll_perf"', '"p2p_perf"', '"dump_stats"')))


def looks_like_inspector_prometheus(head: str) -> bool:
    """True for the Inspector's Prometheus text output (not supported: it has no per-op records)."""
    return _PROM.search(head) is not None


def _records(path: Path, report: IngestReport):
    """Yield (line number, record) for each JSON object (JSON Lines, pretty-printed or an array); a torn
    last record, a malformed one or stray text is skipped and counted."""
    for number, record in iter_objects(read_text(path)):
        report.lines_read += 1
        if isinstance(record, Bad):
            reason = {"truncated": "truncated last record (the writer was stopped mid-write)",
                      "malformed": "malformed JSON record", "stray": "text that is no JSON record"}[record.reason]
            report.skip(reason, f"{path}:{number}")
            continue
        yield number, record


def read_inspector(paths: list[Path], *, strict: bool = False, progress: Progress = None
                   ) -> tuple[pd.DataFrame, IngestReport]:
    """Read NCCL Inspector JSON Lines files (any number of processes) into one §3 frame.

    Parameters
    ----------
    paths : list of Path
        ``<host>-pid<pid>.log`` files of one job.
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
        Malformed JSON (naming file and line) or a line that is not an object.
    """
    report = IngestReport()
    ops: list[dict[str, Any]] = []
    sizes: dict[str, int] = {}
    dropped = 0
    for path in paths:
        report.files.append(str(path))
        for number, rec in _records(path, report):
            where = f"{path}:{number}"
            header, meta = rec.get("header") or {}, rec.get("metadata") or {}
            if "dump_stats" in rec:
                stats = rec["dump_stats"] or {}
                dropped += (as_int(stats.get("coll_dropped_since_last_dump")) or 0) + (
                    as_int(stats.get("p2p_dropped_since_last_dump")) or 0)
                continue
            perf = rec.get("coll_perf") or rec.get("p2p_perf")
            if not isinstance(perf, dict):
                report.skip("line without coll_perf or p2p_perf", where)
                continue
            p2p = "p2p_perf" in rec
            prefix = "p2p" if p2p else "coll"
            name = str(perf.get(prefix, ""))
            op = _OPS.get(name)
            comm, crank, nranks = header.get("id"), as_int(header.get("rank")), as_int(header.get("n_ranks"))
            size = as_int(perf.get(f"{prefix}_msg_size_bytes"))
            if op is None:
                report.skip(f"op not in the schema ({name})", where)
                continue
            if comm is None or crank is None or not nranks or size is None:
                report.skip("record without comm id, rank, n_ranks or size", where)
                continue
            peer = as_int(perf.get("p2p_peer")) if p2p else None
            if op in P2P_OPS and (peer is None or not 0 <= peer < nranks):
                report.skip(f"{op} without a valid peer", where)
                continue
            sizes[str(comm)] = max(sizes.get(str(comm), 0), nranks)
            exec_us = perf.get(f"{prefix}_exec_time_us")
            start = ((perf.get("event_trace_ts") or {}).get(f"{prefix}_start_ts"))
            proc = (str(meta.get("hostname", "")), meta.get("pid")) if meta.get("pid") is not None else path.name
            ops.append(dict(proc=proc, comm=str(comm),
                            crank=crank, nranks=nranks, op=op, count=size, peer=peer, where=where,
                            sn=as_int(perf.get(f"{prefix}_sn")) or 0, host=str(meta.get("hostname", "")),
                            duration_s=float(exec_us) / 1e6 if isinstance(exec_us, int | float) else math.nan,
                            t_us=float(start) if isinstance(start, int | float) and start else math.nan,
                            algo=_known(perf.get("coll_algo")), proto=_known(perf.get("coll_proto"))))
        if progress is not None:
            progress(path.stat().st_size)
    ranks = RankMap.build(((o["proc"], o["comm"], o["crank"]) for o in ops), sizes)
    sink = RowSink()
    for o in ops:
        rank = ranks.global_rank(o["proc"], o["comm"], o["crank"])
        if rank is None or o["comm"] in ranks.unknown:
            report.skip("comm rank cannot be mapped to a global rank (files of other ranks missing?)",
                        o["where"])
            continue
        members = ranks.members[o["comm"]]
        root = o["peer"] if o["op"] in P2P_OPS else (0 if o["op"] in ROOTED_OPS else -1)
        sink.add(rank=rank, comm=o["comm"], op=o["op"], count=o["count"], dtype="int8", nranks=o["nranks"],
                 root=root, t_us=o["t_us"], duration_s=o["duration_s"], host=o["host"], algo=o["algo"],
                 proto=o["proto"], peer=members[o["peer"]] if o["op"] in P2P_OPS else -1, order=o["sn"])
    report.notes.append("NCCL Inspector: bytes only (dtype int8, count = bytes); ops below "
                        "NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES are not recorded; global rank = rank in the largest "
                        f"communicator ({ranks.world_comm or 'none'})")
    if any(o["op"] in ROOTED_OPS for o in ops):
        report.notes.append("NCCL Inspector does not record roots: root 0 assumed")
    if dropped:
        report.notes.append(f"NCCL Inspector dropped {dropped} record(s) from its ring buffers (dump_stats)")
    report.raise_if_strict(strict)
    comms = {c: m for c, m in ranks.members.items() if c not in ranks.unknown}
    return finish_frame(sink, comms=comms, world_size=ranks.world_size or None, source="nccl-inspector",
                        report=report), report


def _known(value: Any) -> str:
    text = "" if value is None else str(value)
    return "" if text.lower() in ("", "unknown") else text


__all__ = ["looks_like_inspector", "looks_like_inspector_prometheus", "read_inspector"]
