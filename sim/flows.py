"""Raw flows over a topology (SPEC §5): :func:`simulate_flows` and the richer :func:`run_flows`.

Each input row is one flow ``src -> dst`` (GPU slots) of ``bytes`` starting at ``start_s``. The flows are
routed by :class:`topologies.Router` (``ecmp``: one hashed equal-cost path per flow, keyed by the row
number so repeated pairs may take different paths; ``spray``: the bytes split evenly over the equal-cost
paths; ``single``: one fixed path per pair) and replayed on a :class:`sim.network.flow_network.FlowNetwork`, which
shares the directed link capacities max-min fairly and re-solves whenever a flow starts or ends.

``finish_s`` = the time the flow's last byte is sent + the sum of ``latency_us`` of the links on its path
(for a sprayed flow: the latest of its sub-flows, each with its own path's latency). ``path`` = the node
names of the (first sub-)flow's path, source GPU first; a flow from a GPU to itself has path ``[gpu]`` and
finishes at its start.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd

from sim.engine.stats import LinkStats, Meter
from sim.errors import SimError
from sim.network.flow_network import FlowNetwork
from sim.option_values import check_seed
from traces.checks import MAX_OP_BYTES, MAX_SPAN_S

__all__ = ["FLOW_COLUMNS", "MAX_FLOW_BYTES", "MAX_START_S", "FlowsResult", "run_flows", "simulate_flows"]

#: Largest flow size and start time taken: the trace schema's own limits (docs/limits.md).
MAX_FLOW_BYTES = MAX_OP_BYTES
MAX_START_S = MAX_SPAN_S

#: Required input columns (SPEC §5).
FLOW_COLUMNS: tuple[str, ...] = ("src", "dst", "bytes", "start_s")


@dataclass(frozen=True)
class FlowsResult:
    """Outcome of :func:`run_flows`.

    Attributes
    ----------
    flows : pandas.DataFrame
        The input columns plus ``finish_s`` and ``path`` (SPEC §5), in input order.
    links : pandas.DataFrame
        One row per directed link: ``src``, ``dst``, ``kind``, ``capacity_gbps``, ``bytes``,
        ``mean_utilization`` (bytes over capacity x ``busy window``), ``peak_utilization``,
        ``busy_above_90_s``.
    makespan_s : float
        Latest ``finish_s`` minus earliest ``start_s`` (0 without flows).
    window_s : float
        From the earliest start to the last byte sent: the window of ``mean_utilization``.
    network : FlowNetwork
        The network after the run.
    link_stats : sim.engine.stats.LinkStats
        Per-link statistics (``binned(end_s)``: the time series, of width ``bin_s`` when given). Exact with
        ``completion_quantile = 0``; with batching, rates are averaged over each batch's stretch.
    """

    flows: pd.DataFrame
    links: pd.DataFrame
    makespan_s: float
    window_s: float
    network: FlowNetwork
    link_stats: LinkStats | None = None


def simulate_flows(topology: nx.Graph, flows: pd.DataFrame, routing: str = "ecmp", seed: int = 0) -> pd.DataFrame:
    """Simulate raw flows over a topology with max-min fair link sharing (SPEC §5).

    Parameters
    ----------
    topology : networkx.Graph
        A topology (SPEC §4), e.g. from :func:`topologies.build`.
    flows : pandas.DataFrame
        Columns ``src``, ``dst`` (int GPU slots), ``bytes`` (int >= 0), ``start_s`` (float >= 0); other
        columns are kept.
    routing : {"ecmp", "spray", "single", "dmodk"}
        Path choice of :class:`topologies.Router`.
    seed : int
        Seed of the ECMP hash.

    Returns
    -------
    pandas.DataFrame
        The input plus ``finish_s`` (float seconds) and ``path`` (list of node names, src to dst).

    Raises
    ------
    SimError
        A missing column, a bad value (naming the column and row), a GPU not in the topology.
    topologies.TopologyError
        An unknown routing mode or a GPU pair with no path.

    Examples
    --------
    >>> import topologies
    >>> g = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=8, link_gbps=400.0)
    >>> df = pd.DataFrame({"src": [0], "dst": [8], "bytes": [50_000_000], "start_s": [0.0]})
    >>> out = simulate_flows(g, df)
    >>> float(round(out.finish_s[0] * 1e3, 3)), out.path[0][0], out.path[0][-1]   # 50 MB at 50 GB/s + 4 hops
    (1.004, 'gpu0', 'gpu8')
    """
    # no per-link statistics: the flows alone need neither the meter nor the link table
    return _replay(topology, flows, routing, seed, 0.0, None, with_links=False).flows


def run_flows(topology: nx.Graph, flows: pd.DataFrame, routing: str = "ecmp", seed: int = 0, *,
              completion_quantile: float = 0.0, bin_s: float | None = None) -> FlowsResult:
    """:func:`simulate_flows` with the per-link table, the makespan and the network kept.

    Parameters
    ----------
    topology, flows, routing, seed
        As for :func:`simulate_flows`.
    completion_quantile : float
        Accuracy knob of :class:`~sim.network.flow_network.FlowNetwork` (0 = exact).
    bin_s : float, optional
        Time-bin width of the per-link byte series (``link_stats.binned``); adaptive when omitted.

    Returns
    -------
    FlowsResult
    """
    return _replay(topology, flows, routing, seed, completion_quantile, bin_s, with_links=True)


def _replay(topology: nx.Graph, flows: pd.DataFrame, routing: str, seed: int, completion_quantile: float,
            bin_s: float | None, *, with_links: bool) -> FlowsResult:
    """Route and replay the flows; the per-link statistics only ``with_links`` (:func:`run_flows`)."""
    from topologies import Router, TopologyError, validate_graph

    if not isinstance(topology, nx.Graph):
        raise TopologyError(f"a topology is a networkx.Graph, got {type(topology).__name__}")
    validate_graph(topology, str(topology.graph.get("name") or "topology"))  # e.g. a negative latency_us
    seed = check_seed(seed)  # as sim.simulate does ("x" failed inside the router's hash)
    router = Router(topology, routing=routing, seed=seed)
    src, dst, size, start = _checked_columns(flows, router.num_gpus)
    n = src.size
    links = router.links
    capacity_bytes_per_s = links["capacity_gbps"].to_numpy(float) * 1e9 / 8.0
    if n == 0:
        out = flows.copy()
        out["finish_s"] = pd.Series(dtype=float)
        out["path"] = pd.Series(dtype=object)
        net = FlowNetwork(capacity_bytes_per_s)
        stats = LinkStats(net.capacity, bin_s)
        table = _link_table(links, net, stats, 0.0) if with_links else None
        return FlowsResult(flows=out, links=table, makespan_s=0.0, window_s=0.0, network=net, link_stats=stats)
    routes = router.route(src, dst, np.arange(n, dtype=np.int64))
    net = FlowNetwork(capacity_bytes_per_s, completion_quantile=completion_quantile)
    stats = LinkStats(capacity_bytes_per_s, bin_s) if with_links else None
    # the meter hands every constant-rate stretch to the statistics; without them the network runs alone
    clock = Meter(net, stats) if with_links else net

    sub_flow = routes.flow_of_sub
    sub_size = size[sub_flow] * routes.fraction
    sub_start = start[sub_flow]
    order = np.argsort(sub_start, kind="stable")
    ptr, idx = _reorder_csr(routes.link_ptr, routes.link_idx, order)
    # Flows starting together are added in one call (one solve); the network's ids follow ``order``.
    sorted_start = sub_start[order]
    cuts = np.flatnonzero(np.r_[True, sorted_start[1:] != sorted_start[:-1], True])
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        t = float(sorted_start[a])
        clock.advance(t)
        net.add_flows(t, ptr[a:b + 1], idx, sub_size[order[a:b]])
    clock.advance(np.inf)

    sub_done = np.empty(order.size)
    sub_done[order] = net.finish_s
    latency_s = links["latency_us"].to_numpy(float) * 1e-6
    # reduceat over possibly empty rows: pad so every start is valid, then zero the empty rows
    sub_latency = np.add.reduceat(np.r_[latency_s[routes.link_idx], 0.0], routes.link_ptr[:-1])
    sub_latency[np.diff(routes.link_ptr) == 0] = 0.0
    finish = np.maximum.reduceat(sub_done + sub_latency, routes.sub_ptr[:-1])

    out = flows.copy()
    out["finish_s"] = finish
    out["path"] = _first_paths(routes, links, src)
    first_start = float(start.min())
    makespan = float(finish.max()) - first_start
    window = max(float(np.nanmax(net.finish_s)) - first_start, 0.0)
    table = _link_table(links, net, stats, window) if with_links else None
    out.attrs["collsim_flows"] = {
        "flows": int(n), "makespan_s": makespan, "bytes": float(size.sum()),
        "routing": routing, "seed": int(seed), "solves": int(net.stats["solves"]),
    }
    if with_links:
        out.attrs["collsim_flows"]["max_link_utilization"] = float(table["peak_utilization"].max())
    return FlowsResult(flows=out, links=table, makespan_s=makespan, window_s=window, network=net, link_stats=stats)


def _checked_columns(flows: pd.DataFrame, num_gpus: int):
    """The four input columns as numpy arrays; SimError naming the column (and row) of bad input."""
    if not isinstance(flows, pd.DataFrame):
        raise SimError(f"flows: expected a pandas DataFrame, got {type(flows).__name__}")
    missing = [c for c in FLOW_COLUMNS if c not in flows.columns]
    if missing:
        raise SimError(f"flows: missing column '{missing[0]}' (need {', '.join(FLOW_COLUMNS)})")
    arrays = {}
    for column in FLOW_COLUMNS:
        values = pd.to_numeric(flows[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = ~np.isfinite(values)
        if column != "start_s":
            bad |= values != np.round(values)
        bad |= values < 0
        # the trace schema's limits (docs/limits.md): sizes exact in float64, times within 11.6 days
        bad |= values > (MAX_START_S if column == "start_s" else MAX_FLOW_BYTES)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            want = (f"a number in 0..{MAX_START_S:g}" if column == "start_s" else
                    f"a whole number in 0..{MAX_FLOW_BYTES}" if column == "bytes" else "a whole number >= 0")
            value = flows[column].iloc[row]
            value = value.item() if isinstance(value, np.generic) else value
            raise SimError(f"flows: column '{column}', row {row}: {value!r} is not {want}")
        arrays[column] = values
    for column in ("src", "dst"):
        outside = arrays[column] >= num_gpus
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise SimError(f"flows: column '{column}', row {row}: gpu{int(arrays[column][row])} is not in the "
                           f"topology (gpu0..gpu{num_gpus - 1})")
    return (arrays["src"].astype(np.int64), arrays["dst"].astype(np.int64), arrays["bytes"], arrays["start_s"])


def _reorder_csr(ptr: np.ndarray, idx: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows taken in ``order``."""
    deg = np.diff(ptr)[order]
    new_ptr = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(deg, out=new_ptr[1:])
    pos = np.arange(new_ptr[-1], dtype=np.int64) + np.repeat(ptr[order] - new_ptr[:-1], deg)
    return new_ptr, idx[pos]


def _first_paths(routes, links: pd.DataFrame, src: np.ndarray) -> list[list[str]]:
    """Node names of each flow's first sub-flow path (``[gpu]`` for a flow to itself).

    Flows are taken a path length at a time: one (flows x hops) table of names per length and one
    ``tolist`` each, instead of Python work per flow.
    """
    first = routes.sub_ptr[:-1]
    begin = routes.link_ptr[first]
    hops = routes.link_ptr[first + 1] - begin
    link_src = links["src"].to_numpy(object)
    link_dst = links["dst"].to_numpy(object)
    paths: list = [None] * len(first)
    for length in np.unique(hops).tolist():
        rows = np.flatnonzero(hops == length)
        if length == 0:
            names = [[f"gpu{s}"] for s in src[rows].tolist()]
        else:
            hop = routes.link_idx[begin[rows, None] + np.arange(length)]
            names = np.concatenate([link_src[hop[:, :1]], link_dst[hop]], axis=1).tolist()
        for i, p in zip(rows.tolist(), names, strict=True):
            paths[i] = p
    return paths


def _link_table(links: pd.DataFrame, net: FlowNetwork, stats: LinkStats, window_s: float) -> pd.DataFrame:
    capacity_bytes_per_s = links["capacity_gbps"].to_numpy(float) * 1e9 / 8.0
    mean = net.link_bytes / (capacity_bytes_per_s * window_s) if window_s > 0 else np.zeros(len(links))
    return pd.DataFrame({
        "src": links["src"].to_numpy(object),
        "dst": links["dst"].to_numpy(object),
        "kind": links["kind"].to_numpy(object),
        "capacity_gbps": links["capacity_gbps"].to_numpy(float),
        "bytes": net.link_bytes.copy(),
        "mean_utilization": mean,
        "peak_utilization": stats.peak_rate / capacity_bytes_per_s,
        "busy_above_90_s": stats.busy90_s.copy(),
    })
