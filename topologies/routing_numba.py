"""Compiled (numba) route walk: :meth:`topologies.routing.Router.route` for ``ecmp`` and ``single`` as one loop.

The numpy walk pays, per GPU pair and hop, for temporaries the size of the batch (the splitmix hash, the
next-hop gather, the padded path matrix and its mask). These kernels do the same integer arithmetic per
pair: the same splitmix64 hash of (seed, src, dst, key), the same equal-cost access switch (the
``h % count``-th of the nearest ones), the same next hop at each switch (``mix(h ^ salt) % count``-th entry
of the next-hop table) and the same last link, so the routes are identical (a hypothesis test compares
them on small fabrics of every preset, cut links included). numba caches the machine code on disk
(``cache=True``); :func:`topologies.routing.use_compiled_walk` decides when loading it pays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["flow_hash", "route_csr"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_DST_SALT = np.uint64(0x632BE59BD9B4E019)
_SW_SALT = np.uint64(0xD6E8FEB86659FD93)


@njit(cache=True, nogil=True, inline="always")
def _mix(x):
    """splitmix64 finaliser (the numpy ``topologies.routing`` one, on one uint64)."""
    x = x + _GOLDEN
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


@njit(cache=True, nogil=True)
def flow_hash(seed, src, dst, key):
    """ECMP hash of every flow: ``mix(mix(mix(seed ^ mix(src)) ^ mix(dst + salt)) ^ key)`` (``seed`` a
    uint64, the others uint64 arrays)."""
    n = len(src)
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = _mix(seed ^ _mix(src[i]))
        h = _mix(h ^ _mix(dst[i] + _DST_SALT))
        out[i] = _mix(h ^ key[i])
    return out


@njit(cache=True, nogil=True, inline="always")
def _mod(hop, cnt):
    """``hop % cnt`` (exact; a mask where ``cnt`` is a power of two, the common case: no division)."""
    if cnt & (cnt - 1) == 0:
        return np.int64(hop & np.uint64(cnt - 1))
    return np.int64(hop % np.uint64(cnt))


@njit(cache=True, nogil=True)
def route_csr(pre, post, net_of, a, b, h, target_of, dt, acc_sw, acc_lid, acc_down, nh_cnt, nh_ptr, nh_lid,
              sw_of, ldst, sw_node, n_sw, inf):
    """Links of every flow in CSR form: its NVLink leg ``pre[i]``, then (when ``net_of[i] >= 0``) the network
    path GPU ``a[k]`` -> GPU ``b[k]`` with hash ``h[k]`` for ``k = net_of[i]``, then ``post[i]``; -1 entries
    of the padded legs dropped.

    Returns ``(link_ptr, link_idx, bad)``: ``bad`` is the first network segment ``k`` with no path (-1
    when every segment has one; the CSR is then empty).
    """
    n = pre.shape[0]
    m_net = len(a)
    width = acc_sw.shape[1]
    best = np.empty(m_net, dtype=np.int64)  # network hops of segment k (access link included)
    longest = 0
    for k in range(m_net):
        t = target_of[b[k]]
        m = inf
        for c in range(width):
            d = dt[t, acc_sw[a[k], c]]
            if d < m:
                m = d
        if m >= inf:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), k
        best[k] = m
        longest = max(longest, m)
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(pre.shape[1]):
            c += pre[i, j] >= 0
        if net_of[i] >= 0:
            c += best[net_of[i]] + 1
        for j in range(post.shape[1]):
            c += post[i, j] >= 0
        ptr[i + 1] = ptr[i] + c
    idx = np.empty(ptr[n], dtype=np.int64)
    at = np.empty(m_net, dtype=np.int64)  # where segment k's links start in idx
    x = np.empty(m_net, dtype=np.int64)   # the switch segment k has reached
    base = np.empty(m_net, dtype=np.int64)
    for i in range(n):
        p = ptr[i]
        for j in range(pre.shape[1]):
            if pre[i, j] >= 0:
                idx[p] = pre[i, j]
                p += 1
        k = net_of[i]
        if k >= 0:
            t = target_of[b[k]]
            m = best[k]
            choice = 0
            if width > 1:  # the (h % count)-th of the nearest access switches
                count = 0
                for c in range(width):
                    count += dt[t, acc_sw[a[k], c]] == m
                nth = _mod(h[k], count)
                seen = 0
                for c in range(width):
                    if dt[t, acc_sw[a[k], c]] == m:
                        if seen == nth:
                            choice = c
                            break
                        seen += 1
            idx[p] = acc_lid[a[k], choice]
            at[k] = p
            x[k] = acc_sw[a[k], choice]
            base[k] = t * n_sw
            p += m + 1
        q = 0
        for j in range(post.shape[1]):
            if post[i, j] >= 0:
                idx[p + q] = post[i, j]
                q += 1
    salt = np.empty(len(sw_node), dtype=np.uint64)
    for y in range(len(sw_node)):
        salt[y] = np.uint64(sw_node[y]) * _SW_SALT
    # hop by hop over all segments (not segment by segment): the table loads of different segments are
    # independent, so the processor overlaps them instead of waiting on one segment's chain of loads
    for step in range(1, longest):
        for k in range(m_net):
            if step < best[k]:
                key = base[k] + x[k]
                lid = nh_lid[nh_ptr[key] + _mod(_mix(h[k] ^ salt[x[k]]), nh_cnt[key])]
                idx[at[k] + step] = lid
                x[k] = sw_of[ldst[lid]]
    missing = 0
    for k in range(m_net):
        last = -1  # the link from the last switch down to the GPU: its access link's reverse
        for c in range(width):
            if acc_sw[b[k], c] == x[k]:
                last = acc_down[b[k], c]
                break
        idx[at[k] + best[k]] = last
        missing += last < 0
    if missing:  # a link the graph lacks: dropped, as the padded numpy walk drops its -1 entries
        counts = np.zeros(n, dtype=np.int64)
        for i in range(n):
            for q in range(ptr[i], ptr[i + 1]):
                counts[i] += idx[q] >= 0
        ptr[1:] = np.cumsum(counts)
        idx = idx[idx >= 0]
    return ptr, idx, -1
