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
``next_event(live, q)``
    the time of the next batch end: the smallest, over groups, of the q-quantile (weighted by the flows
    each slot stands for, rank ``floor(q * n_g)``) of the group's predicted finishes; the earliest finish
    when ``q = 0``.
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
from sim.network.events_rank import group_rank
from sim.network.live import LiveFlows

__all__ = ["NUMPY_OPS", "backend", "next_event_numpy", "solve_next_numpy", "solve_numpy", "step_numpy"]


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
    live.group_dirty[live.group[fin]] = 1
    end = np.minimum(live.pred[fin], target_s)
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
    live.group_dirty[live.group[cand]] = 1
    with np.errstate(divide="ignore"):   # a flow over a link that is down: rate 0, never finishes
        live.pred[cand] = now_s + rem / new
    return iterations


def next_event_numpy(live: LiveFlows, q: float) -> float:
    """The next batch end of the module docstring, in numpy.

    Examples
    --------
    Two groups: four flows finishing at 1..4 s and one at 9 s; with q = 0.5 group 0 allows rank 2 (3 s):

    >>> live = LiveFlows(1)
    >>> _ = live.append(np.full((5, 1), 0), np.ones(5, int), np.ones(5), 0.0, np.ones(5),
    ...                 np.array([0, 0, 0, 0, 1]), np.arange(5))
    >>> live.pred[:5] = [1.0, 2.0, 3.0, 4.0, 9.0]
    >>> next_event_numpy(live, 0.5), next_event_numpy(live, 0.0)
    (3.0, 1.0)
    """
    idx = live.live_slots()
    if not idx.size:
        return math.inf
    pred = live.pred[idx]
    if q == 0.0:
        return float(pred.min())
    group, w = live.group[idx], live.w[idx]
    total = np.bincount(group, weights=w)
    first_min = np.full(total.size, math.inf)
    np.minimum.at(first_min, group, pred)
    k = np.floor(q * total)
    present = total > 0
    small = present & (k == 0)
    best = float(first_min[small].min()) if small.any() else math.inf
    whole = int(np.count_nonzero(present)) == 1
    for g in np.flatnonzero(present & (k > 0) & (first_min < best)).tolist():
        best = min(best, group_rank(live, g, float(k[g]), whole=whole))
    return best


def solve_next_numpy(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray, q: float
                     ) -> tuple[int, int, float]:
    """:func:`solve_numpy`, then :func:`next_event_numpy`."""
    solved, iterations = solve_numpy(live, theta, now_s, capacity)
    return solved, iterations, next_event_numpy(live, q)


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
