"""Compiled (numba) per-path reductions of the analytical tier: the same results as the numpy code of
:mod:`sim.analytical.routes`, in one pass instead of a gather, a ``reduceat`` and a ``repeat``.

- :func:`path_bounds`: each path's slowest link (``np.minimum.reduceat``, exact in any order) and its
  latency (``np.add.reduceat``: numpy adds a segment as its first element plus the pairwise sum of the
  rest, eight accumulators for eight or more; :func:`path_bounds` adds in that order, so the sums are
  bit-identical, as ``tests/sim/analytical/test_kernels.py`` checks).
- :func:`link_loads`: ``bincount(links, weights=repeat(row_bytes, per_row) [x fraction])``, adding in the
  same order (identical sums); the per-key route table's kernel, which now serves only as the test oracle of
  :class:`sim.analytical.key_routes.KeyRoutes` (``tests/sim/analytical/pair_routes_oracle.py``).
- :func:`grouped_loads`: :func:`sim.analytical.key_routes.grouped_loads_numpy` (per group of rows a sum
  from zero, then the groups' sums in order), in one pass over the rows' links.

:func:`topologies.routing.use_compiled_walk` decides when they run (numba is loaded for the route walk
then anyway). numba caches the machine code on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["MAX_PATH_LINKS", "grouped_loads", "link_loads", "path_bounds"]

#: Longest path (links) :func:`path_bounds` sums like numpy (beyond, numpy's pairwise sum recurses).
MAX_PATH_LINKS = 129


@njit(cache=True, nogil=True, inline="always")
def _pairwise(vals, lo, n):
    """numpy's pairwise sum of ``vals[lo:lo + n]`` for ``n <= 128`` (no recursion at that size)."""
    if n < 8:
        res = 0.0
        for q in range(lo, lo + n):
            res += vals[q]
        return res
    r0, r1, r2, r3 = vals[lo], vals[lo + 1], vals[lo + 2], vals[lo + 3]
    r4, r5, r6, r7 = vals[lo + 4], vals[lo + 5], vals[lo + 6], vals[lo + 7]
    i = 8
    top = n - n % 8
    while i < top:
        r0 += vals[lo + i]
        r1 += vals[lo + i + 1]
        r2 += vals[lo + i + 2]
        r3 += vals[lo + i + 3]
        r4 += vals[lo + i + 4]
        r5 += vals[lo + i + 5]
        r6 += vals[lo + i + 6]
        r7 += vals[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += vals[lo + i]
        i += 1
    return res


@njit(cache=True, nogil=True)
def path_bounds(link_ptr, link_idx, capacity, latency):
    """Per path ``j`` (links ``link_idx[link_ptr[j]:link_ptr[j + 1]]``, at most :data:`MAX_PATH_LINKS`):
    its smallest capacity (``inf`` for no links) and its summed latency (0 for no links)."""
    n = len(link_ptr) - 1
    cap_min = np.full(n, np.inf)
    lat = np.zeros(n)
    for j in range(n):
        lo, hi = link_ptr[j], link_ptr[j + 1]
        if hi > lo:
            c = capacity[link_idx[lo]]
            for q in range(lo + 1, hi):
                c = min(c, capacity[link_idx[q]])
            cap_min[j] = c
            first = latency[link_idx[lo]]
            rest = 0.0
            m = hi - lo - 1
            if m < 8:
                for q in range(lo + 1, hi):
                    rest += latency[link_idx[q]]
            else:
                buf = np.empty(m)
                for q in range(m):
                    buf[q] = latency[link_idx[lo + 1 + q]]
                rest = _pairwise(buf, 0, m)
            lat[j] = first + rest
    return cap_min, lat


@njit(cache=True, nogil=True)
def link_loads(links, fraction, row_ptr, row_bytes, n_links):
    """Bytes per link: row ``r`` puts ``row_bytes[r]`` (times ``fraction[e]`` when ``fraction`` is not empty)
    on each link ``links[e]``, ``row_ptr[r] <= e < row_ptr[r + 1]``.

    Rows without bytes are skipped (numpy adds their zeros, which changes no sum), so an op touches only
    the entries of its own pairs, in table order: the sums are numpy's, bit for bit.
    """
    load = np.zeros(n_links)
    frac = len(fraction) > 0
    for r in range(len(row_ptr) - 1):
        w = row_bytes[r]
        if w == 0.0:
            continue
        for e in range(row_ptr[r], row_ptr[r + 1]):
            load[links[e]] += w * fraction[e] if frac else w
    return load


@njit(cache=True, nogil=True)
def grouped_loads(group, rows, row_bytes, row_ptr, links, fraction, n_links):
    """Bytes per link: for each group of ``rows`` (``group`` non-decreasing), its rows' ``row_bytes`` (times
    ``fraction[e]`` when not empty) summed per link from zero in row order; each group's sums then added
    to the total in group order. Rows without bytes are skipped (adding their zeros changes no sum)."""
    load = np.zeros(n_links)
    part = np.zeros(n_links)
    seen = np.zeros(n_links, np.bool_)
    touched = np.empty(n_links, np.int64)
    frac = len(fraction) > 0
    nt = 0
    n = len(rows)
    for q in range(n):
        r = rows[q]
        w = row_bytes[q]
        if w != 0.0:
            for e in range(row_ptr[r], row_ptr[r + 1]):
                link = links[e]
                if not seen[link]:
                    seen[link] = True
                    touched[nt] = link
                    nt += 1
                part[link] += w * fraction[e] if frac else w
        if q + 1 == n or group[q + 1] != group[q]:
            for t in range(nt):
                link = touched[t]
                load[link] += part[link]
                part[link] = 0.0
                seen[link] = False
            nt = 0
    return load
