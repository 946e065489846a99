"""One network event on :class:`sim.network.live.LiveFlows`: a step, a re-solve, the next batch end.

Three operations, each in numpy here and compiled in :mod:`sim.network.events_numba` (loaded lazily, the
first time a network needs it, when :data:`sim.network.maxmin.SOLVER` allows; same float operations in the
same order, so both give the same bits, tested):

``step(live, target_s, slack_s, dt_s, link_bytes)``
    move ``dt_s`` at the current rates (``link_bytes += load * dt``), complete the live slots predicted to
    finish by ``target_s + slack_s``: correct ``link_bytes`` by their exact bytes left, take them off
    their links' counts and loads, mark them dead (``pred`` inf). Returns ``(n, min_rate, flows)``; their
    slots are ``live.slot_buf[:n]`` in finishing order (by ``min(pred, target_s)``, ties in slot order),
    those finish times ``live.end_buf[:n]``, ``flows`` the flows they stand for.
``solve(live, theta, now_s, capacity)``
    re-solve the live slots whose rate is ``>= theta`` (all of them, with a fresh load, when that is
    every slot) on the capacity the others leave (weighted max-min); update their bytes left, rates,
    predicted finishes and the link loads. Returns ``(slots solved, water-filling passes)``.
``next_event(live, q, now_s)``
    the time of the next batch end: with ``q = 0`` the earliest predicted finish; with ``q > 0`` the
    latest predicted finish such that, for every group, what its finished flows hold (rate x time from
    their last byte to the batch end, summed with what they held before) stays at most ``q`` times the
    bytes the group has sent by ``now_s``, at any time up to the batch end (:func:`batch_end`).
``solve_next(live, theta, now_s, capacity, q)``
    ``solve`` then ``next_event`` (one compiled call): ``(slots solved, passes, next batch end)``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from sim.network import maxmin
from sim.network.constants import THETA_RTOL
from sim.network.live import LiveFlows

__all__ = ["NUMPY_OPS", "backend", "batch_end", "next_event_numpy", "solve_next_numpy", "solve_numpy",
           "step_numpy"]


def step_numpy(live: LiveFlows, target_s: float, slack_s: float, dt_s: float, link_bytes: np.ndarray
               ) -> tuple[int, float, int]:
    """The step of the module docstring, in numpy.

    Examples
    --------
    >>> live = LiveFlows(1)
    >>> _ = live.append(np.array([[0]]), np.array([1]), np.array([4.0]), 0.0, np.ones(1), np.zeros(1, int),
    ...                 np.zeros(1, int))
    >>> live.rate[0], live.pred[0] = 2.0, 2.0
    >>> live.load[0] = 2.0
    >>> step_numpy(live, 2.0, 0.0, 2.0, np.zeros(1)), live.count.tolist(), bool(live.alive[0])
    ((1, 2.0, 1), [0], False)
    """
    hi = live.hi
    load = live.load
    if dt_s > 0:
        link_bytes += load * dt_s
    fin_mask = live.alive[:hi] & (live.pred[:hi] <= target_s + slack_s)
    if not fin_mask.any():
        return 0, math.inf, 0
    fin = np.flatnonzero(fin_mask)
    n = fin.size
    deg = live.deg[fin]
    rows = live.links[fin]
    links = rows[rows >= 0]
    rate = live.rate[fin]
    w = live.w[fin]
    # Bytes left at target (negative for flows that finished inside the step): bytes conservation.
    left = live.rem0[fin] - rate * (target_s - live.t0[fin])
    num = live.num_links
    link_bytes += np.bincount(links, weights=(left * w).repeat(deg), minlength=num)
    live.count -= np.bincount(links, weights=w.repeat(deg), minlength=num).astype(np.int64)
    load -= np.bincount(links, weights=(rate * w).repeat(deg), minlength=num)
    load[live.count == 0] = 0.0
    live.alive[fin] = False
    end = np.minimum(live.pred[fin], target_s)
    # the batching budget of their groups: what they held after their last byte, and their bytes
    g = live.group[fin]
    np.add.at(live.group_held, g, (rate * w) * (target_s - end))
    np.add.at(live.group_live, g, -w)
    order = np.argsort(end, kind="stable")
    live.slot_buf[:n] = fin[order]
    live.end_buf[:n] = end[order]
    live.pred[fin] = np.inf
    return n, float(rate.min()), int(w.sum())


def solve_numpy(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray) -> tuple[int, int]:
    """The re-solve of the module docstring, in numpy."""
    hi = live.hi
    alive = live.alive[:hi]
    cand_mask = alive & (live.rate[:hi] >= theta * (1.0 - THETA_RTOL))
    n_cand = int(np.count_nonzero(cand_mask))
    if not n_cand:
        return 0, 0
    full = n_cand == live.n_slots
    iterations = _resolve_numpy(live, np.flatnonzero(cand_mask), full, now_s, capacity)
    if iterations < 0:   # float rounding at an exact tie starved a flow: a full solve is always safe
        n_cand = live.n_slots
        iterations = _resolve_numpy(live, np.flatnonzero(alive), True, now_s, capacity)
    return n_cand, iterations


def _resolve_numpy(live: LiveFlows, cand: np.ndarray, full: bool, now_s: float, capacity: np.ndarray) -> int:
    """Weighted max-min rates of the slots ``cand`` on the capacity the other slots leave; -1 when a
    partial solve would starve a slot (nothing changed then)."""
    num = live.num_links
    rows = live.links[cand]
    links = rows[rows >= 0]
    deg = live.deg[cand]
    w = live.w[cand]
    lptr = np.zeros(cand.size + 1, dtype=np.int64)
    np.cumsum(deg, out=lptr[1:])
    old = live.rate[cand]
    old_known = np.where(old < math.inf, old, 0.0)
    if full:   # a full solve also clears any drift of the incremental load
        residual = capacity
        old_load = None
    else:
        old_load = np.bincount(links, weights=(old_known * w).repeat(deg), minlength=num)
        residual = capacity - (live.load - old_load)
    new, iterations = maxmin.max_min_rates_numpy(lptr, links, residual, w)
    maxmin.charge_numpy(maxmin.numpy_excess_s(links.size, iterations))   # towards loading the kernel
    if old_load is not None and not (new > 0.0).all():
        return -1
    new_load = np.bincount(links, weights=(new * w).repeat(deg), minlength=num)
    if old_load is None:
        live.load[:] = new_load
    else:
        live.load += new_load - old_load
        live.load[live.count == 0] = 0.0   # no drift on idle links
    rem = live.rem0[cand] - old_known * (now_s - live.t0[cand])
    live.rem0[cand] = rem
    live.t0[cand] = now_s
    live.rate[cand] = new
    with np.errstate(divide="ignore"):   # a flow over a link that is down: rate 0, never finishes
        live.pred[cand] = now_s + rem / new
    return iterations


def batch_end(pred_s: np.ndarray, rate_w: np.ndarray, group: np.ndarray, held: np.ndarray, sent: np.ndarray,
              in_flight: np.ndarray, q: float) -> float:
    """The latest batch end the groups' budgets allow, for live flows in finishing order.

    Parameters
    ----------
    pred_s : ndarray, shape (n,)
        Predicted finishes, increasing (ties in slot order), all finite.
    rate_w : ndarray, shape (n,)
        Rate x weight of each.
    group : ndarray of int, shape (n,)
        Dense group of each.
    held, sent, in_flight : ndarray, per group
        Capacity-time held by the group's finished flows; bytes it has sent; its flows in flight. A group
        of fewer than ``1 / q`` flows in flight holds nothing (its deadline is its first finish).
    q : float

    Returns
    -------
    float
        ``pred_s[j - 1]`` for the first ``j`` such that ``pred_s[j]`` is later than the deadline of a
        group with a flow among the first ``j``; ``pred_s[-1]`` if there is none. A group's deadline,
        with finishers ``F`` so far, is the latest ``T`` with ``held + sum_F rate_w (T - pred) <= q sent``,
        so holding them up to any time before the next finisher keeps the budget (for a group of fewer
        than ``1 / q`` flows: its first finish).

    Examples
    --------
    One group of 100 flows in flight that has sent 200 bytes: flows at 1 B/s finish at 100, 101 and 103
    s; holding the first until 101 s costs 1 byte-s (within 0.01 x 200); holding both to 103 s (3 + 2
    byte-s) would not be. With 99 flows in flight (fewer than 1 / q) nothing is held:

    >>> p = np.array([100.0, 101.0, 103.0])
    >>> args = (np.ones(3), np.zeros(3, int), np.zeros(1), np.array([200.0]))
    >>> batch_end(p, *args, np.array([100.0]), 0.01), batch_end(p, *args, np.array([99.0]), 0.01)
    (101.0, 100.0)
    """
    n = pred_s.size
    order = np.argsort(group, kind="stable")          # candidates group by group, in finishing order
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]]
    seg = np.cumsum(first) - 1
    start = np.flatnonzero(first)
    a = _segment_cumsum(rate_w[order], start, seg)
    b = _segment_cumsum(rate_w[order] * pred_s[order], start, seg)
    deadline = np.empty(n)
    deadline[order] = np.where(np.floor(q * in_flight[g]) == 0.0, pred_s[order], (q * sent[g] - held[g] + b) / a)
    nxt = np.full(n, n, dtype=np.int64)              # the group's next candidate (its checks end there)
    last = np.r_[g[1:] != g[:-1], True]
    nxt[order[~last]] = order[1:][~last[:-1]]
    i = np.arange(n)
    j = np.maximum(np.searchsorted(pred_s, deadline, side="right"), i + 1)
    broken = j <= np.minimum(nxt, n - 1)
    stop = int(j[broken].min()) if broken.any() else n
    return float(pred_s[stop - 1])


def _segment_cumsum(x: np.ndarray, start: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Running sums of ``x`` restarting at each ``start`` (``seg``: the segment of each element), added in
    order as the compiled scan does."""
    out = np.empty(x.size)
    for a, b in zip(start.tolist(), np.r_[start[1:], x.size].tolist(), strict=True):
        np.cumsum(x[a:b], out=out[a:b])
    return out


def next_event_numpy(live: LiveFlows, q: float, now_s: float = 0.0) -> float:
    """The next batch end of the module docstring, in numpy.

    Examples
    --------
    Two slots of 10 flows each, of 2 and 2.5 bytes at 1 B/s since 0 s, at 1 s (20 bytes sent): holding
    the first slot from 2 s to 2.5 s costs 10 x 0.5 = 5 byte-s: more than q = 0.1 of 20 bytes, within 0.5:

    >>> live = LiveFlows(1)
    >>> _ = live.append(np.zeros((2, 1), int), np.ones(2, int), np.array([2.0, 2.5]), 0.0, np.full(2, 10.0),
    ...                 np.zeros(2, int), np.arange(2))
    >>> live.rate[:2], live.pred[:2] = 1.0, [2.0, 2.5]
    >>> [next_event_numpy(live, q, 1.0) for q in (0.0, 0.1, 0.5)]
    [2.0, 2.0, 2.5]
    """
    idx = live.live_slots()
    if not idx.size:
        return math.inf
    pred = live.pred[idx]
    if q == 0.0:
        return float(pred.min())
    order = np.argsort(pred, kind="stable")
    s = idx[order]
    p = pred[order]
    finite = int(np.searchsorted(p, math.inf, side="left"))   # stalled flows (rate 0) never finish
    if finite == 0:
        return math.inf
    s, p = s[:finite], p[:finite]
    # bytes each group has sent by now: all its bytes less what its flows in flight have left (in slot order)
    left = np.zeros(live.group_added.size)
    np.add.at(left, live.group[idx], live.w[idx] * (live.rem0[idx] - live.rate[idx] * (now_s - live.t0[idx])))
    sent = live.group_added - left
    return batch_end(p, live.rate[s] * live.w[s], live.group[s], live.group_held, sent, live.group_live, q)


def solve_next_numpy(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray, q: float
                     ) -> tuple[int, int, float]:
    """:func:`solve_numpy`, then :func:`next_event_numpy`."""
    solved, iterations = solve_numpy(live, theta, now_s, capacity)
    return solved, iterations, next_event_numpy(live, q, now_s)


_BACKEND: dict[str, Any] = {}


def backend(incidences: int = 0) -> SimpleNamespace:
    """The event operations to use: compiled (:mod:`sim.network.events_numba`) once
    :func:`sim.network.maxmin.use_compiled` says numba pays for its loading (``incidences``: link
    incidences of the flows in flight), numpy until then (same bits either way)."""
    hit = _BACKEND.get("compiled")
    if hit is not None:
        return hit
    if not maxmin.use_compiled(incidences):
        return _NUMPY
    try:
        from sim.network import events_numba
    except Exception:  # noqa: BLE001 - no numba (or it cannot compile here): numpy
        if maxmin.SOLVER == "jit":
            raise
        events_numba = None
    _BACKEND["compiled"] = _NUMPY if events_numba is None else SimpleNamespace(
        step=events_numba.step, solve=events_numba.solve, next_event=events_numba.next_event,
        solve_next=events_numba.solve_next)
    return _BACKEND["compiled"]


_NUMPY = SimpleNamespace(step=step_numpy, solve=solve_numpy, next_event=next_event_numpy,
                         solve_next=solve_next_numpy)
#: The numpy event operations (what :func:`backend` gives until the compiled ones pay).
NUMPY_OPS = _NUMPY
