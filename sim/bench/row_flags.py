"""Rows of a measured nccl-tests table that the table itself contradicts (flagged, never dropped).

nccl-tests times every size twice, out-of-place then in-place (``BenchTime(..., 0)`` and
``BenchTime(..., 1)`` in its ``src/common.cu``): the same collective on the same bytes, NCCL choosing its
algorithm and protocol from the size alone, so the two columns are two samples of one quantity. And NCCL's
tuner picks, per size, the fastest of its (algorithm, protocol) models, each ``latency + bytes / bw``, so
its time never falls as the size grows. A row is flagged, by one rule for every table, when

* ``columns``: its out-of-place time (the one the error is taken from) is more than
  :data:`FLAG_FACTOR` times its own in-place time: the run did not reproduce itself at that size (the
  first timed row after warm-up, a stall in the out-of-place loop; a stall of the in-place loop alone
  leaves the out-of-place time good);
* ``non-monotone``: its out-of-place time is more than :data:`FLAG_FACTOR` times a time (either column)
  of a *larger* size of the same table: a collective of fewer bytes took over twice as long as one of
  more bytes in the same run, which no per-size cost allows.

The factor is 2 (the time doubled), well above the scatter of the two columns in the suite's tables
without stalls (out-of-place / in-place at most 1.36). Flagged rows stay in ``validate.parquet`` (column ``flag``) and are counted in the error
summary; the medians leave them out and say how many.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLAG_FACTOR", "flag_rows"]

#: A time more than this many times the row's own other column, or a larger size's time, is flagged.
FLAG_FACTOR = 2.0


def flag_rows(sizes, time_us, time_inplace_us, factor: float = FLAG_FACTOR) -> np.ndarray:
    """Per row: ``""`` (kept), ``"columns"`` or ``"non-monotone"`` (see the module docstring).

    Parameters
    ----------
    sizes : array_like of int
        nccl-tests' size column (bytes), in the table's order.
    time_us : array_like of float
        The out-of-place time (us), the one the error is taken from.
    time_inplace_us : array_like of float
        The in-place time (us); nan where the table prints none.
    factor : float
        The ratio beyond which a row is flagged (> 1).

    Returns
    -------
    numpy.ndarray of str
        One flag per row; rows of size 0 or without a positive time are never flagged.

    Raises
    ------
    ValueError
        ``factor`` not above 1, or columns of different lengths.

    Examples
    --------
    >>> flag_rows([8, 16, 32, 64], [172.7, 39.1, 39.1, 38.8], [40.2, 40.1, 38.8, 39.4]).tolist()
    ['columns', '', '', '']
    >>> flag_rows([1024, 2048, 4096], [40.0, 900.0, 60.0], [40.0, 880.0, 61.0]).tolist()
    ['', 'non-monotone', '']
    """
    if not np.isfinite(factor) or factor <= 1.0:
        raise ValueError(f"flag factor must be a number above 1, got {factor!r}")
    size = np.asarray(sizes, dtype=float)
    oop = np.asarray(time_us, dtype=float)
    inp = np.asarray(time_inplace_us, dtype=float)
    if not (size.shape == oop.shape == inp.shape):
        raise ValueError(f"columns of different lengths: {size.shape}, {oop.shape}, {inp.shape}")
    valid = (size > 0) & (oop > 0)
    both = np.fmin(np.where(oop > 0, oop, np.nan), np.where(inp > 0, inp, np.nan))
    flags = np.full(size.shape, "", dtype=object)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = oop / inp
        columns = valid & (inp > 0) & (ratio > factor)
    # the fastest time of any strictly larger size (rows need not be sorted; equal sizes do not count)
    faster_larger = np.full(size.shape, np.nan)
    for i in np.flatnonzero(valid):
        larger = (size > size[i]) & np.isfinite(both)
        if larger.any():
            faster_larger[i] = both[larger].min()
    with np.errstate(invalid="ignore"):
        monotone_bad = valid & (oop > factor * faster_larger)
    flags[monotone_bad] = "non-monotone"
    flags[columns] = "columns"
    return flags.astype(str)
