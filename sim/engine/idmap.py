"""A map from network flow ids to flow-log rows that holds the flows in flight only.

The network numbers its flows consecutively over the whole run; the engine needs, for each flow in flight,
the flow-log row it fills in when the flow ends. An array indexed by flow id would grow with every flow of
the run (8 bytes a flow: 130 MB for a 16 M-flow decode step). :class:`LiveIdMap` keeps two parts:

* a **window**: the rows of ids ``base .. base + n - 1`` in one array indexed by ``id - base`` (-1 for an id
  that ended). New ids arrive in increasing order, so adding is an append, and a lookup is one subtraction
  and one gather: no search, whatever the number of flows (the per-event path of the replay);
* **stragglers**: live pairs older than the window, sorted by id and found by binary search.

When the dead entries of the window outnumber its live ones, the window slides past its dead prefix; the
few live ids left far behind (a long flow among many short ones) move to the stragglers, so the window
stays within about twice the live ids it holds and the map follows the most flows in flight at once, not
the flows of the run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LiveIdMap"]

_NONE = np.zeros(0, dtype=np.int64)


class _Sorted:
    """Live ``id -> row`` pairs sorted by id (the stragglers): binary search, dead pairs squeezed out."""

    def __init__(self, min_dead: int) -> None:
        self.min_dead = min_dead
        self.ids = _NONE
        self.rows = _NONE
        self.live = 0

    def __len__(self) -> int:
        return self.live

    def put(self, ids: np.ndarray, rows: np.ndarray) -> None:
        keep = self.rows >= 0
        all_ids = np.concatenate([self.ids[keep], ids])
        all_rows = np.concatenate([self.rows[keep], rows])
        order = np.argsort(all_ids, kind="stable")
        self.ids, self.rows = all_ids[order], all_rows[order]
        self.live = len(self.ids)

    def where(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``ids`` and whether each is a live pair."""
        n = len(self.ids)
        if not n:
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        pos = np.minimum(np.searchsorted(self.ids, ids), n - 1)
        return pos, (self.ids[pos] == ids) & (self.rows[pos] >= 0)

    def kill(self, pos: np.ndarray) -> None:
        """Pairs at ``pos`` (live, distinct) end."""
        self.rows[pos] = -1
        self.live -= len(pos)
        if len(self.ids) - self.live > max(self.live, self.min_dead):
            keep = self.rows >= 0
            self.ids, self.rows = self.ids[keep], self.rows[keep]


class LiveIdMap:
    """``ids -> rows`` for the flows in flight (see the module docstring).

    Ids handed to :meth:`pop` must be distinct (the network returns each finished flow once).

    Examples
    --------
    >>> m = LiveIdMap(); m.put(np.array([0, 1, 2]), np.array([5, 6, 7])); m.put(np.array([3]), np.array([9]))
    >>> m.pop(np.array([2, 0])).tolist(), m.get(np.array([3, 1])).tolist(), len(m)
    ([7, 5], [9, 6], 2)
    >>> m.get(np.array([0])).tolist()   # gone
    [-1]
    """

    def __init__(self, min_dead: int = 1024) -> None:
        self.min_dead = int(min_dead)   # dead entries tolerated before sliding (amortises the copy)
        self._rows = np.full(16, -1, dtype=np.int64)   # window: row of id base + i, -1 when ended
        self._base = 0
        self._n = 0          # window length (ids base .. base + n - 1)
        self._live = 0       # live entries in the window
        self._old = _Sorted(self.min_dead)   # live ids below base

    def __len__(self) -> int:
        return self._live + len(self._old)

    @property
    def capacity(self) -> int:
        """Entries the arrays hold now (what the map costs: 8 bytes a window entry, 16 a straggler)."""
        return len(self._rows) + 2 * len(self._old.ids)

    def put(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add pairs ``ids[i] -> rows[i]`` (ids new to the map)."""
        ids = np.asarray(ids, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        k = len(ids)
        if k == 0:
            return
        end = self._base + self._n
        first, last = int(ids[0]), int(ids[-1])
        if not self._n and not len(self._old) and not self._live:
            self._base = end = first
        # the usual case: the network's next consecutive ids, just after the window
        if end <= first and last - first == k - 1 and first - end <= max(k, self.min_dead) and \
                (k < 3 or (np.diff(ids) == 1).all()):
            self._append(first - end, rows)
            return
        if k > 1 and (np.diff(ids) <= 0).any():
            order = np.argsort(ids, kind="stable")
            ids, rows = ids[order], rows[order]
        low = ids < self._base   # below the window: stragglers (they stay below it)
        if low.any():
            self._old.put(ids[low], rows[low])
            ids, rows = ids[~low], rows[~low]
        inside = ids < end       # new ids in the window's gaps
        if inside.any():
            self._rows[ids[inside] - self._base] = rows[inside]
            self._live += int(inside.sum())
            ids, rows = ids[~inside], rows[~inside]
        if not len(ids):
            return
        span = int(ids[-1]) - int(ids[0]) + 1
        if span <= 2 * len(ids) + self.min_dead:   # dense enough for a window
            if int(ids[0]) - end > max(len(ids), self.min_dead):   # far ahead: a new window there
                self._retire(self._n)
                self._base = end = int(ids[0])
            self._reserve(int(ids[-1]) + 1 - self._base)
            self._rows[self._n:int(ids[-1]) + 1 - self._base] = -1
            self._rows[ids - self._base] = rows
            self._n = int(ids[-1]) + 1 - self._base
            self._live += len(ids)
            return
        # spread far apart: stragglers, and the (empty) window starts after them
        self._retire(self._n)
        self._old.put(ids, rows)
        self._base = int(ids[-1]) + 1

    def _append(self, gap: int, rows: np.ndarray) -> None:
        """Rows of the ``len(rows)`` ids starting ``gap`` after the window's end."""
        n, k = self._n, len(rows)
        self._reserve(n + gap + k)
        if gap:
            self._rows[n:n + gap] = -1
        self._rows[n + gap:n + gap + k] = rows
        self._n = n + gap + k
        self._live += k

    def _lookup(self, ids: np.ndarray, kill: bool) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return _NONE
        pos = ids - self._base
        if self._n and pos.min() >= 0 and pos.max() < self._n:   # stragglers are all below the window
            out = self._rows[pos]   # the per-event path: one gather
            if kill:
                self._rows[pos] = -1
                self._live -= int(np.count_nonzero(out >= 0))
                self._maybe_slide()
            return out
        out = np.full(len(ids), -1, dtype=np.int64)
        inwin = (pos >= 0) & (pos < self._n)
        if inwin.any():
            wp = pos[inwin]
            got = self._rows[wp]
            out[inwin] = got
            if kill:
                self._rows[wp] = -1
                self._live -= int(np.count_nonzero(got >= 0))
        rest = np.flatnonzero(~inwin)
        if len(rest) and len(self._old):
            opos, ok = self._old.where(ids[rest])
            out[rest[ok]] = self._old.rows[opos[ok]]
            if kill and ok.any():
                self._old.kill(opos[ok])
        if kill:
            self._maybe_slide()
        return out

    def get(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map)."""
        return self._lookup(ids, False)

    def pop(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map), removing them from the map."""
        return self._lookup(ids, True)

    # -- keeping the window small ------------------------------------------------------------------------
    def _maybe_slide(self) -> None:
        if self._n - self._live <= max(self._live, self.min_dead):
            return
        n = self._n
        keep = np.flatnonzero(self._rows[:n] >= 0)
        live = len(keep)
        if live == 0:
            self._base += n
            self._n = 0
        else:
            # the first live entry from which the window is at most half dead (with min_dead slack); the
            # live entries before it are stragglers
            dense = (n - keep) <= 2 * (live - np.arange(live)) + self.min_dead
            j = int(np.argmax(dense)) if dense.any() else live
            cut = int(keep[j]) if j < live else n
            self._retire(cut)
        if 4 * max(self._n, 16) < len(self._rows):   # shrink too: the arrays follow the flows in flight
            rows = np.full(max(2 * self._n, 16), -1, dtype=np.int64)
            rows[:self._n] = self._rows[:self._n]
            self._rows = rows

    def _retire(self, cut: int) -> None:
        """Window entries before ``cut``: live ones to the stragglers; the window then starts at ``cut``."""
        if cut <= 0:
            return
        head = self._rows[:cut]
        alive = np.flatnonzero(head >= 0)
        if len(alive):
            self._old.put(alive + self._base, head[alive].copy())
            self._live -= len(alive)
        rest = self._n - cut
        self._rows[:rest] = self._rows[cut:self._n].copy()
        self._rows[rest:self._n] = -1
        self._base += cut
        self._n = rest

    def _reserve(self, n: int) -> None:
        if n > len(self._rows):
            rows = np.full(max(n, 2 * len(self._rows)), -1, dtype=np.int64)
            rows[:self._n] = self._rows[:self._n]
            self._rows = rows
