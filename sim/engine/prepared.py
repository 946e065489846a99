"""A prepared op: what the engine takes in for one op instance (its transfers and their routes).

The replay layer plans and routes an op (:class:`sim.replay.Preparer`); the engine only reads the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PreparedOp"]


@dataclass(frozen=True)
class PreparedOp:
    """An op instance's transfers, dependencies and routes, ready for the event loop.

    Per transfer: ``delay_s`` (software delay after its dependencies), ``dep_count`` (dependencies),
    ``rev_ptr`` / ``rev_idx`` (CSR of the transfers that depend on it), ``sub_ptr`` (its route sub-flows),
    ``src`` / ``dst`` (global ranks). Per sub-flow: ``sub_bytes``, ``sub_latency_s`` (one-way path
    latency), ``sub_transfer``, and its links ``sub_link_idx[sub_link_ptr[i]:sub_link_ptr[i + 1]]`` (no
    link: a local copy). ``footprint``: the sorted link ids of all its paths (computed when omitted).
    ``sub_cap_bytes_per_s``: per sub-flow, its transfer's rate ceiling (``inf``: none), which the
    transfer's sub-flows share (a p2p connection's NCCL channels, ``sim.planning.p2p``); ``None``: no
    sub-flow has one.

    Examples
    --------
    One transfer of 8 bytes over links 3 then 5:

    >>> z = np.zeros(1, np.int64)
    >>> p = PreparedOp("direct", "Simple", np.zeros(1), z, np.zeros(2, np.int64), z[:0], np.array([0, 1]),
    ...                np.array([8.0]), np.zeros(1), z, z, z + 1, np.array([0, 2]), np.array([3, 5]))
    >>> p.n_transfers, p.links_footprint().tolist()
    (1, [3, 5])
    """

    algo: str
    proto: str
    delay_s: np.ndarray
    dep_count: np.ndarray
    rev_ptr: np.ndarray
    rev_idx: np.ndarray
    sub_ptr: np.ndarray
    sub_bytes: np.ndarray
    sub_latency_s: np.ndarray
    sub_transfer: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sub_link_ptr: np.ndarray
    sub_link_idx: np.ndarray
    footprint: np.ndarray | None = None
    sub_cap_bytes_per_s: np.ndarray | None = None

    @property
    def n_transfers(self) -> int:
        """Number of transfers."""
        return len(self.delay_s)

    def links_footprint(self) -> np.ndarray:
        """The sorted distinct link ids of all sub-flows (``footprint`` when given)."""
        if self.footprint is not None:
            return self.footprint
        return np.unique(self.sub_link_idx[self.sub_link_ptr[0]:self.sub_link_ptr[-1]]).astype(np.int64)
