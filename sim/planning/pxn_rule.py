"""NCCL's PXN relay rule for one transfer (:func:`pxn_relays`), vectorised; :mod:`sim.planning.pxn` applies it.

Split from :mod:`sim.planning.pxn` (module size); the rule and its sources are described there.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pxn_relays"]

_I64 = np.int64


def pxn_relays(src: np.ndarray, dst: np.ndarray, server: dict[int, int], rail: dict[int, int],
               local: dict[int, int] | None = None, domain: dict[int, int] | None = None) -> np.ndarray:
    """Relay GPU of each transfer (``-1``: none): the sender's server-mate on the receiver's rail.

    Parameters
    ----------
    src, dst : ndarray of int
        Global ranks of each transfer.
    server : dict
        Server of every rank of the communicator (relays are taken among them).
    rail : dict
        Rail of every GPU with a NIC (:func:`network_rails`): relay where sender and receiver differ.
    local : dict, optional
        Local rank of every rank: relay instead wherever the local ranks differ, to the server-mate with
        the receiver's local rank (NCCL's p2p PXN rule, ``NCCL_P2P_PXN_LEVEL=2``), provided that GPU has a
        NIC on the receiver's rail.
    domain : dict, optional
        NVLink domain of every GPU (:func:`nvlink_domains`): the relay must share the sender's (NCCL's
        ``PATH_NVL`` condition). Default: any server-mate.

    Examples
    --------
    >>> server = {0: 0, 1: 0, 2: 1, 3: 1}
    >>> pxn_relays(np.array([0, 0]), np.array([3, 2]), server, {0: 0, 1: 1, 2: 0, 3: 1}).tolist()
    [1, -1]
    >>> pxn_relays(np.array([0, 0]), np.array([3, 2]), server, {r: 0 for r in range(4)}).tolist()
    [-1, -1]
    >>> pxn_relays(np.array([0]), np.array([3]), server, {r: 0 for r in range(4)}, {0: 0, 1: 1, 2: 0, 3: 1}).tolist()
    [1]
    >>> pxn_relays(np.array([0]), np.array([3]), server, {r: 0 for r in range(4)}, {0: 0, 1: 1, 2: 0, 3: 1},
    ...            domain={0: 0, 1: 5, 2: 1, 3: 1}).tolist()  # no NVLink between GPUs 0 and 1: no relay
    [-1]
    """
    src, dst = np.asarray(src, dtype=_I64), np.asarray(dst, dtype=_I64)
    out = np.full(len(src), -1, dtype=_I64)
    key = rail if local is None else local
    cand = np.array(sorted(r for r in server if r in key and r in rail), dtype=_I64)
    if not len(src) or not len(cand):
        return out
    size = int(max(max(server), src.max(), dst.max())) + 1
    srv, ky, rl = _lookup(server, size), _lookup(key, size), _lookup(rail, size)
    # the lowest rank of each (server, key) with a NIC: np.unique keeps the first of the sorted candidates
    width = int(ky.max()) + 1
    codes, first = np.unique(srv[cand] * width + ky[cand], return_index=True)
    sa, sb, ka, kb = srv[src], srv[dst], ky[src], ky[dst]
    ok = (sa >= 0) & (sb >= 0) & (sa != sb) & (ka >= 0) & (kb >= 0) & (ka != kb)
    want = np.where(ok, sa * width + kb, -1)
    pos = np.minimum(np.searchsorted(codes, want), len(codes) - 1)
    relay = cand[first[pos]]
    ok &= (codes[pos] == want) & (relay != src)
    # the relay's NIC must be on the receiver's rail (the receiver's own when it has one)
    ok &= rl[relay] == np.where(rl[dst] >= 0, rl[dst], rl[relay])
    if domain is not None:
        dom = _lookup(domain, size)
        ok &= (dom[relay] >= 0) & (dom[relay] == dom[src])
    out[ok] = relay[ok]
    return out


def _lookup(mapping: dict[int, int], size: int) -> np.ndarray:
    """``mapping`` as an array over ranks ``0 .. size-1`` (``-1`` where absent)."""
    out = np.full(size, -1, dtype=_I64)
    if mapping:
        k = np.fromiter(mapping.keys(), dtype=_I64, count=len(mapping))
        v = np.fromiter(mapping.values(), dtype=_I64, count=len(mapping))
        keep = (k >= 0) & (k < size)
        out[k[keep]] = v[keep]
    return out
