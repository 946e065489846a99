"""Result tables of a replay (SPEC §6): per collective, per link, utilisation over time, ECMP imbalance.

Definitions (nccl-tests ``doc/PERFORMANCE.md``): ``bytes`` is the size S nccl-tests reports for the op
(AllReduce / Broadcast / Reduce / Send: one rank's buffer; AllGather / ReduceScatter: the whole array,
``nranks`` x the per-rank count; AllToAll: one rank's whole send buffer, the largest rank's for uneven
splits), ``algbw = S / t`` and ``busbw = algbw x factor`` with factor 2(n-1)/n for AllReduce, (n-1)/n for
AllGather, ReduceScatter, AllToAll, Gather and Scatter, and 1 for Broadcast, Reduce and Send/Recv.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from sim.planning import tuning

#: SPEC §6 columns of collectives.parquet, then extras.
COLLECTIVE_COLUMNS = ("comm", "seq", "op", "bytes", "nranks", "algo", "start_s", "end_s", "duration_s",
                      "ideal_s", "slowdown", "algbw_gbps", "busbw_gbps", "rank_bytes", "flows")
LINK_COLUMNS = ("src", "dst", "kind", "capacity_gbps", "bytes", "mean_utilization", "peak_utilization",
                "busy_above_90_s")
#: Node tiers, bottom to top: a directed switch-to-switch link from a lower to a higher tier is an uplink.
TIER = {"gpu": 0, "nvswitch": 0, "leaf": 1, "rail": 1, "crossbar": 1, "spine": 2, "core": 3}


def size_bytes(op: np.ndarray, rank_bytes: np.ndarray, nranks: np.ndarray, splits: list) -> np.ndarray:
    """nccl-tests' size S of each op (:func:`sim.planning.tuning.nccltests_bytes`; uneven AllToAll: the largest
    rank's send total)."""
    s = np.array([tuning.nccltests_bytes(o, float(b), int(n))
                  for o, b, n in zip(op, rank_bytes, nranks, strict=True)], dtype=np.float64)
    for i, split in enumerate(splits):
        if split is not None:
            s[i] = float(np.asarray(split).sum(axis=1).max())
    return s


def collectives_table(ops, log, ideal_log) -> pd.DataFrame:
    """One row per op instance (collective or Send/Recv pair), SPEC §6 columns plus extras."""
    f = ops.frame
    start, end = log.op_start_s, log.op_end_s
    duration = end - start
    if ideal_log is None:
        ideal = np.full(len(f), np.nan)
    elif getattr(ideal_log, "ideal_s", None) is not None:   # the reference's bound itself (sim.reference)
        ideal = np.asarray(ideal_log.ideal_s, np.float64)
    else:
        ideal = ideal_log.op_end_s - ideal_log.op_start_s
    nbytes = size_bytes(f["op"].to_numpy(), f["rank_bytes"].to_numpy(), f["nranks"].to_numpy(), ops.splits)
    with np.errstate(divide="ignore", invalid="ignore"):
        slowdown = np.where(ideal > 0, duration / ideal, np.where(np.isnan(ideal), np.nan,
                                                                  np.where(duration > 0, np.inf, 1.0)))
        algbw = np.where(duration > 0, nbytes * 8 / duration / 1e9, np.nan)
    factor = np.array([tuning.busbw_factor(o, int(n))
                       for o, n in zip(f["op"], f["nranks"], strict=True)], dtype=np.float64)
    return pd.DataFrame({
        "comm": f["comm"].astype(str).to_numpy(), "seq": f["seq"].to_numpy(np.int64),
        "op": f["op"].astype(str).to_numpy(), "bytes": nbytes.astype(np.int64),
        "nranks": f["nranks"].to_numpy(np.int32), "algo": np.asarray(log.op_algo, dtype=object),
        "start_s": start, "end_s": end, "duration_s": duration, "ideal_s": ideal, "slowdown": slowdown,
        "algbw_gbps": algbw, "busbw_gbps": algbw * factor, "rank_bytes": f["rank_bytes"].to_numpy(np.int64),
        "flows": log.op_flows.astype(np.int64),
    })


def links_table(links: pd.DataFrame, stats, makespan_s: float) -> pd.DataFrame:
    """One row per directed link: bytes, mean and peak utilisation, time above 90 %."""
    cap_bps = links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    span = makespan_s if makespan_s > 0 else np.inf
    return pd.DataFrame({
        "src": links["src"].astype(str).to_numpy(), "dst": links["dst"].astype(str).to_numpy(),
        "kind": links["kind"].astype(str).to_numpy(), "capacity_gbps": links["capacity_gbps"].to_numpy(float),
        "bytes": stats.total, "mean_utilization": stats.total / (cap_bps * span),
        "peak_utilization": stats.peak_rate / cap_bps, "busy_above_90_s": stats.busy90_s,
    })


def link_timeseries(links: pd.DataFrame, stats, makespan_s: float) -> pd.DataFrame:
    """Utilisation of every link that carried traffic, per time bin (``t_s`` = bin start)."""
    width, bins = stats.binned(makespan_s)
    used = np.flatnonzero(stats.total > 0)
    cap_bps = links["capacity_gbps"].to_numpy(np.float64)[used] * 1e9 / 8
    util = bins[:, used] / (cap_bps[None, :] * width)
    nb = len(bins)
    return pd.DataFrame({
        "src": np.tile(links["src"].astype(str).to_numpy()[used], nb),
        "dst": np.tile(links["dst"].astype(str).to_numpy()[used], nb),
        "t_s": np.repeat(np.arange(nb) * width, len(used)),
        "utilization": util.reshape(-1),
    })


def ecmp_imbalance(links: pd.DataFrame, graph: nx.Graph) -> dict[str, float]:
    """Load spread across equal-cost uplinks, per uplink tier.

    For each switch and tier of uplinks (directed links to a higher tier, e.g. leaf -> spine), the ratio
    max / mean of the bytes on its uplinks of that kind (1.0 = perfectly even); per tier the worst switch
    is reported. Switches whose uplinks carried nothing are left out.

    Returns
    -------
    dict
        ``{link kind: max/mean}``, e.g. ``{"leaf-spine": 1.8, "spine-core": 1.2}``.
    """
    kind = nx.get_node_attributes(graph, "kind")
    src_tier = links["src"].map(lambda n: TIER.get(kind.get(n), -1)).to_numpy()
    dst_tier = links["dst"].map(lambda n: TIER.get(kind.get(n), -1)).to_numpy()
    up = (src_tier >= 1) & (dst_tier > src_tier)
    if not up.any():
        return {}
    sub = links[up]
    out: dict[str, float] = {}
    for ekind, grp in sub.groupby("kind", sort=True):
        agg = grp.groupby("src")["bytes"].agg(["max", "mean", "size"])
        agg = agg[(agg["size"] >= 2) & (agg["mean"] > 0)]
        if len(agg):
            out[str(ekind)] = float((agg["max"] / agg["mean"]).max())
    return out


def summary(*, trace: str, topology: str, world_size: int, coll: pd.DataFrame, links: pd.DataFrame,
            incast: pd.DataFrame, log, ideal_log, imbalance: dict, n_flows: int, extra: dict) -> dict:
    """The SPEC §6 ``summary.json`` dict (plus extras: ECMP imbalance, memo and event counts)."""
    used = links[links["bytes"] > 0]
    hot = links.sort_values(["mean_utilization", "bytes"], ascending=False).head(10)
    # busiest links: longest time above 90 % first, then peak (a mean over the run washes bursts out)
    busiest = links.sort_values(["busy_above_90_s", "peak_utilization", "bytes"], ascending=False).head(10)
    sl = coll["slowdown"].to_numpy(np.float64)
    sl = sl[np.isfinite(sl)]
    out = {
        "trace": trace,
        "topology": topology,
        "world_size": int(world_size),
        "collectives": int(len(coll)),
        "flows": int(n_flows),
        "makespan_s": float(log.makespan_s),
        "ideal_makespan_s": float(ideal_log.makespan_s) if ideal_log is not None else None,
        "bytes_on_wire": float(links["bytes"].sum()),
        "max_link_utilization": float(links["mean_utilization"].max()) if len(links) else 0.0,
        "mean_link_utilization": float(used["mean_utilization"].mean()) if len(used) else 0.0,
        "peak_link_utilization": float(links["peak_utilization"].max()) if len(links) else 0.0,
        "hot_links": [{"link": f"{r.src}->{r.dst}", "utilization": float(r.mean_utilization),
                       "bytes": float(r.bytes)} for r in hot.itertuples(index=False) if r.bytes > 0],
        "busiest_links": [{"link": f"{r.src}->{r.dst}", "kind": str(r.kind),
                           "busy_above_90_s": float(r.busy_above_90_s),
                           "peak_utilization": float(r.peak_utilization), "utilization": float(r.mean_utilization),
                           "bytes": float(r.bytes)} for r in busiest.itertuples(index=False) if r.bytes > 0],
        "incast_events": int(len(incast)),
        "max_incast_fanin": int(incast["fanin"].max()) if len(incast) else 0,
        "slowdown_p50": float(np.percentile(sl, 50)) if len(sl) else None,
        "slowdown_p99": float(np.percentile(sl, 99)) if len(sl) else None,
        "ecmp_imbalance": imbalance,
        "ecmp_imbalance_max": float(max(imbalance.values())) if imbalance else 1.0,
    }
    if out["ideal_makespan_s"]:
        out["makespan_vs_ideal"] = out["makespan_s"] / out["ideal_makespan_s"]
    out.update(extra)
    return out


__all__ = [
    "COLLECTIVE_COLUMNS",
    "LINK_COLUMNS",
    "TIER",
    "collectives_table",
    "ecmp_imbalance",
    "link_timeseries",
    "links_table",
    "size_bytes",
    "summary",
]
