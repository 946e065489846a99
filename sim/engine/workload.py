"""The workload of a replay: rank programs over op instances, and building it from a trace.

:func:`build_ops` groups the rows of a §3 trace into op instances (one per ``(comm, seq)`` collective,
one per matched Send/Recv pair); :func:`build_workload` turns each rank's rows into its program of steps
over those ops (:class:`Workload`, what :class:`sim.engine.engine.Engine` runs).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sim.errors import SimError

__all__ = ["OpTable", "SplitTable", "Workload", "build_ops", "build_workload", "ideal_gaps"]


@dataclass(frozen=True)
class Workload:
    """Rank programs over op instances (built from a trace by :mod:`sim.replay`).

    Steps are stored program by program: program ``p`` owns steps ``prog_ptr[p]:prog_ptr[p + 1]``.

    Attributes
    ----------
    n_ops : int
        Number of op instances.
    op_key : sequence of hashable or None
        Identity of each op's traffic (same key -> same transfers and routes); ``None`` never memoises.
    prog_ptr : ndarray of int64
        Program -> step range.
    prog_delay_s : ndarray of float64
        Delay added to every step of the program (stragglers), seconds.
    step_op_ptr, step_op_idx : ndarray of int64
        CSR: the op instances of each step.
    step_t_start_s : ndarray of float64
        Recorded issue time of each step (NaN when unknown).
    step_gap_s : ndarray of float64
        Recorded compute gap before each step (``timing="trace"``).
    op_class : sequence of hashable or None, optional
        Traffic class of each op: ops of one class make the same transfer plan, and the same routes
        unless their communicators' ECMP hashes differ (the op key without the communicator's name: its
        members and ring order instead). A record of one key may replay an op of another key of its class
        when their prepared ops are equal array for array (:mod:`sim.engine.memo`). ``None``: the op keys.
    """

    n_ops: int
    op_key: Sequence[Hashable | None]
    prog_ptr: np.ndarray
    prog_delay_s: np.ndarray
    step_op_ptr: np.ndarray
    step_op_idx: np.ndarray
    step_t_start_s: np.ndarray
    step_gap_s: np.ndarray
    op_class: Sequence[Hashable | None] | None = None

    @property
    def n_steps(self) -> int:
        return int(self.prog_ptr[-1])


class SplitTable(Sequence):
    """The per-peer byte matrix of each op (uneven AllToAll), built when asked for, never all at once.

    ``table[op]`` is ``None`` (no splits: every rank sends ``rank_bytes`` to every peer) or an
    ``n x n`` int64 array, row ``i`` what comm rank ``i`` sends to each peer. The table keeps only
    references to the trace rows' own ``split_bytes`` values (tuples, lists or int64 arrays, not copied)
    and builds an op's matrix on each access: dense matrices of every AllToAll of a 1,024-GPU decode step
    would hold 116 x 8 MB next to the trace that already holds the same values.

    Examples
    --------
    >>> t = SplitTable(); t.append(None); t.add(2, 5, [(1, (3, 4))])
    >>> len(t), t[0], t[1].tolist()
    (2, None, [[5, 5], [3, 4]])
    """

    def __init__(self) -> None:
        self._specs: list[tuple[int, int, list] | None] = []

    def append(self, split: np.ndarray | None) -> None:
        """An op with the given matrix (``None``: no splits)."""
        if split is None:
            self._specs.append(None)
        else:
            split = np.asarray(split, dtype=np.int64)
            self._specs.append((len(split), 0, list(enumerate(split))))

    def add(self, n_ranks: int, fill_bytes: int, rows: list) -> None:
        """An op of ``n_ranks`` ranks whose comm rank ``i`` sends ``v`` per peer for each ``(i, v)`` of
        ``rows``, and ``fill_bytes`` to every peer for the ranks not in ``rows``."""
        self._specs.append((int(n_ranks), int(fill_bytes), rows))

    def __len__(self) -> int:
        return len(self._specs)

    def __getitem__(self, op):
        if isinstance(op, slice):
            return [self[i] for i in range(*op.indices(len(self)))]
        spec = self._specs[op]
        if spec is None:
            return None
        n, fill, rows = spec
        split = np.full((n, n), fill, dtype=np.int64)
        for i, v in rows:
            split[i] = np.asarray(v, dtype=np.int64)
        return split


@dataclass(frozen=True)
class OpTable:
    """The op instances of a trace, one row per op (``frame``), their per-peer splits (``splits``:
    a :class:`SplitTable` or a list of matrices / ``None``) and what was skipped (``skipped``)."""

    frame: pd.DataFrame
    splits: Sequence
    skipped: dict[str, int]


def _comm_members(df: pd.DataFrame, comms: Mapping[str, list[int]]) -> dict[str, np.ndarray]:
    out = {str(c): np.asarray(r, dtype=np.int64) for c, r in comms.items()}
    for comm, ranks in df.groupby("comm", sort=False)["rank"]:
        if comm not in out:  # no metadata: members in rank order
            out[comm] = np.unique(ranks.to_numpy()).astype(np.int64)
    return out


def build_ops(df: pd.DataFrame, comms: Mapping[str, list[int]]) -> tuple[OpTable, np.ndarray]:
    """Group trace rows into op instances.

    Returns
    -------
    OpTable
        One row per op: ``kind`` (``coll`` / ``p2p``), ``comm``, ``seq``, ``op``, ``rank_bytes`` (bytes of
        one rank's row), ``root`` (comm rank), ``nranks``, ``src``/``dst`` (p2p global ranks), ``members``
        (global ranks in comm order).
    row_op : ndarray of int64
        The op of each trace row (-1: skipped).

    Raises
    ------
    SimError
        When the rows of one collective disagree on the op, or a Send/Recv names a communicator the
        metadata does not list.
    """
    members = _comm_members(df, comms)
    n = len(df)
    row_op = np.full(n, -1, dtype=np.int64)
    ops = df["op"].to_numpy()
    is_p2p = np.isin(ops, ["Send", "Recv"])
    rows: list[dict[str, Any]] = []
    splits = SplitTable()
    skipped = {"incomplete_collectives": 0, "unmatched_p2p_rows": 0}

    coll = df[~is_p2p]
    if len(coll):
        grp = coll.groupby(["comm", "seq"], sort=False)
        gid = grp.ngroup().to_numpy()
        size = grp["rank"].transform("size").to_numpy()
        first = coll.groupby(gid, sort=False).head(1)
        n_ops_of = grp["op"].nunique().to_numpy()
        if (n_ops_of > 1).any():
            bad = np.flatnonzero(n_ops_of > 1)[0]
            key = list(grp.groups)[bad]
            raise SimError(f"collective comm={key[0]!r} seq={key[1]}: its rows name different ops")
        comm_size = np.array([len(members[c]) for c in first["comm"]], dtype=np.int64)
        complete = np.asarray(size, dtype=np.int64) == comm_size[gid]
        skipped["incomplete_collectives"] = int(len(np.unique(gid[~complete])))
        new_id = np.full(len(first), -1, dtype=np.int64)
        ok_groups = np.unique(gid[complete])
        new_id[ok_groups] = np.arange(len(ok_groups))
        row_op[np.flatnonzero(~is_p2p)] = new_id[gid]
        is_a2a = first["op"].to_numpy() == "AllToAll"
        split_rows = {}
        if is_a2a.any():
            a2a = coll[(coll["op"] == "AllToAll").to_numpy()]
            has_split = np.fromiter((len(v) > 0 for v in a2a["split_bytes"]), bool, len(a2a))
            if has_split.any():
                sub = a2a[has_split]
                for g, (c, r, v) in zip(gid[(coll["op"] == "AllToAll").to_numpy()][has_split],
                                        zip(sub["comm"], sub["rank"], sub["split_bytes"], strict=True),
                                        strict=True):
                    split_rows.setdefault(int(g), []).append((c, int(r), v))
        f_comm, f_seq, f_op = first["comm"].tolist(), first["seq"].tolist(), first["op"].tolist()
        f_bytes, f_root = first["bytes"].tolist(), first["root"].tolist()
        for g in ok_groups.tolist():
            comm = f_comm[g]
            mem = members[comm]
            rows.append(dict(kind="coll", comm=comm, seq=int(f_seq[g]), op=f_op[g], rank_bytes=int(f_bytes[g]),
                             root=int(f_root[g]), nranks=len(mem), src=-1, dst=-1, members=mem))
            if g in split_rows:  # rows without splits send ``bytes`` to every peer
                pos = {int(r): i for i, r in enumerate(mem)}
                splits.add(len(mem), int(f_bytes[g]), [(pos[r], v) for _, r, v in split_rows[g]])
            else:
                splits.append(None)

    if is_p2p.any():
        p2p = df[is_p2p].copy()
        p2p["row"] = np.flatnonzero(is_p2p)
        missing = sorted(set(p2p["comm"]) - set(members))
        if missing:
            raise SimError(f"Send/Recv on comm {missing[0]!r}: the trace metadata does not list its ranks")
        peer = np.empty(len(p2p), dtype=np.int64)
        for comm, idx in p2p.groupby("comm", sort=False).indices.items():
            mem = members[comm]
            roots = p2p["root"].to_numpy()[idx]
            if (roots >= len(mem)).any():
                raise SimError(f"Send/Recv on comm {comm!r}: root {int(roots.max())} is outside its "
                               f"{len(mem)} ranks")
            peer[idx] = mem[roots]
        p2p["peer"] = peer
        send = p2p[p2p["op"] == "Send"]
        recv = p2p[p2p["op"] == "Recv"]
        s = pd.DataFrame({"comm": send["comm"], "src": send["rank"].astype(np.int64),
                          "dst": send["peer"], "seq": send["seq"], "bytes": send["bytes"],
                          "srow": send["row"]})
        r = pd.DataFrame({"comm": recv["comm"], "src": recv["peer"], "dst": recv["rank"].astype(np.int64),
                          "seq": recv["seq"], "rrow": recv["row"]})
        m = s.merge(r, on=["comm", "src", "dst", "seq"], how="inner", sort=False)
        skipped["unmatched_p2p_rows"] = int(len(p2p) - 2 * len(m))
        base = len(rows)
        ids = base + np.arange(len(m), dtype=np.int64)
        row_op[m["srow"].to_numpy()] = ids
        row_op[m["rrow"].to_numpy()] = ids
        for rec in m.itertuples(index=False):
            rows.append(dict(kind="p2p", comm=rec.comm, seq=int(rec.seq), op="Send",  # the pair, as its Send
                             rank_bytes=int(rec.bytes), root=-1, nranks=2, src=int(rec.src), dst=int(rec.dst),
                             members=np.array([rec.src, rec.dst], dtype=np.int64)))
            splits.append(None)
    frame = pd.DataFrame(rows, columns=["kind", "comm", "seq", "op", "rank_bytes", "root", "nranks", "src",
                                        "dst", "members"])
    return OpTable(frame, splits, skipped), row_op


def build_workload(df: pd.DataFrame, row_op: np.ndarray, n_ops: int, op_key: list, world_size: int,
                   straggler_delay_s: Mapping[int, float] | None = None, op_class: list | None = None) -> Workload:
    """Rank programs (steps in trace order, grouped rows merged) over the op instances.

    Rows with ``row_op == -1`` (skipped) are left out. ``op_class``: :attr:`Workload.op_class`.
    """
    keep = row_op >= 0
    rid = np.flatnonzero(keep)
    rank = df["rank"].to_numpy()[keep].astype(np.int64)
    group = df["group"].to_numpy()[keep].astype(np.int64)
    t0 = df["t_start_s"].to_numpy()[keep].astype(np.float64)
    dur = df["duration_s"].to_numpy()[keep].astype(np.float64)
    ops = row_op[keep]
    key = rid.copy()
    grouped = group >= 0
    if grouped.any():  # a group is one step, placed at its first row
        g = pd.DataFrame({"rank": rank[grouped], "group": group[grouped], "rid": rid[grouped]})
        key[grouped] = g.groupby(["rank", "group"])["rid"].transform("min").to_numpy()
    combo = rank * (int(rid.max()) + 1 if len(rid) else 1) + key
    uniq, step_of_row = np.unique(combo, return_inverse=True)
    n_steps = len(uniq)
    step_rank = np.zeros(n_steps, dtype=np.int64)
    step_rank[step_of_row] = rank
    # step -> ops (unique pairs)
    pairs = np.unique(step_of_row * max(n_ops, 1) + ops)
    ps, po = pairs // max(n_ops, 1), pairs % max(n_ops, 1)
    step_op_ptr = np.zeros(n_steps + 1, dtype=np.int64)
    np.cumsum(np.bincount(ps, minlength=n_steps), out=step_op_ptr[1:])
    # recorded times per step
    t_start = np.full(n_steps, np.inf)
    np.minimum.at(t_start, step_of_row, np.where(np.isnan(t0), np.inf, t0))
    t_end = np.full(n_steps, -np.inf)
    end_row = t0 + dur
    np.maximum.at(t_end, step_of_row, np.where(np.isnan(end_row), -np.inf, end_row))
    t_start[~np.isfinite(t_start)] = np.nan
    prog_ptr = np.zeros(world_size + 1, dtype=np.int64)
    np.cumsum(np.bincount(step_rank, minlength=world_size), out=prog_ptr[1:])
    # forward-fill unknown issue times within a rank; gaps from the recorded end of the previous step
    ts = pd.Series(t_start).groupby(step_rank).ffill().fillna(0.0).to_numpy()
    prev_end = np.r_[np.nan, t_end[:-1]]
    first_of_prog = np.zeros(n_steps, dtype=bool)
    first_of_prog[prog_ptr[:-1][np.diff(prog_ptr) > 0]] = True
    gap = np.where(np.isfinite(prev_end) & ~first_of_prog, ts - prev_end, 0.0)
    gap = np.clip(np.nan_to_num(gap, nan=0.0), 0.0, None)
    delay = np.zeros(world_size)
    for r, d in (straggler_delay_s or {}).items():
        if not 0 <= int(r) < world_size:
            raise SimError(f"straggler rank {r} is outside the trace's world size {world_size}")
        delay[int(r)] += float(d)
    return Workload(n_ops=n_ops, op_key=op_key, prog_ptr=prog_ptr, prog_delay_s=delay,
                    step_op_ptr=step_op_ptr, step_op_idx=po.astype(np.int64), step_t_start_s=ts,
                    step_gap_s=gap, op_class=op_class)


def ideal_gaps(workload: Workload, op_end_s: np.ndarray) -> np.ndarray:
    """Compute gap of each step: its recorded issue time minus the end of the step before (``op_end_s``).

    Used for ``timing="gaps"`` on a trace without recorded durations: the ends come from the ideal
    replay, so that replay keeps the trace's timeline and a slower fabric pushes what follows back.

    Examples
    --------
    >>> w = Workload(n_ops=2, op_key=[None, None], prog_ptr=np.array([0, 2]), prog_delay_s=np.zeros(1),
    ...              step_op_ptr=np.array([0, 1, 2]), step_op_idx=np.array([0, 1]),
    ...              step_t_start_s=np.array([0.0, 5.0]), step_gap_s=np.zeros(2))
    >>> ideal_gaps(w, np.array([2.0, 6.0])).tolist()
    [0.0, 3.0]
    """
    n = workload.n_steps
    if n == 0:
        return np.zeros(0)
    done = np.maximum.reduceat(op_end_s[workload.step_op_idx], workload.step_op_ptr[:-1])
    prev = np.r_[np.nan, done[:-1]]
    prev[workload.prog_ptr[:-1][np.diff(workload.prog_ptr) > 0]] = np.nan  # first step of a program
    gap = workload.step_t_start_s - prev
    return np.clip(np.nan_to_num(gap, nan=0.0), 0.0, None)
