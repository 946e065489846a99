"""``simulate(trace, topology, ...) -> Result``: a trace replayed as NCCL-style flows over a topology.

The trace becomes a :class:`sim.engine.core.Workload` (rank programs over op instances: one per ``(comm, seq)``
collective, one per matched Send/Recv pair); each op's transfers come from
:func:`sim.planning.collectives.plan_collective` and their routes from :class:`topologies.routing.Router`; the
:class:`sim.engine.core.Engine` runs them over a :class:`sim.network.flow_network.FlowNetwork`. The same workload is run a
second time over :func:`topologies.nonblocking` of the graph (the ideal reference: same access links, one
non-blocking crossbar) for ``ideal_makespan_s`` and each collective's ``ideal_s``.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from sim.engine.core import Engine, EngineLog, PathTable, PreparedOp, Workload, reverse_csr
from sim.errors import SimError

#: Options of :func:`simulate` besides its named parameters.
OPTIONS = ("timing", "completion_quantile", "bin_s", "fail_links", "degrade_links", "stragglers", "progress",
           "ideal", "memoize", "trace_name", "topology_params", "channels")


@dataclass(frozen=True)
class OpTable:
    """The op instances of a trace, one row per op (``frame``), and what was skipped (``skipped``)."""

    frame: pd.DataFrame
    splits: list[np.ndarray | None]
    skipped: dict[str, int]


def _comm_members(df: pd.DataFrame, comms: Mapping[str, list[int]]) -> dict[str, np.ndarray]:
    out = {str(c): np.asarray(r, dtype=np.int64) for c, r in comms.items()}
    for comm, ranks in df.groupby("comm", sort=False)["rank"]:
        if comm not in out:  # no metadata: members in rank order
            out[comm] = np.unique(ranks.to_numpy()).astype(np.int64)
    return out


def build_ops(df: pd.DataFrame, comms: Mapping[str, list[int]]) -> tuple[OpTable, np.ndarray]:
    """Group trace rows into op instances.

    Returns
    -------
    OpTable
        One row per op: ``kind`` (``coll`` / ``p2p``), ``comm``, ``seq``, ``op``, ``rank_bytes`` (bytes of
        one rank's row), ``root`` (comm rank), ``nranks``, ``src``/``dst`` (p2p global ranks), ``members``
        (global ranks in comm order).
    row_op : ndarray of int64
        The op of each trace row (-1: skipped).

    Raises
    ------
    SimError
        When the rows of one collective disagree on the op, or a Send/Recv names a communicator the
        metadata does not list.
    """
    members = _comm_members(df, comms)
    n = len(df)
    row_op = np.full(n, -1, dtype=np.int64)
    ops = df["op"].to_numpy()
    is_p2p = np.isin(ops, ["Send", "Recv"])
    rows: list[dict[str, Any]] = []
    splits: list[np.ndarray | None] = []
    skipped = {"incomplete_collectives": 0, "unmatched_p2p_rows": 0}

    coll = df[~is_p2p]
    if len(coll):
        grp = coll.groupby(["comm", "seq"], sort=False)
        gid = grp.ngroup().to_numpy()
        size = grp["rank"].transform("size").to_numpy()
        first = coll.groupby(gid, sort=False).head(1)
        n_ops_of = grp["op"].nunique().to_numpy()
        if (n_ops_of > 1).any():
            bad = np.flatnonzero(n_ops_of > 1)[0]
            key = list(grp.groups)[bad]
            raise SimError(f"collective comm={key[0]!r} seq={key[1]}: its rows name different ops")
        comm_size = np.array([len(members[c]) for c in first["comm"]], dtype=np.int64)
        complete = np.asarray(size, dtype=np.int64) == comm_size[gid]
        skipped["incomplete_collectives"] = int(len(np.unique(gid[~complete])))
        new_id = np.full(len(first), -1, dtype=np.int64)
        ok_groups = np.unique(gid[complete])
        new_id[ok_groups] = np.arange(len(ok_groups))
        row_op[np.flatnonzero(~is_p2p)] = new_id[gid]
        is_a2a = first["op"].to_numpy() == "AllToAll"
        split_rows = {}
        if is_a2a.any():
            a2a = coll[(coll["op"] == "AllToAll").to_numpy()]
            has_split = np.fromiter((len(v) > 0 for v in a2a["split_bytes"]), bool, len(a2a))
            if has_split.any():
                sub = a2a[has_split]
                for g, (c, r, v) in zip(gid[(coll["op"] == "AllToAll").to_numpy()][has_split],
                                        zip(sub["comm"], sub["rank"], sub["split_bytes"], strict=True),
                                        strict=True):
                    split_rows.setdefault(int(g), []).append((c, int(r), v))
        f_comm, f_seq, f_op = first["comm"].tolist(), first["seq"].tolist(), first["op"].tolist()
        f_bytes, f_root = first["bytes"].tolist(), first["root"].tolist()
        for g in ok_groups.tolist():
            comm = f_comm[g]
            mem = members[comm]
            rows.append(dict(kind="coll", comm=comm, seq=int(f_seq[g]), op=f_op[g], rank_bytes=int(f_bytes[g]),
                             root=int(f_root[g]), nranks=len(mem), src=-1, dst=-1, members=mem))
            split = None
            if g in split_rows:  # rows without splits send ``bytes`` to every peer
                pos = {int(r): i for i, r in enumerate(mem)}
                split = np.full((len(mem), len(mem)), int(f_bytes[g]), dtype=np.int64)
                for _, r, v in split_rows[g]:
                    split[pos[r]] = np.asarray(v, dtype=np.int64)
            splits.append(split)

    if is_p2p.any():
        p2p = df[is_p2p].copy()
        p2p["row"] = np.flatnonzero(is_p2p)
        missing = sorted(set(p2p["comm"]) - set(members))
        if missing:
            raise SimError(f"Send/Recv on comm {missing[0]!r}: the trace metadata does not list its ranks")
        peer = np.empty(len(p2p), dtype=np.int64)
        for comm, idx in p2p.groupby("comm", sort=False).indices.items():
            mem = members[comm]
            roots = p2p["root"].to_numpy()[idx]
            if (roots >= len(mem)).any():
                raise SimError(f"Send/Recv on comm {comm!r}: root {int(roots.max())} is outside its "
                               f"{len(mem)} ranks")
            peer[idx] = mem[roots]
        p2p["peer"] = peer
        send = p2p[p2p["op"] == "Send"]
        recv = p2p[p2p["op"] == "Recv"]
        s = pd.DataFrame({"comm": send["comm"], "src": send["rank"].astype(np.int64),
                          "dst": send["peer"], "seq": send["seq"], "bytes": send["bytes"],
                          "srow": send["row"]})
        r = pd.DataFrame({"comm": recv["comm"], "src": recv["peer"], "dst": recv["rank"].astype(np.int64),
                          "seq": recv["seq"], "rrow": recv["row"]})
        m = s.merge(r, on=["comm", "src", "dst", "seq"], how="inner", sort=False)
        skipped["unmatched_p2p_rows"] = int(len(p2p) - 2 * len(m))
        base = len(rows)
        ids = base + np.arange(len(m), dtype=np.int64)
        row_op[m["srow"].to_numpy()] = ids
        row_op[m["rrow"].to_numpy()] = ids
        for rec in m.itertuples(index=False):
            rows.append(dict(kind="p2p", comm=rec.comm, seq=int(rec.seq), op="Send",  # the pair, as its Send
                             rank_bytes=int(rec.bytes), root=-1, nranks=2, src=int(rec.src), dst=int(rec.dst),
                             members=np.array([rec.src, rec.dst], dtype=np.int64)))
            splits.append(None)
    frame = pd.DataFrame(rows, columns=["kind", "comm", "seq", "op", "rank_bytes", "root", "nranks", "src",
                                        "dst", "members"])
    return OpTable(frame, splits, skipped), row_op


def build_workload(df: pd.DataFrame, row_op: np.ndarray, n_ops: int, op_key: list, world_size: int,
                   straggler_delay_s: Mapping[int, float] | None = None) -> Workload:
    """Rank programs (steps in trace order, grouped rows merged) over the op instances.

    Rows with ``row_op == -1`` (skipped) are left out.
    """
    keep = row_op >= 0
    rid = np.flatnonzero(keep)
    rank = df["rank"].to_numpy()[keep].astype(np.int64)
    group = df["group"].to_numpy()[keep].astype(np.int64)
    t0 = df["t_start_s"].to_numpy()[keep].astype(np.float64)
    dur = df["duration_s"].to_numpy()[keep].astype(np.float64)
    ops = row_op[keep]
    key = rid.copy()
    grouped = group >= 0
    if grouped.any():  # a group is one step, placed at its first row
        g = pd.DataFrame({"rank": rank[grouped], "group": group[grouped], "rid": rid[grouped]})
        key[grouped] = g.groupby(["rank", "group"])["rid"].transform("min").to_numpy()
    combo = rank * (int(rid.max()) + 1 if len(rid) else 1) + key
    uniq, step_of_row = np.unique(combo, return_inverse=True)
    n_steps = len(uniq)
    step_rank = np.zeros(n_steps, dtype=np.int64)
    step_rank[step_of_row] = rank
    # step -> ops (unique pairs)
    pairs = np.unique(step_of_row * max(n_ops, 1) + ops)
    ps, po = pairs // max(n_ops, 1), pairs % max(n_ops, 1)
    step_op_ptr = np.zeros(n_steps + 1, dtype=np.int64)
    np.cumsum(np.bincount(ps, minlength=n_steps), out=step_op_ptr[1:])
    # recorded times per step
    t_start = np.full(n_steps, np.inf)
    np.minimum.at(t_start, step_of_row, np.where(np.isnan(t0), np.inf, t0))
    t_end = np.full(n_steps, -np.inf)
    end_row = t0 + dur
    np.maximum.at(t_end, step_of_row, np.where(np.isnan(end_row), -np.inf, end_row))
    t_start[~np.isfinite(t_start)] = np.nan
    prog_ptr = np.zeros(world_size + 1, dtype=np.int64)
    np.cumsum(np.bincount(step_rank, minlength=world_size), out=prog_ptr[1:])
    # forward-fill unknown issue times within a rank; gaps from the recorded end of the previous step
    ts = pd.Series(t_start).groupby(step_rank).ffill().fillna(0.0).to_numpy()
    prev_end = np.r_[np.nan, t_end[:-1]]
    first_of_prog = np.zeros(n_steps, dtype=bool)
    first_of_prog[prog_ptr[:-1][np.diff(prog_ptr) > 0]] = True
    gap = np.where(np.isfinite(prev_end) & ~first_of_prog, ts - prev_end, 0.0)
    gap = np.clip(np.nan_to_num(gap, nan=0.0), 0.0, None)
    delay = np.zeros(world_size)
    for r, d in (straggler_delay_s or {}).items():
        if not 0 <= int(r) < world_size:
            raise SimError(f"straggler rank {r} is outside the trace's world size {world_size}")
        delay[int(r)] += float(d)
    return Workload(n_ops=n_ops, op_key=op_key, prog_ptr=prog_ptr, prog_delay_s=delay,
                    step_op_ptr=step_op_ptr, step_op_idx=po.astype(np.int64), step_t_start_s=ts,
                    step_gap_s=gap)


def _flow_key_base(comm: str) -> int:
    """A stable per-communicator hash: NCCL opens its own connections (source ports) per communicator."""
    return zlib.crc32(comm.encode()) & 0x3FFFFFFF


class Preparer:
    """``prepare(op_id) -> PreparedOp`` with plans and routes cached per op identity.

    Parameters
    ----------
    ops : OpTable
    router : topologies.routing.Router
    paths : PathTable
    algo : str
        ``auto``, ``ring``, ``tree`` or ``direct``.
    graph : networkx.Graph
        The topology (for the planner's view of servers and links).
    meta : dict
        Trace metadata (rings per communicator, gpus_per_node).
    plan_options : dict
        Extra keyword arguments of ``plan_collective`` (e.g. ``channels``).
    """

    def __init__(self, ops: OpTable, router, paths: PathTable, algo: str, graph: nx.Graph, meta: Mapping,
                 plan_options: Mapping[str, Any] | None = None, plans: dict | None = None) -> None:
        self.ops = ops
        self.router = router
        self.paths = paths
        self.algo = algo
        self.graph = graph
        self.meta = meta
        self.plan_options = dict(plan_options or {})
        self.cache: dict[Any, PreparedOp] = {}
        self.keys = op_keys(ops, algo)
        self._records = ops.frame.to_dict("records")
        # plans depend on the graph only through servers and per-GPU link rates, which the ideal fabric
        # keeps: the real and the ideal run share them
        self.plans: dict = {} if plans is None else plans

    def __call__(self, op: int) -> PreparedOp:
        key = self.keys[op]
        hit = self.cache.get(key)
        if hit is None:
            hit = self._prepare(op)
            self.cache[key] = hit
        return hit

    def _prepare(self, op: int) -> PreparedOp:
        rec = self._records[op]
        plan = self.plans.get(self.keys[op])
        if plan is None:
            if rec["kind"] == "p2p":
                plan = plan_p2p(rec, self.algo, self.graph, self.plan_options)
            else:
                plan = plan_op(rec, self.ops.splits[op], self.algo, self.graph, self.meta, self.plan_options)
            self.plans[self.keys[op]] = plan
        src, dst = np.asarray(plan.src, np.int64), np.asarray(plan.dst, np.int64)
        nbytes = np.asarray(plan.bytes, np.float64)
        channel = np.asarray(plan.channel, np.int64)
        delay = np.asarray(plan.delay_s, np.float64)
        dep_ptr, dep_idx = np.asarray(plan.dep_ptr, np.int64), np.asarray(plan.dep_idx, np.int64)
        algo, proto = str(plan.algo), str(plan.proto)
        n = len(src)
        rev_ptr, rev_idx = reverse_csr(dep_ptr, dep_idx, n)
        dep_count = np.diff(dep_ptr).astype(np.int64)
        flow_key = _flow_key_base(str(rec["comm"])) + channel
        local = src == dst
        routes = self.router.route(src[~local], dst[~local], flow_key[~local]) if (~local).any() else None
        # sub-flows: one per route sub-flow; a local copy (src == dst) is one sub-flow with no links
        sub_count = np.ones(n, dtype=np.int64)
        if routes is not None:
            sub_count[~local] = np.diff(np.asarray(routes.sub_ptr, np.int64))
        sub_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sub_count, out=sub_ptr[1:])
        n_sub = int(sub_ptr[-1])
        sub_transfer = np.repeat(np.arange(n, dtype=np.int64), sub_count)
        sub_bytes = np.zeros(n_sub)
        sub_path = np.zeros(n_sub, dtype=np.int64)
        sub_lat = np.zeros(n_sub)
        remote_sub = ~local[sub_transfer]
        if routes is not None:
            frac = np.asarray(routes.fraction, np.float64)
            ids, lat = self.paths.add(np.asarray(routes.link_ptr), np.asarray(routes.link_idx))
            sub_path[remote_sub] = ids
            sub_lat[remote_sub] = lat
            sub_bytes[remote_sub] = nbytes[sub_transfer[remote_sub]] * frac
        if local.any():
            ids, _ = self.paths.add(np.zeros(int(local.sum()) + 1, np.int64), np.zeros(0, np.int64))
            sub_path[~remote_sub] = ids
            # a local copy moves no network bytes: it costs its software delay only
        footprint = np.unique(np.asarray(routes.link_idx)) if routes is not None else np.zeros(0, np.int64)
        return PreparedOp(algo=algo, proto=proto, delay_s=delay, dep_count=dep_count, rev_ptr=rev_ptr,
                          rev_idx=rev_idx, sub_ptr=sub_ptr, sub_bytes=sub_bytes, sub_path=sub_path,
                          sub_latency_s=sub_lat, sub_transfer=sub_transfer, src=src, dst=dst,
                          footprint=footprint.astype(np.int64))




def plan_op(rec: Mapping, split: np.ndarray | None, algo: str, graph: nx.Graph, meta: Mapping,
            options: Mapping[str, Any]):
    """:func:`sim.planning.collectives.plan_collective` for one collective op instance (ring orders from the
    trace metadata when it logged them)."""
    from sim.planning.collectives import plan_collective

    rings = (meta.get("rings") or {}).get(rec["comm"])
    return plan_collective(rec["op"], int(rec["rank_bytes"]), rec["members"], algo=algo, root=int(rec["root"]),
                           split_bytes=split, rings=rings, graph=graph, **options)


def plan_p2p(rec: Mapping, algo: str, graph: nx.Graph, options: Mapping[str, Any]):
    """:func:`sim.planning.collectives.plan_collective` for a matched Send/Recv pair."""
    from sim.planning.collectives import plan_collective

    return plan_collective("Send", int(rec["rank_bytes"]), [int(rec["src"]), int(rec["dst"])], algo=algo,
                           graph=graph, **options)


def op_keys(ops: OpTable, algo: str) -> list:
    """Identity of each op's traffic: ops with equal keys make the same transfers over the same routes."""
    f = ops.frame
    keys = []
    for i, (kind, comm, op, nb, root, src, dst) in enumerate(zip(
            f["kind"], f["comm"], f["op"], f["rank_bytes"], f["root"], f["src"], f["dst"], strict=True)):
        split = ops.splits[i]
        sk = None if split is None else zlib.crc32(np.ascontiguousarray(split).tobytes()) ^ split.size
        keys.append((kind, comm, op, int(nb), int(root), int(src), int(dst), sk, algo))
    return keys


def run_engine(workload: Workload, preparer: Preparer, router, paths: PathTable, *, timing: str,
               completion_quantile: float, bin_s: float | None, memoize: bool,
               progress: Callable[[int], None] | None, describe: Callable[[int], str],
               link_stats: bool = True, memo: dict | None = None) -> EngineLog:
    """One replay of ``workload`` over the routes of ``router``.

    When a memoised op turns out not to have been alone (:class:`sim.engine.core.MemoConflict`), the replay
    starts again with that op's key never replayed; records stay valid and are kept. After a few
    conflicts memoisation is switched off.
    """
    from sim.engine.core import MemoConflict
    from sim.network.flow_network import FlowNetwork

    cap = router.links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    memo = {} if memo is None else memo
    blocked: set = set()
    for attempt in range(4):
        net = FlowNetwork(cap, completion_quantile=completion_quantile, link_stats=False)  # LinkStats keeps them
        engine = Engine(workload, preparer, net, paths, cap, timing=timing, bin_s=bin_s,
                        memoize=memoize and attempt < 3, progress=progress if attempt == 0 else None,
                        memo=memo, blocked=blocked, link_stats=link_stats)
        engine.describe = describe
        try:
            return engine.run()
        except MemoConflict as conflict:
            blocked.add(conflict.key)
    raise AssertionError("unreachable: the last attempt runs without memoisation")
def nvlink_records(records: Mapping, preparer: Preparer, router) -> dict:
    """Records of ops that used NVLink only, for the ideal run (durations only).

    The non-blocking reference keeps every NVLink cable as it is, and plans are shared, so an op that
    crosses no network link runs the same on both fabrics: its isolated duration carries over exactly.
    The ideal run keeps no link statistics or flow log, so only the duration is kept.
    """
    from sim.engine.core import Record

    kinds = router.links["kind"].to_numpy()
    out = {}
    none, no_ids = np.zeros(0), np.zeros(0, dtype=np.int64)
    empty_flows = (no_ids, none, none, none, none)
    for key, rec in records.items():
        prep = preparer.cache.get(key)
        if prep is None or prep.footprint is None or len(prep.footprint) == 0:
            continue
        if (kinds[prep.footprint] == "nvlink").all():
            out[key] = Record(rec.duration_s, none, none, np.zeros(1, dtype=np.int64), no_ids, none, no_ids,
                              none, none, none, empty_flows)
    return out


def load_topology(topology, world_size: int, gpus_per_node: int, params: Mapping[str, Any]) -> nx.Graph:
    """The fabric a trace replays over: a graph as given, or a preset / YAML file built with ``params``.

    Presets (and preset YAML files) are sized to the trace (``num_gpus=world_size``,
    ``gpus_per_server=gpus_per_node``) unless ``params`` says otherwise; an explicit YAML graph keeps its
    own size.

    Raises
    ------
    topologies.TopologyError
        Unknown preset, bad or unknown parameter.
    """
    import topologies

    if isinstance(topology, nx.Graph):
        return topology
    name = str(topology)
    kw = {"num_gpus": world_size, "gpus_per_server": gpus_per_node}
    kw.update(params or {})
    if Path(name).suffix.lower() in (".yaml", ".yml"):
        from topologies.errors import TopologyError

        try:  # size a preset YAML to the trace; an explicit graph may fix its own server size
            return topologies.build(name, **kw)
        except TopologyError:
            return topologies.build(name, **dict(params or {}))
    return topologies.build(name, **kw)


def check_fit(graph: nx.Graph, world_size: int) -> None:
    """The trace must fit the topology, and the topology's GPUs must reach each other.

    Raises
    ------
    SimError
        When the trace's world size exceeds the GPUs, or the graph is disconnected.
    """
    gpus = [n for n, d in graph.nodes(data=True) if d.get("kind") == "gpu"]
    name = graph.graph.get("name", "topology")
    if world_size > len(gpus):
        raise SimError(f"trace world_size {world_size} exceeds the {len(gpus)} GPUs of topology {name!r}")
    missing = [f"gpu{r}" for r in range(world_size) if f"gpu{r}" not in graph]
    if missing:
        raise SimError(f"topology {name!r} has no node {missing[0]} for rank {missing[0][3:]}")
    if world_size > 1:
        comp = nx.node_connected_component(graph, "gpu0")
        cut = [f"gpu{r}" for r in range(world_size) if f"gpu{r}" not in comp]
        if cut:
            raise SimError(f"topology {name!r} is disconnected: gpu0 cannot reach {cut[0]}"
                           + (f" (and {len(cut) - 1} more GPUs)" if len(cut) > 1 else ""))


def simulate(trace_df: pd.DataFrame, topology, algo: str = "auto", routing: str = "ecmp", seed: int = 0,
             **options: Any):
    """Replay a trace over a topology (SPEC §9).

    Parameters
    ----------
    trace_df : pandas.DataFrame
        A §3 trace (``traces.read_trace``); metadata in ``attrs["collsim"]``.
    topology : networkx.Graph or str
        A §4 graph, a preset name or a YAML path (built with ``num_gpus = world_size`` and
        ``gpus_per_server = gpus_per_node``; ``topology_params`` adds builder parameters).
    algo : {"auto", "ring", "tree", "direct"}
        Collective algorithm (``auto`` chooses per op and size as NCCL does).
    routing : {"ecmp", "spray", "single"}
    seed : int
        Seeds routing and the choice of failed / degraded links; the same seed gives the same results.
    **options
        ``timing`` ("auto" | "trace" | "asap"; auto = trace when every ``t_start_s`` is known),
        ``completion_quantile`` (FlowNetwork accuracy knob, default 0 = exact), ``bin_s`` (utilisation
        bins; adaptive when omitted), ``fail_links`` (int or link names), ``degrade_links`` (``"N:F"`` or
        ``{link: factor}``), ``stragglers`` (``{rank: delay_us}`` or ``["RANK:DELAY_US"]``), ``progress``
        (callable taking a fraction done), ``ideal`` (run the non-blocking reference, default True),
        ``memoize`` (exact replay of identical idle phases, default True), ``trace_name``,
        ``topology_params``, ``channels``; ``model`` ("flow", default; "analytical": per-collective bounds
        of the same plans, no event loop; "both": the flow Result plus ``tiers``, see
        :mod:`sim.analytical`).

    Returns
    -------
    sim.results.result.Result

    Raises
    ------
    SimError
        Bad options, a trace that does not fit the topology, a disconnected topology, a deadlocked trace.

    Examples
    --------
    >>> res = simulate(read_trace("ds_v3.parquet"), "fat_tree")  # doctest: +SKIP
    >>> res.summary["makespan_s"] >= res.summary["ideal_makespan_s"]  # doctest: +SKIP
    True
    """
    model = options.pop("model", "flow")  # a plain keyword: "analytical" and "both" leave here
    if model != "flow":
        from sim.analytical.dispatch import simulate_model

        return simulate_model(model, trace_df, topology, algo, routing, seed, options)
    import topologies
    from sim import anomalies
    from sim.results import metrics
    from sim.results.result import Result
    from topologies.routing import Router
    from traces.schema import validate

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise SimError(f"unknown simulate option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
    if algo not in ("auto", "ring", "tree", "direct"):
        raise SimError(f"algo {algo!r} is not one of: auto, ring, tree, direct")
    if routing not in ("ecmp", "spray", "single"):
        raise SimError(f"routing {routing!r} is not one of: ecmp, spray, single")
    wall0 = time.perf_counter()
    df = validate(trace_df)
    meta = dict(df.attrs.get("collsim") or {})
    world = int(meta.get("world_size") or (int(df["rank"].max()) + 1 if len(df) else 0))
    gpn = int(meta.get("gpus_per_node") or 8)
    graph = load_topology(topology, world, gpn, options.get("topology_params") or {})
    check_fit(graph, world)
    damaged, damage = anomalies.apply(graph, fail_links=options.get("fail_links"),
                                      degrade_links=options.get("degrade_links"), seed=seed)
    if damage.failed:
        anomalies.check_reachable(damaged, world, damage)
    stragglers = anomalies.parse_stragglers(options.get("stragglers"))
    timing = options.get("timing") or "auto"
    if timing not in ("auto", "trace", "asap"):
        raise SimError(f"timing {timing!r} is not one of: auto, trace, asap")
    if timing == "auto":
        timing = "trace" if len(df) and not df["t_start_s"].isna().any() else "asap"
    quantile = float(options.get("completion_quantile") or 0.0)
    bin_s = options.get("bin_s")
    memoize = bool(options.get("memoize", True))
    plan_options = {k: options[k] for k in ("channels",) if options.get(k) is not None}

    ops, row_op = build_ops(df, meta.get("comms") or {})
    keys = op_keys(ops, algo)
    workload = build_workload(df, row_op, len(ops.frame), keys, world,
                              {r: d * 1e-6 for r, d in stragglers.items()})
    labels = ops.frame

    def describe(op: int) -> str:
        rec = labels.iloc[op]
        return f"{rec['op']} on comm {rec['comm']!r} seq {rec['seq']}"

    user_progress = options.get("progress")
    runs = 2 if options.get("ideal", True) else 1
    total = max(1, runs * len(ops.frame))
    state = {"done": 0}

    def progress(k: int) -> None:
        state["done"] += k
        if user_progress is not None and (state["done"] % 64 == 0 or state["done"] == total):
            user_progress(state["done"] / total)

    router = Router(damaged, routing=routing, seed=seed)
    paths = PathTable(router.links["capacity_gbps"].to_numpy(), router.links["latency_us"].to_numpy())
    prep = Preparer(ops, router, paths, algo, damaged, meta, plan_options)
    records: dict = {}
    log = run_engine(workload, prep, router, paths, timing=timing, completion_quantile=quantile, bin_s=bin_s,
                     memoize=memoize, progress=progress, describe=describe, memo=records)
    ideal_log = None
    if options.get("ideal", True):
        ideal_graph = topologies.nonblocking(graph)
        irouter = Router(ideal_graph, routing=routing, seed=seed)
        ipaths = PathTable(irouter.links["capacity_gbps"].to_numpy(), irouter.links["latency_us"].to_numpy())
        iprep = Preparer(ops, irouter, ipaths, algo, ideal_graph, meta, plan_options, plans=prep.plans)
        ideal_log = run_engine(workload, iprep, irouter, ipaths, timing=timing, completion_quantile=quantile,
                               bin_s=None, memoize=memoize, progress=progress, describe=describe,
                               link_stats=False, memo=nvlink_records(records, prep, router))
    if user_progress is not None:
        user_progress(1.0)
    trace_name = options.get("trace_name") or meta.get("name") or meta.get("source") or "trace"
    return Result.build(ops=ops, log=log, ideal=ideal_log, router=router, graph=damaged, damage=damage,
                        trace_name=str(trace_name), world_size=world, timing=timing, algo=algo,
                        routing=routing, seed=seed, wall0=wall0, metrics=metrics,
                        completion_quantile=quantile)
