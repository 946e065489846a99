"""The engine's table of route sub-flow paths: every distinct path seen in a run, in CSR arrays."""

from __future__ import annotations

import numpy as np

__all__ = ["PathTable", "path_latency_s"]


def path_latency_s(link_ptr: np.ndarray, link_idx: np.ndarray, latency_us: np.ndarray) -> np.ndarray:
    """One-way latency of each path of a CSR batch (sum of its links' latencies), seconds.

    Summed as one running sum over the batch, so a path's latency depends on the batch it comes in only
    through float rounding (the planner and the table use the same batches).

    Examples
    --------
    >>> path_latency_s(np.array([0, 2, 2, 3]), np.array([0, 1, 1]), np.array([1.0, 2.0])).tolist()
    [3e-06, 0.0, 2e-06]
    """
    link_ptr = np.asarray(link_ptr, dtype=np.int64)
    links = np.asarray(link_idx[link_ptr[0]:link_ptr[-1]], dtype=np.int64)
    ptr = link_ptr - link_ptr[0]
    cum = np.concatenate(([0.0], np.cumsum(np.asarray(latency_us, dtype=np.float64)[links])))
    return (cum[ptr[1:]] - cum[ptr[:-1]]) * 1e-6


class PathTable:
    """Every distinct route sub-flow seen in a run: its links and latency.

    ``links[ptr[i]:ptr[i+1]]`` are path ``i``'s link ids, source first. Stored in arrays that grow by
    doubling, so reading ``ptr`` / ``links`` after each ``add`` costs nothing.

    Parameters
    ----------
    capacity_gbps, latency_us : ndarray
        Per link (the router's link table).

    Examples
    --------
    >>> t = PathTable(np.array([100.0, 100.0]), np.array([1.0, 2.0]))
    >>> ids, lat = t.add(np.array([0, 2, 3]), np.array([0, 1, 1]))
    >>> ids.tolist(), t.ptr.tolist(), t.links.tolist()
    ([0, 1], [0, 2, 3], [0, 1, 1])
    """

    def __init__(self, capacity_gbps: np.ndarray, latency_us: np.ndarray) -> None:
        self.capacity_gbps = np.asarray(capacity_gbps, dtype=np.float64)
        self.latency_us = np.asarray(latency_us, dtype=np.float64)
        self._ptr = np.zeros(1024, dtype=np.int64)
        self._links = np.zeros(4096, dtype=np.int64)
        self._n_paths = 0
        self._n_links = 0

    def add(self, link_ptr: np.ndarray, link_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append paths (CSR).

        Returns
        -------
        ids : ndarray of int64
            The new path ids (consecutive).
        latency_s : ndarray of float64
            One-way latency of each (:func:`path_latency_s`).
        """
        link_ptr = np.asarray(link_ptr, dtype=np.int64)
        link_idx = np.asarray(link_idx[link_ptr[0]:link_ptr[-1]], dtype=np.int64)
        link_ptr = link_ptr - link_ptr[0]
        n = len(link_ptr) - 1
        ids = np.arange(self._n_paths, self._n_paths + n, dtype=np.int64)
        p_end, l_end = self._n_paths + n + 1, self._n_links + len(link_idx)
        if p_end > len(self._ptr):
            self._ptr = np.concatenate([self._ptr, np.zeros(max(p_end, len(self._ptr)), dtype=np.int64)])
        if l_end > len(self._links):
            self._links = np.concatenate([self._links, np.zeros(max(l_end, len(self._links)), dtype=np.int64)])
        self._ptr[self._n_paths + 1:p_end] = link_ptr[1:] + self._n_links
        self._links[self._n_links:l_end] = link_idx
        self._n_paths += n
        self._n_links = l_end
        return ids, path_latency_s(link_ptr, link_idx, self.latency_us)

    @property
    def ptr(self) -> np.ndarray:
        """Path -> link range (CSR pointers)."""
        return self._ptr[: self._n_paths + 1]

    @property
    def links(self) -> np.ndarray:
        """Link ids of all paths, path after path."""
        return self._links[: self._n_links]

    def __len__(self) -> int:
        return self._n_paths
