"""Accumulate the ops of every rank's program and turn them into a §3 trace with issue times.

Generators call :meth:`TraceBuilder.compute` (time a rank spends computing before its next op),
:meth:`TraceBuilder.collective` (one row per member) and :meth:`TraceBuilder.p2p` (a rank's Sends and
Recvs, grouped when there are several). :meth:`TraceBuilder.frame` then replays the programs under the
semantics the simulator uses — each rank issues its ops in order; a collective starts when all members
have issued it; a Send/Recv pair when both sides have; a group progresses as one — assigning each op its
issue time ``t_start_s``. A program that cannot finish under those semantics (a deadlock) raises: a
generator bug, never a silent trace.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traces.schema import DTYPE_BYTES, TraceError, new_metadata, normalize
from traces.synth.compute import comm_estimate_s

#: Most rows a synthesized trace may have (~2 GB of Python lists while building; docs/limits.md).
MAX_SYNTH_ROWS = 5_000_000


class TraceBuilder:
    """Per-rank programs of collective and point-to-point ops.

    Parameters
    ----------
    world_size : int
        Global ranks; rank ``r`` runs on GPU slot ``r``, server ``r // gpus_per_node``.
    gpus_per_node : int
        GPUs per server.
    nvlink_gbps, net_gbps : float
        Bandwidths used only to estimate how long an op keeps its ranks waiting (issue-time model).
    """

    def __init__(self, world_size: int, gpus_per_node: int, nvlink_gbps: float = 3600.0,
                 net_gbps: float = 400.0) -> None:
        self.world_size = int(world_size)
        self.gpus_per_node = int(gpus_per_node)
        self.nvlink_gbps = nvlink_gbps
        self.net_gbps = net_gbps
        self.comms: dict[str, tuple[int, ...]] = {}
        self._comm_rank: dict[str, dict[int, int]] = {}
        self._seq: defaultdict[tuple[str, int], int] = defaultdict(int)
        self._p2p_seq: defaultdict[tuple[str, str, int, int], int] = defaultdict(int)
        self._gap_s = np.zeros(self.world_size)
        self._not_before_s = np.zeros(self.world_size)
        self._next_group = 0
        self._cols: dict[str, list] = {k: [] for k in (
            "rank", "comm", "seq", "op", "count", "dtype", "root", "nranks", "context", "group",
            "split_bytes", "gap_s", "not_before_s")}

    # -- programs ---------------------------------------------------------------------------------------
    def add_comm(self, name: str, ranks: Sequence[int]) -> str:
        """Register communicator ``name`` over global ``ranks`` (in comm-rank order) and return its name."""
        ranks = tuple(int(r) for r in ranks)
        if name in self.comms and self.comms[name] != ranks:
            raise TraceError(f"communicator {name!r} registered twice with different ranks")
        if len(set(ranks)) != len(ranks) or min(ranks) < 0 or max(ranks) >= self.world_size:
            raise TraceError(f"communicator {name!r}: ranks {ranks} are not distinct ranks below {self.world_size}")
        self.comms[name] = ranks
        self._comm_rank[name] = {r: i for i, r in enumerate(ranks)}
        return name

    def compute(self, ranks: Sequence[int] | np.ndarray, seconds) -> None:
        """Add ``seconds`` (scalar or one per rank) of computation before each rank's next op."""
        np.add.at(self._gap_s, np.asarray(ranks, dtype=np.int64), seconds)

    def wait_until(self, ranks: Sequence[int] | np.ndarray, t_s: float) -> None:
        """The ranks' next op is not issued before ``t_s`` (a request arrival, for example)."""
        idx = np.asarray(ranks, dtype=np.int64)
        self._not_before_s[idx] = np.maximum(self._not_before_s[idx], t_s)

    def _take_gap(self, rank: int) -> tuple[float, float]:
        gap, nb = float(self._gap_s[rank]), float(self._not_before_s[rank])
        self._gap_s[rank] = 0.0
        self._not_before_s[rank] = 0.0
        return gap, nb

    def _append(self, rank: int, comm: str, seq: int, op: str, count: int, dtype: str, root: int,
                nranks: int, context: str, group: int, split: tuple[int, ...], gap: float, nb: float) -> None:
        c = self._cols
        if len(c["rank"]) >= MAX_SYNTH_ROWS:  # bounded memory whatever option made the run long
            raise TraceError(f"synthesis would exceed {MAX_SYNTH_ROWS:,} rows (docs/limits.md); use fewer requests, "
                             "output tokens, steps or layers")
        c["rank"].append(rank)
        c["comm"].append(comm)
        c["seq"].append(seq)
        c["op"].append(op)
        c["count"].append(int(count))
        c["dtype"].append(dtype)
        c["root"].append(root)
        c["nranks"].append(nranks)
        c["context"].append(context)
        c["group"].append(group)
        c["split_bytes"].append(split)
        c["gap_s"].append(gap)
        c["not_before_s"].append(nb)

    def collective(self, comm: str, op: str, count, dtype: str, context: str, root: int = -1,
                   split_bytes: np.ndarray | None = None) -> None:
        """Every member of ``comm`` issues ``op`` now (one row each, in comm-rank order).

        Parameters
        ----------
        count : int or sequence of int
            Elements as NCCL logs them; one value, or one per comm rank.
        split_bytes : numpy.ndarray, optional
            ``(n, n)`` bytes from comm rank i to comm rank j, for an uneven AllToAll; ``count`` is then
            derived (total elements sent // n).
        """
        ranks = self.comms[comm]
        n = len(ranks)
        counts = np.broadcast_to(np.asarray(count, dtype=np.int64), (n,))
        size = DTYPE_BYTES[dtype]
        for i, r in enumerate(ranks):
            gap, nb = self._take_gap(r)
            split: tuple[int, ...] = ()
            cnt = int(counts[i])
            if split_bytes is not None:
                row = split_bytes[i]
                split = tuple(row.tolist())
                cnt = int(row.sum()) // size // n
            seq = self._seq[(comm, r)]
            self._seq[(comm, r)] = seq + 1
            self._append(r, comm, seq, op, cnt, dtype, root, n, context, -1, split, gap, nb)

    def p2p(self, rank: int, comm: str, ops: Sequence[tuple[str, int, int, str]], context: str) -> None:
        """Rank ``rank`` issues Sends/Recvs ``ops`` = ``[(op, peer_global_rank, count, dtype), ...]``.

        Several ops are one ``ncclGroupStart/End`` group (they progress together, as
        ``batch_isend_irecv`` issues them); an empty list does nothing.
        """
        if not ops:
            return
        group = -1
        if len(ops) > 1:
            group = self._next_group
            self._next_group += 1
        to_comm = self._comm_rank[comm]
        gap, nb = self._take_gap(rank)
        for op, peer, count, dtype in ops:
            key = (comm, op, rank, peer)
            seq = self._p2p_seq[key]
            self._p2p_seq[key] = seq + 1
            self._append(rank, comm, seq, op, count, dtype, to_comm[peer], len(self.comms[comm]), context,
                         group, (), gap, nb)
            gap = 0.0

    # -- output -----------------------------------------------------------------------------------------
    def frame(self, source: str, **metadata) -> pd.DataFrame:
        """Return the §3 trace: issue times from the replay, rows sorted by time then rank then issue order.

        Raises
        ------
        TraceError
            When the programs deadlock or a Send has no matching Recv (a generator bug).
        """
        c = self._cols
        n_rows = len(c["rank"])
        rank = np.asarray(c["rank"], dtype=np.int64)
        op = np.asarray(c["op"], dtype=object)
        count = np.asarray(c["count"], dtype=np.int64)
        dtype = np.asarray(c["dtype"], dtype=object)
        nbytes = count * np.asarray([DTYPE_BYTES[d] for d in dtype], dtype=np.int64)
        t_start = self._replay(rank, op, nbytes) if n_rows else np.zeros(0)
        df = pd.DataFrame({
            "rank": rank.astype(np.int32), "comm": c["comm"], "seq": c["seq"], "op": op, "count": count,
            "dtype": dtype, "bytes": nbytes, "root": np.asarray(c["root"], dtype=np.int32),
            "nranks": np.asarray(c["nranks"], dtype=np.int32), "t_start_s": t_start,
            "duration_s": np.full(n_rows, np.nan),
            "host": [f"node{r // self.gpus_per_node}" for r in rank],
            "device": (rank % self.gpus_per_node).astype(np.int32), "context": c["context"],
            "algo": "", "proto": "", "group": np.asarray(c["group"], dtype=np.int64),
            "split_bytes": c["split_bytes"],
        })
        order = np.lexsort((np.arange(n_rows), rank, np.round(t_start, 12)))
        df = df.iloc[order].reset_index(drop=True)
        meta = new_metadata(self.world_size, {k: list(v) for k, v in self.comms.items()}, source,
                            gpus_per_node=self.gpus_per_node, **metadata)
        return normalize(df, meta)

    def _instances(self, rank: np.ndarray, op: np.ndarray) -> np.ndarray:
        """Instance id per row: rows of one collective, or a Send and its Recv, share an id."""
        c = self._cols
        keys = []
        for i in range(len(rank)):
            o = op[i]
            if o == "Send":
                peer = self.comms[c["comm"][i]][c["root"][i]]
                keys.append((c["comm"][i], int(rank[i]), peer, c["seq"][i]))
            elif o == "Recv":
                peer = self.comms[c["comm"][i]][c["root"][i]]
                keys.append((c["comm"][i], peer, int(rank[i]), c["seq"][i]))
            else:
                keys.append((c["comm"][i], -1, -1, c["seq"][i]))
        codes, _ = pd.factorize(pd.Series(keys, dtype=object))
        return np.asarray(codes, dtype=np.int64)

    def _estimates(self, rank: np.ndarray, op: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        c = self._cols
        comm = np.asarray(c["comm"], dtype=object)
        cross = {k: len({r // self.gpus_per_node for r in v}) > 1 for k, v in self.comms.items()}
        crossing = np.asarray([cross[k] for k in comm], dtype=bool)
        nranks = np.asarray(c["nranks"], dtype=np.int64)
        offnode = np.zeros(len(rank))
        for i in np.flatnonzero(op == "AllToAll"):
            split = c["split_bytes"][i]
            me = self._comm_rank[comm[i]][int(rank[i])]
            offnode[i] = sum(split) - split[me] if split else nbytes[i] * (nranks[i] - 1)
        est = np.zeros(len(rank))
        for name in np.unique(op):
            m = op == name
            est[m] = comm_estimate_s(str(name), nbytes[m], nranks[m], offnode[m], crossing[m],
                                     self.nvlink_gbps, self.net_gbps)
        return est

    def _replay(self, rank: np.ndarray, op: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """Issue time of every row under in-order, all-members-present semantics."""
        c = self._cols
        inst = self._instances(rank, op)
        n_inst = int(inst.max()) + 1
        expected = np.zeros(n_inst, dtype=np.int64)
        is_p2p = (op == "Send") | (op == "Recv")
        np.maximum.at(expected, inst, np.where(is_p2p, 2, np.asarray(c["nranks"], dtype=np.int64)))
        members = np.bincount(inst, minlength=n_inst)
        if np.any(members != expected):
            bad = int(np.flatnonzero(members != expected)[0])
            row = int(np.flatnonzero(inst == bad)[0])
            raise TraceError(f"synthesis bug: op {op[row]} on comm {c['comm'][row]} seq {c['seq'][row]} has "
                             f"{members[bad]} of {expected[bad]} participants")
        est = self._estimates(rank, op, nbytes)
        inst_est = np.zeros(n_inst)
        np.maximum.at(inst_est, inst, est)
        # rows of each instance, and each rank's items (a group of consecutive same-group rows, or one row)
        by_inst = np.argsort(inst, kind="stable")
        inst_ptr = np.concatenate([[0], np.cumsum(members)])
        group = np.asarray(c["group"], dtype=np.int64)
        gap = np.asarray(c["gap_s"], dtype=float)
        not_before = np.asarray(c["not_before_s"], dtype=float)
        rows_of_rank = [np.flatnonzero(rank == r) for r in range(self.world_size)]
        items: list[list[np.ndarray]] = []
        for rows in rows_of_rank:
            cuts = [0]
            for j in range(1, len(rows)):
                g = group[rows[j]]
                if g < 0 or g != group[rows[j - 1]]:
                    cuts.append(j)
            cuts.append(len(rows))
            items.append([rows[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)])

        t_start = np.zeros(len(rank))
        t_end = np.zeros(len(rank))
        arrived = np.zeros(n_inst, dtype=np.int64)
        latest = np.zeros(n_inst)
        clock = np.zeros(self.world_size)
        ptr = np.zeros(self.world_size, dtype=np.int64)
        pending = np.zeros(self.world_size, dtype=np.int64)
        stack = [r for r in range(self.world_size) if items[r]]
        while stack:
            r = stack.pop()
            item = items[r][ptr[r]]
            first = item[0]
            t = max(clock[r] + gap[first], not_before[first])
            pending[r] = len(item)
            for row in item:
                t_start[row] = t
                k = inst[row]
                arrived[k] += 1
                latest[k] = max(latest[k], t)
                if arrived[k] == members[k]:
                    end = latest[k] + inst_est[k]
                    for m in by_inst[inst_ptr[k]:inst_ptr[k + 1]]:
                        t_end[m] = end
                        mr = rank[m]
                        pending[mr] -= 1
                        if pending[mr] == 0:
                            done = items[mr][ptr[mr]]
                            clock[mr] = t_end[done].max()
                            ptr[mr] += 1
                            if ptr[mr] < len(items[mr]):
                                stack.append(int(mr))
        stuck = [r for r in range(self.world_size) if ptr[r] < len(items[r])]
        if stuck:
            r = stuck[0]
            row = items[r][ptr[r]][0]
            raise TraceError(f"synthesis bug: deadlock, rank {r} waits in {op[row]} on comm {c['comm'][row]} "
                             f"seq {c['seq'][row]} ({len(stuck)} rank(s) stuck)")
        return t_start


__all__ = ["TraceBuilder"]
