"""A map from network flow ids to flow-log rows that holds the flows in flight only.

The network numbers its flows consecutively over the whole run; the engine needs, for each flow in flight,
the flow-log row it fills in when the flow ends. An array indexed by flow id would grow with every flow of
the run (8 bytes a flow: 130 MB for a 16 M-flow decode step). :class:`LiveIdMap` keeps two parts:

* a **window**: the rows of ids ``base .. base + n - 1`` in one array indexed by ``id - base`` (-1 for an id
  that ended). New ids arrive in increasing order, so adding is an append, and a lookup is one subtraction
  and one gather, whatever the number of flows (the replay's per-event path);
* **stragglers**: the few live ids left far behind the window (a long flow among millions of short ones),
  in a dictionary.

The window slides once it is longer than four times its live ids plus ``min_dead`` entries (2 MB by
default): it then starts at the first live id from which it is at most about half dead, and the live ids
before that become stragglers. So the map follows the most flows in flight at once, not the run's flows,
and a slide (one pass over the window) comes at most once per ``min_dead`` / 2 new ids.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LiveIdMap"]

_NONE = np.zeros(0, dtype=np.int64)


class LiveIdMap:
    """``ids -> rows`` for the flows in flight (see the module docstring).

    Ids handed to :meth:`put` must be new to the map, and those handed to :meth:`pop` distinct (the
    network returns each finished flow once).

    Parameters
    ----------
    min_dead : int
        Window entries tolerated beyond four per live id before the window slides.

    Examples
    --------
    >>> m = LiveIdMap(); m.put(np.array([0, 1, 2]), np.array([5, 6, 7])); m.put(np.array([3]), np.array([9]))
    >>> m.pop(np.array([2, 0])).tolist(), m.get(np.array([3, 1])).tolist(), len(m)
    ([7, 5], [9, 6], 2)
    >>> m.get(np.array([0])).tolist()   # gone
    [-1]
    """

    def __init__(self, min_dead: int = 1 << 18) -> None:
        self.min_dead = max(1, int(min_dead))
        self._rows = np.full(16, -1, dtype=np.int64)   # window: row of id base + i, -1 when ended
        self._base = 0
        self._n = 0          # window length (ids base .. base + n - 1)
        self._live = 0       # live entries in the window
        self._old: dict[int, int] = {}   # stragglers: live ids below base

    def __len__(self) -> int:
        return self._live + len(self._old)

    @property
    def capacity(self) -> int:
        """Entries held now: the window's array and the stragglers."""
        return len(self._rows) + len(self._old)

    # -- adding ------------------------------------------------------------------------------------------
    def put(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add pairs ``ids[i] -> rows[i]`` (ids new to the map)."""
        ids = np.asarray(ids, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        k = len(ids)
        if k == 0:
            return
        end = self._base + self._n
        first, last = int(ids[0]), int(ids[-1])
        # the usual case: the network's next consecutive ids, just after the window
        if end <= first and last - first == k - 1 and last + 1 - self._base <= self._limit(k) and \
                (k < 3 or (np.diff(ids) == 1).all()):
            self._cover(last + 1)
            self._rows[first - self._base:last + 1 - self._base] = rows
            self._live += k
            return
        if k > 1 and (np.diff(ids) <= 0).any():
            order = np.argsort(ids, kind="stable")
            ids, rows = ids[order], rows[order]
        low = ids < self._base   # below the window: stragglers
        if low.any():
            self._old.update(zip(ids[low].tolist(), rows[low].tolist(), strict=True))
            ids, rows = ids[~low], rows[~low]
        if not len(ids):
            return
        last = int(ids[-1])
        if last + 1 - self._base > self._limit(len(ids)):   # too far ahead: a new window for them
            self._retire(self._n)
            self._base = int(ids[0])
            if last + 1 - self._base > self._limit(len(ids)):   # spread far apart: stragglers all
                self._old.update(zip(ids.tolist(), rows.tolist(), strict=True))
                self._base = last + 1
                return
        self._cover(last + 1)
        self._rows[ids - self._base] = rows
        self._live += len(ids)

    def _limit(self, k: int) -> int:
        """Longest window before a slide, with ``k`` more live ids."""
        return 4 * (self._live + k) + self.min_dead

    def _cover(self, end_id: int) -> None:
        """Grow the window to end at ``end_id`` (new entries -1)."""
        n = end_id - self._base
        if n > len(self._rows):
            rows = np.full(max(n, 2 * len(self._rows)), -1, dtype=np.int64)
            rows[:self._n] = self._rows[:self._n]
            self._rows = rows
        if n > self._n:
            self._n = n

    # -- looking up ----------------------------------------------------------------------------------------
    def _lookup(self, ids: np.ndarray, kill: bool) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return _NONE
        pos = ids - self._base
        if len(pos) <= 32:   # a network event's few flows: bounds in Python (numpy reductions cost more)
            listed = pos.tolist()
            inside = self._n > 0 and min(listed) >= 0 and max(listed) < self._n
        else:
            inside = self._n > 0 and pos.min() >= 0 and pos.max() < self._n
        if inside:   # stragglers are all below the window
            out = self._rows[pos]   # the per-event path: one gather
            if kill:
                self._rows[pos] = -1
                self._live -= int(np.count_nonzero(out >= 0))
        else:
            inwin = (pos >= 0) & (pos < self._n)
            out = np.full(len(ids), -1, dtype=np.int64)
            wp = pos[inwin]
            got = self._rows[wp]
            out[inwin] = got
            if kill:
                self._rows[wp] = -1
                self._live -= int(np.count_nonzero(got >= 0))
            if self._old:
                rest = np.flatnonzero(~inwin)
                take = self._old.pop if kill else self._old.get
                out[rest] = [take(i, -1) for i in ids[rest].tolist()]
        if kill and self._n > self._limit(0):
            self._slide()
        return out

    def get(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map)."""
        return self._lookup(ids, False)

    def pop(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (-1 for an id not in the map), removing them from the map."""
        return self._lookup(ids, True)

    # -- keeping the window small ------------------------------------------------------------------------
    def _slide(self) -> None:
        n = self._n
        keep = np.flatnonzero(self._rows[:n] >= 0)
        live = len(keep)
        # the first live entry from which the window is at most about half dead: the live ids before it
        # become stragglers
        dense = (n - keep) <= 2 * (live - np.arange(live)) + self.min_dead // 2
        j = int(np.argmax(dense)) if dense.any() else live
        self._retire(int(keep[j]) if j < live else n)
        if len(self._rows) > 4 * max(self._n, 16):   # shrink too: the arrays follow the flows in flight
            rows = np.full(max(2 * self._n, 16), -1, dtype=np.int64)
            rows[:self._n] = self._rows[:self._n]
            self._rows = rows

    def _retire(self, cut: int) -> None:
        """Window entries before ``cut``: live ones become stragglers; the window then starts at ``cut``."""
        if cut <= 0:
            return
        head = self._rows[:cut]
        alive = np.flatnonzero(head >= 0)
        if len(alive):
            self._old.update(zip((alive + self._base).tolist(), head[alive].tolist(), strict=True))
            self._live -= len(alive)
        rest = self._n - cut
        self._rows[:rest] = self._rows[cut:self._n].copy()
        self._rows[rest:self._n] = -1
        self._base += cut
        self._n = rest
