"""The ``split_bytes`` entries of uneven AllToAll rows, checked and summed flat (no Python object per entry).

A 4,096-GPU decode step holds billions of entries (one per peer per AllToAll row), so both functions take
rows in chunks of about :data:`SPLIT_CHUNK_ENTRIES` entries, each one flat int64 array. Used by
:func:`traces.checks.check_rows`.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["SPLIT_CHUNK_ENTRIES", "split_out_of_range", "split_sums"]


#: Split entries checked at once by :func:`split_out_of_range` (bounds its temporaries to ~32 MB).
SPLIT_CHUNK_ENTRIES = 1 << 22


def split_out_of_range(splits: np.ndarray, split_len: np.ndarray, max_entry: int) -> np.ndarray:
    """Rows whose ``split_bytes`` has an entry outside ``0..max_entry`` (compared exactly, as integers).

    Rows with entries are taken in chunks of about :data:`SPLIT_CHUNK_ENTRIES` entries, each one flat int64
    array (``np.concatenate`` of int64 arrays, or ``np.fromiter`` over tuples of ints; Python ints beyond
    64 bits are compared as objects), so no Python object is made per entry.

    Examples
    --------
    >>> split_out_of_range(np.array([(1, 2), (), (-1, 5)], dtype=object), np.array([2, 0, 2]), 2**53).tolist()
    [False, False, True]
    """
    bad = np.zeros(len(splits), bool)
    rows = np.flatnonzero(split_len)
    cum = np.cumsum(split_len[rows])
    starts = np.searchsorted(cum, np.arange(0, int(cum[-1]) if len(cum) else 0, SPLIT_CHUNK_ENTRIES), side="right")
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(rows)], strict=True):
        part = rows[lo:hi]
        if not len(part):
            continue
        values = splits[part]
        try:
            if isinstance(values[0], np.ndarray):
                flat = np.concatenate(values.tolist()).astype(np.int64, copy=False)
            else:
                flat = np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64,
                                   count=int(split_len[part].sum()))
        except (OverflowError, TypeError, ValueError):  # ints beyond int64, or mixed rows: exact as objects
            flat = np.fromiter(itertools.chain.from_iterable(values), dtype=object)
        out = (flat < 0) | (flat > max_entry)
        if out.any():
            bad[np.repeat(part, split_len[part])[out]] = True
    return bad


def split_sums(splits: np.ndarray, split_len: np.ndarray) -> np.ndarray:
    """Total bytes of each row's ``split_bytes`` (0 for a row without), exact in int64; -1 where the total
    would reach 2**62 (no real op sends that much; its entries are in range, so the row is refused).

    Examples
    --------
    >>> split_sums(np.array([(1, 2), (), (5, 5)], dtype=object), np.array([2, 0, 2])).tolist()
    [3, 0, 10]
    """
    total = np.zeros(len(splits), np.int64)
    rows = np.flatnonzero(split_len)
    if not len(rows):
        return total
    step = max(1, SPLIT_CHUNK_ENTRIES // int(split_len[rows].max()))  # rows per chunk of ~SPLIT_CHUNK_ENTRIES
    for lo in range(0, len(rows), step):
        part = rows[lo:lo + step]
        values = splits[part]
        flat = (np.concatenate(values.tolist()) if isinstance(values[0], np.ndarray)
                else np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64,
                                 count=int(split_len[part].sum()))).astype(np.int64, copy=False)
        offsets = np.concatenate([[0], np.cumsum(split_len[part])[:-1]])
        rough = np.add.reduceat(flat.astype(np.float64), offsets)  # entries are <= 2**53: no overflow here
        exact = np.add.reduceat(flat, offsets)
        total[part] = np.where(rough < 2.0**62, exact, -1)
    return total
