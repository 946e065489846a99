"""Characterisation tables of a trace (SPEC §7): op counts, transfer sizes, request sizes, bandwidth.

Pure functions on a §3 DataFrame, the tables of a measurement study of collective traffic: which operations a
workload issues and how often, how large they are, and how bursty the bytes it issues are over time. Every
table can be split per communicator (``by_comm=True`` puts a ``comm`` column first).

Definitions (SPEC §7):

``calls``
    Collective operations. A collective is one call per (``comm``, ``seq``) group, however many ranks logged
    it. A Send/Recv is one call per matched pair (the k-th Send a→b on a comm with the k-th Recv b←a); the
    pair is counted on the ``Send`` row and on the ``Recv`` row, so each of those rows reads as "point-to-point
    operations". A Send or Recv whose partner is absent still counts as one call, and is also counted in
    ``partial_calls`` (so are collectives that fewer than ``nranks`` ranks logged).
``rank_calls``
    Rows of the trace (one per op per rank).
``bytes_total``
    Sum of ``bytes`` over rows: the payload the ranks handed to NCCL, not bytes on the wire.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traces.schema import COLLECTIVE_OPS, METADATA_KEY, OPS, P2P_OPS, TraceError

#: Upper bound on windows of a bandwidth series, so a tiny ``--window`` fails clearly instead of exhausting RAM.
MAX_WINDOWS = 20_000_000
#: Windows the automatic window size aims at over the trace's span.
TARGET_WINDOWS = 200
#: Smallest automatic window: trace clocks tick in microseconds at best.
MIN_AUTO_WINDOW_S = 1e-6


def _op_order(ops: pd.Series) -> pd.Series:
    """Sort key: SPEC §3 op order, unknown names last."""
    rank = {op: i for i, op in enumerate(OPS)}
    return ops.map(lambda op: rank.get(op, len(OPS)))


def _sorted(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if table.empty:
        return table.reset_index(drop=True)
    order = table.assign(_op=_op_order(table["op"])) if "op" in table.columns else table.assign(_op=0)
    sort_keys = [k for k in keys if k != "op"] + ["_op"]
    return order.sort_values(sort_keys, kind="stable").drop(columns="_op").reset_index(drop=True)


def _members(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Communicator -> global ranks in comm-rank order, from the trace metadata."""
    comms = (df.attrs.get(METADATA_KEY) or {}).get("comms") or {}
    return {str(c): np.asarray(ranks, dtype=np.int64) for c, ranks in comms.items()}


def p2p_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Match Sends with Recvs (SPEC §3 ``seq`` rule) and count pairs per communicator.

    The Send on rank a to comm rank ``root`` is matched with the Recv on the peer b whose ``root`` is a's comm
    rank and whose ``seq`` is the same. Comm ranks are turned into global ranks with the metadata's ``comms``;
    rows of a communicator the metadata does not list cannot be matched and are counted unmatched.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace (metadata in ``df.attrs["collsim"]``).

    Returns
    -------
    pandas.DataFrame
        One row per communicator with point-to-point rows: ``comm``, ``pairs`` (matched Send/Recv pairs),
        ``unmatched_send``, ``unmatched_recv`` (rows without a partner).

    Examples
    --------
    >>> from traces.schema import new_metadata
    >>> rows = [dict(rank=0, comm="c", seq=0, op="Send", root=1), dict(rank=1, comm="c", seq=0, op="Recv", root=0)]
    >>> df = pd.DataFrame(rows)
    >>> df.attrs["collsim"] = new_metadata(2, {"c": [0, 1]}, "doc")
    >>> p2p_pairs(df).to_dict("records")
    [{'comm': 'c', 'pairs': 1, 'unmatched_send': 0, 'unmatched_recv': 0}]
    """
    columns = ["comm", "pairs", "unmatched_send", "unmatched_recv"]
    p2p = df.loc[df["op"].isin(P2P_OPS), ["rank", "comm", "seq", "op", "root"]]
    if p2p.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "comm" else "int64") for c in columns})
    members = _members(df)
    peer = np.full(len(p2p), -1, dtype=np.int64)
    comm_codes, comm_names = pd.factorize(p2p["comm"])
    root = p2p["root"].to_numpy(dtype=np.int64)
    for code, name in enumerate(comm_names):
        ranks = members.get(str(name))
        if ranks is None:
            continue
        rows = comm_codes == code
        ok = rows & (root >= 0) & (root < len(ranks))
        peer[ok] = ranks[root[ok]]
    rank = p2p["rank"].to_numpy(dtype=np.int64)
    is_send = (p2p["op"] == "Send").to_numpy()
    # A pair's key is (comm, sender, receiver, seq), read from either side.
    keyed = pd.DataFrame({
        "comm": p2p["comm"].to_numpy(),
        "src": np.where(is_send, rank, peer),
        "dst": np.where(is_send, peer, rank),
        "seq": p2p["seq"].to_numpy(),
        "send": is_send.astype(np.int64),
        "recv": (~is_send).astype(np.int64),
        "known": peer >= 0,
    })
    known = keyed[keyed["known"]]
    per_key = known.groupby(["comm", "src", "dst", "seq"], sort=False)[["send", "recv"]].sum()
    per_key["pairs"] = np.minimum(per_key["send"], per_key["recv"])
    pairs = per_key.groupby(level="comm", sort=False)["pairs"].sum()
    sends = keyed.groupby("comm", sort=False)["send"].sum()
    recvs = keyed.groupby("comm", sort=False)["recv"].sum()
    out = pd.DataFrame({"send": sends, "recv": recvs})
    out["pairs"] = pairs.reindex(out.index).fillna(0).astype("int64")
    out["unmatched_send"] = out["send"] - out["pairs"]
    out["unmatched_recv"] = out["recv"] - out["pairs"]
    out = out.rename_axis("comm").reset_index()
    return out[columns].sort_values("comm", kind="stable").reset_index(drop=True)


def op_counts(df: pd.DataFrame, by_comm: bool = False) -> pd.DataFrame:
    """Operation types and counts (SPEC §7 ``op_counts.csv``).

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.
    by_comm : bool
        One row per (``comm``, ``op``) instead of per ``op``.

    Returns
    -------
    pandas.DataFrame
        ``[comm,] op, calls, rank_calls, bytes_total, partial_calls`` (see the module docstring), ops in SPEC
        order, only the ops present.

    Examples
    --------
    >>> from traces.schema import new_metadata
    >>> df = pd.DataFrame(dict(rank=[0, 1, 0, 1], comm="c", seq=[0, 0, 1, 1], op="AllReduce", bytes=8,
    ...                        nranks=2, root=-1))
    >>> df.attrs["collsim"] = new_metadata(2, {"c": [0, 1]}, "doc")
    >>> op_counts(df)[["op", "calls", "rank_calls", "bytes_total"]].to_dict("records")
    [{'op': 'AllReduce', 'calls': 2, 'rank_calls': 4, 'bytes_total': 32}]
    """
    keys = ["comm", "op"] if by_comm else ["op"]
    columns = [*keys, "calls", "rank_calls", "bytes_total", "partial_calls"]
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("comm", "op") else "int64") for c in columns})
    rows = df.groupby(keys, sort=False).agg(rank_calls=("bytes", "size"), bytes_total=("bytes", "sum"))

    coll = df.loc[df["op"].isin(COLLECTIVE_OPS)]
    groups = coll.groupby(["comm", "seq", "op"], sort=False).agg(ranks=("rank", "nunique"), nranks=("nranks", "max"))
    groups["partial"] = (groups["ranks"] < groups["nranks"]).astype("int64")
    group_keys = [k for k in ("comm", "op") if k in keys]
    calls = groups.groupby(level=group_keys, sort=False).agg(calls=("partial", "size"), partial_calls=("partial", "sum"))

    pairs = p2p_pairs(df)
    if not pairs.empty:
        p2p = pd.concat([
            pairs.assign(op="Send", calls=pairs["pairs"] + pairs["unmatched_send"], partial_calls=pairs["unmatched_send"]),
            pairs.assign(op="Recv", calls=pairs["pairs"] + pairs["unmatched_recv"], partial_calls=pairs["unmatched_recv"]),
        ])
        p2p = p2p[p2p["calls"] > 0].groupby(keys, sort=False)[["calls", "partial_calls"]].sum()
        calls = pd.concat([calls, p2p])
    table = rows.join(calls, how="left").fillna(0).reset_index()
    for name in ("calls", "rank_calls", "bytes_total", "partial_calls"):
        table[name] = table[name].astype("int64")
    return _sorted(table[columns], keys)


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
    return _sorted(table.reset_index()[columns], keys)


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
    return _sorted(table[columns], keys)


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


def _burst_figures(bytes_per_s: np.ndarray) -> tuple[float, float, float, float]:
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
    peak, mean, ratio, cv = _burst_figures(table["bytes_per_s"].to_numpy())
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


def comm_summary(df: pd.DataFrame, window_s: float | None = None) -> pd.DataFrame:
    """One row per communicator: size, ops, counts, bytes and burstiness (the ``comm`` breakdown).

    Bandwidth figures use the windows of the whole trace (``bandwidth_over_time`` with the same
    ``window_s``), so a communicator's mean is its bytes over the whole trace's span and the rows compare.

    Returns
    -------
    pandas.DataFrame
        ``comm, nranks, ops, calls, rank_calls, bytes_total, bytes_share, peak_bytes_per_s, mean_bytes_per_s,
        peak_to_mean, cv, untimed_rows``, largest ``bytes_total`` first.
    """
    columns = ["comm", "nranks", "ops", "calls", "rank_calls", "bytes_total", "bytes_share", "peak_bytes_per_s",
               "mean_bytes_per_s", "peak_to_mean", "cv", "untimed_rows"]
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("comm", "ops") else "float64") for c in columns})
    counts = op_counts(df, by_comm=True)
    per_comm = counts.groupby("comm", sort=False).agg(
        ops=("op", lambda ops: ",".join(ops)), rank_calls=("rank_calls", "sum"), bytes_total=("bytes_total", "sum"))
    # A communicator's calls count each Send/Recv pair once (op_counts lists it under Send and under Recv).
    coll = counts[~counts["op"].isin(P2P_OPS)].groupby("comm", sort=False)["calls"].sum()
    pairs = p2p_pairs(df).set_index("comm")
    p2p = pairs["pairs"] + pairs["unmatched_send"] + pairs["unmatched_recv"]
    per_comm["calls"] = coll.reindex(per_comm.index).fillna(0).astype("int64") + \
        p2p.reindex(per_comm.index).fillna(0).astype("int64")
    per_comm["nranks"] = df.groupby("comm", sort=False)["nranks"].max()
    total = per_comm["bytes_total"].sum()
    per_comm["bytes_share"] = per_comm["bytes_total"] / total if total > 0 else math.nan
    series = bandwidth_by_comm(df, window_s)
    figures = {}
    for comm, part in series.groupby("comm", sort=False):
        peak, mean, ratio, cv = _burst_figures(part["bytes_per_s"].to_numpy())
        figures[comm] = (peak, mean, ratio, cv)
    figs = pd.DataFrame.from_dict(figures, orient="index",
                                  columns=["peak_bytes_per_s", "mean_bytes_per_s", "peak_to_mean", "cv"])
    per_comm = per_comm.join(figs, how="left")
    untimed = df["t_start_s"].isna().groupby(df["comm"], sort=False).sum()
    per_comm["untimed_rows"] = untimed.reindex(per_comm.index).fillna(0).astype("int64")
    out = per_comm.rename_axis("comm").reset_index()
    return out.sort_values(["bytes_total", "comm"], ascending=[False, True], kind="stable")[columns].reset_index(drop=True)
