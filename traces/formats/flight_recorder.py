"""PyTorch Flight Recorder dumps (``TORCH_NCCL_TRACE_BUFFER_SIZE``) -> §3 rows.

The format, as ``torch/csrc/distributed/c10d/FlightRecorder*.hpp`` defines it (dump version 2.x): one file
per rank, ``<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`` (default ``/tmp/nccl_trace_rank_<rank>``), holding
``{version, comm_lib_version, pg_config, pg_status, entries[, nccl_comm_state]}``, written as a pickle
(the default, by torch's own pickler: only dicts, lists, tuples, strings, numbers, None and bools) or as
JSON (``dump_json``). The rank is not in the dump: PyTorch's own analyser (``tools/flight_recorder``) takes
it from the file name's trailing number, and so does this reader.

- ``pg_config``: ``{pg_name: {name, desc, ranks}}``, ``ranks`` a string ``"[0, 1, 2]"`` of global ranks;
  a process group's comm rank k is its k-th smallest global rank.
- each entry: ``record_id, pg_id, process_group (name, desc), collective_seq_id, p2p_seq_id, op_id,
  profiling_name ("nccl:all_reduce", "nccl:send 0->1", "nccl:recv 1<-0"), time_created_ns,
  duration_ms (only with TORCH_NCCL_ENABLE_TIMING), input_sizes / output_sizes (one list of dims per
  tensor), input_dtypes / output_dtypes (c10 names: "Float", "BFloat16"), state, time_discovered_*_ns,
  retired, timeout_ms, is_p2p[, frames]``.

Mapping: ``comm`` = ``pg:<pg_name>``, ``op`` from the profiling name (torch names, as for Kineto), ``count``
from the tensor element counts, ``dtype`` from the input dtype, ``nranks`` = the group's size, ``t_start_s``
from ``time_created_ns`` (enqueue time), ``duration_s`` from ``duration_ms``, ``seq`` of collectives from
``collective_seq_id`` (so ranks whose ring buffers dropped different numbers of old entries still line up). Lost: roots of rooted ops
(0 assumed), durations without TORCH_NCCL_ENABLE_TIMING, hosts, devices, and every op older than the
ring buffer (``TORCH_NCCL_TRACE_BUFFER_SIZE`` entries). ``coalesced`` marker entries carry no data.

The pickle is read by an unpickler that builds plain containers and scalars only: any class or callable
named in the stream (other than torch's list builders, which make plain lists) is refused, so a dump
cannot run code.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traces.formats.common import (
    Ignored,
    RowSink,
    finish_frame,
    parse_int_list,
    torch_count,
    torch_dtype,
    torch_op,
)
from traces.formats.files import read_bytes
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import P2P_OPS, ROOTED_OPS, TraceError

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["load_dump", "looks_like_flight_recorder", "looks_like_flight_recorder_pickle", "read_flight_recorder"]

Progress = Callable[[float], Any] | None
#: torch's pickler writes typed lists through these builders: each makes a plain list.
_LIST_BUILDERS = {("torch.jit._pickle", name) for name in
                  ("build_intlist", "build_doublelist", "build_boollist", "build_tensorlist", "build_genericlist")}
_P2P_NAME = re.compile(r"^(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)$")


def looks_like_flight_recorder(head: str) -> bool:
    """True for a JSON Flight Recorder dump (an object with ``version`` and ``pg_config``).

    Examples
    --------
    >>> looks_like_flight_recorder('{"version": "2.4", "pg_config": {}, "pg_status": {}, "entries": []}')
    True
    """
    text = head.lstrip()[:65536]
    return text.startswith("{") and '"pg_config"' in text and '"version"' in text and (
        '"entries"' in text or '"pg_status"' in text)


def looks_like_flight_recorder_pickle(raw: bytes) -> bool:
    """True for a pickled Flight Recorder dump: a pickle (protocol 2+) whose first keys are the dump's."""
    return raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and b"pg_config" in raw[:65536]


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, tuples, strings, numbers, None and bools; refuses every class and callable."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _LIST_BUILDERS:
            return list
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} (only plain containers and scalars)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refusing a persistent id (only plain containers and scalars)")


def load_dump(path: Path) -> dict[str, Any]:
    """The dump of one file, pickle or JSON, as plain Python data.

    Raises
    ------
    TraceError
        When it is neither, holds anything but plain data, or is not a dump.
    """
    raw = read_bytes(path)
    if looks_like_flight_recorder_pickle(raw):
        try:
            dump = _PlainUnpickler(io.BytesIO(raw)).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as exc:
            raise TraceError(f"{path}: not a readable Flight Recorder pickle ({exc})") from None
    else:
        try:
            dump = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            # PyTorch's tutorial prints an unpickled dump with tuples ("process_group": ("0", "default_pg")):
            # Python's print of the dict, which is no JSON; the pickle itself or json.dump of it reads.
            tuple_hint = (isinstance(exc, json.JSONDecodeError) and exc.doc[exc.pos:exc.pos + 1] == "(")
            hint = "; a '(' there is a Python tuple: give the pickle, or json.dump the unpickled dict" if tuple_hint \
                else ""
            raise TraceError(f"{path}: not a Flight Recorder dump (neither pickle nor JSON: {exc}{hint})") from None
    if not isinstance(dump, dict) or "pg_config" not in dump:
        raise TraceError(f"{path}: not a Flight Recorder dump (no pg_config)")
    return dump


def _rank_of(path: Path) -> int:
    m = re.search(r"(\d+)(?:\.\w+)*$", path.name)
    if m is None:
        raise TraceError(f"{path}: a Flight Recorder dump does not record its rank, and the file name does not end "
                         "in one (name dumps <prefix><rank>, as TORCH_NCCL_DEBUG_INFO_TEMP_FILE does)")
    return int(m.group(1))


def _groups(dump: dict[str, Any], path: Path) -> dict[str, list[int]]:
    out = {}
    for key, cfg in (dump.get("pg_config") or {}).items():
        cfg = cfg if isinstance(cfg, dict) else {}
        ranks = parse_int_list(cfg.get("ranks"))
        if ranks is None:
            raise TraceError(f"{path}: pg_config[{key!r}].ranks is not a list of ranks ({cfg.get('ranks')!r})")
        out[str(cfg.get("name", key))] = sorted(ranks)
    return out


def _numel(sizes: Any) -> int:
    total = 0
    for dims in sizes if isinstance(sizes, list | tuple) else []:
        if isinstance(dims, list | tuple):
            total += math.prod(int(d) for d in dims)
    return total


def read_flight_recorder(paths: list[Path], *, strict: bool = False, progress: Progress = None
                         ) -> tuple[pd.DataFrame, IngestReport]:
    """Read Flight Recorder dumps (one per rank, pickle or JSON) into one §3 frame.

    Parameters
    ----------
    paths : list of Path
        ``nccl_trace_rank_<r>`` files (the rank is the name's trailing number).
    strict : bool
        Raise on the first skipped entry instead of counting it.
    progress : callable, optional
        Called with each file's size in bytes once it is read.

    Returns
    -------
    (pandas.DataFrame, IngestReport)

    Raises
    ------
    TraceError
        An unreadable dump, a pickle naming any class, a rank missing from the name, two files of one rank.
    """
    report = IngestReport()
    sink = RowSink()
    ignored = Ignored()
    comms: dict[str, list[int]] = {}
    seen_ranks: dict[int, Path] = {}
    timed = untimed = 0
    dumps = []
    for path in paths:
        rank = _rank_of(path)
        if rank in seen_ranks:
            raise TraceError(f"{path}: rank {rank} again (also {seen_ranks[rank].name}); give one dump per rank")
        seen_ranks[rank] = path
        dump = load_dump(path)
        dumps.append((path, rank, dump, _groups(dump, path)))
    # A group name should be one group everywhere; where dumps disagree on its ranks, each set of ranks is
    # its own communicator, named by its first rank.
    versions: dict[str, set[tuple[int, ...]]] = {}
    for *_, groups in dumps:
        for name, members in groups.items():
            versions.setdefault(name, set()).add(tuple(members))
    for path, rank, dump, groups in dumps:
        report.files.append(str(path))
        entries = dump.get("entries") or []
        for k, e in enumerate(entries if isinstance(entries, list) else []):
            report.lines_read += 1
            where = f"{path}:entry {k}"
            if not isinstance(e, dict):
                report.skip("entry that is not a record", where)
                continue
            name = str(e.get("profiling_name", "")).removeprefix("nccl:").strip()
            p2p = _P2P_NAME.match(name)
            kind = p2p.group(1) if p2p else name
            op = torch_op(kind)
            if op is None:
                ignored.add(kind or "?", where)
                continue
            pg = e.get("process_group")
            pg_name = str(pg[0]) if isinstance(pg, list | tuple) and pg else str(e.get("pg_id", ""))
            members = groups.get(pg_name)
            if members is None or rank not in members:
                report.skip("entry of a process group pg_config does not list with this rank", where)
                continue
            nranks = len(members)
            dtypes = e.get("input_dtypes") or e.get("output_dtypes") or []
            dtype = torch_dtype(str(dtypes[0])) if dtypes else None
            if dtype is None:
                report.skip(f"entry with an unknown dtype ({dtypes[:1]})", where)
                continue
            count = torch_count(op, _numel(e.get("input_sizes")), _numel(e.get("output_sizes")), nranks)
            peer = -1
            root = 0 if op in ROOTED_OPS else -1
            if op in P2P_OPS:
                if not p2p:
                    report.skip(f"{op} entry without 'src->dst' in its name", where)
                    continue
                peer_crank = int(p2p.group(4))  # "send me->peer", "recv me<-peer" (comm ranks)
                if not 0 <= peer_crank < nranks:
                    report.skip(f"{op} peer outside its group", where)
                    continue
                root, peer = peer_crank, members[peer_crank]
            duration = e.get("duration_ms")
            timed += duration is not None
            untimed += duration is None
            created = e.get("time_created_ns")
            seq_id = e.get("collective_seq_id")  # 1-based per group: aligns ranks whose ring buffers wrapped
            comm = f"pg:{pg_name}" if len(versions[pg_name]) == 1 else f"pg:{pg_name}@{members[0]}"
            comms[comm] = members
            sink.add(rank=rank, comm=comm, op=op, count=count, dtype=dtype, nranks=nranks, root=root,
                     t_us=float(created) / 1e3 if isinstance(created, int | float) else math.nan,
                     duration_s=float(duration) / 1e3 if isinstance(duration, int | float) else math.nan,
                     context=f"pg_desc={pg[1]}" if isinstance(pg, list | tuple) and len(pg) > 1 else "",
                     peer=peer, order=int(e.get("record_id", k)),
                     seq=int(seq_id) - 1 if op not in P2P_OPS and isinstance(seq_id, int) and seq_id > 0 else -1)
        if progress is not None:
            progress(path.stat().st_size)
    ignored.to_notes(report)
    report.notes.append("Flight Recorder: rank from the file name; roots not recorded (0 assumed); only the last "
                        "TORCH_NCCL_TRACE_BUFFER_SIZE ops of each rank are in a dump")
    if untimed:
        report.notes.append(f"Flight Recorder: {untimed} of {timed + untimed} op(s) without duration_ms "
                            "(set TORCH_NCCL_ENABLE_TIMING=1 to record them)")
    report.raise_if_strict(strict)
    world = max([r for m in comms.values() for r in m] + list(seen_ranks), default=-1) + 1
    return finish_frame(sink, comms=comms, world_size=world, source="flight-recorder", report=report,
                        gpus_per_node=None), report
