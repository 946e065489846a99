"""The network walk of ``ecmp``, ``single``, ``dmodk`` and ``spray`` routes in numpy, over :class:`RouteTables`.

``ecmp`` and ``single``: at each switch a hash of (src, dst, flow_key, seed, switch) picks one of the
equal-cost next hops (:func:`flow_hash`, :func:`mix`); flows walk hop by hop, all at once as numpy arrays.
``dmodk``: the same walk with the choice taken from the destination's index alone (:func:`dmodk_digit`).
``spray``: the flow's bytes split evenly over all equal-cost paths, at most ``max_paths`` of them, evenly
spaced in the ranked list of paths from a hashed offset (:func:`spray_paths`). The compiled twin of the
``ecmp`` walk is :mod:`topologies.routing_numba`; :class:`topologies.routing.Router` picks one.
"""

from __future__ import annotations

import numpy as np

from topologies.errors import TopologyError
from topologies.route_tables import INF, RouteTables

_U64 = np.uint64


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-spread 64-bit hash of uint64 arrays.

    Examples
    --------
    >>> int(mix(np.array([0], dtype=np.uint64))[0]) == int(mix(np.array([0], dtype=np.uint64))[0])
    True
    """
    x = x + _U64(0x9E3779B97F4A7C15)  # a new array; the rest in place (the same arithmetic, fewer temporaries)
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
    return x


def flow_hash(seed: int, single: bool, src, dst, key, kernels=None) -> np.ndarray:
    """The 64-bit hash of each flow's (seed, src, dst, flow key); the key is ignored for ``single``.

    Parameters
    ----------
    seed : int
        Seed of the ECMP hash.
    single : bool
        ``single`` routing: one path per (src, dst) pair.
    src, dst, key : numpy.ndarray of int64
        Per flow.
    kernels : module or None
        :mod:`topologies.routing_numba` to hash compiled (the same values), or None for numpy.

    Returns
    -------
    numpy.ndarray of uint64

    Examples
    --------
    >>> a = flow_hash(0, True, np.array([1]), np.array([2]), np.array([5]))
    >>> bool((a == flow_hash(0, True, np.array([1]), np.array([2]), np.array([6]))).all())
    True
    """
    if single:
        key = np.zeros_like(key)
    if kernels is not None:
        seed = np.array([seed], dtype=np.int64).astype(_U64)[0]
        return kernels.flow_hash(seed, src.astype(_U64), dst.astype(_U64), key.astype(_U64))
    with np.errstate(over="ignore"):
        h = mix(np.full(len(src), seed, dtype=np.int64).astype(_U64) ^ mix(src.astype(_U64)))
        h = mix(h ^ mix(dst.astype(_U64) + _U64(0x632BE59BD9B4E019)))
        return mix(h ^ key.astype(_U64))


def network_paths(tables: RouteTables, a: np.ndarray, b: np.ndarray, h: np.ndarray, spray: bool,
                  max_paths: int, name: str, dest: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Network paths GPU a -> GPU b: (sub-flow link matrix padded with -1, sub-flows per flow).

    Parameters
    ----------
    tables : RouteTables
        The graph's tables.
    a, b : numpy.ndarray of int64
        Entry and exit GPU slot of each flow (in distinct NVLink domains).
    h : numpy.ndarray of uint64
        :func:`flow_hash` of each flow.
    spray : bool
        All equal-cost paths (:func:`spray_paths`) instead of one hashed path per flow.
    max_paths : int
        Most sub-flows of a sprayed flow.
    name : str
        The topology's name, for errors.
    dest : numpy.ndarray of int64, optional
        ``dmodk``: each flow's destination index (:attr:`RouteTables.leaf_rank` of ``b``); the hop choice is
        then :func:`dmodk_digit` of it instead of the hash ``h`` (which is ignored).

    Raises
    ------
    TopologyError
        A pair with no path, naming both GPUs.
    """
    t = tables.target_of[b]
    acc_d = tables.dt[t[:, None], tables.acc_sw[a]]
    best = acc_d.min(axis=1)
    if (best >= INF).any():
        k = int(np.nonzero(best >= INF)[0][0])
        raise TopologyError(f"{name}: no path from gpu{a[k]} to gpu{b[k]}")
    if spray:
        return spray_paths(tables, a, b, t, h, acc_d, best, max_paths)
    ismin = acc_d == best[:, None]
    if dest is not None:
        radix = np.ones(len(a), dtype=np.int64)
        choice = nth_true(ismin, dmodk_digit(dest, radix, ismin.sum(axis=1)))
    else:
        choice = nth_true(ismin, (h % ismin.sum(axis=1).astype(_U64)).astype(np.int64))
    length = best.astype(np.int64) + 1
    out = np.full((len(a), int(length.max())), -1, dtype=np.int64)
    out[:, 0] = tables.acc_lid[a, choice]
    # Flows a length at a time: a hop of a shortest path is one step closer to the target, so a flow of
    # length L is at its last switch after L - 1 hops, and a group walks without masks or gathers.
    order = np.argsort(length, kind="stable")
    cuts = np.flatnonzero(np.diff(length[order])) + 1
    salt = tables.sw_node.astype(_U64) * _U64(0xD6E8FEB86659FD93)
    for sel in np.split(order, cuts):
        steps = int(length[sel[0]])
        x = tables.acc_sw[a[sel], choice[sel]]
        base = t[sel] * tables.S
        hs = h[sel]
        ds, rs = (dest[sel], radix[sel]) if dest is not None else (None, None)
        for step in range(1, steps - 1):
            key = base + x
            if ds is not None:
                j = dmodk_digit(ds, rs, tables.nh_cnt[key])
            else:
                with np.errstate(over="ignore"):
                    hop = mix(hs ^ salt[x])
                j = (hop % tables.nh_cnt[key].astype(_U64)).astype(np.int64)
            lid = tables.nh_lid[tables.nh_ptr[key] + j]
            out[sel, step] = lid
            x = tables.sw_of[tables.ldst[lid]]
        if steps > 1:
            out[sel, steps - 1] = tables.lookup(tables.sw_node[x], tables.gpu_node[b[sel]])
    return out, np.ones(len(a), dtype=np.int64)


def dmodk_digit(dest: np.ndarray, radix: np.ndarray, count: np.ndarray) -> np.ndarray:
    """D-mod-k: the next-hop choice ``(dest // radix) % count``, and ``radix *= count`` in place.

    Zahavi et al.'s D-mod-k (E. Zahavi, G. Johnson, D. J. Kerbyson, M. Lang, "Optimized InfiniBand fat-tree
    routing for shift all-to-all communication patterns", Concurrency Computat.: Pract. Exper. 22(2), 2010;
    C. Gomez et al., "Deterministic versus adaptive routing in fat-trees", IPDPS 2007), the up-port rule of
    OpenSM's ``ftree`` routing: at the ``l``-th hop with a choice, among ``k_l`` equal-cost next hops, take
    digit ``l`` of the destination's index in the mixed radix of the hops below, ``(d // (k_1 ... k_{l-1}))
    mod k_l``. A hop with one next hop (every downward hop of a fat tree) leaves the radix as it is. On a
    fat tree or XGFT every flow reaches a switch through hops of the same fan-outs, so the choice is a
    function of (switch, destination) only: a linear forwarding table, as the subnet manager programs it.

    Parameters
    ----------
    dest : numpy.ndarray of int64
        Destination index per flow.
    radix : numpy.ndarray of int64
        Product of the fan-outs of the flow's earlier hops (updated in place; capped once above every index).
    count : numpy.ndarray of int
        Equal-cost next hops at this hop (>= 1).

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> r = np.ones(3, dtype=np.int64)
    >>> dmodk_digit(np.array([5, 6, 7]), r, np.array([2, 2, 2])).tolist(), r.tolist()
    ([1, 0, 1], [2, 2, 2])
    >>> dmodk_digit(np.array([5, 6, 7]), r, np.array([2, 2, 1])).tolist()
    [0, 1, 0]
    """
    count = count.astype(np.int64)
    j = (dest // radix) % count
    top = int(dest.max()) + 1 if len(dest) else 1
    radix[:] = np.where(radix > top, radix, radix * count)
    return j


def spray_paths(tables: RouteTables, a, b, t, h, acc_d, best, max_paths: int) -> tuple[np.ndarray, np.ndarray]:
    """All equal-cost paths (at most ``max_paths``), each as one sub-flow: :func:`network_paths` for spray.

    Parameters
    ----------
    tables : RouteTables
        The graph's tables.
    a, b, t : numpy.ndarray of int64
        Entry GPU, exit GPU and the exit GPU's target per flow.
    h : numpy.ndarray of uint64
        Flow hashes (their top 53 bits place the first path when a flow has more than ``max_paths``).
    acc_d, best : numpy.ndarray
        Hops from each of the entry GPU's access switches to the target, and their minimum.
    max_paths : int
        Most sub-flows per flow.

    Returns
    -------
    tuple of numpy.ndarray
        Sub-flow link matrix (padded with -1) and sub-flows per flow.
    """
    paths = tables.num_paths
    S = tables.S
    acc_paths = np.where(acc_d == best[:, None], paths[t[:, None] * S + np.minimum(tables.acc_sw[a], S - 1)], 0.0)
    total = acc_paths.sum(axis=1)
    count = np.minimum(total, max_paths).astype(np.int64)
    flow = np.repeat(np.arange(len(a)), count)
    i = np.arange(len(flow)) - np.repeat(np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    offset = (h >> _U64(11)).astype(np.float64) / float(1 << 53)
    spread = total[flow] > max_paths
    rank = np.where(spread, np.floor((i + offset[flow]) * total[flow] / np.maximum(count[flow], 1)), i)
    rank = np.minimum(rank, total[flow] - 1)
    choice, rank = unrank(acc_paths[flow], rank)
    af, tf, bf = a[flow], t[flow], b[flow]
    x = tables.acc_sw[af, choice]
    length = best[flow].astype(np.int64) + 1
    out = np.full((len(flow), int(length.max())), -1, dtype=np.int64)
    out[:, 0] = tables.acc_lid[af, choice]
    cum = tables.nh_cum
    for step in range(1, out.shape[1]):
        act = np.nonzero(length > step)[0]
        xs, ts = x[act], tf[act]
        last = tables.dt[ts, xs] == 1
        fin = act[last]
        out[fin, step] = tables.lookup(tables.sw_node[xs[last]], tables.gpu_node[bf[fin]])
        mid = act[~last]
        start = tables.nh_ptr[ts[~last] * S + xs[~last]]
        base = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
        # the next hop whose cumulative path-count interval holds the rank (one global sorted array)
        entry = search_segments(cum, start, tables.nh_cnt[ts[~last] * S + xs[~last]], base + rank[mid])
        rank[mid] -= np.where(entry > start, cum[np.maximum(entry - 1, 0)], base) - base
        lid = tables.nh_lid[entry]
        out[mid, step] = lid
        x[mid] = tables.sw_of[tables.ldst[lid]]
    return out, count


def search_segments(values: np.ndarray, start: np.ndarray, count: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per query, the first index in ``[start, start + count)`` with ``values > query`` (values sorted there).

    A vectorised binary search inside each short segment: a few cache-friendly passes instead of a search of
    the whole table per query.

    Examples
    --------
    >>> search_segments(np.array([1., 2., 3., 1., 5.]), np.array([0, 3]), np.array([3, 2]), np.array([1.5, 0.])).tolist()
    [1, 3]
    """
    lo, hi = start.copy(), start + count
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        right = open_ & (values[np.minimum(mid, len(values) - 1)] <= query)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(open_ & ~right, mid, hi)


def nth_true(mask: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Column of the n-th (0-based) True of each row of ``mask``.

    Examples
    --------
    >>> nth_true(np.array([[True, False, True], [True, True, False]]), np.array([1, 0])).tolist()
    [2, 0]
    """
    if mask.shape[1] == 1:
        return np.zeros(len(mask), dtype=np.int64)
    return np.argmax(np.cumsum(mask, axis=1) > n[:, None], axis=1)


def unrank(weights: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pick the column whose cumulative weight interval holds ``rank``; return it and the rank within it.

    Examples
    --------
    >>> pick, rest = unrank(np.array([[2.0, 3.0]]), np.array([3.0]))
    >>> pick.tolist(), rest.tolist()
    ([1], [1.0])
    """
    cum = np.cumsum(weights, axis=1)
    pick = np.argmax(cum > rank[:, None], axis=1)
    before = np.where(pick > 0, cum[np.arange(len(rank)), np.maximum(pick - 1, 0)], 0.0)
    return pick, rank - before


__all__ = ["dmodk_digit", "flow_hash", "mix", "network_paths", "nth_true", "search_segments", "spray_paths", "unrank"]
