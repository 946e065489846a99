"""``simrun validate``: replay measured nccl-tests tables and compare busbw size by size.

The measured trace comes from ``traces.formats.nccl_tests`` (one communicator ``t{k}`` per table, each
row an op whose ``duration_s`` is the measured time). Each table is replayed on its own fabric (the
topology sized to the table's ranks and servers) and its simulated busbw set beside the measured one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from sim.bench.row_flags import flag_rows
from sim.bench.run import bench_table, run_trace_sizes
from sim.bench.sizes import host_floor_s
from sim.errors import SimError
from sim.planning import tuning
from sim.planning.machine import graph_machine
from traces.schema import normalize

__all__ = ["LARGE_BYTES", "SMALL_BYTES", "VALIDATE_COLUMNS", "error_summary", "nccl_predicted_us", "table_gpus_per_server",
           "validate_trace"]

#: Columns of ``validate.parquet`` (SPEC §10 first, then context).
VALIDATE_COLUMNS = ("size", "busbw_measured", "busbw_sim", "ratio", "op", "nranks", "table", "time_measured_us",
                    "time_sim_us", "algo", "proto", "time_nccl_us", "gpus_per_thread", "time_inplace_us", "flag")
#: The issue's size classes: "large" is >= 256 MiB, "small" <= 1 MiB (nccl-tests' size column).
LARGE_BYTES = 256 << 20
SMALL_BYTES = 1 << 20


def nccl_predicted_us(op: str, sizes, algos, protos, nranks: int, graph: nx.Graph) -> np.ndarray:
    """NCCL's own predicted time (us) of each size with the chosen (algorithm, protocol): its tuner's
    ``latency + bytes / bandwidth`` (:func:`sim.planning.tuning.predict_time_s`); nan for direct ops.

    ``sizes`` are nccl-tests' size column; the tuner takes the trace's bytes (per rank for AllGather and
    ReduceScatter).
    """
    servers, model = graph_machine(graph, range(nranks))
    nnodes = len(np.unique(servers))
    out = np.full(len(sizes), np.nan)
    for i, (size, algo, proto) in enumerate(zip(sizes, algos, protos, strict=True)):
        if not algo or algo == "direct":
            continue
        nbytes = int(size) // nranks if op in ("AllGather", "ReduceScatter") else int(size)
        out[i] = tuning.predict_time_s(op, nbytes, nranks, nnodes, algo, proto, model) * 1e6
    return out


def table_gpus_per_server(entry: Mapping[str, Any]) -> int:
    """GPUs per server of one nccl-tests table: its ``# Rank`` lines' count per host, else ``min(ranks, 8)``.

    Parameters
    ----------
    entry : mapping
        The reader's table entry (``nranks``, ``gpus_per_node``: ``None`` without Rank lines).

    Returns
    -------
    int
        The GPUs per server the table is replayed with.

    Examples
    --------
    >>> table_gpus_per_server({"nranks": 16, "gpus_per_node": None}), table_gpus_per_server({"nranks": 4})
    (8, 4)
    >>> table_gpus_per_server({"nranks": 16, "gpus_per_node": 2})
    2
    """
    return int(entry.get("gpus_per_node") or min(int(entry["nranks"]), 8))


def _table_trace(trace: pd.DataFrame, meta: Mapping[str, Any], entry: Mapping[str, Any]) -> pd.DataFrame:
    comm = entry["comm"]
    sub = trace[trace["comm"] == comm]
    sub_meta = dict(meta)
    sub_meta.update(world_size=int(entry["nranks"]), comms={comm: list(range(int(entry["nranks"])))},
                    gpus_per_node=table_gpus_per_server(entry))
    sub_meta.pop("nccl_tests", None)
    return normalize(sub.reset_index(drop=True), sub_meta)


def validate_trace(trace: pd.DataFrame, build_graph: Callable[[Mapping[str, Any]], nx.Graph], *,
                   routing: str = "ecmp", seed: int = 0, gpus_per_thread: Sequence[int] | None = None
                   ) -> pd.DataFrame:
    """Measured vs simulated busbw of every table in an nccl-tests trace.

    Parameters
    ----------
    trace : pandas.DataFrame
        From ``traces.formats.nccl_tests`` (``attrs["collsim"]["nccl_tests"]`` lists the tables).
    build_graph : callable
        Takes a table's entry (``nranks``, ``gpus_per_node``, ...) and returns its fabric.
    gpus_per_thread : sequence of int, optional
        Per table, the GPUs one nccl-tests thread drove (``-g``; :func:`sim.bench.sizes.gpus_per_thread`
        reads it from the output); default 1. A simulated time is at least that thread's launch time
        (:func:`sim.bench.sizes.host_floor_s`), as nccl-tests measures it.

    Returns
    -------
    pandas.DataFrame
        :data:`VALIDATE_COLUMNS`; ``ratio`` = simulated / measured busbw (nan where busbw printed 0);
        ``flag`` is :func:`sim.bench.row_flags.flag_rows`' verdict on the measured row (``""`` kept).

    Raises
    ------
    SimError
        A trace without nccl-tests tables.
    """
    meta = trace.attrs.get("collsim") or {}
    tables = meta.get("nccl_tests")
    if not tables:
        raise SimError("the trace holds no nccl-tests tables (read it with --format nccl-tests)")
    frames = []
    for k, entry in enumerate(tables):
        graph = build_graph(entry)
        sub = _table_trace(trace, meta, entry)
        g = int(gpus_per_thread[k]) if gpus_per_thread is not None else 1
        # nccl-tests' time of a size is at least its thread's kernel launches per iteration (none for
        # count 0: NCCL returns before launching, and the plan is empty)
        times = run_trace_sizes(sub, graph, routing=routing, seed=seed).to_numpy()
        times = np.where(times > 0, np.maximum(times, host_floor_s(g)), times)
        sim = bench_table(entry["op"], entry["size"], times, int(entry["nranks"]), graph, dtype=entry["dtype"])
        # busbw from the printed time (4 significant digits), not the printed busbw (2 decimals: 0.00 at 8 B)
        measured = bench_table(entry["op"], entry["size"], np.asarray(entry["time_us"], dtype=float) * 1e-6,
                               int(entry["nranks"]), None, dtype=entry["dtype"])["busbw"].to_numpy(dtype=float)
        busbw_sim = sim["busbw"].to_numpy(dtype=float)
        # traces ingested before the in-place time was kept carry none: nothing is flagged by the columns
        inplace_us = np.asarray(entry.get("time_inplace_us") or [np.nan] * len(entry["size"]), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(measured > 0, busbw_sim / measured, np.nan)
        frames.append(pd.DataFrame({
            "size": np.asarray(entry["size"], dtype=np.int64), "busbw_measured": measured, "busbw_sim": busbw_sim,
            "ratio": ratio, "op": entry["op"], "nranks": int(entry["nranks"]), "table": k,
            "time_measured_us": np.asarray(entry["time_us"], dtype=float), "time_sim_us": sim["time"].to_numpy(),
            "algo": sim["algo"].to_numpy(), "proto": sim["proto"].to_numpy(),
            "time_nccl_us": nccl_predicted_us(entry["op"], sim["size"].to_numpy(), sim["algo"].to_numpy(),
                                              sim["proto"].to_numpy(), int(entry["nranks"]), graph),
            "gpus_per_thread": g, "time_inplace_us": inplace_us,
            "flag": flag_rows(entry["size"], entry["time_us"], inplace_us)}))
    return pd.concat(frames, ignore_index=True)[list(VALIDATE_COLUMNS)]


def error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per table: median and worst |busbw error| at >= 256 MiB and at <= 1 MiB (fractions; nan if none).

    The error of a size is ``|sim / measured - 1|``. Rows flagged by :func:`sim.bench.row_flags.flag_rows`
    (column ``flag``, when the table has one) are left out of the median and worst and counted in
    ``large_flagged`` / ``small_flagged``; ``large_median_all`` / ``small_median_all`` keep every row.

    Examples
    --------
    >>> t = pd.DataFrame({"table": [0, 0], "size": [1 << 30, 1024], "ratio": [1.1, 0.5]})
    >>> error_summary(t)[["large_median", "small_worst"]].round(3).values.tolist()
    [[0.1, 0.5]]
    >>> t["flag"] = ["", "columns"]
    >>> error_summary(t)[["small_n", "small_flagged", "small_median_all"]].values.tolist()
    [[0.0, 1.0, 0.5]]
    """
    rows = []
    for k, grp in table.groupby("table", sort=True):
        err = (grp["ratio"] - 1.0).abs()
        flagged = grp["flag"].astype(str) != "" if "flag" in grp else pd.Series(False, index=grp.index)
        row = {"table": k}
        for name, in_class in (("large", grp["size"] >= LARGE_BYTES), ("small", grp["size"] <= SMALL_BYTES)):
            every = err[in_class].dropna()
            kept = every[~flagged[every.index]]
            row.update({f"{name}_n": len(kept), f"{name}_median": kept.median() if len(kept) else np.nan,
                        f"{name}_worst": kept.max() if len(kept) else np.nan,
                        f"{name}_flagged": len(every) - len(kept),
                        f"{name}_median_all": every.median() if len(every) else np.nan})
        rows.append(row)
    return pd.DataFrame(rows)
