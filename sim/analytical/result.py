"""Result tables of the analytical tier, in the flow tier's shapes (SPEC §6), and the side-by-side table."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

__all__ = ["TIER_COLUMNS", "build_result", "compare_tiers"]

#: Columns of the ``--model both`` table (``tiers.parquet``), one row per collective.
TIER_COLUMNS = ("comm", "seq", "op", "bytes", "nranks", "algo", "flow_s", "analytical_s", "disagreement",
                "flow_ideal_s", "port_ideal_s", "ideal_disagreement", "path_s", "link_s")


def build_result(*, ops, times: pd.DataFrame, start: np.ndarray, end: np.ndarray, ideal_end: np.ndarray, router,
                 graph, trace_name: str, world: int, timing: str, algo: str, routing: str, seed: int,
                 wall0: float, extra: dict):
    """A :class:`sim.results.result.Result` from analytical op times and their schedule."""
    from sim.results import metrics
    from sim.results.result import Result

    log = SimpleNamespace(op_start_s=start, op_end_s=end, op_algo=times["algo"].to_numpy(object),
                          op_flows=times["flows"].to_numpy(np.int64),
                          makespan_s=float(np.nanmax(end)) if len(end) else 0.0)
    ideal = SimpleNamespace(op_start_s=np.zeros(len(times)), op_end_s=times["ideal_s"].to_numpy(),
                            makespan_s=float(np.nanmax(ideal_end)) if len(ideal_end) else 0.0)
    coll = metrics.collectives_table(ops, log, ideal)
    coll["path_s"] = times["path_s"].to_numpy()
    coll["link_s"] = times["link_s"].to_numpy()
    lt = router.links
    link_bytes = times.attrs["link_bytes"]
    cap = lt["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    span = log.makespan_s if log.makespan_s > 0 else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.nan_to_num(link_bytes / (cap * span))
    links = pd.DataFrame({"src": lt["src"].astype(str).to_numpy(), "dst": lt["dst"].astype(str).to_numpy(),
                          "kind": lt["kind"].astype(str).to_numpy(), "capacity_gbps": lt["capacity_gbps"].to_numpy(),
                          "bytes": link_bytes, "mean_utilization": util,
                          "peak_utilization": np.full(len(lt), np.nan), "busy_above_90_s": np.full(len(lt), np.nan)})
    incast = pd.DataFrame({"port": pd.Series(dtype=str), "t_start_s": pd.Series(dtype=float),
                           "t_end_s": pd.Series(dtype=float), "fanin": pd.Series(dtype=np.int64),
                           "demand_gbps": pd.Series(dtype=float), "capacity_gbps": pd.Series(dtype=float),
                           "est_buffer_bytes": pd.Series(dtype=float)})
    series = pd.DataFrame({"src": pd.Series(dtype=str), "dst": pd.Series(dtype=str),
                           "t_s": pd.Series(dtype=float), "utilization": pd.Series(dtype=float)})
    more = {"model": "analytical", "timing": timing, "algo": algo, "routing": routing, "seed": int(seed),
            "skipped": dict(ops.skipped), "routed_pairs": int(times.attrs.get("routed_pairs", 0)),
            "network_events": 0, **extra}
    summary = metrics.summary(trace=trace_name, topology=str(graph.graph.get("name", "topology")),
                              world_size=world, coll=coll, links=links, incast=incast, log=log, ideal_log=ideal,
                              imbalance=metrics.ecmp_imbalance(links, graph), n_flows=int(coll["flows"].sum()),
                              extra=more)
    summary["incast_events"] = None  # not modelled without the event loop
    summary["max_incast_fanin"] = None
    summary["sim_wall_s"] = time.perf_counter() - wall0
    return Result(summary=summary, collectives=coll, links=links, link_timeseries=series, incast=incast,
                  log=None, link_names=lt, graph=graph)


def compare_tiers(flow: pd.DataFrame, analytical: pd.DataFrame) -> pd.DataFrame:
    """One row per collective: the flow tier's and the analytical tier's durations and ideals side by side.

    ``disagreement = flow_s / analytical_s - 1`` (>= 0 up to the flow tier's batching error: the analytical
    time is a lower bound); ``ideal_disagreement = flow_ideal_s / port_ideal_s - 1`` (0 where the per-port
    bound gives the flow tier's ideal reference).

    Examples
    --------
    >>> f = pd.DataFrame({"comm": ["c"], "seq": [0], "op": ["AllReduce"], "bytes": [8], "nranks": [2],
    ...                   "algo": ["ring"], "duration_s": [2.0], "ideal_s": [1.0]})
    >>> a = f.assign(duration_s=1.0, ideal_s=1.0, path_s=1.0, link_s=0.5)
    >>> compare_tiers(f, a)[["flow_s", "analytical_s", "disagreement"]].values.tolist()
    [[2.0, 1.0, 1.0]]
    """
    a = analytical.set_index(["comm", "seq", "op"])
    f = flow.set_index(["comm", "seq", "op"])
    a = a.reindex(f.index)
    with np.errstate(divide="ignore", invalid="ignore"):
        dis = f["duration_s"].to_numpy() / a["duration_s"].to_numpy() - 1.0
        idis = f["ideal_s"].to_numpy() / a["ideal_s"].to_numpy() - 1.0
    out = pd.DataFrame({
        "comm": f.index.get_level_values(0).astype(str), "seq": f.index.get_level_values(1).astype(np.int64),
        "op": f.index.get_level_values(2).astype(str), "bytes": f["bytes"].to_numpy(),
        "nranks": f["nranks"].to_numpy(), "algo": f["algo"].to_numpy(),
        "flow_s": f["duration_s"].to_numpy(), "analytical_s": a["duration_s"].to_numpy(), "disagreement": dis,
        "flow_ideal_s": f["ideal_s"].to_numpy(), "port_ideal_s": a["ideal_s"].to_numpy(),
        "ideal_disagreement": idis, "path_s": a["path_s"].to_numpy(), "link_s": a["link_s"].to_numpy()})
    return out[list(TIER_COLUMNS)]
