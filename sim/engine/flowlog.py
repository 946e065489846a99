"""The flow log of a replay: one row per flow in flight, handed to sinks when the flow is final.

A row is *live* from the moment its flow starts (a network flow, or a flow of an op replayed from a
record) until nothing can change it any more: a network flow when its last byte is sent (or, for an op
being recorded, when the op ends: the record reads its rows then), a replayed op's flows when the replay
ends. :meth:`FlowLog.release` then hands the rows to the sinks (the whole log kept in memory, a bounded
sample, the streaming incast detection, a Parquet file in row groups) and frees them for reuse, so the
log holds the flows in flight, not every flow of the run. Rows of a replayed op that is materialised are
dropped without reaching a sink (:meth:`FlowLog.kill`; the explicit run's rows replace them).

A sink is any object with ``add(cols, paths)`` (``cols``: the :data:`SINK_COLUMNS` of the released
rows; ``paths``: the engine's :class:`sim.engine.paths.PathTable`) and ``close(paths)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.engine.csr import GrowArray

__all__ = ["SINK_COLUMNS", "FlowKeep", "FlowLog", "FlowSample"]

_COLUMNS = (("op", np.int64, -1), ("sub", np.int64, -1), ("path", np.int64, -1), ("bytes", np.float64, 0.0),
            ("start", np.float64, np.nan), ("sent", np.float64, np.nan), ("end", np.float64, np.nan),
            ("lat", np.float64, np.nan))

#: what a sink receives per released flow: op, path id, bytes, start / last byte sent / end (+ latency)
SINK_COLUMNS = ("op", "path", "bytes", "start", "sent", "end")


class FlowLog:
    """Per-flow columns of the flows in flight: ``op``, ``sub`` (sub-flow of the op's prepared op),
    ``path`` (id in the engine's path table), ``bytes``, ``start`` / ``sent`` (last byte) / ``end`` (last
    byte + latency), ``lat`` (path latency).

    Each column is a :class:`GrowArray`; ``col.a[rows]`` reads and writes it. Freed rows are reused by
    later :meth:`append` calls, so the arrays grow to the most flows live at once plus one block of
    released rows waiting for their sinks.

    Parameters
    ----------
    sinks : sequence
        Receive the released rows (see the module docstring).
    paths : PathTable, optional
        Handed to the sinks with the rows.
    block : int
        Released flows are staged and handed to the sinks ``block`` at a time (and at :meth:`close`):
        one sink call per block, not per network event.

    Examples
    --------
    >>> keep = FlowKeep(); log = FlowLog([keep])
    >>> rows = log.append(3); log.op.a[rows] = 7; log.bytes.a[rows] = [1.0, 2.0, 3.0]
    >>> log.kill(rows[:1]); log.release(rows[1:]); log.close(); log.n_live, log.released
    (0, 2)
    >>> keep.columns()["bytes"].tolist(), log.append(2).tolist()   # freed rows are reused
    ([2.0, 3.0], [2, 1])
    """

    def __init__(self, sinks: Sequence = (), paths=None, block: int = 1 << 16) -> None:
        self.sinks = list(sinks)
        self.paths = paths
        self.block = max(1, int(block))
        # released rows wait here, in release order, until a block is handed over: they are read then
        # (one gather per column per block) and only then freed, so a release costs one copy of row ids
        self._stage = GrowArray(np.int64, -1)
        self._staged = 0
        self.n = 0            # rows ever used (the arrays' high-water mark: live + staged + free)
        self.n_live = 0       # rows of flows not released yet
        self.peak_live = 0    # the most such rows at once
        self.released = 0     # flows handed to the sinks
        self._free = GrowArray(np.int64, -1)   # a stack of freed rows (the first ``_n_free`` entries)
        self._n_free = 0
        for name, dtype, fill in _COLUMNS:
            setattr(self, name, GrowArray(dtype, fill))

    def append(self, k: int) -> np.ndarray:
        """Reserve ``k`` rows (freed ones first); return their indices."""
        reuse = min(k, self._n_free)
        rows = self._free.a[self._n_free - reuse:self._n_free][::-1].copy()
        self._n_free -= reuse
        if reuse < k:
            fresh = np.arange(self.n, self.n + k - reuse, dtype=np.int64)
            self.n += k - reuse
            for name, _, _ in _COLUMNS:
                getattr(self, name).ensure(self.n)
            rows = np.concatenate([rows, fresh]) if reuse else fresh
        self.n_live += k
        if self.n_live > self.peak_live:
            self.peak_live = self.n_live
        return rows

    def release(self, rows: np.ndarray) -> None:
        """The flows of ``rows`` are final: hand them to the sinks (a block at a time), then free the rows."""
        k = len(rows)
        if k == 0:
            return
        self.released += k
        self.n_live -= k
        if not self.sinks:
            self._drop(rows)
            return
        for lo in range(0, k, self.block):
            part = rows[lo:lo + self.block] if k > self.block else rows
            if self._staged + len(part) > self.block:
                self._hand_over()
            at = self._staged
            self._stage.ensure(at + len(part))
            self._stage.a[at:at + len(part)] = part
            self._staged = at + len(part)

    def kill(self, rows: np.ndarray) -> None:
        """Free ``rows`` without handing them to a sink (a replay replaced by an explicit run)."""
        if len(rows):
            self.n_live -= len(rows)
            self._drop(rows)

    def _drop(self, rows: np.ndarray) -> None:
        self._free.ensure(self._n_free + len(rows))
        self._free.a[self._n_free:self._n_free + len(rows)] = rows
        self._n_free += len(rows)
        for name in ("start", "sent", "end"):   # a reused row starts blank, as a fresh one
            getattr(self, name).a[rows] = np.nan

    def _hand_over(self) -> None:
        """The staged flows to every sink; their rows are free again."""
        if self._staged:
            rows = self._stage.a[:self._staged].copy()
            self._staged = 0
            cols = {name: getattr(self, name).a[rows] for name in SINK_COLUMNS}
            self._drop(rows)
            for sink in self.sinks:
                sink.add(cols, self.paths)

    def close(self) -> None:
        """The run is over: the staged flows go out, every sink closes (all rows must have been released)."""
        self._hand_over()
        for sink in self.sinks:
            sink.close(self.paths)


class FlowKeep:
    """A sink that keeps every released flow (the whole log, in release order; tests and small runs).

    Examples
    --------
    >>> k = FlowKeep(); k.add({"op": np.array([1]), "bytes": np.array([2.0])}, None)
    >>> k.columns()["op"].tolist(), k.stride
    ([1], 1)
    """

    stride = 1

    def __init__(self) -> None:
        self._chunks: list[dict] = []

    def add(self, cols: dict, paths) -> None:
        self._chunks.append({k: np.array(v) for k, v in cols.items()})

    def close(self, paths) -> None:
        self._chunks = [self.columns()] if self._chunks else []

    def columns(self) -> dict[str, np.ndarray]:
        """The kept flows, column by column (empty arrays when none)."""
        if not self._chunks:
            return {k: np.zeros(0, dtype=np.int64 if k in ("op", "path") else np.float64) for k in SINK_COLUMNS}
        return {k: np.concatenate([c[k] for c in self._chunks]) for k in self._chunks[0]}


class FlowSample(FlowKeep):
    """A sink that keeps every ``stride``-th released flow, at most ``2 * limit`` of them: when the sample
    is full, every other kept flow is dropped and the stride doubles (so the sample is always flows
    0, stride, 2 stride, ... of the release order).

    Examples
    --------
    >>> s = FlowSample(limit=2)
    >>> for i in range(10): s.add({"op": np.array([i])}, None)
    >>> s.columns()["op"].tolist(), s.stride
    ([0, 4, 8], 4)
    """

    def __init__(self, limit: int = 1 << 15) -> None:
        super().__init__()
        self.limit = max(1, int(limit))
        self.stride = 1
        self.seen = 0
        self.kept = 0

    def add(self, cols: dict, paths) -> None:
        n = len(next(iter(cols.values())))
        first = (-self.seen) % self.stride   # the first index of this batch that lands on the stride
        pick = np.arange(first, n, self.stride)
        self.seen += n
        if len(pick):
            self._chunks.append({k: np.asarray(v)[pick] for k, v in cols.items()})
            self.kept += len(pick)
        while self.kept > 2 * self.limit:
            cols_all = self.columns()
            self._chunks = [{k: v[::2] for k, v in cols_all.items()}]
            self.kept = len(next(iter(self._chunks[0].values())))
            self.stride *= 2
