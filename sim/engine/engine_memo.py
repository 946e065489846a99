"""The engine's start of ops and its exact memoisation of isolated ops (a mixin of :class:`~sim.engine.engine.Engine`).

When the members of an op have all issued it, :meth:`EngineMemo._start_batch` starts it: replayed from a
record (:mod:`sim.engine.memo`) when its footprint is free and a record of its key or traffic class
exists, else launched explicitly (recorded when a later op of its class may replay it). An op that
starts on the footprint of a replay materialises it (:mod:`sim.engine.materialise`). See the
:mod:`sim.engine.engine` docstring for why the figures are those of an explicit run.
"""

from __future__ import annotations

import weakref

import numpy as np

from sim.engine.clock import EVENT
from sim.engine.csr import csr_take
from sim.engine.materialise import materialise
from sim.engine.memo import InFlight, Record, Recording, footprints_overlap
from sim.engine.prepared import PreparedOp

__all__ = ["EngineMemo"]


class EngineMemo:
    """Starting ops and memoisation, the half of :class:`~sim.engine.engine.Engine` that touches records.

    A mixin: it holds no state of its own and works on the attributes ``Engine.__init__`` sets (``clock``,
    ``w``, ``ops``, ``memo``, ``aliases``, ``inflight``, ``link_users``, ``link_owner``, ``recording``,
    ``runner``, ``log``, ``stats``, the counters) and on ``Engine._finish``.

    Examples
    --------
    >>> from sim.engine.engine import Engine
    >>> issubclass(Engine, EngineMemo)
    True
    """

    def _start_batch(self) -> None:
        """Start the ops whose members have all issued them: replay isolated ones from records."""
        t = float(self.clock.now)
        self._batch_at = None
        started, self.just_started = self.just_started, []
        preps = [self.ops[op] for op in started]
        fps = [p.links_footprint() for p in preps]
        batch = np.bincount(np.concatenate(fps), minlength=len(self.link_users)) if len(fps) > 1 else None
        for op, prep, fp in zip(started, preps, fps, strict=True):
            self.op_algo[op] = prep.algo
            self.op_used[op] = self._used_links(prep, fp)
            busy = bool(self.link_users[fp].any())
            if busy:  # other ops in flight on this footprint: they are no longer alone
                for other, fl in list(self.inflight.items()):
                    if footprints_overlap(fl.footprint, fp):
                        if fl.virtual:
                            self._materialise(other, fl, t)
                        if fl.rec is not None:
                            fl.rec.alive = False
            alone = not busy and (batch is None or not (batch[fp] > 1).any())
            key = self.w.op_key[op]
            cls = self.op_class[op]
            if key is not None:
                self.key_left[cls] -= 1
            memo_ok = self.memoize and key is not None and alone
            if memo_ok:
                src = key if key in self.memo else self.aliases.find(cls, prep)
                if src is not None:
                    self._replay(op, src, prep, fp, t)
                    continue
            # record only when a later op of the same class may replay it (most ops never repeat)
            rec = Recording(t) if memo_ok and self.key_left[cls] > 0 else None
            self.inflight[op] = InFlight(fp, False, rec, prep=prep)
            self.link_users[fp] += 1
            if rec is not None:
                self.recording += 1
                self.link_owner[fp] = op
                self.runner.set_hold(op, True)
            self.runner.launch(op, prep, t)

    def _used_links(self, prep: PreparedOp, fp: np.ndarray) -> np.ndarray:
        """Sorted link ids of ``prep``'s sub-flows that move bytes (its footprint when all of them do)."""
        used = self._used_of.get(id(prep))
        if used is None:
            moving = prep.sub_bytes > 0
            used = fp if moving.all() else np.unique(csr_take(prep.sub_link_ptr, prep.sub_link_idx,
                                                              np.flatnonzero(moving))[1]).astype(np.int64)
            self._used_of[id(prep)] = used
            weakref.finalize(prep, self._used_of.pop, id(prep), None)
        return used

    def _materialise(self, op: int, fl: InFlight, t: float) -> None:
        materialise(self, op, fl, t)
        self.materialised += 1

    def _replay(self, op: int, key, prep: PreparedOp, fp: np.ndarray, t: float) -> None:
        rec: Record = self.memo[key]
        self.memo_hits += 1
        self.replaying[key] += 1
        f_sub, f_bytes, f_start, f_sent, f_end = rec.flows
        f_path = self.runner.sub_path(prep)[f_sub]
        rows = self.log.append(len(f_path))
        self.inflight[op] = InFlight(fp, True, None, t, key, rows, prep)
        self.link_users[fp] += 1
        if len(f_path):
            log = self.log
            log.op.a[rows] = op
            log.sub.a[rows] = f_sub
            log.path.a[rows] = f_path
            log.bytes.a[rows] = f_bytes
            log.start.a[rows] = t + f_start
            log.sent.a[rows] = t + f_sent
            log.end.a[rows] = t + f_end
            self.runner.op_flows[op] += len(f_path)
        self.clock.call_at(t + rec.duration_s, EVENT, self._replay_end, op, key, t)

    def _replay_end(self, op: int, key, t0: float) -> None:
        self.replaying[key] -= 1
        fl = self.inflight.get(op)
        if fl is not None and fl.virtual and fl.t0 == t0:   # else materialised meanwhile: ends explicitly
            if self.keep_stats:
                self.stats.add_record(t0, self.memo[key])
            self.log.release(fl.rows)
            self._finish(op)
        self._spend(key)

    def _spend(self, key) -> None:
        """Cut the record of ``key`` down once no op of its class is left to start or being replayed."""
        if self.key_left[self.key_class[key]] <= 0 and self.replaying[key] <= 0 and key in self.memo:
            self.memo[key] = self.memo[key].spent()
            self.aliases.drop(key)

    def _record_flows(self, op_arr: np.ndarray, rows: np.ndarray) -> None:
        if not self.recording:
            return
        for op in np.unique(op_arr).tolist():
            fl = self.inflight.get(op)
            if fl is not None and fl.rec is not None:   # held until the op ends, even if the record dies
                fl.rec.flow_ids.append(rows[op_arr == op])  # log rows of the recorded op's flows

    def _record_segment(self, a: float, b: float, delta: np.ndarray) -> None:
        """Per-link bytes of ``[a, b)`` to the recordings of the ops that own those links."""
        if not self.recording:
            return
        owners = self.link_owner
        idx = np.flatnonzero((delta > 0) & (owners >= 0))
        if not len(idx):
            return
        vals, owners = delta[idx], owners[idx]
        if (owners == owners[0]).all():
            rec = self.inflight[int(owners[0])].rec
            rec.segments.append((a - rec.t0, b - rec.t0, idx, vals))
            return
        for op in np.unique(owners).tolist():
            rec = self.inflight[op].rec
            m = owners == op
            rec.segments.append((a - rec.t0, b - rec.t0, idx[m], vals[m]))

    def _store(self, op: int, rec: Recording, t: float, footprint: np.ndarray) -> None:
        ids = np.concatenate(rec.flow_ids) if rec.flow_ids else np.zeros(0, dtype=np.int64)
        t0, log = rec.t0, self.log
        flows = (log.sub.a[ids], log.bytes.a[ids], log.start.a[ids] - t0, log.sent.a[ids] - t0,
                 log.end.a[ids] - t0)
        key = self.w.op_key[op]
        self.memo[key] = Record.build(t - t0, rec.segments, self.stats.cap, flows, footprint)
        self.aliases.add(self.key_class[key], key, self.inflight[op].prep)
        self.memo_records += 1
        self._spend(key)
