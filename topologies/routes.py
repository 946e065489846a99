"""Routes of a batch of flows (:class:`Routes`, CSR sub-flows over link ids) and relays built from two legs.

:class:`topologies.routing.Router` returns its routes in this form; a relayed flow (PXN, a streamed relay)
is its two legs one after the other: :func:`chain_routes` joins them, :func:`lead_legs` pads the first legs
of a batch where only some flows have a relay.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Routes:
    """Routes of a batch of flows, in CSR form.

    Flow ``i`` has sub-flows ``j`` in ``[sub_ptr[i], sub_ptr[i+1])``; sub-flow ``j`` carries
    ``fraction[j]`` of the flow's bytes over links ``link_idx[link_ptr[j]:link_ptr[j+1]]``, ordered from
    source to destination. A flow from a GPU to itself has one sub-flow with no links. ``sub_ptr``,
    ``link_ptr`` and ``link_idx`` are int64 arrays, ``fraction`` float64 (summing to 1 per flow).
    """

    sub_ptr: np.ndarray
    fraction: np.ndarray
    link_ptr: np.ndarray
    link_idx: np.ndarray

    @property
    def flow_of_sub(self) -> np.ndarray:
        """Flow index of every sub-flow."""
        return np.repeat(np.arange(len(self.sub_ptr) - 1), np.diff(self.sub_ptr))

    def links_of(self, sub: int) -> np.ndarray:
        """Link ids of sub-flow ``sub``."""
        return self.link_idx[self.link_ptr[sub]:self.link_ptr[sub + 1]]


def chain_routes(first: Routes, second: Routes) -> Routes:
    """Flow ``i`` of ``first`` followed by flow ``i`` of ``second``: every pair of their sub-flows, links of
    the first leg then the second's, fractions multiplied.

    Examples
    --------
    >>> a = Routes(np.array([0, 1, 2]), np.ones(2), np.array([0, 1, 1]), np.array([4]))
    >>> b = Routes(np.array([0, 1, 3]), np.array([1.0, 0.5, 0.5]), np.array([0, 2, 3, 4]), np.array([5, 6, 7, 8]))
    >>> c = chain_routes(a, b)
    >>> c.sub_ptr.tolist(), c.fraction.tolist(), [c.links_of(j).tolist() for j in range(3)]
    ([0, 1, 3], [1.0, 0.5, 0.5], [[4, 5, 6], [7], [8]])
    """
    na, nb = np.diff(first.sub_ptr), np.diff(second.sub_ptr)
    n = na * nb
    sub_ptr = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=sub_ptr[1:])
    flow = np.repeat(np.arange(len(n), dtype=np.int64), n)
    k = np.arange(int(sub_ptr[-1]), dtype=np.int64) - sub_ptr[:-1][flow]
    ia = first.sub_ptr[:-1][flow] + k // nb[flow]
    ib = second.sub_ptr[:-1][flow] + k % nb[flow]
    la = np.diff(first.link_ptr)[ia]
    lb = np.diff(second.link_ptr)[ib]
    link_ptr = np.zeros(len(ia) + 1, dtype=np.int64)
    np.cumsum(la + lb, out=link_ptr[1:])
    link_idx = np.empty(int(link_ptr[-1]), dtype=np.int64)
    for legs, rows, count, at in ((first, ia, la, link_ptr[:-1]), (second, ib, lb, link_ptr[:-1] + la)):
        off = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        link_idx[np.repeat(at, count) + off] = legs.link_idx[np.repeat(legs.link_ptr[:-1][rows], count) + off]
    return Routes(sub_ptr=sub_ptr, fraction=first.fraction[ia] * second.fraction[ib], link_ptr=link_ptr,
                  link_idx=link_idx)


def lead_legs(has: np.ndarray, lead: Routes) -> Routes:
    """The first legs of a batch of flows: ``lead``'s routes for the flows where ``has`` is True (in order),
    an empty leg (one sub-flow, no link, fraction 1) for the others.

    Parameters
    ----------
    has : numpy.ndarray of bool
        Per flow of the batch, whether it is relayed.
    lead : Routes
        Routes of the relayed flows' first legs, one flow per True of ``has``.

    Returns
    -------
    Routes
        One flow per entry of ``has``, ready for :func:`chain_routes` with the second legs.

    Examples
    --------
    >>> lead = Routes(np.array([0, 1]), np.ones(1), np.array([0, 2]), np.array([3, 4]))
    >>> r = lead_legs(np.array([False, True]), lead)
    >>> r.sub_ptr.tolist(), [r.links_of(j).tolist() for j in range(2)]
    ([0, 1, 2], [[], [3, 4]])
    """
    n_sub = np.ones(len(has), dtype=np.int64)
    n_sub[has] = np.diff(lead.sub_ptr)
    sub_ptr = np.zeros(len(has) + 1, dtype=np.int64)
    np.cumsum(n_sub, out=sub_ptr[1:])
    mine = np.repeat(has, n_sub)
    fraction = np.ones(int(sub_ptr[-1]))
    fraction[mine] = lead.fraction
    n_links = np.zeros(len(fraction), dtype=np.int64)
    n_links[mine] = np.diff(lead.link_ptr)
    link_ptr = np.zeros(len(fraction) + 1, dtype=np.int64)
    np.cumsum(n_links, out=link_ptr[1:])
    return Routes(sub_ptr=sub_ptr, fraction=fraction, link_ptr=link_ptr,
                  link_idx=lead.link_idx[lead.link_ptr[0]:lead.link_ptr[-1]])


__all__ = ["Routes", "chain_routes", "lead_legs"]
