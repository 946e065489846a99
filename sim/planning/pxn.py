"""PXN in the plan: a send to a peer on another rail goes over NVLink to the sender's server-mate on the
peer's rail first, and leaves from that GPU's NIC (NCCL's PXN, 2.12+; ``NCCL_PXN_DISABLE``).

Rails are read from the fabric: a GPU's *rail* is the network component of its NIC's switch (the
switches connected without passing through a GPU). On ``rail_only`` every rail is its own network, so a
cross-rail send cannot leave from the sender's NIC at all: the plan relays it (``pxn=None``, the default,
relays exactly where the rails require it). ``pxn=True`` also relays every send whose peer has another
local rank, as NCCL does by default on rail-optimized fabrics (rails joined by spines: the send stays on
the peer's rail switch); ``pxn=False`` leaves the plan alone (the router still detours unreachable flows,
inside one flow).

The relayed transfer becomes two: sender -> relay over NVLink, then relay -> peer over the network, the
second after the first; what waited for the original waits for the second.
"""

from __future__ import annotations

import dataclasses
import weakref

import networkx as nx
import numpy as np

from sim.planning.plan import LEG_PATH, TransferPlan, excl_cumsum

__all__ = ["apply_pxn", "network_rails", "pxn_relays"]

_I64 = np.int64
_NET_KINDS = frozenset({"leaf", "spine", "core", "rail", "crossbar"})
_RAILS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def network_rails(graph) -> dict[int, int]:
    """Rail (network component of its NIC's switch) of every GPU slot with a NIC; cached per graph.

    Examples
    --------
    >>> import topologies
    >>> rails = network_rails(topologies.build("rail_only", num_gpus=16))
    >>> rails[0] == rails[8] != rails[1]
    True
    """
    hit = _RAILS.get(graph)
    if hit is not None:
        return hit
    switches = [v for v, d in graph.nodes(data=True) if d.get("kind") in _NET_KINDS]
    comp_of = {}
    for cid, comp in enumerate(nx.connected_components(graph.subgraph(switches))):
        for v in comp:
            comp_of[v] = cid
    out = {}
    for v, d in graph.nodes(data=True):
        if d.get("kind") != "gpu" or not str(v).startswith("gpu"):
            continue
        comps = {comp_of[w] for w in graph.neighbors(v) if w in comp_of}
        if comps:
            out[int(str(v)[3:])] = min(comps)
    _RAILS[graph] = out
    return out


def pxn_relays(src: np.ndarray, dst: np.ndarray, server: dict[int, int], rail: dict[int, int],
               local: dict[int, int] | None = None) -> np.ndarray:
    """Relay GPU of each transfer (``-1``: none): the sender's server-mate on the receiver's rail.

    Parameters
    ----------
    src, dst : ndarray of int
        Global ranks of each transfer.
    server : dict
        Server of every rank of the communicator (relays are taken among them).
    rail : dict
        Rail of every GPU with a NIC (:func:`network_rails`): relay where sender and receiver differ.
    local : dict, optional
        Local rank of every rank: relay instead wherever the local ranks differ, to the server-mate with
        the receiver's local rank (NCCL's PXN on a rail-optimized fabric, whose rails share spines).

    Examples
    --------
    >>> server = {0: 0, 1: 0, 2: 1, 3: 1}
    >>> pxn_relays(np.array([0, 0]), np.array([3, 2]), server, {0: 0, 1: 1, 2: 0, 3: 1}).tolist()
    [1, -1]
    >>> pxn_relays(np.array([0, 0]), np.array([3, 2]), server, {r: 0 for r in range(4)}).tolist()
    [-1, -1]
    >>> pxn_relays(np.array([0]), np.array([3]), server, {r: 0 for r in range(4)}, {0: 0, 1: 1, 2: 0, 3: 1}).tolist()
    [1]
    """
    key = rail if local is None else local
    by_server_rail: dict[tuple[int, int], int] = {}
    for r in sorted(server):
        if r in key and r in rail:
            by_server_rail.setdefault((server[r], key[r]), r)
    out = np.full(len(src), -1, dtype=_I64)
    for i, (a, b) in enumerate(zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), strict=True)):
        if server.get(a) == server.get(b) or a not in key or b not in key or key[a] == key[b]:
            continue
        relay = by_server_rail.get((server[a], key[b]), -1)
        if relay >= 0 and relay != a and rail.get(relay) == rail.get(b, rail.get(relay)):
            out[i] = relay
    return out


def apply_pxn(plan: TransferPlan, relay: np.ndarray) -> TransferPlan:
    """``plan`` with every transfer ``i`` with ``relay[i] >= 0`` split into src -> relay -> dst.

    Examples
    --------
    >>> p = TransferPlan(src=np.array([0], np.int32), dst=np.array([3], np.int32), bytes=np.array([8.0]),
    ...                  channel=np.zeros(1, np.int32), delay_s=np.array([1e-6]), dep_ptr=np.array([0, 0]),
    ...                  dep_idx=np.zeros(0, np.int64), algo="direct", proto="Simple")
    >>> q = apply_pxn(p, np.array([1]))
    >>> q.src.tolist(), q.dst.tolist(), q.dep_idx.tolist(), q.delay_s.tolist()
    ([0, 1], [1, 3], [0], [1e-06, 0.0])
    """
    relay = np.asarray(relay, dtype=_I64)
    hop = relay >= 0
    if not hop.any():
        return plan
    n = len(plan)
    pos = np.arange(n, dtype=_I64) + np.cumsum(hop)  # new index of each transfer (its second leg if relayed)
    first = pos[hop] - 1
    m = n + int(hop.sum())
    old_cnt = np.diff(plan.dep_ptr)
    cnt = np.zeros(m, dtype=_I64)
    cnt[pos] = np.where(hop, 1, old_cnt)
    cnt[first] = old_cnt[hop]
    ptr = excl_cumsum(cnt)
    dep = np.empty(int(ptr[-1]), dtype=_I64)
    owner = np.where(hop, np.zeros(n, _I64), pos)  # where the original dependencies go
    owner[hop] = first
    rows = np.repeat(owner, old_cnt)
    k = np.arange(len(plan.dep_idx), dtype=_I64) - np.repeat(plan.dep_ptr[:-1], old_cnt)
    dep[ptr[rows] + k] = pos[plan.dep_idx]
    dep[ptr[pos[hop]]] = first

    def spread(a, second=None, first_value=None):
        out = np.empty(m, dtype=np.asarray(a).dtype)
        out[pos] = a if second is None else np.where(hop, second, a)
        out[first] = np.asarray(a)[hop] if first_value is None else first_value
        return out

    leg = plan.leg if plan.leg is not None else np.full(n, LEG_PATH, np.int8)
    return dataclasses.replace(
        plan, src=spread(plan.src, relay.astype(plan.src.dtype)), dst=spread(plan.dst, None, relay[hop].astype(plan.dst.dtype)),
        bytes=spread(plan.bytes), channel=spread(plan.channel), delay_s=spread(plan.delay_s, 0.0),
        dep_ptr=ptr, dep_idx=dep, step=None if plan.step is None else spread(plan.step),
        chunk=None if plan.chunk is None else spread(plan.chunk), leg=spread(leg))
