"""Rate ceilings of flows as private links (``FlowNetwork.add_flows(..., rate_cap=, cap_key=)``).

A flow may have a ceiling on its rate, shared by the flows of one key in an ``add_flows`` call (a
connection's sub-flows, e.g. NCCL's p2p channels). The network gives each key a *private link* of that
capacity, appended to its flows' paths after the public links, so max-min stays exact with no change to the
solver: a private link is one more link that saturates like any other. Private links are internal
(ids ``num_public ..``): the network's ``capacity``, ``link_bytes`` and link loads show the public links
only, and a private link is reused once its last flow has finished.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError

__all__ = ["PrivateLinks", "checked_caps"]


def checked_caps(rate_cap, cap_key, n: int, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The checked ceilings and keys of the flows ``keep`` of an ``add_flows`` call of ``n`` flows.

    Parameters
    ----------
    rate_cap : array_like of float, shape (n,)
        Most bytes/s of each flow (``inf``: none), ``> 0``.
    cap_key : array_like of int, shape (n,), optional
        Which flows share a ceiling (None: each flow its own).
    n : int
    keep : ndarray of bool, shape (n,)
        The flows that enter the network (not the instant ones).

    Returns
    -------
    (cap, key) : ndarray of float64, ndarray of int64
        Those of the flows ``keep``.

    Raises
    ------
    SimError
        For a shape that does not match or a ceiling that is not > 0.

    Examples
    --------
    >>> cap, key = checked_caps([5.0, math.inf], None, 2, np.array([True, True]))
    >>> cap.tolist(), key.tolist()
    ([5.0, inf], [0, 1])
    """
    cap = np.asarray(rate_cap, dtype=np.float64).reshape(-1)
    key = np.arange(n, dtype=np.int64) if cap_key is None else np.asarray(cap_key).reshape(-1)
    if cap.shape != (n,) or key.shape != (n,) or (key.size and key.dtype.kind not in "iu"):
        raise SimError(f"add_flows: rate_cap and cap_key must give one value per flow ({n})")
    if not (cap > 0).all():
        raise SimError("add_flows: rate_cap must be > 0 (inf: no ceiling)")
    return cap[keep], key[keep].astype(np.int64)


class PrivateLinks:
    """The private links of a network: ids after its ``num_public`` links, a free list of unused ones.

    Parameters
    ----------
    num_public : int
        Links of the fabric (private ids start there).

    Examples
    --------
    Two flows over link 0, the first with a ceiling of 3 B/s: it gets private link 1.

    >>> from sim.network.live import LiveFlows
    >>> live, priv = LiveFlows(1), PrivateLinks(1)
    >>> rows, deg, cap, link_bytes = priv.attach(np.array([[0], [0]]), np.array([1, 1]),
    ...                                          (np.array([3.0, np.inf]), np.array([0, 1])),
    ...                                          np.array([10.0]), np.zeros(1), live)
    >>> rows.tolist(), deg.tolist(), float(cap[1])
    ([[0, 1], [0, -1]], [2, 1], 3.0)
    """

    def __init__(self, num_public: int) -> None:
        self.num_public = num_public
        self.free: list[int] = []   # private links no flow crosses

    def attach(self, rows: np.ndarray, deg: np.ndarray, caps: tuple, capacity: np.ndarray,
               link_bytes: np.ndarray, live) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``rows`` with each capped flow's private link appended (one per key).

        Parameters
        ----------
        rows : ndarray of int64, shape (n, width)
            Link ids of the new flows, padded with -1.
        deg : ndarray of int64, shape (n,)
        caps : (cap, key)
            From :func:`checked_caps`.
        capacity, link_bytes : ndarray of float64
            The network's per-link arrays (public then private links).
        live : sim.network.live.LiveFlows
            Grown with the per-link arrays when more private links are needed.

        Returns
        -------
        (rows, deg, capacity, link_bytes)
            The new flows' links and degrees, and the per-link arrays (new ones when they grew; the
            private links' capacities set).
        """
        cap, key = caps
        capped = np.flatnonzero(cap < math.inf)
        if not capped.size:
            return rows, deg, capacity, link_bytes
        uniq, first, inv = np.unique(key[capped], return_index=True, return_inverse=True)
        need = uniq.size - len(self.free)
        if need > 0:   # more private links: grow every per-link array (amortised doubling)
            total = capacity.size
            grow = max(need, total - self.num_public, 64)
            capacity = np.concatenate([capacity, np.ones(grow)])
            link_bytes = np.concatenate([link_bytes, np.zeros(grow)])
            live.grow_links(total + grow)
            self.free.extend(range(total + grow - 1, total - 1, -1))
        priv = np.array([self.free.pop() for _ in range(uniq.size)], dtype=np.int64)
        capacity[priv] = cap[capped][first]
        live.load[priv] = 0.0
        out = np.full((rows.shape[0], rows.shape[1] + 1), -1, dtype=np.int64)
        out[:, : rows.shape[1]] = rows
        out[capped, deg[capped]] = priv[inv.reshape(-1)]
        deg = deg.copy()
        deg[capped] += 1
        return out, deg, capacity, link_bytes

    def release(self, rows: np.ndarray, count: np.ndarray) -> None:
        """Free the private links among ``rows`` (of finished flows) that no flow crosses any more.

        ``count`` is the flows in flight per link (after the finished ones left).
        """
        priv = rows[rows >= self.num_public]
        if priv.size:
            priv = priv[count[priv] == 0]
            if priv.size:   # (most steps free none: no sort then)
                self.free.extend(np.unique(priv).tolist())
