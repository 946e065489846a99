"""Helpers the JSON readers share: JSON value coercion, the row sink and frame finishing, PyTorch names and
counts, and comm-rank -> global-rank mapping for NCCL's own outputs. Each reader only maps its records."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, METADATA_KEY, P2P_OPS, TraceError, new_metadata, validate

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["Progress", "Ignored", "RankMap", "RowSink", "as_int", "finish_frame", "inputs_text", "parse_int_list",
           "split_bytes_of", "torch_count", "torch_dtype", "torch_op"]

#: A progress callback: called with the fraction of the input read so far (None: no progress).
Progress = Callable[[float], Any] | None


def as_int(value: Any) -> int | None:
    """An int from a JSON value (int, float without fraction, or numeric string); None otherwise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def parse_int_list(value: Any) -> list[int] | None:
    """A list of ints from a JSON list or its string form ``"[0, 1, 2]"``; None when unreadable."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, list):
        return None
    out = [as_int(v) for v in value]
    return None if any(v is None for v in out) else out  # type: ignore[return-value]


@dataclass
class Ignored:
    """Records a reader set aside because they carry no collective data (``wait``, ``barrier``,
    ``init``): not skipped data, so ``--strict`` accepts them, but counted in the report's notes."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, what: str, where: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        self.first.setdefault(what, where)

    def to_notes(self, report: IngestReport) -> None:
        """Append one note per kind: ``ignored 6 non-data record(s) 'wait' (first at FILE:RECORD)``."""
        for what, n in self.counts.items():
            report.notes.append(f"ignored {n} non-data record(s) '{what}' (first at {self.first[what]})")


@dataclass
class RowSink:
    """Collects one reader's rows before they become a frame.

    Each row is a dict with the §3 columns except ``seq``, ``bytes`` and ``t_start_s``, plus ``t_us``
    (absolute issue time in microseconds on the trace's clock, NaN when unknown) and, for Send/Recv,
    ``peer`` (the peer's global rank, which keys the per-peer ``seq``). :func:`finish_frame` turns them
    into the schema.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        *,
        rank: int,
        comm: str,
        op: str,
        count: int,
        dtype: str,
        nranks: int,
        root: int = -1,
        t_us: float = math.nan,
        duration_s: float = math.nan,
        host: str = "",
        device: int = -1,
        context: str = "",
        algo: str = "",
        proto: str = "",
        split_bytes: tuple[int, ...] = (),
        peer: int = -1,
        order: int = 0,
        seq: int = -1,
    ) -> None:
        """Add one op of one rank (``order`` breaks ties between rows of a rank with equal times; ``seq``, when
        the format records it, is the collective's 0-based number on its communicator, the same on every
        member even when a rank's record starts later: it is used when every collective row of the comm has one).
        """
        self.rows.append(
            dict(rank=rank, comm=comm, op=op, count=count, dtype=dtype, root=root, nranks=nranks, t_us=t_us,
                 duration_s=duration_s, host=host, device=device, context=context, algo=algo, proto=proto,
                 split_bytes=tuple(split_bytes), peer=peer, order=order, seq_hint=seq)
        )


def finish_frame(
    sink: RowSink,
    *,
    comms: Mapping[str, list[int]],
    world_size: int | None,
    source: str,
    report: IngestReport,
    t0_us: float | None = None,
    gpus_per_node: int | None = None,
    **extra_meta: Any,
) -> pd.DataFrame:
    """Turn collected rows into a validated §3 frame with metadata.

    ``seq`` follows SPEC §3: rows of one rank are put in issue order (time, then ``order``); collectives
    are numbered per (comm, rank), Send/Recv per (comm, rank, op, peer). ``t_start_s`` is measured from
    ``t0_us`` (default: the earliest row time). ``report.records`` is set to the row count.

    Raises
    ------
    TraceError
        When the rows break the schema (a reader bug or an inconsistent input).
    """
    from traces.schema import empty_trace

    if not sink.rows:
        df = empty_trace()
    else:
        df = pd.DataFrame(sink.rows)
        df["_t"] = df["t_us"].astype("float64")
        df = df.sort_values(["rank", "_t", "order"], kind="stable", na_position="last").reset_index(drop=True)
        is_p2p = df["op"].isin(P2P_OPS).to_numpy()
        key_peer = np.where(is_p2p, df["peer"].to_numpy(), -1)
        key_op = np.where(is_p2p, df["op"].to_numpy(dtype=object), "")
        df["seq"] = df.assign(_peer=key_peer, _op=key_op).groupby(
            ["comm", "rank", "_op", "_peer"], sort=False).cumcount()
        hint = df["seq_hint"].to_numpy()
        coll = ~is_p2p
        hinted = pd.Series(hint[coll] >= 0).groupby(df["comm"].to_numpy()[coll]).all()
        use = coll & df["comm"].map(hinted.to_dict()).eq(True).to_numpy()
        if use.any() and not df[use].duplicated(["comm", "rank", "seq_hint"]).any():
            df.loc[use, "seq"] = hint[use]
        _check_counts(df["count"], sink, report)
        df["bytes"] = df["count"].astype("int64") * df["dtype"].map(DTYPE_BYTES).astype("int64")
        times = df["_t"].to_numpy()
        if t0_us is None:
            finite = times[np.isfinite(times)]
            t0_us = float(finite.min()) if finite.size else 0.0
        df["t_start_s"] = (times - t0_us) / 1e6
        df = df.drop(columns=["_t", "t_us", "peer", "order", "seq_hint"])
    ranks = [int(r) for r in df["rank"]] if len(df) else []
    members = [r for m in comms.values() for r in m]
    world = world_size if world_size is not None else (max(ranks + members) + 1 if ranks or members else 0)
    per_node = gpus_per_node
    if per_node is None and len(df) and (df["host"] != "").all():
        per_node = int(df.groupby("host")["rank"].nunique().max())  # ranks seen per host
    if per_node is None:
        per_node = max(1, min(8, world))
    report.records = len(df)
    meta = new_metadata(world, comms, source, gpus_per_node=per_node, **extra_meta)
    # Validate with only what the checks need: pandas deep-copies attrs on every operation, and a
    # large ``comms`` table made that copying the slowest part of an ingest.
    df.attrs = {METADATA_KEY: {"world_size": world}}
    try:
        out = validate(df, collectives=False)  # checked in full by write_trace / read_trace
    except TraceError as exc:  # the row numbers are the frame's: name the input files too
        raise TraceError(f"{inputs_text(report)}: {exc}") from None
    out.attrs = {METADATA_KEY: meta}
    return out


def inputs_text(report: IngestReport) -> str:
    """The files a reader read, for an error message: the file, or the first few of them.

    Parameters
    ----------
    report : IngestReport
        The report whose ``files`` were read.

    Returns
    -------
    str
        ``"a.log"``, ``"a.log, b.log"`` or ``"a.log, b.log and 3 more file(s)"`` (``"ingest"`` when none).
    """
    files = report.files
    if len(files) <= 2:
        return ", ".join(files) or "ingest"
    return f"{files[0]}, {files[1]} and {len(files) - 2} more file(s)"


def _check_counts(count: pd.Series, sink: RowSink, report: IngestReport) -> None:
    """Refuse an element count that is not an integer in ``0..2**53`` before it is cast to int64 (a count of
    10**30 in a JSON record would overflow there, and a wrapped one would be wrong data)."""
    if count.dtype.kind in "iu" and (not len(count) or (count.min() >= 0 and count.max() <= 1 << 53)):
        return
    for row in sink.rows:
        value = row["count"]
        if not (isinstance(value, int | np.integer) and 0 <= value <= 1 << 53):
            raise TraceError(f"{inputs_text(report)}: rank {row['rank']} {row['op']} on {row['comm']}: element "
                             f"count {str(value)[:40]} is outside 0..2**53")


# --------------------------------------------------------------------------------------------------
# PyTorch collective names, shared by the Kineto, Execution Trace and PARAM readers.

#: normalised torch collective name prefix -> schema op (longest prefixes first).
_TORCH_PREFIXES: tuple[tuple[str, str], ...] = (
    ("allreduce", "AllReduce"),
    ("allgather", "AllGather"),
    ("reducescatter", "ReduceScatter"),
    ("alltoall", "AllToAll"),
    ("broadcast", "Broadcast"),
    ("reduce", "Reduce"),
    ("gather", "Gather"),
    ("scatter", "Scatter"),
    ("send", "Send"),
    ("isend", "Send"),
    ("recv", "Recv"),
    ("irecv", "Recv"),
)


def torch_op(name: str) -> str | None:
    """Map a PyTorch / PARAM collective name to a schema op; None for non-data calls.

    ``all_reduce``, ``allreduce``, ``allreduce_coalesced`` -> AllReduce; ``_allgather_base``,
    ``all_gather_into_tensor`` -> AllGather; ``reduce_scatter_tensor`` -> ReduceScatter; ``all_to_allv``,
    ``alltoall_base`` -> AllToAll; ``send``/``recv`` (and ``recvanysource``) -> Send/Recv. ``barrier``,
    ``wait``, ``init``, ``batch_isend_irecv`` and unknown names give None.

    Examples
    --------
    >>> torch_op("_allgather_base"), torch_op("all_to_allv"), torch_op("barrier")
    ('AllGather', 'AllToAll', None)
    """
    key = name.strip().lower().lstrip("_").replace("_", "").removeprefix("nccl:")
    key = key.lstrip("_").replace("_", "")
    if key.startswith("batch") or key in ("barrier", "wait", "init", "coalesced"):
        return None
    for prefix, op in _TORCH_PREFIXES:
        if key.startswith(prefix):
            return op
    return None


def torch_count(op: str, in_nelems: int, out_nelems: int, nranks: int) -> int:
    """The §3 ``count`` of a torch collective from its input/output element counts.

    AllGather: elements each rank sends (its input); ReduceScatter: elements each rank receives (its
    output); AllToAll: elements sent to each peer (input / nranks); Recv and Scatter: output; every other
    op: input. A zero side falls back on the other side scaled by ``nranks``.
    """
    n = max(int(nranks), 1)
    if op == "AllGather":
        return in_nelems if in_nelems > 0 else out_nelems // n
    if op == "ReduceScatter":
        return out_nelems if out_nelems > 0 else in_nelems // n
    if op == "AllToAll":
        return (in_nelems if in_nelems > 0 else out_nelems) // n
    if op in ("Recv", "Scatter"):
        return out_nelems if out_nelems > 0 else in_nelems
    return in_nelems if in_nelems > 0 else out_nelems


def split_bytes_of(splits: list[int] | None, total_elems: int, nranks: int, elem_bytes: int) -> tuple[int, ...]:
    """Bytes to each peer of an uneven all-to-all, or ``()`` when even or not usable.

    ``splits`` are PyTorch split sizes (rows of dim 0, one per comm rank); a row holds
    ``total_elems / sum(splits)`` elements.
    """
    if not splits or len(splits) != nranks or len(set(splits)) == 1:
        return ()
    rows = sum(splits)
    if rows <= 0 or total_elems % rows:
        return ()
    per_row = total_elems // rows
    return tuple(int(s) * per_row * elem_bytes for s in splits)


#: C10 scalar type names (Kineto ``dtype`` args, ET tensor types) not covered by ``dtype_name``.
_TORCH_DTYPES: dict[str, str] = {
    "signed char": "int8", "unsigned char": "uint8", "long int": "int64", "float8_e4m3fnuz": "fp8_e4m3",
    "float8_e5m2fnuz": "fp8_e5m2", "c10::half": "fp16", "c10::bfloat16": "bf16", "c10::float8_e4m3fn": "fp8_e4m3",
    "c10::float8_e5m2": "fp8_e5m2",
}


def torch_dtype(name: str) -> str | None:
    """Schema dtype of a torch type name (``Float``, ``BFloat16``, ``Tensor(long int)``, ``signed char``);
    None for types the schema lacks (int16, complex, ...)."""
    from traces.schema import dtype_name

    key = name.strip()
    if key.startswith("Tensor(") and key.endswith(")"):
        key = key[7:-1]
    low = key.lower()
    if low in _TORCH_DTYPES:
        return _TORCH_DTYPES[low]
    try:
        return dtype_name(low.removeprefix("c10::"))
    except TraceError:
        return None


# --------------------------------------------------------------------------------------------------
# Comm ranks -> global ranks, for NCCL's own outputs (Inspector, profiler) that only know comm ranks.


@dataclass
class RankMap:
    """Global ranks of processes that only report their rank inside each communicator.

    The largest communicator is taken as the world: a process's global rank is its rank there. A
    communicator's members are then the global ranks of the processes holding each of its comm ranks.
    Built with :meth:`build` from ``(process, comm, comm_rank)`` sightings and the comm sizes.
    """

    world_comm: str
    world_size: int
    process_rank: dict[Any, int]
    members: dict[str, list[int]]
    unknown: set[str]

    @classmethod
    def build(cls, seen: Iterable[tuple[Any, str, int]], sizes: Mapping[str, int]) -> RankMap:
        """Map every (process, comm, comm_rank) sighting; ``sizes`` gives each comm's size."""
        seen = set(seen)
        procs: dict[str, set[Any]] = {}
        for proc, comm, _ in seen:
            procs.setdefault(comm, set()).add(proc)
        # Largest comm; among equals the one seen by most processes (then by name, for determinism).
        world_comm = max(sizes, key=lambda c: (sizes[c], len(procs.get(c, ())), c)) if sizes else ""
        world_size = sizes.get(world_comm, 0)
        in_world: dict[Any, set[int]] = {}
        for proc, comm, crank in seen:
            if comm == world_comm:
                in_world.setdefault(proc, set()).add(crank)
        process_rank = {p: next(iter(r)) for p, r in in_world.items() if len(r) == 1}
        members: dict[str, list[int]] = {world_comm: list(range(world_size))} if world_comm else {}
        unknown: set[str] = set()
        holders: dict[str, dict[int, set[int]]] = {}
        for proc, comm, crank in seen:
            if comm != world_comm and proc in process_rank:
                holders.setdefault(comm, {}).setdefault(crank, set()).add(process_rank[proc])
        for comm, size in sizes.items():
            if comm == world_comm:
                continue
            slots = holders.get(comm, {})
            if all(len(slots.get(i, ())) == 1 for i in range(size)):
                members[comm] = [next(iter(slots[i])) for i in range(size)]
            else:
                unknown.add(comm)
        return cls(world_comm, world_size, process_rank, members, unknown)

    def global_rank(self, proc: Any, comm: str, comm_rank: int) -> int | None:
        """Global rank of a sighting, or None when it cannot be told."""
        if comm == self.world_comm:
            return comm_rank
        return self.process_rank.get(proc)
