"""Bytes issued over time (SPEC §7 ``bandwidth.csv``), per trace and per communicator, with burstiness."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traces.schema import TraceError

__all__ = [
    "MAX_WINDOWS",
    "MIN_AUTO_WINDOW_S",
    "TARGET_WINDOWS",
    "Bandwidth",
    "bandwidth_by_comm",
    "bandwidth_over_time",
    "burst_figures",
    "nice_window_s",
]

#: Upper bound on windows of a bandwidth series, so a tiny ``--window`` fails clearly instead of exhausting RAM.
MAX_WINDOWS = 20_000_000
#: Windows the automatic window size aims at over the trace's span.
TARGET_WINDOWS = 200
#: Smallest automatic window: trace clocks tick in microseconds at best.
MIN_AUTO_WINDOW_S = 1e-6


def nice_window_s(span_s: float, target: int = TARGET_WINDOWS) -> float:
    """A round window (1, 2 or 5 × 10^n seconds) giving about ``target`` windows over ``span_s``.

    Examples
    --------
    >>> nice_window_s(10.0)
    0.05
    >>> nice_window_s(0.0)
    1.0
    """
    if not span_s > 0 or not math.isfinite(span_s):
        return 1.0
    raw = max(span_s / target, MIN_AUTO_WINDOW_S)
    decade = 10.0 ** math.floor(math.log10(raw))
    step = max(m for m in (1.0, 2.0, 5.0) if m * decade <= raw * (1 + 1e-12))
    return float(f"{step * decade:.6g}")


@dataclass(frozen=True)
class Bandwidth:
    """Bytes issued per time window, with its burstiness figures.

    Attributes
    ----------
    table : pandas.DataFrame
        ``t_s`` (window start), ``bytes_per_s``, ``bytes``, ``rows``, ``window_s`` (and ``window``, its SPEC
        §7 name); every window from the
        origin to the last issue, empty ones included (they are part of the mean).
    window_s : float
        Window length.
    peak_bytes_per_s, mean_bytes_per_s : float
        Highest window, and the mean over all windows (total timed bytes / span).
    peak_to_mean : float
        ``peak / mean`` (1 = perfectly smooth; NaN when nothing was issued).
    cv : float
        Coefficient of variation of the windows' ``bytes_per_s`` (population std / mean).
    timed_rows, untimed_rows : int
        Rows with and without a ``t_start_s``; untimed rows are not in the table and are reported here.
    untimed_bytes : int
        Bytes of the untimed rows.
    origin_s : float
        Start of the first window (0, or earlier when a ``t_start_s`` is negative).
    """

    table: pd.DataFrame
    window_s: float
    peak_bytes_per_s: float
    mean_bytes_per_s: float
    peak_to_mean: float
    cv: float
    timed_rows: int
    untimed_rows: int
    untimed_bytes: int
    origin_s: float = 0.0

    def summary(self) -> dict[str, float | int]:
        """The scalar figures as a dict (for a CSV row or JSON)."""
        return {
            "window_s": self.window_s,
            "windows": len(self.table),
            "peak_bytes_per_s": self.peak_bytes_per_s,
            "mean_bytes_per_s": self.mean_bytes_per_s,
            "peak_to_mean": self.peak_to_mean,
            "cv": self.cv,
            "timed_rows": self.timed_rows,
            "untimed_rows": self.untimed_rows,
            "untimed_bytes": self.untimed_bytes,
        }


def _window_grid(times_s: np.ndarray, window_s: float | None) -> tuple[float, float, int]:
    """Origin, window and window count covering ``times_s`` (origin 0, earlier if a time is negative)."""
    if times_s.size == 0:
        return 0.0, float(window_s or 1.0), 0
    lo, hi = float(times_s.min()), float(times_s.max())
    origin = min(0.0, lo)
    if window_s is None:
        window_s = nice_window_s(hi - origin)
    if not (window_s > 0 and math.isfinite(window_s)):
        raise TraceError(f"window {window_s!r} s: must be a positive number of seconds")
    if lo < 0:
        origin = math.floor(lo / window_s) * window_s
    n = int(math.floor((hi - origin) / window_s)) + 1
    if n > MAX_WINDOWS:
        raise TraceError(f"window {window_s:g} s: gives {n:,} windows over {hi - origin:g} s (limit {MAX_WINDOWS:,})")
    return origin, float(window_s), n


def _series(times_s: np.ndarray, sizes: np.ndarray, origin: float, window_s: float, n: int) -> pd.DataFrame:
    idx = np.floor((times_s - origin) / window_s).astype(np.int64)
    idx = np.clip(idx, 0, max(n - 1, 0))  # float rounding at the last edge
    total = np.bincount(idx, weights=sizes.astype(np.float64), minlength=n).round().astype(np.int64)
    rows = np.bincount(idx, minlength=n).astype(np.int64)
    return pd.DataFrame({
        "t_s": origin + np.arange(n) * window_s,
        "bytes_per_s": total / window_s,
        "bytes": total,
        "rows": rows,
        "window_s": np.full(n, window_s),
        "window": np.full(n, window_s),  # SPEC §7's name for the same column (seconds)
    })


def burst_figures(bytes_per_s: np.ndarray) -> tuple[float, float, float, float]:
    if bytes_per_s.size == 0:
        return 0.0, 0.0, math.nan, math.nan
    peak, mean = float(bytes_per_s.max()), float(bytes_per_s.mean())
    if mean <= 0:
        return peak, mean, math.nan, math.nan
    return peak, mean, peak / mean, float(bytes_per_s.std()) / mean


def bandwidth_over_time(df: pd.DataFrame, window_s: float | None = None) -> Bandwidth:
    """Bytes issued per window of ``t_start_s`` (SPEC §7 ``bandwidth.csv``), with peak, mean and burstiness.

    Each row's ``bytes`` are put in the window holding its ``t_start_s`` (the moment it was issued; the
    trace's durations are not spread out). Rows with NaN ``t_start_s`` cannot be placed: they are counted in
    ``untimed_rows`` / ``untimed_bytes``.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.
    window_s : float, optional
        Window length in seconds; by default a round value giving about 200 windows over the trace.

    Returns
    -------
    Bandwidth

    Raises
    ------
    TraceError
        When ``window_s`` is not positive or would give more than ``MAX_WINDOWS`` windows.

    Examples
    --------
    >>> df = pd.DataFrame(dict(t_start_s=[0.1, 0.2, 1.5, float("nan")], bytes=[10, 10, 40, 7]))
    >>> bw = bandwidth_over_time(df, window_s=1.0)
    >>> bw.table["bytes_per_s"].tolist(), bw.peak_to_mean, bw.untimed_rows
    ([20.0, 40.0], 1.3333333333333333, 1)
    """
    times = df["t_start_s"].to_numpy(dtype=np.float64)
    sizes = df["bytes"].to_numpy(dtype=np.int64)
    timed = np.isfinite(times)
    origin, window, n = _window_grid(times[timed], window_s)
    table = _series(times[timed], sizes[timed], origin, window, n)
    peak, mean, ratio, cv = burst_figures(table["bytes_per_s"].to_numpy())
    return Bandwidth(
        table=table, window_s=window, peak_bytes_per_s=peak, mean_bytes_per_s=mean, peak_to_mean=ratio, cv=cv,
        timed_rows=int(timed.sum()), untimed_rows=int((~timed).sum()), untimed_bytes=int(sizes[~timed].sum()),
        origin_s=origin,
    )


def bandwidth_by_comm(df: pd.DataFrame, window_s: float | None = None) -> pd.DataFrame:
    """Bytes issued per window, per communicator, on the same windows as the whole trace.

    Returns
    -------
    pandas.DataFrame
        ``comm, t_s, bytes_per_s, bytes, rows, window_s`` (every window of every communicator).
    """
    times = df["t_start_s"].to_numpy(dtype=np.float64)
    timed = np.isfinite(times)
    origin, window, n = _window_grid(times[timed], window_s)
    parts = []
    for comm, part in df.loc[timed].groupby("comm", sort=True):
        series = _series(part["t_start_s"].to_numpy(dtype=np.float64), part["bytes"].to_numpy(dtype=np.int64),
                         origin, window, n)
        parts.append(series.assign(comm=comm))
    columns = ["comm", "t_s", "bytes_per_s", "bytes", "rows", "window_s"]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "comm" else "float64") for c in columns})
    return pd.concat(parts, ignore_index=True)[columns]
