"""Compiled (numba) max-min fair rates: :func:`sim.network.maxmin.max_min_rates` as one loop nest.

The numpy version spends most of a solve in call overhead and in temporaries the size of the incidence
list. This kernel runs the same passes with the same float operations in the same order (per-link sums
accumulated in incidence order, then subtracted), so its rates are bit-identical to the numpy version's
(a hypothesis test checks it). numba caches the machine code on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sim.network.constants import SHARE_RTOL

__all__ = ["max_min_kernel"]


@njit(cache=True, nogil=True)
def max_min_kernel(flow_ptr, link_idx, capacity, weight):
    """Max-min fair rates (progressive filling, local bottlenecks frozen per pass) and the pass count.

    Same parameters and results as :func:`sim.network.maxmin.max_min_rates` (``weight`` given: float64,
    one per flow, 1 for a plain flow).
    """
    n = len(flow_ptr) - 1
    base = flow_ptr[0]
    nnz = flow_ptr[n] - base
    m_all = len(capacity)
    lk = np.empty(nnz, dtype=np.int64)
    if m_all > 4096 and 4 * nnz < m_all:
        # A big fabric and few links in use: number the used links 0..u-1 (in link-id order, as np.unique
        # does) so per-link arrays stay small.
        order = np.argsort(link_idx[base:base + nnz], kind="mergesort")
        used = np.empty(nnz, dtype=np.int64)
        u = -1
        last = -1
        for j in range(nnz):
            lid = link_idx[base + order[j]]
            if lid != last:
                u += 1
                used[u] = lid
                last = lid
            lk[order[j]] = u
        m = u + 1
        cap = np.empty(m)
        for k in range(m):
            cap[k] = capacity[used[k]]
    else:
        for j in range(nnz):
            lk[j] = link_idx[base + j]
        m = m_all
        cap = capacity
    residual = np.empty(m)
    # The links in use, once: per-pass work then touches only them and the flows not yet frozen (the
    # numpy version moves frozen flows' incidences to a sentinel link instead; same rates).
    seen = np.zeros(m, dtype=np.bool_)
    links = np.empty(nnz, dtype=np.int64)
    n_links = 0
    for e in range(nnz):
        k = lk[e]
        if not seen[k]:
            seen[k] = True
            links[n_links] = k
            n_links += 1
            residual[k] = cap[k]
    rates = np.empty(n)
    count = np.zeros(m)
    share = np.empty(m)
    flow_min = np.empty(n)
    blocked = np.zeros(m, dtype=np.bool_)
    taken = np.zeros(m)
    active = np.arange(n)  # flows not frozen, in flow order; compacted after each pass
    n_active = n
    # Integral weights (plain and merged flows): a link's count is a sum of small integers, exact in
    # float64 whatever the order, so the frozen flows' weights are subtracted instead of counting the
    # active incidences again every pass: the same counts, bit for bit, one sweep fewer per pass.
    integral = True
    for f in range(n):
        if weight[f] != np.floor(weight[f]) or weight[f] > 2.0**40:
            integral = False
            break
    for i in range(n_active):
        f = active[i]
        for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
            count[lk[e]] += weight[f]
    up = 1.0 + SHARE_RTOL
    iterations = 0
    while True:
        iterations += 1
        if not integral and iterations > 1:
            for i in range(n_links):
                count[links[i]] = 0.0
            for i in range(n_active):
                f = active[i]
                for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
                    count[lk[e]] += weight[f]
        for i in range(n_links):
            k = links[i]
            if count[k]:
                share[k] = residual[k] / count[k]
            blocked[k] = False
        # each flow's smallest share, then (its links still in cache) the links it blocks: a link is no
        # local bottleneck when a flow on it is held lower elsewhere (an OR, so the order is free)
        for i in range(n_active):
            f = active[i]
            e0 = flow_ptr[f] - base
            e1 = flow_ptr[f + 1] - base
            lo = share[lk[e0]]
            for e in range(e0 + 1, e1):
                if share[lk[e]] < lo:
                    lo = share[lk[e]]
            flow_min[f] = lo
            bound = lo * up
            for e in range(e0, e1):
                if bound < share[lk[e]]:
                    blocked[lk[e]] = True
        for i in range(n_links):
            taken[links[i]] = 0.0
        kept = 0
        for i in range(n_active):
            f = active[i]
            frozen = False
            for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
                if not blocked[lk[e]]:
                    frozen = True
                    break
            if frozen:
                rates[f] = flow_min[f]
                for e in range(flow_ptr[f] - base, flow_ptr[f + 1] - base):
                    taken[lk[e]] += flow_min[f] * weight[f]  # in incidence order, as np.bincount sums
                    if integral:
                        count[lk[e]] -= weight[f]
            else:
                active[kept] = f
                kept += 1
        n_active = kept
        if not n_active:
            break
        # the links no active flow crosses any more are dropped from the per-link loops (nothing reads
        # them again: only active flows look at shares)
        live_links = 0
        for i in range(n_links):
            k = links[i]
            residual[k] = max(residual[k] - taken[k], 0.0)
            if not integral or count[k] > 0.0:
                links[live_links] = k
                live_links += 1
        n_links = live_links
    return rates, iterations
