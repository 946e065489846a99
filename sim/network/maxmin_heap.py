"""Compiled max-min fair rates for big solves: water-filling driven by a heap of link shares.

The progressive filling of :mod:`sim.network.maxmin_numba` makes one pass over every flow not yet frozen
per water level, so a solve costs incidences x levels: a 1,024-GPU all-to-all (6 M incidences, about 200
levels) spends seconds there. This kernel freezes one bottleneck link at a time instead: the link of
smallest fair share ``residual / flows`` (a min-heap of shares with lazy deletion: a link's stale entries
are skipped when popped) is saturated by all its unfrozen flows at that share, which is their max-min rate
(no link has a smaller share, so none of them is held lower elsewhere); their bytes per second leave the
residual of every link they cross, and only those links get a new share pushed. Each incidence is touched
a constant number of times plus one heap push per link and frozen flow set: O(incidences x log links).

It computes the same allocation (max-min is unique) but not the same float bits as the progressive filling:
residuals are reduced flow by flow instead of once per level, so rates differ by float rounding (a few
ulps; tested). :func:`sim.network.maxmin.max_min_rates` and the compiled network events use it only for
solves of :data:`sim.network.constants.HEAP_MIN_INCIDENCES` or more, a size that always runs compiled
(:func:`sim.network.maxmin.use_compiled`), so which solver a run uses depends on the solve alone, never on
what the process did before.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["max_min_heap_kernel"]


@njit(cache=True, nogil=True)
def _push(keys, vals, size, key, val):
    """Push ``(key, val)`` on the binary min-heap ``keys/vals[:size]`` (ties by ``val``); new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        pk = keys[parent]
        if pk < key or (pk == key and vals[parent] <= val):
            break
        keys[i] = pk
        vals[i] = vals[parent]
        i = parent
    keys[i] = key
    vals[i] = val
    return size + 1


@njit(cache=True, nogil=True)
def _pop(keys, vals, size):
    """Remove the root of the heap ``keys/vals[:size]``; new size (the root was read by the caller)."""
    size -= 1
    key = keys[size]
    val = vals[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (keys[right] < keys[child] or (keys[right] == keys[child] and vals[right] < vals[child])):
            child = right
        ck = keys[child]
        if key < ck or (key == ck and val <= vals[child]):
            break
        keys[i] = ck
        vals[i] = vals[child]
        i = child
    if size > 0:
        keys[i] = key
        vals[i] = val
    return size


@njit(cache=True, nogil=True)
def max_min_heap_kernel(flow_ptr, link_idx, capacity, weight):
    """Max-min fair rates by bottleneck links in order of fair share; the rates and the bottlenecks frozen.

    Same parameters and rates as :func:`sim.network.maxmin.max_min_rates` up to float rounding (``weight``
    given: float64, one per flow). The second result counts the bottleneck links that froze flows.
    """
    n = len(flow_ptr) - 1
    base = flow_ptr[0]
    nnz = flow_ptr[n] - base
    m = len(capacity)
    # per link: weighted flows not frozen, their count, the residual capacity, and the flows (CSC)
    cnt = np.zeros(m)
    n_act = np.zeros(m, dtype=np.int64)
    for f in range(n):
        for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
            k = link_idx[base + e]
            cnt[k] += weight[f]
            n_act[k] += 1
    start = np.zeros(m + 1, dtype=np.int64)
    for k in range(m):
        start[k + 1] = start[k] + n_act[k]
    fill = start[:m].copy()
    csc = np.empty(nnz, dtype=np.int64)
    for f in range(n):
        for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
            k = link_idx[base + e]
            csc[fill[k]] = f
            fill[k] += 1
    residual = np.empty(m)
    share = np.empty(m)
    keys = np.empty(nnz + m)
    vals = np.empty(nnz + m, dtype=np.int64)
    size = 0
    for k in range(m):
        residual[k] = capacity[k]
        if n_act[k]:
            share[k] = capacity[k] / cnt[k]
            size = _push(keys, vals, size, share[k], k)
    rates = np.empty(n)
    frozen = np.zeros(n, dtype=np.bool_)
    dirty = np.zeros(m, dtype=np.bool_)
    changed = np.empty(m, dtype=np.int64)
    left = n
    bottlenecks = 0
    while left > 0 and size > 0:
        s = keys[0]
        k = vals[0]
        size = _pop(keys, vals, size)
        if n_act[k] == 0 or s != share[k]:
            continue   # a stale entry: the link's share changed since, or all its flows are frozen
        bottlenecks += 1
        n_changed = 0
        for i in range(start[k], start[k + 1]):
            f = csc[i]
            if frozen[f]:
                continue
            frozen[f] = True
            rates[f] = s
            left -= 1
            wf = weight[f]
            taken = s * wf
            for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
                j = link_idx[base + e]
                residual[j] -= taken
                cnt[j] -= wf
                n_act[j] -= 1
                if not dirty[j]:
                    dirty[j] = True
                    changed[n_changed] = j
                    n_changed += 1
        for i in range(n_changed):
            j = changed[i]
            dirty[j] = False
            if n_act[j] > 0:
                if residual[j] < 0.0:
                    residual[j] = 0.0   # float rounding below an exactly used-up link
                share[j] = residual[j] / cnt[j]
                size = _push(keys, vals, size, share[j], j)
    return rates, bottlenecks
