"""Transfer sizes (SPEC §7 ``sizes.csv``) and the request-size distribution in power-of-two bins."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traces.stats.tables import sorted_by_op

__all__ = ["size_bins", "size_histogram", "size_stats"]


def size_stats(df: pd.DataFrame, by_comm: bool = False) -> pd.DataFrame:
    """Transfer sizes per operation (SPEC §7 ``sizes.csv``): quantiles of ``bytes`` over the rows of each op.

    Quantiles use linear interpolation (numpy's default).

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.
    by_comm : bool
        One row per (``comm``, ``op``).

    Returns
    -------
    pandas.DataFrame
        ``[comm,] op, min, p50, p90, max, mean, rows`` (bytes; ``rows`` = rank calls).

    Examples
    --------
    >>> df = pd.DataFrame(dict(op="AllReduce", bytes=[1, 2, 3, 4, 5], comm="c"))
    >>> size_stats(df)[["op", "min", "p50", "max"]].to_dict("records")
    [{'op': 'AllReduce', 'min': 1, 'p50': 3.0, 'max': 5}]
    """
    keys = ["comm", "op"] if by_comm else ["op"]
    columns = [*keys, "min", "p50", "p90", "max", "mean", "rows"]
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("comm", "op") else "float64") for c in columns})
    grouped = df.groupby(keys, sort=False)["bytes"]
    table = grouped.agg(min="min", max="max", mean="mean", rows="size")
    table["p50"] = grouped.quantile(0.5)
    table["p90"] = grouped.quantile(0.9)
    return sorted_by_op(table.reset_index()[columns], keys)


def size_bins(sizes_bytes: np.ndarray) -> np.ndarray:
    """Power-of-two bin index of each size: ``k`` for ``2**k <= size < 2**(k+1)``, ``-1`` for 0 bytes.

    Integer arithmetic, exact for every int64 size.

    Examples
    --------
    >>> size_bins(np.array([0, 1, 2, 3, 4, 1023, 1024]))
    array([-1,  0,  1,  1,  2,  9, 10])
    """
    edges = np.left_shift(np.int64(1), np.arange(63, dtype=np.int64))
    sizes = np.asarray(sizes_bytes, dtype=np.int64)
    return np.searchsorted(edges, sizes, side="right").astype(np.int64) - 1


def size_histogram(df: pd.DataFrame, by_comm: bool = False) -> pd.DataFrame:
    """Request-size distribution: rows and bytes per power-of-two size bin, per op.

    A request is one row (one op issued by one rank). Bins are ``[2**k, 2**(k+1))`` bytes; zero-byte rows get
    the bin ``[0, 1)``.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.
    by_comm : bool
        Split per communicator too.

    Returns
    -------
    pandas.DataFrame
        ``[comm,] op, bin_lo_bytes, bin_hi_bytes, rows, bytes``, only non-empty bins, by op then size.

    Examples
    --------
    >>> df = pd.DataFrame(dict(op="Send", bytes=[3, 2, 1024], comm="c"))
    >>> size_histogram(df)[["bin_lo_bytes", "bin_hi_bytes", "rows"]].to_dict("records")
    [{'bin_lo_bytes': 2, 'bin_hi_bytes': 4, 'rows': 2}, {'bin_lo_bytes': 1024, 'bin_hi_bytes': 2048, 'rows': 1}]
    """
    keys = ["comm", "op"] if by_comm else ["op"]
    columns = [*keys, "bin_lo_bytes", "bin_hi_bytes", "rows", "bytes"]
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("comm", "op") else "int64") for c in columns})
    k = size_bins(df["bytes"].to_numpy())
    frame = df[keys].assign(_k=k, bytes=df["bytes"].to_numpy())
    table = frame.groupby([*keys, "_k"], sort=False)["bytes"].agg(rows="size", bytes="sum").reset_index()
    kk = table["_k"].to_numpy()
    table["bin_lo_bytes"] = np.where(kk < 0, 0, np.left_shift(np.int64(1), np.maximum(kk, 0)))
    table["bin_hi_bytes"] = np.left_shift(np.int64(1), kk + 1)
    table = table.sort_values("_k", kind="stable")
    return sorted_by_op(table[columns], keys)
