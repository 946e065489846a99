"""Compiled (numba) network events: :mod:`sim.network.events` as loops over the live slots.

The numpy operations make about ten passes with temporaries over every flow in flight per event; these
kernels make one pass to select (finishers, or the slots to re-solve), then touch only the selected slots
and their links, through per-link scratch arrays that are reset after use (so no pass is over all links,
except ``link_bytes += load * dt``). Per-link sums are accumulated in slot order from zero, as
``np.bincount`` does, and added afterwards, so the results are the numpy version's bits (tested). The next
batch end is one kernel too (two passes over the live slots: the smallest completion window, then the
latest finish inside it), fused with the re-solve, so an event is two compiled calls and no numpy pass
over the slots. Solves of
:data:`sim.network.constants.HEAP_MIN_INCIDENCES` or more go to the heap water-filling
(:mod:`sim.network.maxmin_heap`; same allocation, rounding may differ). Imported only by :func:`sim.network.events.backend`; numba caches the machine code (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sim.network import constants
from sim.network.constants import THETA_RTOL
from sim.network.live import LiveFlows
from sim.network.maxmin_heap import max_min_heap_kernel
from sim.network.maxmin_numba import max_min_kernel

__all__ = ["next_event", "solve", "solve_next", "step"]


def step(live: LiveFlows, target_s: float, slack_s: float, dt_s: float, link_bytes: np.ndarray
         ) -> tuple[int, float, int]:
    """:func:`sim.network.events.step_numpy`, compiled."""
    n, min_rate, flows = _step_kernel(target_s, slack_s, dt_s, live.hi, live.alive, live.fcols, live.icols,
                                      live.links, live.lf, live.li, link_bytes, live.slot_buf, live.end_buf,
                                      live.gf)
    return int(n), float(min_rate), int(flows)


def solve(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray) -> tuple[int, int]:
    """:func:`sim.network.events.solve_numpy`, compiled."""
    n, iterations = _solve_kernel(theta * (1.0 - THETA_RTOL), now_s, capacity, live.hi, live.n_slots,
                                  live.alive, live.fcols, live.icols, live.links, live.lf, live.li,
                                  live.slot_buf, constants.HEAP_MIN_INCIDENCES)
    return int(n), int(iterations)


def next_event(live: LiveFlows, q: float, now_s: float = 0.0) -> float:
    """:func:`sim.network.events.next_event_numpy`, compiled (the same float operations: the same time)."""
    return float(_next_event_kernel(q, now_s, live.hi, live.alive, live.fcols, live.icols, live.gf, live.gi))


def solve_next(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray, q: float
               ) -> tuple[int, int, float]:
    """:func:`solve` then :func:`next_event` in one compiled call."""
    n, iterations, nxt = _solve_next_kernel(theta * (1.0 - THETA_RTOL), now_s, capacity, q, live.hi, live.n_slots,
                                            live.alive, live.fcols, live.icols, live.links, live.lf, live.li,
                                            live.slot_buf, constants.HEAP_MIN_INCIDENCES, live.gf, live.gi)
    return int(n), int(iterations), float(nxt)


# Rows of the packed arrays (sim.network.live): fcols = rem0, t0, rate, pred, w; icols = group, fid, deg;
# lf = load, acc_a, acc_b; li = count, acc_n, lmap, touched; gf = held, added, live, left, a, b; gi = on.


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_next_kernel(threshold, now, capacity, q, hi, n_slots, alive, fcols, icols, links, lf, li, cand,
                       heap_min, gf, gi):
    n, iterations = _solve_kernel(threshold, now, capacity, hi, n_slots, alive, fcols, icols, links, lf, li, cand,
                                  heap_min)
    return n, iterations, _next_event_kernel(q, now, hi, alive, fcols, icols, gf, gi)


@njit(cache=True, nogil=True, error_model="numpy")
def _step_kernel(target, slack, dt, hi, alive, fcols, icols, links, lf, li, link_bytes, out, end_out, gf):
    rem0, t0, rate, pred, w = fcols[0], fcols[1], fcols[2], fcols[3], fcols[4]
    group, deg = icols[0], icols[2]
    held, in_flight = gf[0], gf[2]
    load, acc_bytes, acc_rate = lf[0], lf[1], lf[2]
    count, acc_n, touched = li[0], li[1], li[3]
    if dt > 0:
        for k in range(load.size):
            link_bytes[k] += load[k] * dt
    lim = target + slack
    n = 0
    for s in range(hi):
        if alive[s] and pred[s] <= lim:
            out[n] = s
            n += 1
    if n == 0:
        return 0, math.inf, 0
    n_touched = 0
    min_rate = math.inf
    flows = 0
    for i in range(n):
        s = out[i]
        r = rate[s]
        ws = w[s]
        left = (rem0[s] - r * (target - t0[s])) * ws
        rw = r * ws
        nw = np.int64(ws)
        if r < min_rate:
            min_rate = r
        for j in range(deg[s]):
            k = links[s, j]
            if acc_n[k] == 0:
                touched[n_touched] = k
                n_touched += 1
            acc_bytes[k] += left
            acc_rate[k] += rw
            acc_n[k] += nw
        alive[s] = False
        flows += nw
    for i in range(n_touched):
        k = touched[i]
        link_bytes[k] += acc_bytes[k]
        count[k] -= acc_n[k]
        load[k] -= acc_rate[k]
        if count[k] == 0:
            load[k] = 0.0
        acc_bytes[k] = 0.0
        acc_rate[k] = 0.0
        acc_n[k] = 0
    # finishing order: by min(pred, target), ties in slot order (a stable sort, as numpy's)
    for i in range(n):   # in slot order, as np.add.at: the groups' batching budgets
        s = out[i]
        end_out[i] = pred[s] if pred[s] < target else target
        g = group[s]
        held[g] += (rate[s] * w[s]) * (target - end_out[i])
        in_flight[g] -= w[s]
        pred[s] = math.inf
    if n > 1:
        order = np.argsort(end_out[:n], kind="mergesort")
        fin = out[:n][order]
        end = end_out[:n][order]
        out[:n] = fin
        end_out[:n] = end
    return n, min_rate, flows


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_kernel(threshold, now, capacity, hi, n_slots, alive, fcols, icols, links, lf, li, cand, heap_min):
    rem0, t0, rate, pred, w = fcols[0], fcols[1], fcols[2], fcols[3], fcols[4]
    deg = icols[2]
    load, acc_old, acc_new = lf[0], lf[1], lf[2]
    count, lmap, used = li[0], li[2], li[3]
    n = 0
    for s in range(hi):
        if alive[s] and rate[s] >= threshold:
            cand[n] = s
            n += 1
    if n == 0:
        return 0, 0
    iterations = _resolve(cand, n, n == n_slots, now, capacity, rem0, t0, rate, pred, w, deg, links, count,
                          load, lmap, used, acc_old, acc_new, heap_min)
    if iterations < 0:   # float rounding at an exact tie starved a flow: a full solve is always safe
        n = 0
        for s in range(hi):
            if alive[s]:
                cand[n] = s
                n += 1
        iterations = _resolve(cand, n, True, now, capacity, rem0, t0, rate, pred, w, deg, links, count,
                              load, lmap, used, acc_old, acc_new, heap_min)
    return n, iterations


@njit(cache=True, nogil=True, error_model="numpy")
def _resolve(cand, n, full, now, capacity, rem0, t0, rate, pred, w, deg, links, count, load, lmap, used,
             acc_old, acc_new, heap_min):
    nnz = 0
    for i in range(n):
        nnz += deg[cand[i]]
    ptr = np.empty(n + 1, dtype=np.int64)
    lk = np.empty(nnz, dtype=np.int64)
    wc = np.empty(n)
    old_known = np.empty(n)
    n_used = 0
    e = 0
    for i in range(n):
        s = cand[i]
        r = rate[s]
        ok = r if r < math.inf else 0.0
        old_known[i] = ok
        ws = w[s]
        wc[i] = ws
        ptr[i] = e
        for j in range(deg[s]):
            k = links[s, j]
            if lmap[k] < 0:   # the links in use, numbered 0..n_used-1 (the solve's arrays stay small)
                lmap[k] = n_used
                used[n_used] = k
                n_used += 1
            lk[e] = lmap[k]
            e += 1
            if not full:
                acc_old[k] += ok * ws
    ptr[n] = e
    residual = np.empty(n_used)
    for u in range(n_used):
        k = used[u]
        residual[u] = capacity[k] if full else capacity[k] - (load[k] - acc_old[k])
    if nnz >= heap_min:   # a big solve: one bottleneck at a time, not a pass per level
        new, iterations = max_min_heap_kernel(ptr, lk, residual, wc)
    else:
        new, iterations = max_min_kernel(ptr, lk, residual, wc)
    starved = False
    if not full:
        for i in range(n):
            if not new[i] > 0.0:
                starved = True
    if starved:
        for u in range(n_used):
            k = used[u]
            acc_old[k] = 0.0
            lmap[k] = -1
        return -1
    for i in range(n):
        s = cand[i]
        rw = new[i] * wc[i]
        for j in range(deg[s]):
            acc_new[links[s, j]] += rw
    for u in range(n_used):
        k = used[u]
        if full:
            load[k] = acc_new[k]
        else:
            load[k] += acc_new[k] - acc_old[k]
            if count[k] == 0:
                load[k] = 0.0
        acc_new[k] = 0.0
        acc_old[k] = 0.0
        lmap[k] = -1
    for i in range(n):
        s = cand[i]
        rem = rem0[s] - old_known[i] * (now - t0[s])
        rem0[s] = rem
        t0[s] = now
        rate[s] = new[i]
        pred[s] = now + rem / new[i]   # rate 0 (a link down): inf, never finishes
    return iterations


@njit(cache=True, nogil=True)
def _next_event_kernel(q, now, hi, alive, fcols, icols, gf, gi):
    rem0, t0, rate, pred, w = fcols[0], fcols[1], fcols[2], fcols[3], fcols[4]
    group = icols[0]
    held, added, in_flight, left, ga, gb = gf[0], gf[1], gf[2], gf[3], gf[4], gf[5]
    on = gi[0]
    best = math.inf
    n_live = 0
    for s in range(hi):
        if alive[s]:
            n_live += 1
            if pred[s] < best:
                best = pred[s]
    if q == 0.0 or n_live == 0 or best == math.inf:
        return best
    # the live predicted finishes (to take the earliest m in finishing order), and the bytes each group's
    # flows in flight have left (in slot order, as np.add.at)
    live_pred = np.empty(n_live)
    live_slot = np.empty(n_live, dtype=np.int64)
    present = np.empty(n_live, dtype=np.int64)
    n_present = 0
    n_live = 0
    for s in range(hi):
        if alive[s]:
            live_pred[n_live] = pred[s]
            live_slot[n_live] = s
            n_live += 1
            g = group[s]
            if on[g] == 0:
                on[g] = 1
                present[n_present] = g
                n_present += 1
            left[g] += w[s] * (rem0[s] - rate[s] * (now - t0[s]))
    for i in range(n_present):
        on[present[i]] = 0
    m = 64
    touched = np.empty(0, dtype=np.int64)
    result = math.inf
    while True:
        if m >= n_live:
            cut = math.inf
        else:   # the m-th smallest: every slot up to it (ties included) in the order a full sort gives
            cut = np.partition(live_pred, m - 1)[m - 1]
        sel = np.flatnonzero(live_pred <= cut)
        order = np.argsort(live_pred[sel], kind="mergesort")
        cand = live_slot[sel[order]]
        k = cand.size
        if touched.size < k:
            touched = np.empty(k, dtype=np.int64)
        # scan in finishing order; a group's deadline (events.batch_end) with its finishers so far
        n_t = 0
        limit = math.inf
        small = math.inf   # the first finish of a group of fewer than 1 / q flows: it holds nothing
        stop = k
        for j in range(k):
            s = cand[j]
            p = pred[s]
            if j > 0 and (p > limit or p == math.inf):
                stop = j
                break
            g = group[s]
            if math.floor(q * in_flight[g]) == 0.0:
                if p < small:
                    small = p
                if small < limit:
                    limit = small
                continue
            if on[g] == 0:
                on[g] = 1
                touched[n_t] = g
                n_t += 1
            rw = rate[s] * w[s]
            ga[g] += rw
            gb[g] += rw * p
            limit = small
            for t in range(n_t):
                h = touched[t]
                d = (q * (added[h] - left[h]) - held[h] + gb[h]) / ga[h]
                if d < limit:
                    limit = d
        for t in range(n_t):
            h = touched[t]
            on[h] = 0
            ga[h] = 0.0
            gb[h] = 0.0
        if stop < k or k == n_live:
            result = pred[cand[stop - 1]]
            break
        m *= 4
    for i in range(n_present):
        left[present[i]] = 0.0
    return result
