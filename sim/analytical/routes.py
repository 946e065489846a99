"""Path bounds of routed GPU pairs: each path's slowest link and its latency, over CSR link lists.

The route tables themselves are :class:`sim.analytical.key_routes.KeyRoutes` (one table over (flow key,
pair)); these reductions turn a batch of its new rows into per-row seconds per byte and path latency.
"""

from __future__ import annotations

import numpy as np

from topologies.routing import use_compiled_walk

__all__ = ["path_bounds_auto", "path_bounds_numpy"]


def path_bounds_numpy(link_ptr: np.ndarray, link_idx: np.ndarray, capacity: np.ndarray, latency: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Each path's smallest capacity (``inf`` for no links) and summed latency (0 for no links).

    Parameters
    ----------
    link_ptr, link_idx : ndarray of int
        CSR paths: path ``j`` crosses ``link_idx[link_ptr[j]:link_ptr[j + 1]]``.
    capacity, latency : ndarray of float
        Per link.

    Returns
    -------
    cap_min, latency_sum : ndarray of float64, one per path

    Examples
    --------
    >>> c, l = path_bounds_numpy(np.array([0, 2, 2]), np.array([0, 1]), np.array([2.0, 1.0]), np.array([1.0, 3.0]))
    >>> c.tolist(), l.tolist()
    ([1.0, inf], [4.0, 0.0])
    """
    per = np.diff(link_ptr)
    nonempty = per > 0
    cap_min = np.full(len(per), np.inf)
    lat = np.zeros(len(per))
    if nonempty.any():
        starts = link_ptr[:-1][nonempty]
        cap_min[nonempty] = np.minimum.reduceat(capacity[link_idx], starts)
        lat[nonempty] = np.add.reduceat(latency[link_idx], starts)
    return cap_min, lat


def path_bounds_auto(link_ptr, link_idx, per_sub, capacity, latency):
    """:func:`path_bounds_numpy`, compiled where the route walk is (same results, bit for bit)."""
    if use_compiled_walk():  # only where the walk has loaded numba: these alone never pay for it
        from sim.analytical.kernels import MAX_PATH_LINKS, path_bounds

        if len(per_sub) and int(per_sub.max()) <= MAX_PATH_LINKS:
            return path_bounds(link_ptr, link_idx, capacity, latency)
    return path_bounds_numpy(link_ptr, link_idx, capacity, latency)
