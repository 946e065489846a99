"""What the compiled chunk reader's arrays mean, without importing numba: the columns of its COLL and TUNING
matrices and its op codes.

:mod:`traces.formats.nccl.kernel_numba` (numba's JIT) and the ahead-of-time module of
:mod:`traces.formats.nccl.kernel_aot` return the same arrays; :mod:`traces.formats.nccl.scan_numba` reads them
with these names whichever of the two ran, so a process using the ahead-of-time module never imports numba.

Examples
--------
>>> OP_NAMES[OP_LIST.index("AllReduce")], C_COLS, T_COLS
('AllReduce', 18, 18)
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from traces.formats.nccl import layout as L

__all__ = ["C_COLS", "C_COUNT", "C_DEV", "C_DT", "C_GRANK", "C_HE", "C_HS", "C_LE", "C_LINE", "C_LS",
           "C_NRANKS", "C_OE", "C_OK", "C_OP", "C_OS", "C_PID", "C_ROOT", "C_TID", "C_TS", "NO_TS", "OP_LIST",
           "OP_NAMES", "T_AE", "T_AS", "T_COLS", "T_DEV", "T_HE", "T_HS", "T_LE", "T_LINE", "T_LS", "T_NBYTES",
           "T_OE", "T_OK", "T_OP", "T_OS", "T_PE", "T_PID", "T_PS", "T_TID", "T_TS", "distinct_spans"]

#: A timestamp the kernel could not read.
NO_TS = np.iinfo(np.int64).min
#: Op names the COLL/TUNING fast path accepts (code = index).
OP_LIST = list(L.NCCL_OPS)
OP_NAMES = np.array(OP_LIST, dtype=object)
#: Columns of the integer COLL matrix returned by ``scan_chunk``.
C_LINE, C_LS, C_LE, C_OK, C_OP, C_COUNT, C_DT, C_ROOT, C_NRANKS, C_GRANK = range(10)
C_PID, C_TID, C_HS, C_HE, C_TS, C_OS, C_OE, C_DEV = range(10, 18)
C_COLS = 18
#: Columns of the integer TUNING matrix.
T_LINE, T_LS, T_LE, T_OK, T_OP, T_NBYTES, T_AS, T_AE, T_PS, T_PE = range(10)
T_PID, T_TID, T_HS, T_HE, T_TS, T_OS, T_OE, T_DEV = range(10, 18)
T_COLS = 18


def distinct_spans(kernel: ModuleType, a: np.ndarray, buf: bytes, start: np.ndarray, end: np.ndarray
                   ) -> tuple[np.ndarray, list[bytes]]:
    """Codes and distinct byte strings of the spans [start, end) of a chunk (one Python object per value),
    with the ``span_hashes`` and ``spans_equal`` of ``kernel`` (a 64-bit hash collision, checked byte by
    byte, falls back to slicing every span).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> same = SimpleNamespace(span_hashes=lambda a, s, e: np.zeros(len(s), np.uint64),
    ...                        spans_equal=lambda a, s1, e1, s2, e2: False)  # every span collides
    >>> buf = b"ab cd ab"
    >>> codes, uniq = distinct_spans(same, np.frombuffer(buf, np.uint8), buf, np.array([0, 3, 6]), np.array([2, 5, 8]))
    >>> codes.tolist(), uniq
    ([0, 1, 0], [b'ab', b'cd'])
    """
    from traces.arrays import factorize

    if not len(start):
        return np.empty(0, dtype=np.int64), []
    codes, _ = factorize(kernel.span_hashes(a, start, end))
    first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    if not kernel.spans_equal(a, start, end, start[first][codes], end[first][codes]):  # a 64-bit hash collision
        codes, uniq = factorize(np.array([buf[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)],
                                            dtype=object))
        return codes, list(uniq)
    return codes, [buf[s:e] for s, e in zip(start[first].tolist(), end[first].tolist(), strict=True)]


