"""Sorting by several keys as ``np.lexsort`` does, with radix passes for small integer keys.

``np.lexsort`` runs one stable comparison sort per key. The incast stream sorts millions of port
incidences by (port, sender, start) and (port, time, direction) every round (:mod:`sim.results.incast_stream`),
where the integer keys (ports, senders, +-1) span far fewer than 2**32 values. :func:`lex_order` sorts
least significant key first, as ``np.lexsort``, each pass stable, so its permutation is **exactly**
``np.lexsort``'s; an integer key is sorted by its 16-bit digits (numpy's stable sort of a 16-bit array is a
linear-time radix sort), a float key by numpy's stable sort (which runs fast on nearly sorted data, as the
start times of flows handed over in finishing order are).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["lex_order", "stable_order"]

_DIGIT_BITS = 16
_MAX_DIGITS = 3   # integer keys spanning up to 2**48 values; wider ones take numpy's stable int64 sort


def stable_order(key: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """``order`` (default: the identity) stably re-sorted by ``key[order]``: the indices of ``key``
    sorted by value, equal values in the order they have in ``order``.

    Examples
    --------
    >>> stable_order(np.array([3, 1, 3, 0])).tolist(), stable_order(np.array([0.5, 0.1, 0.5])).tolist()
    ([3, 1, 0, 2], [1, 0, 2])
    >>> stable_order(np.array([1, 1, 0]), np.array([1, 0, 2])).tolist()   # ties keep the given order
    [2, 1, 0]
    """
    key = np.asarray(key)
    n = len(key)
    idx = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if n == 0:
        return idx
    k = key if order is None else key[idx]
    if k.dtype.kind in "iub":
        k = k.astype(np.int64, copy=False)
        lo = int(k.min())
        span = int(k.max()) - lo
        digits = max(1, (span.bit_length() + _DIGIT_BITS - 1) // _DIGIT_BITS)
        if digits <= _MAX_DIGITS:
            off = k - lo
            for d in range(digits):   # least significant digit first: each pass a stable radix sort
                digit = ((off >> (d * _DIGIT_BITS)) & 0xFFFF).astype(np.uint16)
                step = np.argsort(digit, kind="stable")
                idx, off = idx[step], off[step]
            return idx
    return idx[np.argsort(k, kind="stable")]


def lex_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The permutation that sorts rows by ``keys``, the **last** key primary: ``np.lexsort(keys)``, the
    same indices (equal rows keep their input order).

    Parameters
    ----------
    keys : sequence of 1-D arrays of one length
        Integer, boolean or float keys.

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> port, t = np.array([2, 1, 2, 1]), np.array([0.5, 0.7, 0.1, 0.7])
    >>> lex_order((t, port)).tolist(), np.lexsort((t, port)).tolist()
    ([1, 3, 2, 0], [1, 3, 2, 0])
    """
    keys = list(keys)
    if not keys:
        return np.zeros(0, dtype=np.int64)
    order = None
    for key in keys:   # least significant first, as lexsort reads them
        order = stable_order(key, order)
    return order
