"""Preparing ops for the engine: each op instance planned (:mod:`sim.planning`) and routed
(:class:`topologies.routing.Router`) into a :class:`sim.engine.prepared.PreparedOp`.

This is the replay layer's side of the engine's narrow interface: plans and routes are made here, once
per op identity (:func:`op_keys`), and handed to :class:`sim.engine.engine.Engine` as values. The op
identities are :mod:`sim.op_identity`, the rate ceilings and NVLS links :mod:`sim.prepared_links`, the run
of the engine :mod:`sim.replay_run` (re-exported here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np

from sim.engine.csr import reverse_csr
from sim.engine.paths import path_latency_s
from sim.engine.prepared import PreparedOp
from sim.engine.workload import OpTable
from sim.op_identity import flow_key_base, op_classes, op_keys
from sim.planning.plan_latency import paid_path_latency_s
from sim.prepared_links import binding_caps, switch_leg_links
from sim.replay_run import LazyOps, nvlink_records, run_engine

#: plans of more transfers than this are not kept between the reference bound and the replay (made again)
KEEP_PLAN_TRANSFERS = 1 << 14


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

    def collective(self, op: int) -> str:
        """NCCL's name of op ``op``'s collective (``Send`` for a point-to-point op), as the tuner takes it."""
        rec = self._records[op]
        return "Send" if rec["kind"] == "p2p" else str(rec["op"])

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


__all__ = ["KEEP_PLAN_TRANSFERS", "LazyOps", "Plans", "Preparer", "binding_caps", "flow_key_base", "nvlink_records",
           "op_classes", "op_keys", "plan_op", "plan_p2p", "run_engine", "switch_leg_links"]
