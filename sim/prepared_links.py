"""Link-level facts of a prepared op: the rate ceilings that can bind on its sub-flows
(:func:`binding_caps`) and the NVSwitch links of its NVLS legs (:func:`switch_leg_links`).
"""

from __future__ import annotations

import numpy as np


def binding_caps(cap: np.ndarray | None, sub_transfer: np.ndarray, sub_link_ptr: np.ndarray,
                 sub_link_idx: np.ndarray, capacity_bytes_per_s: np.ndarray) -> np.ndarray | None:
    """Per sub-flow, its transfer's rate ceiling (bytes/s; the transfer's sub-flows share it), where it
    can bind; ``None`` where none can.

    A transfer never moves faster than the sum over its sub-flows of their paths' slowest links, so a
    ceiling at or above that sum is dropped: the run is then exactly the run without it.

    Examples
    --------
    >>> binding_caps(np.array([5.0, 50.0]), np.array([0, 1]), np.array([0, 1, 2]), np.array([0, 0]),
    ...              np.array([10.0])).tolist()
    [5.0, inf]
    """
    if cap is None or not len(sub_transfer):
        return None
    cap = np.asarray(cap, np.float64)[sub_transfer]
    deg = np.diff(sub_link_ptr)
    slowest = np.full(len(deg), np.inf)
    has = deg > 0
    if has.any():
        per_link = np.asarray(capacity_bytes_per_s, np.float64)[sub_link_idx[sub_link_ptr[0]:sub_link_ptr[-1]]]
        slowest[has] = np.minimum.reduceat(per_link, sub_link_ptr[:-1][has] - sub_link_ptr[0])
    bound = np.bincount(sub_transfer, weights=np.where(has, slowest, 0.0), minlength=int(sub_transfer.max()) + 1)
    cap = np.where(has & (cap < bound[sub_transfer]), cap, np.inf)
    return cap if np.isfinite(cap).any() else None


def switch_leg_links(router, gpus: np.ndarray, legs: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """Link of each NVLS leg: GPU -> its NVSwitch (leg 1) or NVSwitch -> GPU (leg 2)
    (``sim.planning.plan.LEG_UP`` / ``LEG_DOWN``).

    Raises
    ------
    sim.errors.SimError
        A GPU with no NVSwitch (a plan made for another topology).
    """
    from sim.errors import SimError

    cache = {} if cache is None else cache
    out = np.empty(len(gpus), dtype=np.int64)
    for i, (g, leg) in enumerate(zip(np.asarray(gpus).tolist(), np.asarray(legs).tolist(), strict=True)):
        key = (g, leg)
        if key not in cache:
            node = f"gpu{g}"
            nvs = [v for v in router.graph.neighbors(node) if router.graph.nodes[v].get("kind") == "nvswitch"]
            if not nvs:
                raise SimError(f"{router.name}: {node} has no NVSwitch for an NVLS transfer")
            cache[key] = router.link_id[(node, nvs[0]) if leg == 1 else (nvs[0], node)]
        out[i] = cache[key]
    return out


__all__ = ["binding_caps", "switch_leg_links"]
