"""The engine's table of route sub-flow paths: every distinct path seen in a run, in CSR arrays."""

from __future__ import annotations

import numpy as np

__all__ = ["PathTable", "path_hashes", "path_latency_s"]


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


_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)   # odd 64-bit multiplier (golden ratio): spreads link ids
_HASH_LEN = np.uint64(0xC2B2AE3D27D4EB4F)


def path_hashes(link_ptr: np.ndarray, link_idx: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each path of a CSR batch (its links in order and its length), vectorised.

    Equal paths get equal hashes; unequal ones almost surely differ, and :class:`PathTable` checks every
    match link by link, so a collision costs only a duplicate row, never a wrong path.

    Examples
    --------
    >>> h = path_hashes(np.array([0, 2, 4, 5, 5]), np.array([3, 1, 3, 1, 1]))
    >>> bool(h[0] == h[1]), bool(h[0] != h[2]), bool(h[2] != h[3])
    (True, True, True)
    """
    ptr = np.asarray(link_ptr, dtype=np.int64)
    links = np.asarray(link_idx, dtype=np.int64)[ptr[0]:ptr[-1]]
    ptr = ptr - ptr[0]
    deg = np.diff(ptr)
    pos = np.arange(len(links), dtype=np.int64) - np.repeat(ptr[:-1], deg)
    with np.errstate(over="ignore"):   # wrapping uint64 arithmetic is the point
        powers = np.cumprod(np.full(int(deg.max(initial=0)) + 1, _HASH_MUL, dtype=np.uint64))
        vals = (links.astype(np.uint64) + np.uint64(1)) * powers[pos]
        cum = np.concatenate(([np.uint64(0)], np.cumsum(vals, dtype=np.uint64)))
        return (cum[ptr[1:]] - cum[ptr[:-1]]) ^ (deg.astype(np.uint64) * _HASH_LEN)


class PathTable:
    """Every distinct route sub-flow seen in a run, stored once: its links and latency.

    ``links[ptr[i]:ptr[i+1]]`` are path ``i``'s link ids, source first. :meth:`add` returns the id of an
    equal path already in the table (found by :func:`path_hashes`, confirmed link by link), so the table
    grows with the distinct paths of a run, not with its flows. Stored in arrays that grow by doubling,
    so reading ``ptr`` / ``links`` after each ``add`` costs nothing.

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
    >>> t.add(np.array([0, 1, 3, 4]), np.array([1, 0, 1, 0]))[0].tolist(), len(t)   # [1] and [0, 1] known
    ([1, 0, 2], 3)
    """

    def __init__(self, capacity_gbps: np.ndarray, latency_us: np.ndarray) -> None:
        self.capacity_gbps = np.asarray(capacity_gbps, dtype=np.float64)
        self.latency_us = np.asarray(latency_us, dtype=np.float64)
        self._ptr = np.zeros(1024, dtype=np.int64)
        self._links = np.zeros(4096, dtype=np.int64)
        self._n_paths = 0
        self._n_links = 0
        self._hash_keys = np.zeros(0, dtype=np.uint64)   # sorted hashes of the stored paths
        self._hash_ids = np.zeros(0, dtype=np.int64)     # the path id of each

    def add(self, link_ptr: np.ndarray, link_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Paths (CSR) by id: known ones found, new ones appended.

        Returns
        -------
        ids : ndarray of int64
            The id of each path (equal paths, in this batch or before, share one).
        latency_s : ndarray of float64
            One-way latency of each (:func:`path_latency_s`).
        """
        link_ptr = np.asarray(link_ptr, dtype=np.int64)
        link_idx = np.asarray(link_idx[link_ptr[0]:link_ptr[-1]], dtype=np.int64)
        link_ptr = link_ptr - link_ptr[0]
        lat = path_latency_s(link_ptr, link_idx, self.latency_us)
        if len(link_ptr) == 1:
            return np.zeros(0, dtype=np.int64), lat
        h = path_hashes(link_ptr, link_idx)
        uniq, first, inv = np.unique(h, return_index=True, return_inverse=True)
        pos = np.searchsorted(self._hash_keys, uniq)
        pos_ok = np.minimum(pos, max(len(self._hash_keys) - 1, 0))
        found = (pos < len(self._hash_keys)) & (self._hash_keys[pos_ok] == uniq) if len(self._hash_keys) else \
            np.zeros(len(uniq), dtype=bool)
        cand = np.where(found, self._hash_ids[pos_ok] if len(self._hash_ids) else -1, -1)
        new = np.flatnonzero(~found)
        if len(new):
            cand[new] = self._append(*_rows(link_ptr, link_idx, first[new]))
            at = np.searchsorted(self._hash_keys, uniq[new])
            self._hash_keys = np.insert(self._hash_keys, at, uniq[new])
            self._hash_ids = np.insert(self._hash_ids, at, cand[new])
        ids = cand[inv]
        bad = ~self._same(ids, link_ptr, link_idx)
        if bad.any():   # a hash collision: those paths get rows of their own (correct, just not shared)
            ids[bad] = self._append(*_rows(link_ptr, link_idx, np.flatnonzero(bad)))
        return ids, lat

    def _append(self, link_ptr: np.ndarray, link_idx: np.ndarray) -> np.ndarray:
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
        return ids

    def _same(self, ids: np.ndarray, link_ptr: np.ndarray, link_idx: np.ndarray) -> np.ndarray:
        """Whether stored path ``ids[i]`` has exactly the links of path ``i`` of the batch."""
        ptr, links = self.ptr, self.links
        deg = np.diff(link_ptr)
        same = (ptr[ids + 1] - ptr[ids]) == deg
        starts = np.repeat(ptr[ids] - link_ptr[:-1], deg)
        stored = links[np.clip(np.arange(len(link_idx)) + starts, 0, max(len(links) - 1, 0))] if len(links) else \
            np.full(len(link_idx), -1)
        wrong = np.bincount(np.repeat(np.arange(len(ids)), deg), weights=stored != link_idx, minlength=len(ids))
        return same & (wrong == 0)

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


def _rows(link_ptr: np.ndarray, link_idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of a CSR batch as a CSR."""
    deg = np.diff(link_ptr)[rows]
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    return ptr, link_idx[np.arange(ptr[-1], dtype=np.int64) - np.repeat(ptr[:-1] - link_ptr[rows], deg)]
