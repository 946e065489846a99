"""pandas-free helpers for the ingest path: ``factorize``, ``unique`` and ``duplicated`` as pandas gives them.

``simrun ingest`` of an NCCL log never imports pandas (~0.5 s of CPU per new process, as much as a third of
the whole ingest of a 100 MB log): the steps that used ``pd.factorize`` / ``pd.unique`` /
``Series.duplicated`` use these instead. They give the same codes in the same order (first appearance),
so every table built from them is the same. Integers with a small range use a direct lookup table
(O(n + range), faster than sorting); other integers sort; object arrays (``str``, ``bytes``, ``None``)
use a dict, whose hashes Python caches on each string.

A leaf module (numpy only).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Text", "combined_codes", "duplicated", "factorize", "first_index", "unique"]


class Text:
    """A text column held as integer codes into a small table of ``str`` (how NCCL-log rows keep comm, host
    and dtype): :func:`factorize` reads the codes (no dict lookup per row), ``numpy.asarray`` makes the
    object column, an integer index gives one ``str``, any other index a :class:`Text` of those rows.

    Examples
    --------
    >>> t = Text(np.array([1, 0, 1]), np.array(["a", "b"], dtype=object))
    >>> len(t), t[0], np.asarray(t).tolist(), factorize(t)[1].tolist()
    (3, 'b', ['b', 'a', 'b'], ['b', 'a'])
    """

    __slots__ = ("codes", "names")
    dtype = np.dtype(object)

    def __init__(self, codes: np.ndarray, names: np.ndarray):
        self.codes = np.asarray(codes)
        self.names = np.asarray(names, dtype=object)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, key: object) -> object:
        if isinstance(key, int | np.integer):
            return self.names[self.codes[key]]
        return Text(self.codes[key], self.names)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        out = self.names[self.codes]
        return out if dtype is None else out.astype(dtype)


def _table_span(values: np.ndarray) -> int | None:
    """The range of an integer array when a lookup table over it is cheap (at most ~8x the data, or 1 Mi entries), else None."""
    if values.dtype.kind not in "iu" or not len(values):
        return None
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    return span if span <= max(8 * len(values), 1 << 20) else None


def factorize(values: np.ndarray, na_sentinel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int64) and distinct values of ``values``, in order of first appearance (``pandas.factorize``).

    Parameters
    ----------
    values : numpy.ndarray or Text
        One-dimensional integers, or objects (``str``, ``bytes``, ``None``; hashable).
    na_sentinel : bool
        Objects only: ``None`` gets code -1 and is not among the distinct values (pandas' default); with
        False it is a value like any other (``use_na_sentinel=False``; pandas lists it as NaN, this as None).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The code of each entry and the distinct values (same dtype as ``values``).

    Examples
    --------
    >>> codes, uniq = factorize(np.array([7, 3, 7, 9]))
    >>> codes.tolist(), uniq.tolist()
    ([0, 1, 0, 2], [7, 3, 9])
    >>> codes, uniq = factorize(np.array(["b", None, "a", "b"], dtype=object))
    >>> codes.tolist(), uniq.tolist()
    ([0, -1, 1, 0], ['b', 'a'])
    >>> factorize(np.array([2**63 + 5, 1, 2**63 + 5], dtype=np.uint64))[0].tolist()
    [0, 1, 0]
    """
    if isinstance(values, Text):  # codes first, then equal names of different codes merged (a few)
        codes, used = factorize(values.codes)
        merged, names = factorize(values.names[used], na_sentinel)
        return merged[codes], names
    values = np.asarray(values)
    n = len(values)
    if values.dtype == object:
        items = values.tolist()
        index = {v: k for k, v in enumerate(dict.fromkeys(items))}  # first-appearance order
        if na_sentinel and None in index:
            del index[None]
            index = {v: k for k, v in enumerate(index)}
            index_get = index.get
            codes = np.fromiter((index_get(v, -1) for v in items), dtype=np.int64, count=n)
        else:
            codes = np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=n)
        uniq = np.empty(len(index), dtype=object)
        uniq[:] = list(index)
        return codes, uniq
    if not n:
        return np.empty(0, dtype=np.int64), values[:0].copy()
    if values.dtype.kind == "b":
        values = values.view(np.int8)
    if values.dtype.kind not in "iu":
        raise TypeError(f"factorize takes integers or objects, got {values.dtype}")
    first, inverse, distinct = _first_positions(values)
    order = np.argsort(first, kind="stable")  # distinct values by first appearance
    code_of = np.empty(len(order), dtype=np.int64)
    code_of[order] = np.arange(len(order), dtype=np.int64)
    return code_of[inverse], distinct[order]


def _first_positions(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the distinct values of an integer array (in some order): the first position of each, the index of
    each entry's value among them, and the values."""
    n = len(values)
    span = _table_span(values)
    if span is not None:
        lo = values.min()
        off = (values - lo).astype(np.intp)
        table = np.full(span, n, dtype=np.intp)
        table[off[::-1]] = np.arange(n - 1, -1, -1)  # repeated offsets: the last write (the first row) wins
        present = np.flatnonzero(table < n)
        slot = np.empty(span, dtype=np.intp)
        slot[present] = np.arange(len(present))
        return table[present], slot[off], values[table[present]]  # each value read where it first occurs
    # A huge range (hashes, pointers): bucket by 16 bits of a multiplicative hash, exact when no two distinct
    # values share a bucket (checked; the usual case for the few distinct values of a chunk), else sort.
    with np.errstate(over="ignore"):
        bucket = ((values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(48)).astype(np.intp)
    first, inverse, _ = _first_positions(bucket)
    if (values == values[first][inverse]).all():
        return first, inverse, values[first]
    distinct, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1), distinct


def unique(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance (``pandas.unique``).

    Examples
    --------
    >>> unique(np.array(["h2", "h1", "h2"], dtype=object)).tolist()
    ['h2', 'h1']
    """
    values = np.asarray(values)
    if values.dtype == object:
        keys = list(dict.fromkeys(values.tolist()))
        out = np.empty(len(keys), dtype=object)
        out[:] = keys
        return out
    return factorize(values)[1]


def first_index(codes: np.ndarray, k: int) -> np.ndarray:
    """Index of the first entry of each code ``0..k-1`` (every code occurs, as after :func:`factorize`).

    Examples
    --------
    >>> first_index(np.array([1, 0, 1, 2]), 3).tolist()
    [1, 0, 3]
    """
    first = np.zeros(k, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return first


def combined_codes(*columns: np.ndarray) -> np.ndarray:
    """One int64 code per distinct tuple of the (equal-length, integer) columns, in order of first appearance,
    by factorising one column at a time (no tuple per row).

    Examples
    --------
    >>> combined_codes(np.array([1, 1, 2, 1]), np.array([5, 6, 5, 5])).tolist()
    [0, 1, 2, 0]
    """
    codes = factorize(np.asarray(columns[0]))[0]
    for col in columns[1:]:
        more = factorize(np.asarray(col))[0]
        codes = factorize(codes * (int(more.max(initial=0)) + 1) + more)[0]
    return codes


def duplicated(*keys: np.ndarray) -> np.ndarray:
    """True for each row whose tuple of integer ``keys`` occurred in an earlier row (``DataFrame.duplicated``).

    Examples
    --------
    >>> duplicated(np.array([1, 2, 1, 1]), np.array([0, 0, 0, 5])).tolist()
    [False, False, True, False]
    """
    n = len(keys[0])
    if not n:
        return np.zeros(0, dtype=bool)
    code = combined_codes(*keys)
    seen = np.ones(n, dtype=bool)
    seen[first_index(code, int(code.max()) + 1)] = False
    return seen
