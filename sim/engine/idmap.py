"""A map from network flow ids to flow-log rows that holds the flows in flight only.

The network numbers its flows consecutively over the whole run; the engine needs, for each flow in flight,
the flow-log row it fills in when the flow ends. An array indexed by flow id would grow with every flow of
the run (8 bytes a flow: 130 MB for a 16 M-flow decode step). :class:`LiveIdMap` keeps the live pairs
sorted by id (ids arrive in increasing order, so adding is an append), finds them by binary search and
drops a pair when its flow ends; dead pairs are squeezed out once they outnumber the live ones, so the
arrays follow the most flows in flight at once, not the flows of the run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LiveIdMap"]


class LiveIdMap:
    """``ids -> rows`` for the flows in flight (see the module docstring).

    Examples
    --------
    >>> m = LiveIdMap(); m.put(np.array([0, 1, 2]), np.array([5, 6, 7])); m.put(np.array([3]), np.array([9]))
    >>> m.pop(np.array([2, 0])).tolist(), m.get(np.array([3, 1])).tolist(), len(m)
    ([7, 5], [9, 6], 2)
    >>> m.get(np.array([0])).tolist()   # gone
    [-1]
    """

    def __init__(self, min_dead: int = 1024) -> None:
        self.min_dead = int(min_dead)   # dead pairs tolerated before squeezing (amortises the copy)
        size = max(16, self.min_dead)
        self._ids = np.zeros(size, dtype=np.int64)
        self._rows = np.full(size, -1, dtype=np.int64)
        self._n = 0          # pairs stored (live and dead), the first ``_n`` entries
        self._live = 0

    def __len__(self) -> int:
        return self._live

    @property
    def capacity(self) -> int:
        """Entries the arrays hold now (what the map costs: 16 bytes each)."""
        return len(self._ids)

    def put(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add pairs ``ids[i] -> rows[i]`` (ids new to the map)."""
        ids = np.asarray(ids, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        if len(ids) == 0:
            return
        if len(ids) > 1 and (np.diff(ids) <= 0).any():
            order = np.argsort(ids, kind="stable")
            ids, rows = ids[order], rows[order]
        n, k = self._n, len(ids)
        if n == 0 or ids[0] > self._ids[n - 1]:   # the usual case: the network's next consecutive ids
            self._reserve(n + k)
            self._ids[n:n + k] = ids
            self._rows[n:n + k] = rows
            self._n = n + k
        else:   # ids below the largest stored one (another numbering): merge, keeping the order
            at = np.searchsorted(self._ids[:n], ids)
            all_ids = np.insert(self._ids[:n], at, ids)
            all_rows = np.insert(self._rows[:n], at, rows)
            self._n = 0
            self._reserve(len(all_ids))
            self._ids[:len(all_ids)] = all_ids
            self._rows[:len(all_ids)] = all_rows
            self._n = len(all_ids)
        self._live += k

    def _where(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``ids`` and whether each is a live pair."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self._ids[:self._n], ids)
        ok = pos < self._n
        pos = np.where(ok, pos, 0)
        ok &= (self._ids[pos] == ids) & (self._rows[pos] >= 0) if self._n else np.zeros(len(ids), dtype=bool)
        return pos, ok

    def get(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map)."""
        pos, ok = self._where(ids)
        return np.where(ok, self._rows[pos], -1) if len(pos) else np.zeros(0, dtype=np.int64)

    def pop(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map), removing them from the map."""
        pos, ok = self._where(ids)
        if not len(pos):
            return np.zeros(0, dtype=np.int64)
        out = np.where(ok, self._rows[pos], -1)
        live = np.unique(pos[ok])
        self._rows[live] = -1
        self._live -= len(live)
        if self._n - self._live > max(self._live, self.min_dead):
            self._compact()
        return out

    def _compact(self) -> None:
        keep = np.flatnonzero(self._rows[:self._n] >= 0)
        ids, rows = self._ids[keep], self._rows[keep]
        size = max(self.min_dead, 2 * len(keep), 16)
        if size < len(self._ids) // 2:   # shrink too: the arrays follow the flows in flight
            self._ids = np.zeros(size, dtype=np.int64)
            self._rows = np.full(size, -1, dtype=np.int64)
        self._ids[:len(keep)] = ids
        self._rows[:len(keep)] = rows
        self._rows[len(keep):self._n] = -1
        self._n = len(keep)

    def _reserve(self, n: int) -> None:
        if n > len(self._ids):
            size = max(n, 2 * len(self._ids))
            ids = np.zeros(size, dtype=np.int64)
            rows = np.full(size, -1, dtype=np.int64)
            ids[:self._n] = self._ids[:self._n]
            rows[:self._n] = self._rows[:self._n]
            self._ids, self._rows = ids, rows
