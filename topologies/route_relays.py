"""NVLink legs and relays: where a flow enters and leaves the network, and its NVLink hops around that.

When the destination cannot be reached through the network from the source GPU (``rail_only`` between
rails, or a cut link), or when ``pxn=True``, a flow first hops over NVLink to the GPU of its own server that
is closest to the destination through the network (NCCL's PXN: the GPU on the destination's rail; the
source itself when no GPU is closer). If no GPU of the source server reaches the destination, the flow
enters the network at the source and leaves it at the GPU of the destination server closest to it, then
takes NVLink; failing that, both (:func:`choose_relays`). The NVLink hops themselves are
:func:`nvlink_legs`.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies.errors import TopologyError
from topologies.route_tables import INF, RouteTables


def choose_relays(tables: RouteTables, src, dst, inter, g, hh, pxn: bool, name: str) -> None:
    """Fill g (network entry GPU) and hh (network exit GPU) for flows ``inter`` between domains.

    Parameters
    ----------
    tables : RouteTables
        The graph's tables.
    src, dst : numpy.ndarray of int64
        GPU slots of every flow of the batch.
    inter : numpy.ndarray of int64
        The flows between NVLink domains.
    g, hh : numpy.ndarray of int64
        Entry and exit GPUs, ``src`` and ``dst`` on entry; changed in place where a relay is needed.
    pxn : bool
        Relay every flow to the source-server GPU closest to the destination (NCCL's PXN).
    name : str
        The topology's name, for errors.

    Raises
    ------
    TopologyError
        A pair with no path even through relays, naming both GPUs.
    """
    tt, tgt = tables.tt, tables.target_of
    s, d = src[inter], dst[inter]
    direct = tt[tgt[s], tgt[d]] < INF
    need = np.ones(len(inter), dtype=bool) if pxn else ~direct
    if not need.any():
        return
    idx = np.nonzero(need)[0]
    s, d = s[idx], d[idx]
    # source side: the GPU of the source's domain closest to d; the source itself on ties
    cand = tables.members[tables.domain[s]]
    dist = np.where(cand >= 0, tt[tgt[np.maximum(cand, 0)], tgt[d][:, None]], INF).astype(np.int64)
    best = (2 * dist + (cand != s[:, None])).argmin(axis=1)  # the source wins a tie: no NVLink detour
    ok = dist[np.arange(len(idx)), best] < INF
    g[inter[idx[ok]]] = cand[np.nonzero(ok)[0], best[ok]]
    rest = np.nonzero(~ok)[0]
    if not len(rest):
        return
    s, d = s[rest], d[rest]
    cand_d = tables.members[tables.domain[d]]
    dist = np.where(cand_d >= 0, tt[tgt[s][:, None], tgt[np.maximum(cand_d, 0)]], INF)
    best = dist.argmin(axis=1)
    ok = dist[np.arange(len(rest)), best] < INF
    hh[inter[idx[rest[ok]]]] = cand_d[np.nonzero(ok)[0], best[ok]]
    rest2 = np.nonzero(~ok)[0]
    if not len(rest2):
        return
    s, d = s[rest2], d[rest2]
    cs, cd = tables.members[tables.domain[s]], tables.members[tables.domain[d]]
    both = tt[tgt[np.maximum(cs, 0)][:, :, None], tgt[np.maximum(cd, 0)][:, None, :]]
    both = np.where((cs >= 0)[:, :, None] & (cd >= 0)[:, None, :], both, INF)
    flat = both.reshape(len(rest2), -1).argmin(axis=1)
    bi, bj = np.divmod(flat, cd.shape[1])
    rows = np.arange(len(rest2))
    if (both[rows, bi, bj] >= INF).any():
        k = int(np.nonzero(both[rows, bi, bj] >= INF)[0][0])
        raise TopologyError(f"{name}: no path from gpu{s[k]} to gpu{d[k]}")
    out = inter[idx[rest[rest2]]]
    g[out] = cs[rows, bi]
    hh[out] = cd[rows, bj]


def nvlink_legs(tables: RouteTables, a: np.ndarray, b: np.ndarray, cache: dict, name: str) -> np.ndarray:
    """NVLink paths a -> b inside a domain as a padded (n, width) link matrix; no links where a == b.

    Parameters
    ----------
    tables : RouteTables
        The graph's tables.
    a, b : numpy.ndarray of int64
        GPU slots, in one NVLink domain per pair.
    cache : dict
        ``{(a, b): link ids}`` of pairs outside star domains, filled as they are found (shortest paths in
        the NVLink graph).
    name : str
        The topology's name, for errors.

    Returns
    -------
    numpy.ndarray of int64
        One row per pair, -1 past its links; zero columns when no pair has a link.

    Raises
    ------
    TopologyError
        Two GPUs without an NVLink path.
    """
    n = len(a)
    star = (a != b) & (tables.nvs_of[a] >= 0) & (tables.nvs_of[a] == tables.nvs_of[b])
    other = np.nonzero((a != b) & ~star)[0]
    width = 2
    paths = {}
    for i in other.tolist():
        pair = (int(a[i]), int(b[i]))
        if pair not in cache:
            try:
                nodes = nx.shortest_path(tables.nvlink_graph, int(tables.gpu_node[pair[0]]),
                                         int(tables.gpu_node[pair[1]]))
            except nx.NetworkXNoPath:
                raise TopologyError(f"{name}: no NVLink path from gpu{pair[0]} to gpu{pair[1]}") from None
            cache[pair] = tables.lookup(np.array(nodes[:-1]), np.array(nodes[1:])).tolist()
        paths[i] = cache[pair]
        width = max(width, len(paths[i]))
    out = np.full((n, width if (star.any() or paths) else 0), -1, dtype=np.int64)
    if star.any():
        out[star, 0] = tables.up[a[star]]
        out[star, 1] = tables.down[b[star]]
    for i, links in paths.items():
        out[i, :len(links)] = links
    return out


__all__ = ["choose_relays", "nvlink_legs"]
