"""Array helpers of the flow network: a growing buffer, CSR range gathering, input validation."""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError

__all__ = ["GrowBuffer", "check_flows", "gather_ranges"]


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
