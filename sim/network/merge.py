"""Identical flows of one ``add_flows`` call: one weighted flow for each set of them.

Flows that start together over the same links with the same size (and batching group) get the same
max-min rate at every solve (the max-min allocation is unique, so symmetric flows share it), hence the same
finish: the network solves them as one flow of weight ``w`` (weighted max-min) and expands them only for
the per-flow outputs. Exact by construction; the only difference is float rounding of per-link sums
(``w * r`` instead of ``r + ... + r``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["identical_flows", "weighted_slots"]

#: flows per call below which looking for identical flows costs more than it can save
MIN_FLOWS = 8

_MULT = np.random.default_rng(0x5EED).integers(1, 2**63, size=64, dtype=np.int64).astype(np.uint64) | np.uint64(1)


def identical_flows(rows: np.ndarray, size_bytes: np.ndarray, group: np.ndarray, min_flows: int | None = None
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """Sets of identical flows among ``n`` new ones.

    Parameters
    ----------
    rows : ndarray of int64, shape (n, width)
        Link ids of each flow, padded with -1.
    size_bytes : ndarray of float64, shape (n,)
    group : ndarray of int64, shape (n,)
    min_flows : int, optional
        Calls of fewer flows are not searched (default :data:`MIN_FLOWS`).

    Returns
    -------
    (first, inverse) or None
        None when all flows differ; else ``first`` the index of the first flow of each set (increasing)
        and ``inverse`` the set of each flow (``first[inverse[i]]`` is identical to flow ``i``).

    Examples
    --------
    >>> rows = np.array([[0, 1], [2, -1], [0, 1], [0, 1]])
    >>> first, inverse = identical_flows(rows, np.array([5.0, 5.0, 5.0, 6.0]), np.zeros(4, np.int64), 2)
    >>> first.tolist(), inverse.tolist()
    ([0, 1, 3], [0, 1, 0, 2])
    """
    n = size_bytes.size
    if n < (MIN_FLOWS if min_flows is None else min_flows):
        return None
    key = np.empty((n, rows.shape[1] + 2), dtype=np.int64)
    key[:, :-2] = rows
    key[:, -2] = np.ascontiguousarray(size_bytes, dtype=np.float64).view(np.int64)
    key[:, -1] = group
    mult = _MULT[: key.shape[1]] if key.shape[1] <= _MULT.size else None
    if mult is None:
        return _by_unique(key)
    with np.errstate(over="ignore"):
        h = (key.view(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(hs[1:], hs[:-1], out=new_run[1:])
    runs = int(np.count_nonzero(new_run))
    if runs == n:
        return None
    run_of = np.cumsum(new_run) - 1
    head = order[new_run]                         # the first flow (smallest index) of each run
    if not (key[order] == key[head[run_of]]).all():
        return _by_unique(key)                    # a hash collision: the exact (slower) way
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = run_of
    rank = np.argsort(head)                       # runs in order of their first flow
    pos = np.empty(runs, dtype=np.int64)
    pos[rank] = np.arange(runs)
    return head[rank], pos[inverse]


def _by_unique(key: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    if first.size == key.shape[0]:
        return None
    rank = np.argsort(first)
    pos = np.empty(first.size, dtype=np.int64)
    pos[rank] = np.arange(first.size)
    return first[rank], pos[inverse.reshape(-1)]


def weighted_slots(rows: np.ndarray, deg: np.ndarray, size_bytes: np.ndarray, ids: np.ndarray,
                   group: np.ndarray, min_flows: int | None = None) -> tuple:
    """The slots of ``n`` new flows: one per set of identical flows (:func:`identical_flows`), weighted.

    Parameters
    ----------
    rows : ndarray of int64, shape (n, width)
        Link ids of each flow, padded with -1.
    deg, size_bytes, ids, group : ndarray, shape (n,)
        Links per flow, bytes, flow ids (increasing), batching groups.
    min_flows : int, optional
        As :func:`identical_flows`.

    Returns
    -------
    (rows, deg, size_bytes, group, fid, weight, members)
        Per slot: the first flow's links, degree, size, group and id, the flows it stands for (float64),
        and ``members`` (dict: fid of a slot of weight > 1 -> ids of all its flows).

    Examples
    --------
    >>> rows = np.array([[0, 1], [0, 1], [2, -1]])
    >>> out = weighted_slots(rows, np.array([2, 2, 1]), np.full(3, 5.0), np.arange(3), np.zeros(3, int),
    ...                      min_flows=0)
    >>> out[4].tolist(), out[5].tolist(), {k: v.tolist() for k, v in out[6].items()}
    ([0, 2], [2.0, 1.0], {0: [0, 1]})
    """
    merged = identical_flows(rows, size_bytes, group, min_flows)
    if merged is None:
        return rows, deg, size_bytes, group, ids, np.ones(ids.size), {}
    first, inverse = merged
    weight = np.bincount(inverse).astype(np.float64)
    order = np.argsort(inverse, kind="stable")
    bounds = np.r_[0, np.cumsum(weight.astype(np.int64))]
    all_ids = ids[order]
    members = {int(ids[first[j]]): all_ids[bounds[j]:bounds[j + 1]] for j in np.flatnonzero(weight > 1.0).tolist()}
    return rows[first], deg[first], size_bytes[first], group[first], ids[first], weight, members
