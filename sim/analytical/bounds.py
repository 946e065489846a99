"""Lower bounds on one collective's time from its transfer plan (pure functions, no event loop).

A plan (:class:`sim.planning.collectives.TransferPlan`) is a DAG of transfers. Under the flow tier's
semantics a transfer starts when its dependencies have finished, pays its software delay, sends its bytes
at no more than the slowest link of its path, and finishes one path latency after its last byte. Two
bounds follow, and the analytical time of the op is the larger:

``critical path``
    the longest path through the DAG where transfer ``t`` weighs
    ``delay_s[t] + bytes[t] × s_per_byte[t] + latency_s[t]`` (``s_per_byte`` = 1 / the path's smallest
    capacity): the alpha-beta time of the plan's longest chain (ring steps, tree levels, a sender's
    chunk chain);
``link load``
    for every link, ``min delay + bytes crossing it / capacity + min latency``: no link sends faster than
    its capacity, and no byte moves before the first transfer's delay.

On a non-blocking fabric with one chunk per step these are the alpha-beta closed forms of
:func:`sim.planning.tuning.ideal_time_s` (ring: the critical path; all-to-all: the busiest port).
"""

from __future__ import annotations

import numpy as np

__all__ = ["critical_path_s", "link_bound_s", "op_time_s"]


def critical_path_s(weight_s: np.ndarray, dep_ptr: np.ndarray, dep_idx: np.ndarray) -> float:
    """Longest path through a DAG of transfers listed in topological order.

    Parameters
    ----------
    weight_s : numpy.ndarray
        Time of each transfer alone on its path.
    dep_ptr, dep_idx : numpy.ndarray
        CSR dependencies: transfer ``i`` waits for ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` (smaller indices).

    Returns
    -------
    float
        The latest finish when every transfer starts as soon as its dependencies finish (0 when empty).

    Examples
    --------
    A chain of three 1 s transfers beside an independent 2 s one:

    >>> critical_path_s(np.array([1.0, 1.0, 1.0, 2.0]), np.array([0, 0, 1, 2, 2]), np.array([0, 1]))
    3.0
    """
    n = len(weight_s)
    if n == 0:
        return 0.0
    if len(dep_idx) == 0:
        return float(np.max(weight_s))
    finish = np.asarray(weight_s, dtype=np.float64).copy()
    counts = np.diff(dep_ptr)
    has = np.flatnonzero(counts)
    # transfers in topological order: one pass, each waiting for its latest dependency
    fin = finish.tolist()
    ptr, idx = dep_ptr.tolist(), dep_idx.tolist()
    for i in has.tolist():
        fin[i] += max(fin[j] for j in idx[ptr[i]:ptr[i + 1]])
    return float(max(fin))


def link_bound_s(link_load_bytes: np.ndarray, capacity_bytes_per_s: np.ndarray, min_delay_s: float,
                 min_latency_s: float) -> tuple[float, int]:
    """The busiest link's time: ``min_delay + load / capacity + min_latency``; and that link (-1: none).

    Examples
    --------
    >>> link_bound_s(np.array([0.0, 4e9, 1e9]), np.array([1e9, 1e9, 1e9]), 1e-6, 2e-6)
    (4.000003, 1)
    """
    if len(link_load_bytes) == 0 or not np.any(link_load_bytes > 0):
        return 0.0, -1
    with np.errstate(divide="ignore", invalid="ignore"):  # an unused port may have no capacity
        t = np.where(link_load_bytes > 0, link_load_bytes / capacity_bytes_per_s, 0.0)
    worst = int(np.argmax(t))
    return float(min_delay_s + t[worst] + min_latency_s), worst


def op_time_s(delay_s: np.ndarray, nbytes: np.ndarray, s_per_byte: np.ndarray, latency_s: np.ndarray,
              dep_ptr: np.ndarray, dep_idx: np.ndarray, link_load_bytes: np.ndarray,
              capacity_bytes_per_s: np.ndarray) -> tuple[float, float, float]:
    """Analytical time of one op: ``(time, critical path, link bound)``, time the larger of the two.

    Examples
    --------
    Two independent 1 GB transfers over one 1 GB/s link (no latency): the link, not the path, binds.

    >>> op_time_s(np.zeros(2), np.full(2, 1e9), np.full(2, 1e-9), np.zeros(2), np.zeros(3, int),
    ...           np.zeros(0, int), np.array([2e9]), np.array([1e9]))
    (2.0, 1.0, 2.0)
    """
    if len(nbytes) == 0:
        return 0.0, 0.0, 0.0
    path = critical_path_s(delay_s + nbytes * s_per_byte + latency_s, dep_ptr, dep_idx)
    link, _ = link_bound_s(link_load_bytes, capacity_bytes_per_s, float(delay_s.min()), float(latency_s.min()))
    return max(path, link), path, link
