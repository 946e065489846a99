"""PXN in the plan: a send to a peer on another rail goes over NVLink to the sender's server-mate on the
peer's rail first, and leaves from that GPU's NIC (NCCL's PXN, 2.12+; ``NCCL_PXN_DISABLE``).

NCCL's rule for point-to-point sends (``ncclTopoGetNetDev``, ``src/graph/search.cc`` at v2.23.4-1, with
``NCCL_P2P_PXN_LEVEL`` = 2, "use PXN as much as possible to maximize aggregation", the default): a send
to a remote peer uses the NIC local to the GPU of the sender's node that has the *peer's device index*
(its local rank), and that GPU is the proxy (relay) when it is joined to the sender by NVLink (path type
``<= PATH_NVL``: directly or through an NVSwitch) and its NIC is on its PCI switch (``<= PATH_PXB``). The
receiver always receives on its own NIC (``recvSetup`` in ``src/transport/net.cc``: "We don't support PXN
on receive yet"). So a send leaves on the receiver's rail whenever the two local ranks differ. NCCL's
AllToAll, Gather and Scatter are grouped sends and receives and follow the same rule; rings and trees take
the NIC their search put in the graph (``graph`` branch of ``ncclTopoGetNetDev``), and collsim's rings and
trees are rail-aligned already. GDR is not a condition of this choice (``ncclTopoCheckGdr`` then decides,
with the proxy's distance, whether the data path writes GPU memory directly; collsim does not model GDR).

Rails are read from the fabric: a GPU's *rail* is the network component of its NIC's switch (the
switches connected without passing through a GPU). On ``rail_only`` every rail is its own network, so a
cross-rail send cannot leave from the sender's NIC at all: collective plans are relayed there too.

``PlanOptions.pxn``: ``None`` (default) is NCCL's default: point-to-point plans (``direct``) relay by the
rule above, collective plans where the rails require it; ``True`` relays every plan's sends by the rule
above; ``False`` is ``NCCL_PXN_DISABLE=1`` (the router still detours unreachable flows, inside one flow).

The relayed transfer becomes two: sender -> relay over NVLink, then relay -> peer over the network. A
ring's or tree's chunk is stored and forwarded (the second after the first); a direct plan's message
streams through the relay (both at once, :func:`apply_pxn`). What waited for the original waits for the
second, and the second hashes as the sender's own connection (:data:`CONNECTION_STRIDE`).

A streamed pair is marked in the plan (``TransferPlan.stream_next``) and the flow tier runs it as **one
flow** over both legs' links (:func:`merge_streamed`, ``Router.route_via``). NCCL's proxy thread on the
relay (``sendProxyProgress`` in ``src/transport/net.cc``, NCCL master 5067397) hands the sending GPU at
most ``NCCL_STEPS`` (8, ``src/include/device.h``) buffer slots beyond the last network send completed
(``posted < done + maxDepth``), ``isend``s a slot to the network once the GPU's write of it shows in
``recvTail``, and gives the slot back (``sendMem->head = base + done``) only when that send completes; a
slot holds one ``NCCL_P2P_NET_CHUNKSIZE`` chunk (128 KiB, ``src/init.cc``) for p2p. So the NVLink leg is
never more than 8 chunks ahead of the network leg: the pair moves at the slower leg's rate, one flow at
the min rate of both legs' links. Two independent max-min flows are not that pipeline: the NVLink leg
would finish early at its own rate (as if the relay buffered the whole message) and leave its NVLink
links idle while the network leg still drains. The plan's other consumers (the analytical tier, the
reference bound) read the two legs.
"""

from __future__ import annotations

import dataclasses
import weakref

import networkx as nx
import numpy as np

from sim.planning.plan import LEG_PATH, TransferPlan, excl_cumsum
from sim.planning.plan_latency import pxn_store_latency_s
from sim.planning.pxn_rule import pxn_relays

__all__ = ["CONNECTION_STRIDE", "apply_pxn", "merge_streamed", "network_rails", "nvlink_domains", "pxn_relays",
           "relay_plan", "server_mates"]

_I64 = np.int64
#: a relayed network leg's channel is ``channel + CONNECTION_STRIDE * (1 + original sender)``: above NCCL's
#: channel ids (``MAXCHANNELS``, 32 in 2.23, 64 in 2.29), so it names the sender's connection (a channel
#: keys ECMP hashing only)
CONNECTION_STRIDE = 64
_NET_KINDS = frozenset({"leaf", "spine", "core", "rail", "crossbar"})
_RAILS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DOMAINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SERVERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NVLINK_KINDS = frozenset({"gpu", "nvswitch"})
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: relay tables (:func:`_relay_table`): bytes kept per graph, and the largest communicator given one (int32
#: pairs: 4 MiB at 1,024 ranks, 64 MiB at 4,096)
_TABLE_BUDGET_BYTES = 256 << 20
_TABLE_MAX_RANKS = 4096


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


def nvlink_domains(graph) -> dict[int, int]:
    """NVLink domain of every GPU slot: GPUs joined by NVLink, directly or through NVSwitches; cached.

    NCCL relays a send only through a GPU joined to the sender this way (path type ``<= PATH_NVL``).

    Examples
    --------
    >>> import topologies
    >>> dom = nvlink_domains(topologies.build("rail_optimized", num_gpus=16))
    >>> dom[0] == dom[7] != dom[8]
    True
    """
    hit = _DOMAINS.get(graph)
    if hit is not None:
        return hit
    nodes = [v for v, d in graph.nodes(data=True) if d.get("kind") in _NVLINK_KINDS]
    sub = nx.Graph()
    sub.add_nodes_from(nodes)
    sub.add_edges_from((a, b) for a, b, d in graph.subgraph(nodes).edges(data=True)
                       if d.get("kind", "nvlink") == "nvlink")
    out = {}
    for cid, comp in enumerate(nx.connected_components(sub)):
        for v in comp:
            if str(v).startswith("gpu") and graph.nodes[v].get("kind") == "gpu":
                out[int(str(v)[3:])] = cid
    _DOMAINS[graph] = out
    return out


def server_mates(graph, ranks, server: dict[int, int]) -> dict[int, int]:
    """``server`` extended by every GPU of the topology on the server of one of ``ranks``.

    A Send/Recv plan knows only its two ranks; NCCL's relay is a rank of the communicator on the
    sender's node, and nccl-tests' ``sendrecv`` (one world communicator) has every GPU of the server in
    it, so the plan takes the relay among the server's GPUs (a communicator that leaves the relay out
    would send from the sender's own NIC in NCCL: ``ncclTopoDevToRank`` fails, the local NIC stays).

    Examples
    --------
    >>> import topologies
    >>> mates = server_mates(topologies.build("rail_optimized", num_gpus=16), [7, 8], {7: 0, 8: 1})
    >>> sorted(mates) == list(range(16)), mates[0], mates[15]
    (True, 0, 1)
    """
    slots = _gpus_by_server(graph)
    out = dict(server)
    for r in ranks:
        for v in slots.get(graph.nodes[f"gpu{r}"].get("server", r), ()):  # no server: a server of its own
            out.setdefault(v, server[r])
    return out


def _gpus_by_server(graph) -> dict:
    hit = _SERVERS.get(graph)
    if hit is None:
        hit = {}
        for v, d in graph.nodes(data=True):
            if d.get("kind") == "gpu" and str(v).startswith("gpu"):
                slot = int(str(v)[3:])
                hit.setdefault(d.get("server", slot), []).append(slot)
        _SERVERS[graph] = hit
    return hit


def apply_pxn(plan: TransferPlan, relay: np.ndarray, pipelined: bool = False) -> TransferPlan:
    """``plan`` with every transfer ``i`` with ``relay[i] >= 0`` split into src -> relay -> dst.

    By default the network leg waits for the NVLink leg (store and forward: a ring's chunk). With
    ``pipelined`` both legs start together and pay the transfer's delay (a direct plan's whole message:
    NCCL's proxy on the relay sends each 128 KiB chunk, ``NCCL_P2P_NET_CHUNKSIZE``, as it arrives, so the
    message streams through the relay; the network leg also pays the first chunk's store at the relay,
    :func:`sim.planning.plan_latency.pxn_store_latency_s`), and the NVLink leg is marked
    ``stream_next`` (:func:`merge_streamed` makes the pair one flow). Either way, what waited for the
    original waits for the network leg.

    Examples
    --------
    >>> p = TransferPlan(src=np.array([0], np.int32), dst=np.array([3], np.int32), bytes=np.array([8.0]),
    ...                  channel=np.zeros(1, np.int32), delay_s=np.array([1e-6]), dep_ptr=np.array([0, 0]),
    ...                  dep_idx=np.zeros(0, np.int64), algo="direct", proto="Simple")
    >>> q = apply_pxn(p, np.array([1]))
    >>> q.src.tolist(), q.dst.tolist(), q.dep_idx.tolist(), q.delay_s.tolist()
    ([0, 1], [1, 3], [0], [1e-06, 0.0])
    >>> q = apply_pxn(p, np.array([1]), pipelined=True)
    >>> q.src.tolist(), q.dst.tolist(), q.dep_ptr.tolist(), (q.delay_s * 1e6).round(3).tolist(), q.stream_next.tolist()
    ([0, 1], [1, 3], [0, 0, 0], [1.0, 4.4], [True, False])
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
    cnt[pos] = old_cnt if pipelined else np.where(hop, 1, old_cnt)
    cnt[first] = old_cnt[hop]
    ptr = excl_cumsum(cnt)
    dep = np.empty(int(ptr[-1]), dtype=_I64)
    k = np.arange(len(plan.dep_idx), dtype=_I64) - np.repeat(plan.dep_ptr[:-1], old_cnt)
    targets = pos[plan.dep_idx]
    if pipelined:  # both legs wait for what the original waited for
        dep[ptr[np.repeat(pos, old_cnt)] + k] = targets
        firsts = np.zeros(n, dtype=_I64)
        firsts[hop] = first
        mine = np.repeat(hop, old_cnt)
        dep[ptr[np.repeat(firsts, old_cnt)[mine]] + k[mine]] = targets[mine]
    else:
        owner = pos.copy()  # where the original dependencies go: the first leg of a relayed transfer
        owner[hop] = first
        dep[ptr[np.repeat(owner, old_cnt)] + k] = targets
        dep[ptr[pos[hop]]] = first

    rep = np.repeat(np.arange(n, dtype=_I64), hop + 1)   # the original of each new transfer (legs: twice)
    second_pos = pos[hop]

    def spread(a, second=None, first_value=None):
        out = np.asarray(a)[rep]
        if second is not None:
            out[second_pos] = second if np.ndim(second) == 0 else np.asarray(second)[hop]
        if first_value is not None:
            out[first] = first_value
        return out

    leg = plan.leg if plan.leg is not None else np.full(n, LEG_PATH, np.int8)
    stream = spread(np.zeros(n, bool) if plan.stream_next is None else plan.stream_next, None, pipelined)
    # the network leg is the sender's own connection at the relay's proxy (one per sender and channel): its
    # channel, which keys its ECMP hash, says whose it is, so the relayed sends of different senders to one
    # peer do not all hash alike
    connection = np.asarray(plan.channel, _I64) + CONNECTION_STRIDE * (1 + np.asarray(plan.src, _I64))
    return dataclasses.replace(
        plan, src=spread(plan.src, relay.astype(plan.src.dtype)), dst=spread(plan.dst, None, relay[hop].astype(plan.dst.dtype)),
        bytes=spread(plan.bytes), channel=spread(plan.channel, connection.astype(plan.channel.dtype)),
        # a streamed message's network leg starts once its first chunk is stored at the relay
        delay_s=spread(plan.delay_s, plan.delay_s + pxn_store_latency_s()) if pipelined else spread(plan.delay_s, 0.0),
        dep_ptr=ptr, dep_idx=dep, step=None if plan.step is None else spread(plan.step),
        chunk=None if plan.chunk is None else spread(plan.chunk), leg=spread(leg),
        stream_next=stream if stream.any() else None)


def merge_streamed(plan: TransferPlan) -> tuple[TransferPlan, np.ndarray, np.ndarray]:
    """``plan`` with every streamed relay pair (``stream_next``) as one transfer sender -> peer.

    The merged transfer is the network leg with the NVLink leg's sender as its source: its bytes, channel
    (the sender's connection), delay and dependencies; what waited for either leg waits for it.

    Returns
    -------
    plan : TransferPlan
        The merged plan (``stream_next`` cleared; the plan itself when it has no pair).
    relay : ndarray of int64
        Per transfer, the relay GPU its path passes (``-1``: none).
    relay_channel : ndarray of int64
        Per transfer, the channel of its first leg (the NVLink hop's flow key; its own channel where no
        relay).

    Examples
    --------
    >>> p = TransferPlan(src=np.array([0, 5], np.int32), dst=np.array([3, 6], np.int32), bytes=np.array([8.0, 2.0]),
    ...                  channel=np.zeros(2, np.int32), delay_s=np.array([1e-6, 0.0]), dep_ptr=np.array([0, 0, 1]),
    ...                  dep_idx=np.array([0]), algo="direct", proto="Simple")
    >>> q, relay, ch = merge_streamed(apply_pxn(p, np.array([1, -1]), pipelined=True))
    >>> q.src.tolist(), q.dst.tolist(), relay.tolist(), q.dep_idx.tolist(), q.channel.tolist(), ch.tolist()
    ([0, 5], [3, 6], [1, -1], [0], [64, 0], [0, 0])
    """
    n = len(plan)
    stream = np.zeros(n, bool) if plan.stream_next is None else np.asarray(plan.stream_next, bool)
    channel = np.asarray(plan.channel, _I64)
    if not stream.any():
        return plan, np.full(n, -1, _I64), channel
    first = np.flatnonzero(stream)
    second = first + 1
    if second[-1] >= n or stream[second].any() or (plan.src[second] != plan.dst[first]).any():
        raise ValueError("stream_next must mark an NVLink leg followed by its network leg from the relay")
    keep = ~stream
    new = np.cumsum(keep) - 1
    target = new.copy()
    target[first] = new[second]   # a wait for the NVLink leg becomes a wait for the whole message
    counts = np.diff(plan.dep_ptr)
    dep = target[plan.dep_idx[np.repeat(keep, counts)]]
    src = np.asarray(plan.src).copy()
    src[second] = plan.src[first]
    relay = np.full(n, -1, _I64)
    relay[second] = plan.dst[first]
    first_channel = channel.copy()
    first_channel[second] = channel[first]

    def kept(a):
        return None if a is None else np.asarray(a)[keep]

    merged = dataclasses.replace(
        plan, src=src[keep], dst=kept(plan.dst), bytes=kept(plan.bytes), channel=kept(plan.channel),
        delay_s=kept(plan.delay_s), dep_ptr=excl_cumsum(counts[keep]), dep_idx=dep.astype(_I64),
        step=kept(plan.step), chunk=kept(plan.chunk), leg=kept(plan.leg), stream_next=None,
        rate_cap_bytes_per_s=kept(plan.rate_cap_bytes_per_s))   # the network leg's: the sender's connection
    return merged, relay[keep], first_channel[keep]


def relay_plan(plan: TransferPlan, server: dict[int, int], graph, mode: bool | None) -> TransferPlan:
    """``plan`` with PXN relays where ``mode`` (``PlanOptions.pxn``) and the fabric ask for them.

    Point-to-point plans (``direct``) follow NCCL's p2p rule (``NCCL_P2P_PXN_LEVEL=2``) unless ``mode``
    is False, every plan does with ``mode=True``; otherwise, and where that rule finds no relay, a send
    is relayed only where the rails require it. Relays are taken among the ranks of ``server`` (rank ->
    server); without a graph, or on one server, the plan is returned as it is.

    Examples
    --------
    >>> import topologies
    >>> g = topologies.build("leaf_spine", num_gpus=16)
    >>> p = TransferPlan(src=np.array([7], np.int32), dst=np.array([8], np.int32), bytes=np.array([8.0]),
    ...                  channel=np.zeros(1, np.int32), delay_s=np.zeros(1), dep_ptr=np.array([0, 0]),
    ...                  dep_idx=np.zeros(0, np.int64), algo="direct", proto="Simple")
    >>> server = {r: r // 8 for r in range(16)}
    >>> relay_plan(p, server, g, None).src.tolist(), relay_plan(p, server, g, False).src.tolist()
    ([7, 0], [7])
    """
    if mode is False or graph is None or len(plan) == 0 or len(set(server.values())) < 2:
        return plan
    use_p2p = bool(mode or plan.algo == "direct")
    table = _relay_table(graph, server, use_p2p, len(plan)) if len(server) <= _TABLE_MAX_RANKS else None
    if table is not None:
        lut, pairs = table
        last = len(lut) - 1   # lut[-1] and lut[last] name the padding row and column: no relay
        si = lut[np.clip(np.asarray(plan.src, _I64), -1, last)]
        di = lut[np.clip(np.asarray(plan.dst, _I64), -1, last)]
        relay = pairs[si, di].astype(_I64)
    else:
        relay = _relays(plan.src, plan.dst, server, graph, use_p2p)
    return apply_pxn(plan, relay, pipelined=plan.algo == "direct")


def _relays(src, dst, server: dict[int, int], graph, use_p2p: bool) -> np.ndarray:
    """Relay of each transfer ``src[i] -> dst[i]``: NCCL's p2p rule (``use_p2p``), else the rails' need."""
    rails = network_rails(graph)
    relay = pxn_relays(src, dst, server, rails)   # where the rails require it
    if use_p2p:
        local = {r: int(graph.nodes[f"gpu{r}"].get("local_rank", 0)) for r in server}
        p2p = pxn_relays(src, dst, server, rails, local, nvlink_domains(graph))
        relay = np.where(p2p >= 0, p2p, relay)
    return relay


def _relay_table(graph, server: dict[int, int], use_p2p: bool, transfers: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Relay of every (sender, receiver) pair of ``server``'s ranks, computed once per communicator.

    A transfer's relay (:func:`pxn_relays`) is a function of its own two ranks, the communicator's rank ->
    server map and the graph's rails, local ranks and NVLink domains only, and is ``-1`` whenever either
    rank is outside ``server``; so one table per (graph, ``server`` items, rule) serves every op of the
    communicator. Returns ``lut`` (global rank -> table index; the padding index ``n`` for ranks beyond
    the communicator, also at ``lut[-1]``) and ``pairs`` (``(n + 1) x (n + 1)`` int32; ``-1``: no relay,
    the padding row and column all ``-1``); None (compute per op) the first time a communicator is seen
    with fewer ``transfers`` than pairs, as the table would cost more than the op.
    """
    per_graph = _TABLES.get(graph)
    if per_graph is None:
        per_graph = _TABLES[graph] = {}
    key = (tuple(server.items()), use_p2p)
    hit = per_graph.get(key, False)
    if hit:
        return hit
    n = len(server)
    if transfers < n * n and hit is False:
        per_graph[key] = None   # seen once (a marker, no table)
        return None
    ranks = np.fromiter(server.keys(), dtype=_I64, count=n)
    lut = np.full(int(max(ranks.max(), 0)) + 2, n, dtype=_I64)
    lut[ranks] = np.arange(n, dtype=_I64)
    pairs = np.full((n + 1, n + 1), -1, dtype=np.int32)
    pairs[:n, :n] = _relays(np.repeat(ranks, n), np.tile(ranks, n), server, graph, use_p2p).reshape(n, n)
    tables = [k for k, v in per_graph.items() if v]
    while tables and sum(per_graph[k][1].nbytes for k in tables) + pairs.nbytes > _TABLE_BUDGET_BYTES:
        per_graph[tables.pop(0)] = None   # bound the memory: drop the oldest communicator's table
    per_graph[key] = (lut, pairs)
    return lut, pairs
