"""The ``split_bytes`` entries of uneven AllToAll rows, checked and summed flat (no Python object per entry).

A 4,096-GPU decode step holds billions of entries (one per peer per AllToAll row), so both functions take
rows in chunks of about :data:`SPLIT_CHUNK_ENTRIES` entries, each one flat int64 array. Used by
:func:`traces.checks.check_rows`.
"""

from __future__ import annotations

import itertools
from operator import attrgetter

import numpy as np

__all__ = ["SPLIT_CHUNK_ENTRIES", "base_range", "split_out_of_range", "split_sums"]


#: Split entries checked at once by :func:`split_out_of_range` (bounds its temporaries to ~32 MB).
SPLIT_CHUNK_ENTRIES = 1 << 22

#: Most distinct buffers :func:`base_range` looks at (a frame of ``read_trace`` has one per Arrow chunk).
MAX_BASES = 64


def base_range(values: np.ndarray) -> tuple[int, int] | None:
    """The smallest and largest value of the buffers that hold every row, when every row is an int64 view
    of one of a few int64 buffers (``read_trace``'s rows: views of each Arrow chunk's flat values); else
    None.

    A row's entries are elements of its buffer (an aligned int64 view with stride 8 of a C-contiguous int64
    buffer), so they lie in this range: when the range passes a test, every row does, without copying the
    rows' entries. The buffers may hold more values than the rows (a missing list's), so a range that fails
    says nothing about the rows: the callers then check row by row.

    Examples
    --------
    >>> flat, rows = np.array([3, 0, 7, 1]), np.empty(2, dtype=object)
    >>> rows[0], rows[1] = flat[0:1], flat[2:4]
    >>> base_range(rows), base_range(np.array([(1, 2)], dtype=object))
    ((0, 7), None)
    """
    if not len(values) or set(map(type, values)) != {np.ndarray}:
        return None
    if set(map(attrgetter("dtype"), values)) != {np.dtype(np.int64)} or (
            set(map(attrgetter("strides"), values)) != {(8,)}):
        return None
    bases = {id(b): b for b in map(attrgetter("base"), values)}
    if len(bases) > MAX_BASES or not all(isinstance(b, np.ndarray) and b.dtype == np.int64 and b.flags.c_contiguous
                                         and b.flags.aligned and b.size for b in bases.values()):
        return None
    if not all(v.flags.aligned for v in values):  # an unaligned view would read across the buffer's elements
        return None
    # Arrow's chunks of one row group are slices of one decoded buffer, each wrapped by an array of its
    # own: read each memory span once (8 chunks of the 4,096-GPU decode step would read 0.97 GB 8 times)
    spans = {(b.__array_interface__["data"][0], b.nbytes): b for b in bases.values()}
    return min(int(b.min()) for b in spans.values()), max(int(b.max()) for b in spans.values())


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
    if not len(rows):  # (the chunk walk below needs one row)
        return bad
    span = base_range(splits[rows])
    if span is not None and span[0] >= 0 and span[1] <= max_entry:  # every entry is in range
        return bad
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
    longest = int(split_len[rows].max())
    span = base_range(splits[rows])
    # entries in 0..top: no row sum reaches longest x top, so below 2**61 neither the int64 sums wrap nor the
    # float estimate reaches 2**62 (the -1 test): the float pass can be left out
    small = span is not None and span[0] >= 0 and longest * span[1] < 2 ** 61
    step = max(1, SPLIT_CHUNK_ENTRIES // longest)  # rows per chunk of ~SPLIT_CHUNK_ENTRIES
    for lo in range(0, len(rows), step):
        part = rows[lo:lo + step]
        values = splits[part]
        flat = (np.concatenate(values.tolist()) if isinstance(values[0], np.ndarray)
                else np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64,
                                 count=int(split_len[part].sum()))).astype(np.int64, copy=False)
        offsets = np.concatenate([[0], np.cumsum(split_len[part])[:-1]])
        if small:
            total[part] = np.add.reduceat(flat, offsets)
            continue
        rough = np.add.reduceat(flat.astype(np.float64), offsets)  # entries are <= 2**53: no overflow here
        exact = np.add.reduceat(flat, offsets)
        total[part] = np.where(rough < 2.0**62, exact, -1)
    return total
