"""Preparing ops for the engine: each op instance planned (:mod:`sim.planning`) and routed
(:class:`topologies.routing.Router`) into a :class:`sim.engine.prepared.PreparedOp`.

This is the replay layer's side of the engine's narrow interface: plans and routes are made here, once
per op identity (:func:`op_keys`), and handed to :class:`sim.engine.engine.Engine` as values.
"""

from __future__ import annotations

import gc
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from sim.engine.csr import reverse_csr
from sim.engine.memo import Record
from sim.engine.paths import path_latency_s
from sim.engine.prepared import PreparedOp
from sim.engine.workload import OpTable
from sim.planning.plan_latency import paid_path_latency_s

__all__ = ["KEEP_PLAN_TRANSFERS", "LazyOps", "Plans", "Preparer", "binding_caps", "flow_key_base", "nvlink_records", "op_classes",
           "op_keys", "plan_op", "plan_p2p", "run_engine", "switch_leg_links"]


#: plans of more transfers than this are not kept between the reference bound and the replay (made again)
KEEP_PLAN_TRANSFERS = 1 << 14


def flow_key_base(comm: str) -> int:
    """A stable per-communicator hash (crc32 of the name, 30 bits): NCCL opens its own connections (source
    ports) per communicator, so ECMP hashes each communicator's flows apart. Both tiers route with it.

    Examples
    --------
    >>> flow_key_base("ep") == flow_key_base("ep") != flow_key_base("tp0")
    True
    """
    return zlib.crc32(comm.encode()) & 0x3FFFFFFF


class Plans(dict):
    """Transfer plans by op key, shared by the runs of one replay (the real fabric and the ideal
    reference): a plan is dropped once ``uses`` runs have taken the last op of its key.

    Examples
    --------
    >>> p = Plans(2); p["k"] = "plan"; p.done("k"); "k" in p
    True
    >>> p.done("k"); "k" in p
    False
    """

    def __init__(self, uses: int = 1) -> None:
        super().__init__()
        self.uses = int(uses)
        self.taken: Counter = Counter()

    def done(self, key) -> None:
        """One run has taken the last op of ``key``."""
        self.taken[key] += 1
        if self.taken[key] >= self.uses:
            self.pop(key, None)


class Preparer:
    """``prepare(op_id) -> PreparedOp`` with plans and routes cached per op identity.

    The prepared op carries its paths (links per sub-flow) and their latencies; the engine keeps its own
    table of them.

    Parameters
    ----------
    ops : OpTable
    router : topologies.routing.Router
    algo : str
        ``auto``, ``ring``, ``tree`` or ``direct``.
    graph : networkx.Graph
        The topology (for the planner's view of servers and links).
    meta : dict
        Trace metadata (rings per communicator, gpus_per_node).
    plan_options : dict
        Extra keyword arguments of ``plan_collective`` (e.g. ``channels``).
    plans : dict or Plans, optional
        Plans shared with another preparer (the ideal reference shares the real run's).
    plan_uses : int
        Runs that will take every op (1, or 2 with the ideal reference): with a :class:`Plans` made here,
        a plan is dropped after its key's last op in the last of them.
    """

    def __init__(self, ops: OpTable, router, algo: str, graph: nx.Graph, meta: Mapping,
                 plan_options: Mapping[str, Any] | None = None, plans: dict | None = None,
                 plan_uses: int = 1) -> None:
        self.ops = ops
        self.router = router
        self._latency_us = router.links["latency_us"].to_numpy(np.float64)
        self._capacity_bytes_per_s = router.links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
        self.algo = algo
        self.graph = graph
        self.meta = meta
        self.plan_options = dict(plan_options or {})
        self.cache: dict[Any, PreparedOp] = {}
        self.keys = op_keys(ops, algo)
        self._records = ops.frame.to_dict("records")
        self._switch_links: dict = {}
        self._comm_sizes: dict[str, int] = {}
        # plans depend on the graph only through servers and per-GPU link rates, which the ideal fabric
        # keeps: the real and the ideal run share them
        self.plans: dict = Plans(plan_uses) if plans is None else plans
        self._left = Counter(self.keys)   # ops of each key not taken yet (take())

    def __call__(self, op: int) -> PreparedOp:
        key = self.keys[op]
        hit = self.cache.get(key)
        if hit is None:
            hit = self._prepare(op)
            self.cache[key] = hit
        return hit

    def take(self, op: int) -> PreparedOp:
        """``self(op)`` for an engine that asks once per op: a prepared op leaves the cache with the last
        op of its key, so the cache holds only what later ops will use."""
        prep = self(op)
        key = self.keys[op]
        self._left[key] -= 1
        if self._left[key] <= 0:
            self.cache.pop(key, None)
            if isinstance(self.plans, Plans):
                self.plans.done(key)
        return prep


    def plan(self, op: int, **overrides: Any):
        """The transfer plan of op ``op`` (kept per op key until the run takes the key's last op).

        With ``overrides`` (plan options, e.g. ``pxn=False``) a plan is made and not kept."""
        rec = self._records[op]
        plan = None if overrides else self.plans.get(self.keys[op])
        if plan is None:
            options = {**self.plan_options, **overrides}
            if rec["kind"] == "p2p":
                plan = plan_p2p(rec, self.algo, self.graph, options, self.comm_size(rec["comm"]))
            else:
                plan = plan_op(rec, self.ops.splits[op], self.algo, self.graph, self.meta, options)
            if not overrides:
                self.plans[self.keys[op]] = plan
        return plan

    def comm_size(self, comm: str) -> int:
        """Ranks of communicator ``comm``: the trace metadata's list, else every rank its ops name (as
        :func:`sim.engine.workload.build_ops` takes them); a Send/Recv plan's NCCL channels depend on it."""
        sizes = self._comm_sizes
        if comm not in sizes:
            listed = (self.meta.get("comms") or {}).get(comm)
            if listed is not None:
                sizes[comm] = len(listed)
            else:
                f = self.ops.frame
                mine = f[f["comm"] == comm]
                ranks = set(mine["src"][mine["kind"] == "p2p"].tolist()) | set(mine["dst"][mine["kind"] == "p2p"].tolist())
                for m in mine["members"][mine["kind"] != "p2p"]:
                    ranks.update(np.asarray(m).tolist())
                sizes[comm] = max(2, len(ranks))
        return sizes[comm]

    def _prepare(self, op: int) -> PreparedOp:
        from sim.planning.pxn import merge_streamed

        rec = self._records[op]
        # a streamed PXN relay is one flow sender -> relay -> peer (sim.planning.pxn, "one flow")
        plan, relay, relay_channel = merge_streamed(self.plan(op))
        src, dst = np.asarray(plan.src, np.int64), np.asarray(plan.dst, np.int64)
        nbytes = np.asarray(plan.bytes, np.float64)
        channel = np.asarray(plan.channel, np.int64)
        delay = np.asarray(plan.delay_s, np.float64)
        dep_ptr, dep_idx = np.asarray(plan.dep_ptr, np.int64), np.asarray(plan.dep_idx, np.int64)
        algo, proto = str(plan.algo), str(plan.proto)
        n = len(src)
        rev_ptr, rev_idx = reverse_csr(dep_ptr, dep_idx, n)
        dep_count = np.diff(dep_ptr).astype(np.int64)
        flow_key = flow_key_base(str(rec["comm"])) + channel
        # NVLS legs (GPU -> its NVSwitch, NVSwitch -> GPU) take one NVLink link; src == dst marks them
        leg = getattr(plan, "leg", None)
        is_leg = np.zeros(n, dtype=bool) if leg is None else np.asarray(leg) != 0
        routed = (src != dst) & ~is_leg
        routes = None
        if (relay[routed] >= 0).any():
            base = flow_key_base(str(rec["comm"]))
            routes = self.router.route_via(src[routed], relay[routed], dst[routed], base + relay_channel[routed],
                                           flow_key[routed])
        elif routed.any():
            routes = self.router.route(src[routed], dst[routed], flow_key[routed])
        # sub-flows: one per route sub-flow; a leg or a local copy (src == dst) is one sub-flow
        sub_count = np.ones(n, dtype=np.int64)
        if routes is not None:
            sub_count[routed] = np.diff(np.asarray(routes.sub_ptr, np.int64))
        sub_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sub_count, out=sub_ptr[1:])
        n_sub = int(sub_ptr[-1])
        sub_transfer = np.repeat(np.arange(n, dtype=np.int64), sub_count)
        sub_bytes = np.zeros(n_sub)
        sub_lat = np.zeros(n_sub)
        sub_links = np.zeros(n_sub, dtype=np.int64)
        remote_sub = routed[sub_transfer]
        leg_sub = is_leg[sub_transfer]
        if routes is not None:
            frac = np.asarray(routes.fraction, np.float64)
            link_ptr, r_links = np.asarray(routes.link_ptr, np.int64), np.asarray(routes.link_idx, np.int64)
            sub_lat[remote_sub] = path_latency_s(link_ptr, r_links, self._latency_us)
            sub_bytes[remote_sub] = nbytes[sub_transfer[remote_sub]] * frac
            sub_links[remote_sub] = np.diff(link_ptr)
        leg_links = np.zeros(0, np.int64)
        if leg_sub.any():
            t = sub_transfer[leg_sub]
            leg_links = switch_leg_links(self.router, src[t], np.asarray(leg)[t], self._switch_links)
            sub_lat[leg_sub] = self._latency_us[leg_links] * 1e-6
            sub_bytes[leg_sub] = nbytes[t]
            sub_links[leg_sub] = 1
        # a local copy (no links) moves no network bytes: it costs its software delay only
        sub_link_ptr = np.zeros(n_sub + 1, dtype=np.int64)
        np.cumsum(sub_links, out=sub_link_ptr[1:])
        link_idx = np.zeros(int(sub_link_ptr[-1]), dtype=np.int64)
        if routes is not None:
            counts = np.diff(link_ptr)
            pos = np.repeat(sub_link_ptr[:-1][remote_sub] - (link_ptr[:-1] - link_ptr[0]), counts)
            link_idx[pos + np.arange(int(counts.sum()))] = r_links[link_ptr[0]:link_ptr[-1]]
        link_idx[sub_link_ptr[:-1][leg_sub]] = leg_links
        footprint = np.unique(link_idx).astype(np.int64)
        # NCCL's step latencies include the wire: a step pays only the propagation beyond its delay, a
        # pipelined chunk none (sim.planning.plan_latency.paid_path_latency_s)
        chunk = getattr(plan, "chunk", None)
        sub_lat = paid_path_latency_s(sub_lat, delay[sub_transfer],
                                      None if chunk is None else np.asarray(chunk)[sub_transfer])
        sub_cap = binding_caps(getattr(plan, "rate_cap_bytes_per_s", None), sub_transfer, sub_link_ptr, link_idx,
                               self._capacity_bytes_per_s)
        return PreparedOp(algo=algo, proto=proto, delay_s=delay, dep_count=dep_count, rev_ptr=rev_ptr,
                          rev_idx=rev_idx, sub_ptr=sub_ptr, sub_bytes=sub_bytes, sub_latency_s=sub_lat,
                          sub_transfer=sub_transfer, src=src, dst=dst, sub_link_ptr=sub_link_ptr,
                          sub_link_idx=link_idx, footprint=footprint, sub_cap_bytes_per_s=sub_cap)


def binding_caps(cap: np.ndarray | None, sub_transfer: np.ndarray, sub_link_ptr: np.ndarray,
                 sub_link_idx: np.ndarray, capacity_bytes_per_s: np.ndarray) -> np.ndarray | None:
    """Per sub-flow, its transfer's rate ceiling (bytes/s; the transfer's sub-flows share it), where it
    can bind; ``None`` where none can.

    A transfer never moves faster than the sum over its sub-flows of their paths' slowest links, so a
    ceiling at or above that sum is dropped: the run is then exactly the run without it.

    Examples
    --------
    >>> binding_caps(np.array([5.0, 50.0]), np.array([0, 1]), np.array([0, 1, 2]), np.array([0, 0]),
    ...              np.array([10.0])).tolist()
    [5.0, inf]
    """
    if cap is None or not len(sub_transfer):
        return None
    cap = np.asarray(cap, np.float64)[sub_transfer]
    deg = np.diff(sub_link_ptr)
    slowest = np.full(len(deg), np.inf)
    has = deg > 0
    if has.any():
        per_link = np.asarray(capacity_bytes_per_s, np.float64)[sub_link_idx[sub_link_ptr[0]:sub_link_ptr[-1]]]
        slowest[has] = np.minimum.reduceat(per_link, sub_link_ptr[:-1][has] - sub_link_ptr[0])
    bound = np.bincount(sub_transfer, weights=np.where(has, slowest, 0.0), minlength=int(sub_transfer.max()) + 1)
    cap = np.where(has & (cap < bound[sub_transfer]), cap, np.inf)
    return cap if np.isfinite(cap).any() else None


def switch_leg_links(router, gpus: np.ndarray, legs: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """Link of each NVLS leg: GPU -> its NVSwitch (leg 1) or NVSwitch -> GPU (leg 2)
    (``sim.planning.plan.LEG_UP`` / ``LEG_DOWN``).

    Raises
    ------
    sim.errors.SimError
        A GPU with no NVSwitch (a plan made for another topology).
    """
    from sim.errors import SimError

    cache = {} if cache is None else cache
    out = np.empty(len(gpus), dtype=np.int64)
    for i, (g, leg) in enumerate(zip(np.asarray(gpus).tolist(), np.asarray(legs).tolist(), strict=True)):
        key = (g, leg)
        if key not in cache:
            node = f"gpu{g}"
            nvs = [v for v in router.graph.neighbors(node) if router.graph.nodes[v].get("kind") == "nvswitch"]
            if not nvs:
                raise SimError(f"{router.name}: {node} has no NVSwitch for an NVLS transfer")
            cache[key] = router.link_id[(node, nvs[0]) if leg == 1 else (nvs[0], node)]
        out[i] = cache[key]
    return out


class LazyOps(Sequence):
    """The prepared ops of a run, prepared when the engine first asks (:meth:`Preparer.take`).

    Parameters
    ----------
    preparer : Preparer
    n_ops : int
    """

    def __init__(self, preparer: Preparer, n_ops: int) -> None:
        self.preparer = preparer
        self.n_ops = n_ops

    def __len__(self) -> int:
        return self.n_ops

    def __getitem__(self, op):
        if isinstance(op, slice):
            return [self[i] for i in range(*op.indices(self.n_ops))]
        return self.preparer.take(int(op))


def plan_op(rec: Mapping, split: np.ndarray | None, algo: str, graph: nx.Graph, meta: Mapping,
            options: Mapping[str, Any]):
    """:func:`sim.planning.collectives.plan_collective` for one collective op instance (ring orders from the
    trace metadata when it logged them)."""
    from sim.planning.collectives import plan_collective

    rings = (meta.get("rings") or {}).get(rec["comm"])
    return plan_collective(rec["op"], int(rec["rank_bytes"]), rec["members"], algo=algo, root=int(rec["root"]),
                           split_bytes=split, rings=rings, graph=graph, **options)


def plan_p2p(rec: Mapping, algo: str, graph: nx.Graph, options: Mapping[str, Any], comm_nranks: int | None = None):
    """:func:`sim.planning.collectives.plan_collective` for a matched Send/Recv pair (of a communicator of
    ``comm_nranks`` ranks)."""
    from sim.planning.collectives import plan_collective

    return plan_collective("Send", int(rec["rank_bytes"]), [int(rec["src"]), int(rec["dst"])], algo=algo,
                           graph=graph, comm_nranks=comm_nranks, **options)


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


def op_classes(ops: OpTable, algo: str, meta: Mapping) -> list:
    """Traffic class of each op (:attr:`sim.engine.workload.Workload.op_class`): its :func:`op_keys` key with
    the communicator's name replaced by what the plan depends on, its members in order and its logged ring
    orders. Ops of one class make the same plan; their routes differ only through the communicator's ECMP
    hash (:func:`flow_key_base`), which the engine checks by comparing the prepared ops.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"kind": ["coll"] * 3, "comm": ["a", "b", "c"], "op": ["AllReduce"] * 3,
    ...                   "rank_bytes": [8] * 3, "root": [-1] * 3, "src": [-1] * 3, "dst": [-1] * 3,
    ...                   "members": [np.array([0, 1]), np.array([0, 1]), np.array([2, 3])]})
    >>> c = op_classes(OpTable(f, [None] * 3, {}), "auto", {})
    >>> c[0] == c[1] != c[2]
    True
    """
    rings = meta.get("rings") or {}
    out = []
    for key, comm, members in zip(op_keys(ops, algo), ops.frame["comm"], ops.frame["members"], strict=True):
        ring = rings.get(comm)
        ring_key = None if ring is None else repr(ring)
        out.append((key[0], tuple(np.asarray(members).tolist()), ring_key, *key[2:]))
    return out


def nvlink_records(records: Mapping, preparer: Preparer, router) -> dict:
    """Records of ops that used NVLink only, for the ideal run (durations only).

    The non-blocking reference keeps every NVLink cable as it is, and plans are shared, so an op that
    crosses no network link runs the same on both fabrics: its isolated duration carries over exactly.
    The ideal run keeps no link statistics or flow log, so only the duration is kept.
    """
    kinds = router.links["kind"].to_numpy()
    out = {}
    for key, rec in records.items():
        fp = rec.footprint
        if fp is None:   # a record made without its footprint: the prepared op has it
            prep = preparer.cache.get(key)
            fp = None if prep is None else prep.footprint
        if fp is None or len(fp) == 0:
            continue
        if (kinds[fp] == "nvlink").all():
            out[key] = Record.slim(rec.duration_s, fp)
    return out


def run_engine(workload, preparer: Preparer, router, *, timing: str, completion_quantile: float,
               bin_s: float | None, memoize: bool, progress=None, label=None, link_stats: bool = True,
               memo: dict | None = None, processes=(), flows: str | None = None, sinks=()):
    """One replay of ``workload`` over the routes of ``router``: ops prepared as they start, the engine run.

    Flows are streamed, not kept: with ``link_stats`` (the real fabric) incast is detected as flows
    finish (:class:`sim.results.incast_stream.IncastStream`, the log's ``incast``) and the log keeps a
    bounded sample of the flows (for ``timeline.json``); the ideal reference keeps none. ``flows``
    (``keep`` / ``sample`` / ``none``) overrides that; ``sinks`` receive every finished flow too.

    Returns
    -------
    sim.engine.engine.EngineLog
    """
    from sim.engine.engine import Engine
    from sim.network.flow_network import FlowNetwork
    from sim.results.incast_stream import IncastStream

    cap = router.links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    prepared = LazyOps(preparer, workload.n_ops)   # prepared as ops start, dropped after their key's last
    names = list(zip(router.links["src"].astype(str), router.links["dst"].astype(str), strict=True))
    # the engine reads each advance's last_finish_s: no per-flow times kept over the whole run
    net = FlowNetwork(cap, completion_quantile=completion_quantile, keep_flow_times=False)
    engine = Engine(workload, prepared, net, timing=timing,
                    bin_s=bin_s, memoize=memoize, memo=memo, link_stats=link_stats, progress=progress,
                    label=label, processes=processes, link_names=names,
                    flows=flows or ("sample" if link_stats else "none"),
                    sinks=[*([IncastStream(router.links, preparer.graph)] if link_stats else []), *sinks])
    log = engine.run()
    # the engine, its network and clock point at each other (callbacks): collect them now, before the
    # next run allocates its own, so two runs' per-flow arrays never coexist
    del engine
    gc.collect()
    return log
