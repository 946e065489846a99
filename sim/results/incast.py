"""Incast events at switch egress ports, computed after the run from the flow log.

A flow occupies every link of its path from its start until its last byte is sent. At a switch egress port
(a directed link leaving a network switch; NVSwitch ports are left out: NVLink is credit-based and does not
drop), the *fan-in* at time t is the number of distinct source GPUs with a flow through the port at t (the
GPU whose NIC the flow enters the network from: a PXN relay for a relayed flow), and
the *demand* is the sum of their line rates (a sender's line rate is the slowest link of its path before
the port, usually its NIC). An incast event is a maximal interval with fan-in >= 2 and demand above the
port's capacity. Its estimated burst, the bytes the port must buffer before the senders slow down, is
(demand - capacity) x one round trip, the round trip being twice the median one-way path latency of the
flows crossing the port (flow-level simulation shares bandwidth instantly; a real fabric reacts after about
one RTT, which is when congestion control or PFC would act).

Two implementations give the same events: :func:`incast_events` sweeps a whole flow log after the run;
:class:`IncastStream` (:mod:`sim.results.incast_stream`) is a sink of the engine's flow log that sweeps as
flows finish, holding only what is not final yet (the engine's default, so that memory does not grow with
the run's flows).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from sim.engine.csr import csr_take

INCAST_COLUMNS = ("port", "t_start_s", "t_end_s", "fanin", "demand_gbps", "capacity_gbps", "est_buffer_bytes")
_SWITCH_KINDS = frozenset({"leaf", "spine", "core", "rail", "crossbar"})


def empty_incast() -> pd.DataFrame:
    """An incast table with no event (the columns and dtypes of :func:`incast_events`)."""
    return _empty()


def port_table(links: pd.DataFrame, graph: nx.Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per directed link: is it a switch egress port, its capacity (Gbps), its latency (us), and the GPU
    whose NIC it leaves (-1: it leaves no GPU, or it is an NVLink link: a flow enters the network there)."""
    kind = nx.get_node_attributes(graph, "kind")
    src_names = links["src"].to_numpy()
    is_port = np.array([kind.get(s) in _SWITCH_KINDS for s in src_names]) & (links["kind"].to_numpy() != "nvlink")
    cap = links["capacity_gbps"].to_numpy(np.float64)
    lat_us = links["latency_us"].to_numpy(np.float64)
    gpu_of_src = np.array([int(str(s)[3:]) if kind.get(s) == "gpu" else -1 for s in src_names], dtype=np.int64)
    gpu_of_src[links["kind"].to_numpy() == "nvlink"] = -1
    return is_port, cap, lat_us, gpu_of_src


def path_table(ptr: np.ndarray, plinks: np.ndarray, cap: np.ndarray, lat_us: np.ndarray,
               gpu_of_src: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per path incidence: the upstream line rate (slowest earlier link from the network entry; inf before
    and at it); per path: its one-way latency (s) from the network entry and its sender GPU (-1 for a
    path that never leaves a GPU's NIC).

    The sender is the GPU whose NIC puts the flow into the network (``gpu_of_src`` of :func:`port_table`):
    a streamed PXN relay's flow (sender -> relay over NVLink -> peer) enters at the relay, whose NIC carries
    all the senders it relays, so it counts once and at its own line rate, as when the relay's network leg
    was a flow of its own.

    Examples
    --------
    >>> up, lat, who = path_table(np.array([0, 3, 5]), np.array([0, 1, 2, 1, 2]), np.array([900.0, 400.0, 400.0]),
    ...                           np.array([0.5, 1.0, 1.0]), np.array([-1, 7, -1]))   # link 0: NVLink
    >>> up.tolist(), lat.tolist(), who.tolist()
    ([inf, inf, 400.0, inf, 400.0], [2e-06, 2e-06], [7, 7])
    """
    n_paths = len(ptr) - 1
    ptr = np.asarray(ptr, np.int64) - ptr[0]
    deg = np.diff(ptr)
    inc_path = np.repeat(np.arange(n_paths), deg)
    gpu = gpu_of_src[plinks]
    entry = np.zeros(n_paths, dtype=np.int64)   # position of the first link out of a GPU's NIC (0: none)
    path_sender = np.full(n_paths, -1, dtype=np.int64)
    out = np.flatnonzero(gpu >= 0)
    has, first = np.unique(inc_path[out], return_index=True)
    entry[has] = out[first] - ptr[has]
    path_sender[has] = gpu[out[first]]
    after = np.arange(len(plinks)) - ptr[:-1][inc_path] >= entry[inc_path]
    capi = pd.Series(np.where(after, cap[plinks], np.inf))
    upstream = capi.groupby(inc_path).cummin().groupby(inc_path).shift(1).fillna(np.inf).to_numpy()
    path_lat_s = np.bincount(inc_path, weights=np.where(after, lat_us[plinks], 0.0), minlength=n_paths) * 1e-6
    return upstream, path_lat_s, path_sender


def events_frame(links: pd.DataFrame, e_port, e_t0, e_t1, e_fanin, e_demand, e_rtt) -> pd.DataFrame:
    """The incast table from per-event arrays (ports as link ids), sorted by start time and port."""
    cap = links["capacity_gbps"].to_numpy(np.float64)
    e_cap = cap[e_port]
    names = (links["src"].astype(str) + "->" + links["dst"].astype(str)).to_numpy()
    out = pd.DataFrame({
        "port": names[e_port], "t_start_s": e_t0, "t_end_s": e_t1, "fanin": np.asarray(e_fanin).astype(np.int64),
        "demand_gbps": e_demand, "capacity_gbps": e_cap,
        "est_buffer_bytes": np.clip(e_demand - e_cap, 0, None) * 1e9 / 8 * e_rtt,
    })
    return out.sort_values(["t_start_s", "port"], kind="stable").reset_index(drop=True)


def group_running_max(gid: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Running maximum of ``vals`` inside each run of equal ``gid`` (non-decreasing), exactly (a maximum
    never rounds; a float offset per group would): pandas' grouped ``cummax``, one linear pass, where
    ranking the values for integer offsets cost a sort of them.

    Examples
    --------
    >>> group_running_max(np.array([0, 0, 1, 1]), np.array([3e-3, 1e-3, 2e-3, 5e-3])).tolist()
    [0.003, 0.003, 0.002, 0.005]
    """
    if len(vals) == 0:
        return np.zeros(0)
    return pd.Series(np.asarray(vals, dtype=np.float64)).groupby(np.asarray(gid), sort=False).cummax().to_numpy()


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="string" if c == "port" else "float64") for c in INCAST_COLUMNS}
                        ).astype({"fanin": "int64"})


def incast_events(log, links: pd.DataFrame, graph: nx.Graph) -> pd.DataFrame:
    """Incast events of a replay (see the module docstring).

    Parameters
    ----------
    log : sim.engine.engine.EngineLog
        Flow log (``flow_path``, ``flow_start_s``, ``flow_sent_s``) and the path table.
    links : pandas.DataFrame
        The router's link table (``src``, ``dst``, ``kind``, ``capacity_gbps``, ``latency_us``).
    graph : networkx.Graph
        For node kinds.

    Returns
    -------
    pandas.DataFrame
        ``port`` ("u->v"), ``t_start_s``, ``t_end_s``, ``fanin``, ``demand_gbps``, ``capacity_gbps``,
        ``est_buffer_bytes``, sorted by start time.
    """
    n_flows = len(log.flow_path)
    if n_flows == 0:
        return _empty()
    is_port, cap, lat_us, gpu_of_src = port_table(links, graph)
    # per path incidence: upstream line rate (slowest earlier link), path latency, sender GPU
    ptr, plinks = log.paths.ptr, log.paths.links
    upstream, path_lat_s, path_sender = path_table(ptr, plinks, cap, lat_us, gpu_of_src)

    # expand to flows, keep switch egress ports and flows that moved bytes for a while
    t0 = log.flow_start_s
    t1 = log.flow_sent_s
    ok = np.isfinite(t0) & np.isfinite(t1) & (t1 > t0) & (log.flow_bytes > 0)
    fl = np.flatnonzero(ok)
    if len(fl) == 0:
        return _empty()
    fpath = log.flow_path[fl]
    fptr, _ = csr_take(ptr, plinks, fpath)  # the flows' incidences, path by path
    fdeg = np.diff(fptr)
    pos = np.arange(fptr[-1]) - np.repeat(fptr[:-1] - ptr[fpath], fdeg)   # index into the path table
    inc_flow = np.repeat(np.arange(len(fl)), fdeg)
    port = plinks[pos]
    keep = is_port[port]
    port, pos, inc_flow = port[keep], pos[keep], inc_flow[keep]
    if len(port) == 0:
        return _empty()
    sender = path_sender[fpath[inc_flow]]
    rate = np.minimum(upstream[pos], cap[port])
    a = t0[fl][inc_flow]
    b = t1[fl][inc_flow]
    plat = path_lat_s[fpath[inc_flow]]

    # merge each (port, sender)'s overlapping intervals: one sender counts once
    order = np.lexsort((a, sender, port))
    # plat travels with its incidence (it was left in the old order: round trips of the wrong flows)
    port, sender, a, b, rate, plat = port[order], sender[order], a[order], b[order], rate[order], plat[order]
    grp_new = np.r_[True, (port[1:] != port[:-1]) | (sender[1:] != sender[:-1])]
    gid = np.cumsum(grp_new) - 1
    run_max = group_running_max(gid, b)
    new_iv = grp_new | np.r_[True, a[1:] > run_max[:-1]]
    iv_id = np.cumsum(new_iv) - 1
    starts = np.flatnonzero(new_iv)
    ends = np.r_[starts[1:], len(a)] - 1
    iv_port, iv_a, iv_b = port[starts], a[starts], run_max[ends]
    iv_rate = np.maximum.reduceat(rate, starts)
    del iv_id

    # sweep per port: +1 at start, -1 at end (ends first at equal times: intervals are half-open)
    ev_port = np.r_[iv_port, iv_port]
    ev_t = np.r_[iv_a, iv_b]
    ev_d = np.r_[np.ones(len(iv_a), np.int64), -np.ones(len(iv_a), np.int64)]
    ev_r = np.r_[iv_rate, -iv_rate]
    order = np.lexsort((ev_d, ev_t, ev_port))
    ev_port, ev_t, ev_d, ev_r = ev_port[order], ev_t[order], ev_d[order], ev_r[order]
    fanin = np.cumsum(ev_d)
    port_first = np.r_[True, ev_port[1:] != ev_port[:-1]]
    csum = np.cumsum(ev_r)
    base = np.where(port_first, csum - ev_r, np.nan)
    base = pd.Series(base).ffill().to_numpy()
    demand = csum - base
    same_next = np.r_[ev_port[1:] == ev_port[:-1], False]
    t_next = np.r_[ev_t[1:], ev_t[-1]]
    dur = np.where(same_next, t_next - ev_t, 0.0)
    above = (fanin >= 2) & (demand > cap[ev_port] * (1 + 1e-9)) & (dur > 0)
    sel = np.flatnonzero(dur > 0)
    ab = above[sel]
    if not ab.any():
        return _empty()
    p = ev_port[sel]
    run_start = ab & ~np.r_[False, ab[:-1] & (p[1:] == p[:-1])]
    run_id = np.cumsum(run_start) - 1
    idx = np.flatnonzero(ab)
    rid = run_id[idx]
    first_idx = idx[np.r_[True, rid[1:] != rid[:-1]]]
    bounds = np.r_[np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]]), len(idx)]
    last_idx = idx[bounds[1:] - 1]
    e_port = p[first_idx]
    e_t0 = ev_t[sel][first_idx]
    e_t1 = t_next[sel][last_idx]
    e_fanin = np.maximum.reduceat(fanin[sel][idx], bounds[:-1])
    e_demand = np.maximum.reduceat(demand[sel][idx], bounds[:-1])
    # per-port round trip: twice the median one-way latency of the flows through it
    rtt = pd.Series(plat).groupby(port).median() * 2
    e_rtt = rtt.reindex(e_port).to_numpy()
    return events_frame(links, e_port, e_t0, e_t1, e_fanin, e_demand, e_rtt)


__all__ = ["INCAST_COLUMNS", "empty_incast", "events_frame", "group_running_max", "incast_events", "path_table", "port_table"]
