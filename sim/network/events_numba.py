"""Compiled (numba) network events: :mod:`sim.network.events` as loops over the live slots.

The numpy operations make about ten passes with temporaries over every flow in flight per event; these
kernels make one pass to select (finishers, or the slots to re-solve), then touch only the selected slots
and their links, through per-link scratch arrays that are reset after use (so no pass is over all links,
except ``link_bytes += load * dt``). Per-link sums are accumulated in slot order from zero, as
``np.bincount`` does, and added afterwards, so the results are the numpy version's bits (tested). The next
batch end is one kernel too, the rank selection of big batching groups included (one gathering pass, then
a selection per group), so an event is three compiled calls and no numpy pass over the slots. Solves of
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
                                      live.gi)
    return int(n), float(min_rate), int(flows)


def solve(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray) -> tuple[int, int]:
    """:func:`sim.network.events.solve_numpy`, compiled."""
    n, iterations = _solve_kernel(theta * (1.0 - THETA_RTOL), now_s, capacity, live.hi, live.n_slots,
                                  live.alive, live.fcols, live.icols, live.links, live.lf, live.li,
                                  live.slot_buf, constants.HEAP_MIN_INCIDENCES, live.gi)
    return int(n), int(iterations)


def next_event(live: LiveFlows, q: float) -> float:
    """:func:`sim.network.events.next_event_numpy`, compiled (the rank selection of groups of ``1 / q``
    flows or more too: the same finish time, an element of ``pred``, whatever the selection algorithm)."""
    return float(_next_event_kernel(q, live.hi, live.alive, live.fcols, live.icols, live.weighted, live.gf,
                                    live.gi))


def solve_next(live: LiveFlows, theta: float, now_s: float, capacity: np.ndarray, q: float
               ) -> tuple[int, int, float]:
    """:func:`solve` then :func:`next_event` in one compiled call."""
    n, iterations, nxt = _solve_next_kernel(theta * (1.0 - THETA_RTOL), now_s, capacity, q, live.hi, live.n_slots,
                                            live.alive, live.fcols, live.icols, live.links, live.lf, live.li,
                                            live.slot_buf, constants.HEAP_MIN_INCIDENCES, live.weighted,
                                            live.gf, live.gi)
    return int(n), int(iterations), float(nxt)


# Rows of the packed arrays (sim.network.live): fcols = rem0, t0, rate, pred, w; icols = group, fid, deg;
# lf = load, acc_a, acc_b; li = count, acc_n, lmap, touched; gf = group_w, group_min; gi = group_n, group_buf.


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_next_kernel(threshold, now, capacity, q, hi, n_slots, alive, fcols, icols, links, lf, li, cand,
                       heap_min, weighted, gf, gi):
    n, iterations = _solve_kernel(threshold, now, capacity, hi, n_slots, alive, fcols, icols, links, lf, li, cand,
                                  heap_min, gi)
    return n, iterations, _next_event_kernel(q, hi, alive, fcols, icols, weighted, gf, gi)


@njit(cache=True, nogil=True, error_model="numpy")
def _step_kernel(target, slack, dt, hi, alive, fcols, icols, links, lf, li, link_bytes, out, end_out, gi):
    rem0, t0, rate, pred, w = fcols[0], fcols[1], fcols[2], fcols[3], fcols[4]
    group, deg = icols[0], icols[2]
    group_dirty = gi[2]
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
        group_dirty[group[s]] = 1
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
    for i in range(n):
        s = out[i]
        end_out[i] = pred[s] if pred[s] < target else target
        pred[s] = math.inf
    if n > 1:
        order = np.argsort(end_out[:n], kind="mergesort")
        fin = out[:n][order]
        end = end_out[:n][order]
        out[:n] = fin
        end_out[:n] = end
    return n, min_rate, flows


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_kernel(threshold, now, capacity, hi, n_slots, alive, fcols, icols, links, lf, li, cand, heap_min, gi):
    rem0, t0, rate, pred, w = fcols[0], fcols[1], fcols[2], fcols[3], fcols[4]
    group, deg = icols[0], icols[2]
    group_dirty = gi[2]
    load, acc_old = lf[0], lf[1]
    count, lmap, used = li[0], li[2], li[3]
    n = 0
    for s in range(hi):
        if alive[s] and rate[s] >= threshold:
            cand[n] = s
            n += 1
    if n == 0:
        return 0, 0
    for i in range(n):   # their predicted finishes change: their groups' batch ends too
        group_dirty[group[cand[i]]] = 1
    iterations = _resolve(cand, n, n == n_slots, now, capacity, rem0, t0, rate, pred, w, deg, links, count,
                          load, lmap, used, acc_old, heap_min)
    if iterations < 0:   # float rounding at an exact tie starved a flow: a full solve is always safe
        n = 0
        for s in range(hi):
            if alive[s]:
                cand[n] = s
                n += 1
                group_dirty[group[s]] = 1
        iterations = _resolve(cand, n, True, now, capacity, rem0, t0, rate, pred, w, deg, links, count,
                              load, lmap, used, acc_old, heap_min)
    return n, iterations


@njit(cache=True, nogil=True, error_model="numpy")
def _resolve(cand, n, full, now, capacity, rem0, t0, rate, pred, w, deg, links, count, load, lmap, used,
             acc_old, heap_min):
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
    # the new loads, summed per solve-local link over the CSR just built (sequential, not the slots' link
    # rows again): the same additions in the same order as by link id
    acc_local = np.zeros(n_used)
    for i in range(n):
        rw = new[i] * wc[i]
        for e in range(ptr[i], ptr[i + 1]):
            acc_local[lk[e]] += rw
    for u in range(n_used):
        k = used[u]
        if full:
            load[k] = acc_local[u]
        else:
            load[k] += acc_local[u] - acc_old[k]
            if count[k] == 0:
                load[k] = 0.0
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
def _next_event_kernel(q, hi, alive, fcols, icols, weighted, gf, gi):
    pred, w = fcols[3], fcols[4]
    group = icols[0]
    group_w, group_min, group_val = gf[0], gf[1], gf[2]
    group_n, group_buf, group_dirty = gi[0], gi[1], gi[2]
    if q == 0.0:
        best = math.inf
        for s in range(hi):
            if alive[s] and pred[s] < best:
                best = pred[s]
        return best
    n_groups = 0
    for s in range(hi):
        if alive[s]:
            g = group[s]
            if group_n[g] == 0:
                group_buf[n_groups] = g
                n_groups += 1
                group_min[g] = pred[s]
            elif pred[s] < group_min[g]:
                group_min[g] = pred[s]
            group_n[g] += 1
            group_w[g] += w[s]
    # groups of fewer than 1/q flows batch nothing (rank 0: their earliest finish); the others need the
    # rank-k finish, only when their earliest finish is before the best so far
    best = math.inf
    for i in range(n_groups):
        g = group_buf[i]
        if math.floor(q * group_w[g]) == 0.0 and group_min[g] < best:
            best = group_min[g]
    # a big group no event touched since its batch end was found keeps it (group_val)
    for i in range(n_groups):
        g = group_buf[i]
        if math.floor(q * group_w[g]) > 0.0 and group_dirty[g] == 0 and group_val[g] < best:
            best = group_val[g]
    # the other big groups' predicted finishes, gathered group by group in one pass (group_n: the cursor)
    offset = np.full(n_groups + 1, 0, dtype=np.int64)
    big = np.zeros(n_groups, dtype=np.int64)
    n_big = 0
    total = 0
    for i in range(n_groups):
        g = group_buf[i]
        k = math.floor(q * group_w[g])
        if k > 0.0 and group_dirty[g] != 0 and group_min[g] < best:
            big[n_big] = g
            offset[n_big] = total
            total += group_n[g]
            group_n[g] = -(n_big + 1)   # marks a big group: its index in ``big``
            n_big += 1
        else:
            group_n[g] = 0
    offset[n_big] = total
    if n_big:
        cursor = offset[:n_big].copy()
        buf_pred = np.empty(total)
        buf_w = np.empty(total)
        for s in range(hi):
            if alive[s]:
                b = group_n[group[s]]
                if b < 0:
                    at = cursor[-b - 1]
                    buf_pred[at] = pred[s]
                    buf_w[at] = w[s]
                    cursor[-b - 1] = at + 1
        for b in range(n_big):
            g = big[b]
            seg = buf_pred[offset[b]:offset[b + 1]]
            k = math.floor(q * group_w[g])
            if not weighted:
                kk = np.int64(k)
                value = np.partition(seg, kk)[kk]
            else:   # a slot of weight w counts w times: the first finish whose running weight passes k
                order = np.argsort(seg, kind="mergesort")
                run = 0.0
                value = seg[order[order.size - 1]]
                for j in range(order.size):
                    run += buf_w[offset[b] + order[j]]
                    if run > k:
                        value = seg[order[j]]
                        break
            if value < best:
                best = value
            group_val[g] = value
            group_dirty[g] = 0
            group_n[g] = 0
    for i in range(n_groups):
        g = group_buf[i]
        group_n[g] = 0
        group_w[g] = 0.0
    return best
