"""The transfers of running ops: dependencies, delays, network flows, completions (a prepared op in, flows out).

:class:`OpRunner` runs prepared ops (:class:`sim.engine.prepared.PreparedOp`) on a clock and a network
process. A transfer starts when its dependencies are done plus its ``delay_s``; each becomes one network
flow per route sub-flow, and the transfers that start in one instant enter the network in one call
(priority ``FLUSH``). A transfer is done when every sub-flow's bytes are sent plus its path latency; an op
ends when its last transfer is done (``on_finish(op)`` at that time). Decisions are numpy operations over
the batch of sub-flows an event carries, not per flow.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.engine.clock import EVENT, FLUSH, Clock
from sim.engine.csr import csr_take
from sim.engine.flowlog import FlowLog
from sim.engine.idmap import LiveIdMap
from sim.engine.netproc import NetworkProcess
from sim.engine.paths import PathTable
from sim.engine.prepared import PreparedOp

__all__ = ["OpRun", "OpRunner"]


@dataclass
class OpRun:
    """The progress of one running op: dependencies and sub-flows left per transfer, transfers left."""

    prep: PreparedOp
    start_s: float
    deps_left: np.ndarray
    subs_left: np.ndarray
    transfers_left: int
    t_last: float = 0.0
    one_sub: bool = False   # every transfer is one sub-flow: a batch of distinct sub-flows ends distinct transfers
    sub_waited: np.ndarray | None = None   # per sub-flow: some transfer waits for its transfer (None: none does)


class OpRunner:
    """Transfers of running ops over a :class:`NetworkProcess` (see the module docstring).

    Parameters
    ----------
    clock : Clock
    netproc : NetworkProcess
        Its ``on_done`` must be this runner's :meth:`network_done`.
    paths : PathTable
        Where the prepared ops' paths are registered (once per prepared op).
    log : FlowLog
    n_ops : int
    on_finish : callable
        ``on_finish(op)``, called at the time op ``op`` ends.
    track : bool
        Keep the events not fired yet in ``future`` (a scratch run hands them over, see
        :mod:`sim.engine.materialise`); such a run also keeps its log rows (no release).

    Log rows of finished network flows are released (:meth:`FlowLog.release`) as the flows finish, except
    for ops marked in ``hold`` (being recorded: the engine releases their rows when the op ends).
    """

    def __init__(self, clock: Clock, netproc: NetworkProcess, paths: PathTable, log: FlowLog, n_ops: int,
                 on_finish: Callable[[int], None], track: bool = False) -> None:
        self.clock = clock
        self.netproc = netproc
        self.paths = paths
        self.log = log
        self.on_finish = on_finish
        self.runs: dict[int, OpRun] = {}
        self.pending: list[tuple[int, np.ndarray]] = []
        self.op_flows = np.zeros(n_ops, dtype=np.int64)
        self.on_flows: Callable[[np.ndarray, np.ndarray], None] | None = None
        # network flow id -> log row of the flows in flight (the log also holds flows of replayed ops, which
        # never enter the network); an entry leaves when its flow ends, so the map never grows with the run
        self.net_row = LiveIdMap()
        self._sub_path: dict[int, np.ndarray] = {}
        self._flush_at: float | None = None
        self.future: dict[int, tuple] | None = {} if track else None
        self._n_future = 0
        self.release_done = not track
        self.hold = np.zeros(n_ops, dtype=bool)
        self.n_hold = 0   # ops marked in ``hold`` (none: a release takes every finished row)

    def set_hold(self, op: int, flag: bool) -> None:
        """Hold (or stop holding) op ``op``'s log rows after its flows finish (a recorded op)."""
        if bool(self.hold[op]) != flag:
            self.hold[op] = flag
            self.n_hold += 1 if flag else -1

    # -- events -------------------------------------------------------------------------------------
    def schedule(self, t: float, kind: str, *args) -> None:
        """An event of this runner at ``t``: ``kind`` is ``"start"`` (transfers start), ``"done"``
        (sub-flows end) or ``"finish"`` (the op ends)."""
        self._at(t, kind, *args)

    def _at(self, t: float, kind: str, *args) -> None:
        handler = {"start": self._start, "done": self._done, "finish": self.on_finish}[kind]
        if self.future is None:
            self.clock.call_at(t, EVENT, handler, *args)
            return
        self._n_future += 1
        key = self._n_future
        self.future[key] = (t, kind, args)
        self.clock.call_at(t, EVENT, self._fire, key, handler, args)

    def _fire(self, key: int, handler, args) -> None:
        del self.future[key]
        handler(*args)

    def finish_at(self, t: float, op: int) -> None:
        """End op ``op`` at ``t`` (an op with no transfer, or one replayed from a record)."""
        self._at(t, "finish", op)

    def adopt_paths(self, other: OpRunner) -> None:
        """Share ``other``'s registry of path ids (same path table)."""
        self._sub_path = other._sub_path

    def sub_path(self, prep: PreparedOp) -> np.ndarray:
        """Path ids of the sub-flows of ``prep`` in the path table (registered on first use)."""
        ids = self._sub_path.get(id(prep))
        if ids is None:
            ids, _ = self.paths.add(prep.sub_link_ptr, prep.sub_link_idx)
            self._sub_path[id(prep)] = ids
            # the entry lives as long as the prepared op (the preparer drops ops no later op needs)
            weakref.finalize(prep, self._sub_path.pop, id(prep), None)
        return ids

    # -- starting transfers ---------------------------------------------------------------------------
    def launch(self, op: int, prep: PreparedOp, t: float) -> None:
        """Start op ``op`` at ``t``: its transfers without dependencies start after their delays."""
        self.sub_path(prep)
        n = prep.n_transfers
        subs_left = np.diff(prep.sub_ptr).astype(np.int64)
        run = OpRun(prep, t, prep.dep_count.copy(), subs_left, n, t, bool((subs_left == 1).all()))
        if len(prep.rev_idx):   # some transfer waits for another: which sub-flows' ends must be events
            waits = prep.rev_ptr[1:] > prep.rev_ptr[:-1]
            run.sub_waited = waits[prep.sub_transfer]
        if n == 0:
            self.finish_at(t, op)
            return
        self.runs[op] = run
        roots = np.flatnonzero(run.deps_left == 0)
        self._schedule(op, roots, t + prep.delay_s[roots], t)

    def _schedule(self, op: int, tids: np.ndarray, times: np.ndarray, now: float) -> None:
        if len(tids) == 0:
            return
        if np.all(times == times[0]):
            if times[0] <= now:
                self.pend(op, tids, now)
            else:
                self._at(float(times[0]), "start", op, tids)
            return
        uniq, inv = np.unique(times, return_inverse=True)
        for k, tk in enumerate(uniq.tolist()):
            sel = tids[inv == k]
            if tk <= now:
                self.pend(op, sel, now)
            else:
                self._at(tk, "start", op, sel)

    def _start(self, op: int, tids: np.ndarray) -> None:
        self.pend(op, tids, self.clock.now)

    def pend(self, op: int, tids: np.ndarray, now: float) -> None:
        """Transfers ``tids`` of op ``op`` start now (with this instant's batch)."""
        self.pending.append((op, tids))
        if self._flush_at != now:
            self._flush_at = now
            self.clock.call_at(now, FLUSH, self.flush)

    def flush(self) -> None:
        """Start every pending transfer now: one network call for the batch."""
        self._flush_at = None
        if not self.pending:
            return
        now = float(self.clock.now)
        pend, self.pending = self.pending, []
        subs = []
        for op, tids in pend:
            prep = self.runs[op].prep
            lo, hi = prep.sub_ptr[tids], prep.sub_ptr[tids + 1]
            if np.all(hi - lo == 1):
                subs.append(lo)
            else:
                subs.append(np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]))
        op_arr = np.concatenate([np.full(len(s), op, dtype=np.int64) for (op, _), s in zip(pend, subs, strict=True)])
        sub_arr = np.concatenate(subs)
        sizes = np.empty(len(sub_arr))
        path = np.empty(len(sub_arr), dtype=np.int64)
        lat = np.empty(len(sub_arr))
        cap = key = None   # rate ceilings (sim.planning.p2p), keyed by transfer: its sub-flows share one
        pos = 0
        for (op, _), s in zip(pend, subs, strict=True):
            prep = self.runs[op].prep
            sizes[pos: pos + len(s)] = prep.sub_bytes[s]
            path[pos: pos + len(s)] = self._sub_path[id(prep)][s]
            lat[pos: pos + len(s)] = prep.sub_latency_s[s]
            if prep.sub_cap_bytes_per_s is not None:
                if cap is None:
                    cap, key = np.full(len(sub_arr), np.inf), np.zeros(len(sub_arr), dtype=np.int64)
                cap[pos: pos + len(s)] = prep.sub_cap_bytes_per_s[s]
                key[pos: pos + len(s)] = (op << 32) + prep.sub_transfer[s]
            pos += len(s)
        empty = sizes <= 0
        if empty.any():  # nothing to send: done after the path latency
            self._completions(op_arr[empty], sub_arr[empty], now + lat[empty], now)
            keep = ~empty
            op_arr, sub_arr, sizes, path, lat = op_arr[keep], sub_arr[keep], sizes[keep], path[keep], lat[keep]
            if cap is not None:
                cap, key = cap[keep], key[keep]
            if len(op_arr) == 0:
                return
        link_ptr, link_idx = csr_take(self.paths.ptr, self.paths.links, path)
        ids = self.netproc.add(now, link_ptr, link_idx, sizes, group=op_arr, rate_cap=cap, cap_key=key)
        rows = self.log.append(len(ids))
        self.map_flows(ids, rows)
        log = self.log
        log.op.a[rows] = op_arr
        log.lat.a[rows] = lat
        log.sub.a[rows] = sub_arr
        log.path.a[rows] = path
        log.bytes.a[rows] = sizes
        log.start.a[rows] = now
        np.add.at(self.op_flows, op_arr, 1)
        if self.on_flows is not None:
            self.on_flows(op_arr, rows)

    def map_flows(self, net_ids: np.ndarray, rows: np.ndarray) -> None:
        """Network flows ``net_ids`` are log rows ``rows``."""
        self.net_row.put(net_ids, rows)

    # -- ending transfers -----------------------------------------------------------------------------
    def network_done(self, done: np.ndarray, sent: np.ndarray, t: float) -> None:
        """Network flows ``done`` sent their last byte at ``sent`` (found at ``t``)."""
        log = self.log
        rows = self.net_row.pop(done)
        log.sent.a[rows] = sent
        end = sent + log.lat.a[rows]
        log.end.a[rows] = end
        ops, subs = log.op.a[rows], log.sub.a[rows]
        if self.release_done:   # final now, unless their op is being recorded (released when it ends)
            log.release(rows[~self.hold[ops]] if self.n_hold else rows)
        self._completions(ops, subs, np.maximum(end, t), t)

    def _completions(self, ops: np.ndarray, subs: np.ndarray, t_done: np.ndarray, now: float) -> None:
        """Sub-flows of ``ops`` finish at ``t_done`` (bytes sent plus latency).

        Transfers that nothing waits for are settled at once (their op only needs the count and the
        latest time); the others are queued as events at their own times, in order.
        """
        if not (ops == ops[0]).all():
            for op in np.unique(ops).tolist():
                m = ops == op
                self._completions(ops[m], subs[m], t_done[m], now)
            return
        op = int(ops[0])
        run = self.runs[op]
        if run.sub_waited is None:   # nothing waits for any transfer of this op (e.g. an AllToAll)
            if run.one_sub:   # distinct sub-flows, distinct transfers: count them
                self._count_done(op, run, len(subs), float(t_done.max()))
            else:
                self._settle(op, run, run.prep.sub_transfer[subs], float(t_done.max()))
            return
        waited = run.sub_waited[subs]
        if not waited.all():
            leaf = ~waited
            self._settle(op, run, run.prep.sub_transfer[subs[leaf]], float(t_done[leaf].max()))
            subs, t_done = subs[waited], t_done[waited]
            if len(subs) == 0:
                return
        if (t_done == t_done[0]).all():
            self._at(float(t_done[0]), "done", op, subs)
            return
        order = np.argsort(t_done, kind="stable")
        subs, t_done = subs[order], t_done[order]
        cut = np.flatnonzero(t_done[1:] != t_done[:-1]) + 1
        bounds = [0, *cut.tolist(), len(subs)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            self._at(float(t_done[a]), "done", op, subs[a:b])

    def _count_done(self, op: int, run: OpRun, k: int, t_last: float) -> None:
        """``k`` one-sub-flow transfers that nothing waits for are done by ``t_last``."""
        if t_last > run.t_last:
            run.t_last = t_last
        run.transfers_left -= k
        if run.transfers_left == 0:
            self.runs.pop(op, None)
            self.finish_at(run.t_last, op)

    def _settle(self, op: int, run: OpRun, tr: np.ndarray, t_last: float) -> None:
        """Count transfers (sub-flows ``tr``) as done by ``t_last``; end the op when none is left."""
        if run.one_sub:   # the sub-flows of a batch are distinct, so are their transfers: all end here
            run.subs_left[tr] = 0
            finished = tr
        elif len(tr) == 1:
            run.subs_left[tr] -= 1
            finished = tr if run.subs_left[tr[0]] == 0 else tr[:0]
        else:
            np.subtract.at(run.subs_left, tr, 1)
            tr = np.unique(tr)
            finished = tr[run.subs_left[tr] == 0]
        run.t_last = max(run.t_last, t_last)
        run.transfers_left -= len(finished)
        if run.transfers_left == 0:
            self.runs.pop(op, None)
            self.finish_at(run.t_last, op)

    def _done(self, op: int, subs: np.ndarray) -> None:
        t = self.clock.now
        run = self.runs[op]
        prep = run.prep
        tr = prep.sub_transfer[subs]
        if run.one_sub:   # distinct sub-flows of one-sub-flow transfers: each ends its transfer
            run.subs_left[tr] = 0
            finished = tr
        else:
            np.subtract.at(run.subs_left, tr, 1)
            tr = np.unique(tr)
            finished = tr[run.subs_left[tr] == 0]
        if len(finished) == 0:
            return
        run.transfers_left -= len(finished)
        run.t_last = max(run.t_last, t)
        dep_ptr, dep_idx = csr_take(prep.rev_ptr, prep.rev_idx, finished)
        if len(dep_idx):
            np.subtract.at(run.deps_left, dep_idx, 1)
            cand = np.unique(dep_idx)
            ready = cand[run.deps_left[cand] == 0]
            self._schedule(op, ready, t + prep.delay_s[ready], t)
        if run.transfers_left == 0:
            self.runs.pop(op, None)
            self.finish_at(run.t_last, op)
