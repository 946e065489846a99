"""The state of the flows in flight, in columnar arrays of slots (the flow network's working set).

A *slot* holds one flow in flight, or ``w`` identical flows solved as one weighted flow
(:mod:`sim.network.merge`). Slots ``0 .. hi - 1`` are in use; a finished slot is only marked dead (lazy
deletion) and the arrays are compacted, in order, once dead slots outnumber the live ones, so memory
follows the flows alive at once, not the flows of the run. New slots are appended at ``hi``, so slot order
is the order the flows were added in (the order every per-link sum of the network runs in).

Per slot: ``alive``, bytes left ``rem0`` at time ``t0``, ``rate`` (inf: not solved yet), predicted finish
``pred``, weight ``w`` (flows it stands for), dense ``group`` index (completion batching is bounded per
group), flow id ``fid`` of its first flow, ``deg`` and the link ids ``links[slot, :deg]`` (padded with -1).
Per link: ``count`` (flows in flight over it, weighted) and ``load`` (sum of their rates). The scratch
arrays are the compiled kernels' working memory (kept zero / -1 between calls).

Per group, for the next batch end (:func:`sim.network.events.next_event_numpy` and its compiled twin):
``group_val``, the group's last computed batch end, valid while ``group_dirty`` is 0; every change of a
group's live slots or of their predicted finishes (append, finish, re-solve) sets ``group_dirty``, so a
group no event touched is not selected again.

Columns of one dtype and length are rows of one 2-D array (``fcols``: the float slot columns, ``icols``:
the integer ones, ``lf`` / ``li``: per link, ``gf`` / ``gi``: per group), and the named attributes are
views of those rows: a compiled kernel takes a handful of arrays instead of twenty (numba's dispatch
costs about half a microsecond per array argument, three calls per event).
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError

__all__ = ["LiveFlows"]

#: per-slot float64 columns (rows of ``fcols``), int64 columns (rows of ``icols``); ``end`` is the step's
#: output of finish times
_FLOAT_COLS = ("rem0", "t0", "rate", "pred", "w")
_INT_COLS = ("group", "fid", "deg")
#: per-link float64 rows of ``lf``, int64 rows of ``li``; per-group rows of ``gf`` and ``gi``
_LINK_F = ("load", "acc_a", "acc_b")
_LINK_I = ("count", "acc_n", "lmap", "touched")
_GROUP_F = ("group_w", "group_min", "group_val")
_GROUP_I = ("group_n", "group_buf", "group_dirty")


class LiveFlows:
    """Columnar slots of the flows in flight and per-link counts and loads (see the module docstring).

    Parameters
    ----------
    num_links : int

    Examples
    --------
    >>> live = LiveFlows(3)
    >>> slots = live.append(np.array([[0, 2]]), np.array([2]), np.array([5.0]), 0.0, np.array([1.0]),
    ...                     np.array([0]), np.array([7]))
    >>> slots.tolist(), live.count.tolist(), live.hi
    ([0], [1, 0, 1], 1)
    """

    def __init__(self, num_links: int) -> None:
        self.num_links = num_links
        self.hi = 0
        self.n_slots = 0            # live slots
        self.n_flows = 0            # live flows (sum of the weights of live slots)
        size, width = 256, 4
        self.alive = np.zeros(size, dtype=bool)
        self.fcols = np.zeros((len(_FLOAT_COLS), size))
        self.icols = np.zeros((len(_INT_COLS), size), dtype=np.int64)
        self.links = np.full((size, width), -1, dtype=np.int64)
        # per link: count and load, and the compiled kernels' scratch (zero / -1 between calls)
        self.lf = np.zeros((len(_LINK_F), num_links))
        self.li = np.zeros((len(_LINK_I), num_links), dtype=np.int64)
        self.li[_LINK_I.index("lmap")] = -1
        self.members: dict[int, np.ndarray] = {}   # fid of a weighted slot -> ids of all its flows
        self.weighted = False                      # a slot of weight > 1 was ever added
        self.slot_buf = np.zeros(size, dtype=np.int64)   # a step's finished slots / a solve's candidates
        self.end_buf = np.zeros(size)                    # a step's finish times, aligned with slot_buf
        self.gf = np.zeros((len(_GROUP_F), 16))
        self.gi = np.zeros((len(_GROUP_I), 16), dtype=np.int64)
        self._bind()
        self.group_dirty[:] = 1

    def _bind(self) -> None:
        """The named columns as views of the rows of the packed arrays (again after they grow)."""
        for rows, names in ((self.fcols, _FLOAT_COLS), (self.icols, _INT_COLS), (self.lf, _LINK_F),
                            (self.li, _LINK_I), (self.gf, _GROUP_F), (self.gi, _GROUP_I)):
            for i, name in enumerate(names):
                setattr(self, name, rows[i])

    # ------------------------------------------------------------------------------------------------
    def grow_links(self, num_links: int) -> None:
        """Room for link ids ``0 .. num_links - 1`` (new links idle: no flow, no load)."""
        if num_links <= self.num_links:
            return
        lf = np.zeros((len(_LINK_F), num_links))
        li = np.zeros((len(_LINK_I), num_links), dtype=np.int64)
        li[_LINK_I.index("lmap")] = -1
        lf[:, :self.num_links] = self.lf
        li[:, :self.num_links] = self.li
        self.lf, self.li, self.num_links = lf, li, num_links
        self._bind()

    def reserve_groups(self, n_groups: int) -> None:
        """Room for dense group indices ``0 .. n_groups - 1``."""
        have = self.group_w.size
        if n_groups <= have:
            return
        grow = max(n_groups, 2 * have)
        self.gf = np.zeros((len(_GROUP_F), grow))
        self.gi = np.zeros((len(_GROUP_I), grow), dtype=np.int64)
        self._bind()
        self.group_dirty[:] = 1

    def append(self, rows: np.ndarray, deg: np.ndarray, size_bytes: np.ndarray, now_s: float,
               weight: np.ndarray, group: np.ndarray, fid: np.ndarray) -> np.ndarray:
        """Add flows (one slot each) starting at ``now_s``; return their slots.

        ``rows`` is (n, width) of link ids padded with -1; ``weight`` the flows each slot stands for.
        """
        n = deg.size
        self._reserve(n, rows.shape[1])
        first, end = self.hi, self.hi + n
        self.alive[first:end] = True
        self.rem0[first:end] = size_bytes
        self.t0[first:end] = now_s
        self.rate[first:end] = np.inf
        self.pred[first:end] = np.inf
        self.w[first:end] = weight
        self.group[first:end] = group
        self.group_dirty[group] = 1   # its batch end must be found again (the next event's cache)
        self.fid[first:end] = fid
        self.deg[first:end] = deg
        self.links[first:end] = -1
        self.links[first:end, :rows.shape[1]] = rows
        inc = rows[rows >= 0]
        unit = bool((weight == 1.0).all())
        self.weighted = self.weighted or not unit
        if unit:
            self.count += np.bincount(inc, minlength=self.num_links)
        else:
            self.count += np.bincount(inc, weights=np.repeat(weight, deg), minlength=self.num_links).astype(np.int64)
        self.hi = end
        self.n_slots += n
        self.n_flows += int(weight.sum())
        return np.arange(first, end, dtype=np.int64)

    def release(self, slots: np.ndarray, flows: int) -> None:
        """Slots ``slots`` (standing for ``flows`` flows) finished: the step already took them off the
        links, marked them dead and set their ``pred`` to inf."""
        self.n_slots -= slots.size
        self.n_flows -= flows
        if self.members:
            for f in self.fid[slots][self.w[slots] > 1.0].tolist():
                del self.members[f]
        dead = self.hi - self.n_slots
        if dead > max(256, self.n_slots):
            self.compact()

    def compact(self) -> None:
        """Move the live slots to ``0 .. n_slots - 1``, in order."""
        keep = np.flatnonzero(self.alive[: self.hi])
        n = keep.size
        self.fcols[:, :n] = self.fcols[:, keep]
        self.icols[:, :n] = self.icols[:, keep]
        self.links[:n] = self.links[keep]
        self.alive[:n] = True
        self.alive[n: self.hi] = False
        self.hi = n

    def live_slots(self) -> np.ndarray:
        """Indices of the live slots, in order."""
        return np.flatnonzero(self.alive[: self.hi])

    def expand(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flow ids of the slots ``slots`` and, per flow id, the position of its slot in ``slots``."""
        fid = self.fid[slots]
        if not self.members:
            return fid, np.arange(slots.size)
        w = self.w[slots]
        if (w == 1.0).all():
            return fid, np.arange(slots.size)
        parts = [self.members[f] if wt > 1.0 else np.array([f], dtype=np.int64)
                 for f, wt in zip(fid.tolist(), w.tolist(), strict=True)]
        pos = np.repeat(np.arange(slots.size), [p.size for p in parts])
        return np.concatenate(parts), pos

    def rates_by_id(self) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the flows in flight (increasing) and their current rates (bytes/s)."""
        slots = self.live_slots()
        ids, pos = self.expand(slots)
        order = np.argsort(ids, kind="stable")
        return ids[order], self.rate[slots[pos[order]]]

    def remaining_bytes(self, flow_ids: np.ndarray, now_s: float) -> np.ndarray:
        """Bytes the flows ``flow_ids`` (in flight, solved) have left to send at ``now_s``.

        Raises
        ------
        SimError
            When a flow is not in flight.
        """
        slots = self.live_slots()
        ids, pos = self.expand(slots)
        order = np.argsort(ids)
        want = np.asarray(flow_ids, dtype=np.int64).reshape(-1)
        at = np.searchsorted(ids[order], want)
        if want.size and (at.max() >= ids.size or (ids[order][at] != want).any()):
            raise SimError("remaining_bytes: a flow id is not in flight")
        s = slots[pos[order[at]]]
        rate = self.rate[s]
        return self.rem0[s] - np.where(rate < math.inf, rate, 0.0) * (now_s - self.t0[s])

    def finished_ids(self, slots: np.ndarray, end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flow ids of the finished ``slots`` (in finishing order, ``end_s`` their finish times, in order)
        and their finish times: a weighted slot's flows are listed by (finish, id)."""
        if not self.members:
            return self.fid[slots], end_s
        ids, pos = self.expand(slots)
        end_s = end_s[pos]
        if pos.size != slots.size:
            order = np.lexsort((ids, end_s))
            ids, end_s = ids[order], end_s[order]
        return ids, end_s

    # ------------------------------------------------------------------------------------------------
    def _reserve(self, n: int, width: int) -> None:
        need = self.hi + n
        size = self.alive.size
        if need > size and self.hi > self.n_slots:
            self.compact()           # room from the dead slots first
            need = self.hi + n
        if need <= size and width <= self.links.shape[1]:
            return
        grow = max(need, 2 * size) if need > size else size
        wide = max(width, self.links.shape[1])
        hi = self.hi
        alive = np.zeros(grow, dtype=bool)
        alive[:hi] = self.alive[:hi]
        self.alive = alive
        for name in ("fcols", "icols"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], grow), dtype=old.dtype)
            new[:, :hi] = old[:, :hi]
            setattr(self, name, new)
        links = np.full((grow, wide), -1, dtype=np.int64)
        links[:hi, : self.links.shape[1]] = self.links[:hi]
        self.links = links
        self.slot_buf = np.zeros(grow, dtype=np.int64)
        self.end_buf = np.zeros(grow)
        self._bind()
