"""CSR helpers of the event core: invert a dependency CSR, take rows of a CSR, a growing column.

A CSR (compressed sparse row) pair ``ptr, idx`` stores row ``i`` as ``idx[ptr[i]:ptr[i + 1]]``: the
dependencies of a transfer, the links of a path, the ops of a step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GrowArray", "csr_take", "reverse_csr"]


def reverse_csr(dep_ptr: np.ndarray, dep_idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Invert a dependency CSR (``i`` waits for ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``).

    Returns
    -------
    rev_ptr, rev_idx : ndarray of int64
        ``rev_idx[rev_ptr[j]:rev_ptr[j+1]]`` are the transfers that wait for ``j``.

    Examples
    --------
    >>> rp, ri = reverse_csr(np.array([0, 0, 1, 2]), np.array([0, 0]), 3)
    >>> rp.tolist(), ri.tolist()
    ([0, 2, 2, 2], [1, 2])
    """
    dep_ptr = np.asarray(dep_ptr, dtype=np.int64)
    dep_idx = np.asarray(dep_idx, dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_ptr))
    order = np.argsort(dep_idx, kind="stable")
    rev_idx = owner[order]
    rev_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dep_idx, minlength=n), out=rev_ptr[1:])
    return rev_ptr, rev_idx


def csr_take(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of a CSR matrix as a new CSR (``ptr``, ``idx``), vectorised.

    Examples
    --------
    >>> p, i = csr_take(np.array([0, 2, 3, 5]), np.array([7, 8, 9, 10, 11]), np.array([2, 0]))
    >>> p.tolist(), i.tolist()
    ([0, 2, 4], [10, 11, 7, 8])
    """
    rows = np.asarray(rows, dtype=np.int64)
    starts = ptr[rows]
    lengths = ptr[rows + 1] - starts
    new_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    offsets = np.arange(new_ptr[-1], dtype=np.int64) - np.repeat(new_ptr[:-1] - starts, lengths)
    return new_ptr, idx[offsets]



class GrowArray:
    """A numpy array that grows by doubling (flow-indexed columns of the flow log).

    Parameters
    ----------
    dtype : numpy dtype
    fill : scalar
        Value of the entries not written yet.

    Examples
    --------
    >>> g = GrowArray(np.int64, -1)
    >>> g.ensure(3000); len(g.a) >= 3000, int(g.a[2999])
    (True, -1)
    """

    def __init__(self, dtype, fill) -> None:
        self.a = np.full(1024, fill, dtype=dtype)
        self.fill = fill

    def ensure(self, n: int) -> None:
        """Room for ``n`` entries (the first ``len`` entries kept)."""
        if n > len(self.a):
            new = np.full(max(n, 2 * len(self.a)), self.fill, dtype=self.a.dtype)
            new[: len(self.a)] = self.a
            self.a = new
