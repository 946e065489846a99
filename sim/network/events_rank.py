"""The rank-k predicted finish of one batching group (numpy's selection, shared by both backends)."""

from __future__ import annotations

import numpy as np

from sim.network.live import LiveFlows

__all__ = ["group_rank"]


def group_rank(live: LiveFlows, group: int, k: float, whole: bool = False) -> float:
    """Predicted finish at 0-based rank ``k`` among the live flows of dense group ``group`` (a slot of
    weight ``w`` counts ``w`` times). ``whole``: the group holds every live slot (dead slots have an
    infinite ``pred``, so no mask is needed).

    Examples
    --------
    >>> live = LiveFlows(1)
    >>> _ = live.append(np.zeros((3, 1), int), np.ones(3, int), np.ones(3), 0.0, np.array([1.0, 2.0, 1.0]),
    ...                 np.zeros(3, int), np.arange(3))
    >>> live.pred[:3] = [5.0, 1.0, 3.0]
    >>> group_rank(live, 0, 0.0), group_rank(live, 0, 1.0), group_rank(live, 0, 2.0, whole=True)
    (1.0, 1.0, 3.0)
    """
    hi = live.hi
    kk = int(k)
    if whole and not live.weighted:
        return float(np.partition(live.pred[:hi], kk)[kk])
    mask = live.alive[:hi] & (live.group[:hi] == group)
    pred = live.pred[:hi][mask]
    if not live.weighted:
        return float(np.partition(pred, kk)[kk])
    w = live.w[:hi][mask]
    order = np.argsort(pred, kind="stable")
    run = np.cumsum(w[order])
    return float(pred[order][np.searchsorted(run, k, side="right")])
