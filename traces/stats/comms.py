"""The per-communicator breakdown: size, ops, counts, bytes and burstiness of each communicator."""

from __future__ import annotations

import math

import pandas as pd

from traces.schema import P2P_OPS
from traces.stats.bandwidth import bandwidth_by_comm, burst_figures
from traces.stats.counts import op_counts, p2p_pairs

__all__ = ["comm_summary"]


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
        peak, mean, ratio, cv = burst_figures(part["bytes_per_s"].to_numpy())
        figures[comm] = (peak, mean, ratio, cv)
    figs = pd.DataFrame.from_dict(figures, orient="index",
                                  columns=["peak_bytes_per_s", "mean_bytes_per_s", "peak_to_mean", "cv"])
    per_comm = per_comm.join(figs, how="left")
    untimed = df["t_start_s"].isna().groupby(df["comm"], sort=False).sum()
    per_comm["untimed_rows"] = untimed.reindex(per_comm.index).fillna(0).astype("int64")
    out = per_comm.rename_axis("comm").reset_index()
    return out.sort_values(["bytes_total", "comm"], ascending=[False, True], kind="stable")[columns].reset_index(drop=True)
