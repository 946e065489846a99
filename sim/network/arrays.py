"""Array helpers of the flow network: a growing buffer, CSR range gathering, padded link rows, input validation."""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError

__all__ = ["GrowBuffer", "check_capacity_change", "check_flows", "dense_groups", "gather_ranges", "padded_rows"]


def gather_ranges(ptr: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the CSR entries of rows ``ids`` (in order), and the row pointer of that selection."""
    begin = ptr[ids]
    deg = ptr[ids + 1] - begin
    local_ptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(deg, out=local_ptr[1:])
    pos = np.arange(local_ptr[-1], dtype=np.int64) + np.repeat(begin - local_ptr[:-1], deg)
    return pos, local_ptr


class GrowBuffer:
    """A growing 1-D array (amortised doubling) exposing its filled prefix as ``view``."""

    def __init__(self, dtype):
        self.data = np.zeros(256, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > self.data.size:
            grown = np.zeros(max(end, 2 * self.data.size), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:end] = values
        self.size = end

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


def check_flows(num_links: int, clock_s: float, now_s: float, ptr: np.ndarray, links: np.ndarray,
                size: np.ndarray) -> np.ndarray:
    """Validate one ``FlowNetwork.add_flows`` call; return the number of links of each flow.

    Raises
    ------
    SimError
        For time going backwards, malformed CSR, unknown links or bad sizes.

    Examples
    --------
    >>> check_flows(2, 0.0, 1.0, np.array([0, 1, 3]), np.array([0, 0, 1]), np.array([1.0, 2.0])).tolist()
    [1, 2]
    """
    if not (math.isfinite(now_s) and now_s >= clock_s):
        raise SimError(f"add_flows: start time {now_s} is before the network's clock {clock_s}")
    if ptr.size != size.size + 1:
        raise SimError(f"add_flows: link_ptr has {ptr.size} entries for {size.size} flows (want n + 1)")
    deg = ptr[1:] - ptr[:-1]
    if size.size and ((deg < 0).any() or ptr[0] < 0 or ptr[-1] > links.size):
        raise SimError("add_flows: link_ptr is not a non-decreasing index into link_idx")
    used = links[ptr[0]:ptr[-1]]
    if used.size and (used.min() < 0 or used.max() >= num_links):
        bad = int(used[(used < 0) | (used >= num_links)][0])
        raise SimError(f"add_flows: link id {bad} is not in 0..{num_links - 1}")
    if not (size >= 0).all() or not np.isfinite(size).all():   # NaN fails the first test
        row = int(np.flatnonzero(~np.isfinite(size) | (size < 0))[0])
        raise SimError(f"add_flows: size_bytes[{row}] = {size[row]} is not a finite size >= 0")
    return deg


def padded_rows(links: np.ndarray, starts: np.ndarray, deg: np.ndarray) -> np.ndarray:
    """Link ids of flows (``links[starts[i]:starts[i] + deg[i]]``) as the rows of a matrix padded with -1.

    Examples
    --------
    >>> padded_rows(np.array([4, 5, 6]), np.array([0, 2]), np.array([2, 1])).tolist()
    [[4, 5], [6, -1]]
    """
    n = deg.size
    width = max(int(deg.max()) if n else 1, 1)
    if n and (deg == width).all():   # every path as long: one gather, no scatter
        return links[(starts[:, None] + np.arange(width)).reshape(-1)].reshape(n, width)
    rows = np.full((n, width), -1, dtype=np.int64)
    begin = np.cumsum(deg) - deg
    c = np.arange(int(deg.sum())) - np.repeat(begin, deg)
    row_start = np.repeat(np.arange(n) * width, deg)
    rows.reshape(-1)[row_start + c] = links[np.repeat(starts, deg) + c]
    return rows


def dense_groups(table: dict, group, n: int) -> np.ndarray:
    """Dense index of the batching group of each of ``n`` new flows; new keys are added to ``table``.

    Parameters
    ----------
    table : dict
        Group key -> dense index so far (None: the flows without a group); updated.
    group : int, array_like of int, shape (n,), or None

    Raises
    ------
    SimError
        For a group that is not one integer or ``n`` integers.

    Examples
    --------
    >>> table = {}
    >>> dense_groups(table, np.array([7, 3, 7]), 3).tolist(), dense_groups(table, None, 1).tolist()
    ([1, 0, 1], [2])
    """
    if group is None:
        key = table.setdefault(None, len(table))
        return np.full(n, key, dtype=np.int64)
    raw = np.asarray(group)
    if raw.ndim == 0:
        raw = np.full(n, raw)
    if raw.shape != (n,) or (raw.size and raw.dtype.kind not in "iu"):
        raise SimError(f"add_flows: group must be an integer or {n} integers, one per flow")
    keys, inverse = np.unique(raw.astype(np.int64), return_inverse=True)
    idx = np.array([table.setdefault(k, len(table)) for k in keys.tolist()], dtype=np.int64)
    return idx[inverse.reshape(-1)]


def check_capacity_change(num_links: int, link_ids, capacity_bytes_per_s) -> tuple[np.ndarray, np.ndarray]:
    """The link ids and new capacities of ``FlowNetwork.set_capacity``, checked (one capacity per id).

    Raises
    ------
    SimError
        For an unknown link or a capacity that is negative or not finite.

    Examples
    --------
    >>> ids, cap = check_capacity_change(4, [1, 3], 0.0)
    >>> ids.tolist(), cap.tolist()
    ([1, 3], [0.0, 0.0])
    """
    ids = np.asarray(link_ids, dtype=np.int64).reshape(-1)
    cap = np.broadcast_to(np.asarray(capacity_bytes_per_s, dtype=np.float64), ids.shape)
    if ids.size and (ids.min() < 0 or ids.max() >= num_links):
        raise SimError(f"set_capacity: a link id is not in 0..{num_links - 1}")
    if not (np.isfinite(cap).all() and (cap >= 0).all()):
        raise SimError("set_capacity: capacities must be finite and >= 0")
    return ids, cap
