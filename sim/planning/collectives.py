"""Collective decomposition: op × algorithm → :class:`TransferPlan` (pure functions, no network).

A plan is a DAG of point-to-point transfers. Transfer ``i`` moves ``bytes[i]`` from GPU ``src[i]`` to GPU
``dst[i]`` on NCCL channel ``channel[i]``; it may start once every transfer in
``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` has finished, and then pays ``delay_s[i]`` of software latency before
its bytes move. Transfers are listed in a topological order (every dependency has a smaller index).

Shapes (``n`` ranks, ``K`` channels, ``C`` chunks; see ``docs/collectives.md``):

========================  ===============================================  ==================
op / algorithm            transfers                                        bytes each
========================  ===============================================  ==================
AllReduce ring            K · 2(n−1) steps · n ranks · C                   S / (K·n·C)
AllGather / ReduceScatter K · (n−1) · n · C                                S_rank / (K·C)
Broadcast / Reduce ring   K · (n−1) hops · C  (a chain from / to the root)  S / (K·C)
AllReduce tree            K · 2(n−1) tree edges (up + down) · C            S / (K·C)
AllToAll direct           n(n−1) pairs (non-zero ones) · parts             split[i][j] / parts
Send/Recv, Gather/Scatter 1 or n−1 transfers · parts                       S / parts
========================  ===============================================  ==================

Pipelining: a rank's sends on one channel form a chain in NCCL's kernel order, and a forwarded chunk
waits for its arrival. On a ring, step ``s`` chunk ``c`` from rank ``p`` depends on step ``s−1`` chunk
``c`` from rank ``p−1`` (the data it forwards) and on ``p``'s previous send (chunk ``c−1`` of the same
step, or the last chunk of step ``s−1``), which stands in for NCCL's slot flow control. Trees and chains
do the same per edge. Only chunk 0 of each step pays the step latency (later chunks are pipelined
behind it) and every transfer without dependencies also pays the launch (base) latency.

Zero bytes (or a one-rank communicator) give an empty plan: NCCL returns at once for count 0, so the
engine should complete an empty plan when it starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.errors import SimError
from sim.planning import logical, nvls, p2p, pat_nvls, pxn, tuning
from sim.planning.machine import graph_cost_model, graph_machine, graph_nccl_version
from sim.planning.options import PlanOptions
from sim.planning.plan import Edges, TransferPlan, assemble, excl_cumsum

__all__ = ["PlanOptions", "TransferPlan", "graph_cost_model", "graph_machine", "plan_collective", "split_matrix"]

_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Send", "Recv",
        "Gather", "Scatter")
_ROOTED = ("Broadcast", "Reduce", "Gather", "Scatter")
_I32 = np.int32
_I64 = np.int64



# --- rings ------------------------------------------------------------------------------------------------

def _ring_edges(rings: np.ndarray, nsteps: int, step_bytes: float, step_delay_s: float) -> Edges:
    """Every step, every rank sends to its ring successor; step s forwards what arrived at step s−1."""
    k, n = rings.shape
    s, ch, p = (a.reshape(-1) for a in np.meshgrid(np.arange(nsteps), np.arange(k), np.arange(n),
                                                   indexing="ij"))
    has_pred = s >= 1  # edge id is (s * k + ch) * n + p, the meshgrid order
    pred_idx = (((s - 1) * k + ch) * n + (p - 1) % n)[has_pred]
    prev = np.where(has_pred, ((s - 1) * k + ch) * n + p, -1)
    return Edges(src=rings[ch, p], dst=rings[ch, (p + 1) % n], channel=ch, step=s,
                  bytes=np.full(len(s), float(step_bytes)), delay_s=np.full(len(s), step_delay_s),
                  pred_ptr=excl_cumsum(has_pred.astype(_I64)), pred_idx=pred_idx.astype(_I64),
                  prev=prev.astype(_I64), pos=p)


def _chain_edges(orders: np.ndarray, hop_bytes: float, hop_delay_s: float) -> Edges:
    """A pipelined chain along each channel's order: hop h forwards what hop h−1 delivered."""
    k, n = orders.shape
    h, ch = (a.reshape(-1) for a in np.meshgrid(np.arange(n - 1), np.arange(k), indexing="ij"))
    has_pred = h >= 1
    pred_idx = ((h - 1) * k + ch)[has_pred]
    return Edges(src=orders[ch, h], dst=orders[ch, h + 1], channel=ch, step=h,
                  bytes=np.full(len(h), float(hop_bytes)), delay_s=np.full(len(h), hop_delay_s),
                  pred_ptr=excl_cumsum(has_pred.astype(_I64)), pred_idx=pred_idx.astype(_I64),
                  prev=np.full(len(h), -1, _I64), pos=h)


# --- trees ------------------------------------------------------------------------------------------------

def _tree_edges(ranks: np.ndarray, parents: list[np.ndarray], server: np.ndarray, ch_bytes: float,
                proto: str, model: tuning.CostModel | None = None) -> Edges:
    """Reduce up every channel's tree, then broadcast down it, chunk by chunk."""
    src, dst, chan, step, delay, preds = [], [], [], [], [], []
    offset = 0
    for ch, parent in enumerate(parents):
        n = len(parent)
        children: list[list[int]] = [[] for _ in range(n)]
        for v in range(n):
            if parent[v] >= 0:
                children[parent[v]].append(v)
        depth = np.zeros(n, dtype=_I64)
        order = []  # BFS from the root: parents before children
        root = int(np.flatnonzero(parent < 0)[0])
        queue = deque([root])
        while queue:
            v = queue.popleft()
            order.append(v)
            for w in children[v]:
                depth[w] = depth[v] + 1
                queue.append(w)
        height = np.zeros(n, dtype=_I64)
        for v in reversed(order):
            if children[v]:
                height[v] = 1 + max(height[w] for w in children[v])
        top = int(height[root])
        non_root = [v for v in order if v != root]
        up_id = {v: offset + i for i, v in enumerate(non_root)}
        down_id = {v: offset + len(non_root) + i for i, v in enumerate(non_root)}
        for v in non_root:  # up: v -> parent, after every child of v delivered
            src.append(ranks[v])
            dst.append(ranks[parent[v]])
            step.append(height[v])
            preds.append([up_id[w] for w in children[v]])
        for v in non_root:  # down: parent -> v, after the parent got it (the root: after the reduction)
            p = int(parent[v])
            src.append(ranks[p])
            dst.append(ranks[v])
            step.append(top + depth[p])
            preds.append([up_id[w] for w in children[p]] if p == root else [down_id[p]])
        for a, b in ((v, parent[v]) for v in non_root):
            delay.append(tuning.tree_hop_latency_s(proto, bool(server[a] != server[b]), model))
        delay.extend(delay[-len(non_root):] if non_root else [])
        chan.extend([ch] * (2 * len(non_root)))
        offset += 2 * len(non_root)
    counts = np.array([len(p) for p in preds], dtype=_I64)
    flat = np.array([x for p in preds for x in p], dtype=_I64)
    m = len(src)
    return Edges(src=np.array(src, _I64), dst=np.array(dst, _I64), channel=np.array(chan, _I64),
                  step=np.array(step, _I64), bytes=np.full(m, float(ch_bytes)), delay_s=np.array(delay),
                  pred_ptr=excl_cumsum(counts), pred_idx=flat, prev=np.full(m, -1, _I64),
                  pos=np.arange(m, dtype=_I64))


# --- direct -----------------------------------------------------------------------------------------------

def _direct(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, parts: int, server: dict[int, int],
            proto: str, algo: str) -> TransferPlan:
    """Independent transfers, each split over ``parts`` channels.

    A network transfer runs Simple whatever ``proto`` says: NCCL allocates no LL buffers for p2p network
    connections (``NCCL_ALLOC_P2P_NET_LL_BUFFERS`` = 0, ``src/init.cc``; the shared p2p buffers of
    ``src/transport/net.cc`` are Simple's), and ``addP2pToPlan`` takes LL only where the connection has
    them (``protoLL &= buffs[NCCL_PROTO_LL] != nullptr``, ``src/enqueue.cc``; 2.19 - 2.29). So it pays
    Simple's latency and wire bytes (:func:`_wire_bytes`); NVLink pairs keep ``proto``.
    """
    keep = nbytes > 0
    src, dst, nbytes = src[keep], dst[keep], nbytes[keep].astype(np.float64)
    m = len(src) * parts
    s = np.repeat(src, parts)
    d = np.repeat(dst, parts)
    inter = np.array([server.get(int(a), a) != server.get(int(b), b) for a, b in zip(src, dst, strict=True)],
                     dtype=bool)
    if len(inter) and inter.all():
        proto = "Simple"   # every transfer crosses the network (a Send/Recv between servers): label it so
    lat = np.where(inter, tuning.p2p_latency_s("Simple", True), tuning.p2p_latency_s(proto, False))
    return TransferPlan(src=s.astype(_I32), dst=d.astype(_I32), bytes=np.repeat(nbytes / parts, parts),
                        channel=np.tile(np.arange(parts, dtype=_I32), len(src)),
                        delay_s=np.repeat(lat, parts), dep_ptr=np.zeros(m + 1, _I64),
                        dep_idx=np.zeros(0, _I64), algo=algo, proto=proto, step=np.zeros(m, _I32),
                        chunk=np.zeros(m, _I32))


# --- inputs -----------------------------------------------------------------------------------------------

def split_matrix(split_bytes, nbytes: float, n: int) -> np.ndarray:
    """The ``n x n`` AllToAll byte matrix: ``split_bytes`` checked, or ``nbytes`` to every peer; zero diagonal.

    Examples
    --------
    >>> split_matrix(None, 4.0, 2).tolist()
    [[0.0, 4.0], [4.0, 0.0]]
    """
    if split_bytes is None:
        m = np.full((n, n), float(nbytes))
    else:
        m = np.array(split_bytes, dtype=np.float64)
        if m.shape != (n, n):
            raise SimError(f"split_bytes: shape {m.shape} does not match {n} ranks (needs {n} x {n})")
        if not np.all(np.isfinite(m)) or np.any(m < 0):
            raise SimError("split_bytes: entries must be finite and >= 0")
    np.fill_diagonal(m, 0.0)  # a rank's own share stays local
    return m


def plan_collective(op: str, nbytes: float, ranks: Sequence[int] | np.ndarray, *, root: int = -1,
                    split_bytes=None, server_of: Sequence[int] | np.ndarray | None = None,
                    rings: Sequence[Sequence[int]] | None = None, graph=None, options: PlanOptions | None = None,
                    comm_nranks: int | None = None, **overrides: Any) -> TransferPlan:
    """Decompose one collective into transfers, as NCCL runs it.

    The arguments say what the collective is; :class:`~sim.planning.options.PlanOptions` says how to
    plan it (algorithm, protocol, channels, chunking, budgets, cost model). Option fields may also be
    given as keywords (``algo="ring"``, ``channels=4``), which override ``options``.

    Parameters
    ----------
    op : str
        A SPEC §3 op name.
    nbytes : float
        The row's ``bytes``: AllReduce/Broadcast/Reduce the buffer; AllGather per-rank send bytes;
        ReduceScatter per-rank receive bytes; AllToAll bytes to each peer; Send/Recv the message;
        Gather/Scatter each non-root rank's share.
    ranks : sequence of int
        Global ranks in comm-rank order. Send/Recv: ``[sender, receiver]``.
    root : int
        Root comm rank of Broadcast/Reduce/Gather/Scatter.
    split_bytes : array-like (n, n), optional
        Uneven AllToAll: ``split_bytes[i][j]`` = bytes comm rank i sends comm rank j (diagonal ignored).
    server_of : sequence of int, optional
        Server of each rank (NVLink-aware rings, trees, node counts). Default: from ``graph``, else one
        server.
    rings : list of list of int, optional
        Logged ring orders (global ranks), one per channel; replace the rail-aligned rings.
    graph : networkx.Graph, optional
        A SPEC §4 topology: servers of ``gpu{rank}`` nodes, link rates and hardware presets.
    comm_nranks : int, optional
        Send/Recv: the size of the communicator the pair belongs to (NCCL sizes a network peer's p2p
        channels by it, :mod:`sim.planning.p2p`); default 2.
    options : PlanOptions, optional
        How to plan (default: ``PlanOptions()``). An algorithm the op does not have falls back to
        ``auto``; ``max_transfers`` reduces chunks, then (unless ``nchannels`` is given) channels, but
        keeps on several servers as many channels as the largest server has GPUs (every NIC in use).
    **overrides
        :class:`PlanOptions` fields (and ``channels``, an alias of ``nchannels``).

    Returns
    -------
    TransferPlan

    Raises
    ------
    SimError
        Unknown op or algorithm, bad root, negative bytes, inconsistent ``server_of`` / ``split_bytes`` /
        ``rings``.

    Examples
    --------
    >>> p = plan_collective("AllReduce", 8 << 20, range(4), algo="ring", nchannels=2, max_chunks=1)
    >>> len(p), p.algo, p.total_bytes == 2 * 3 / 4 * (8 << 20) * 4
    (48, 'ring', True)
    >>> q = plan_collective("AllReduce", 8 << 20, range(4), options=PlanOptions(algo="ring", nchannels=2,
    ...                                                                          max_chunks=1))
    >>> len(q) == len(p)
    True
    """
    opts = PlanOptions.build(options, overrides)
    algo, proto, nchannels, model = opts.algo, opts.proto, opts.nchannels, opts.model
    chunk_bytes, max_chunks, max_channels = opts.chunk_bytes, opts.max_chunks, opts.max_channels
    max_transfers, merge_nvlink_channels = opts.max_transfers, opts.merge_nvlink_channels
    max_pipeline_transfers = opts.max_pipeline_transfers
    if op not in _OPS:
        raise SimError(f"op {op!r} is not one of: {', '.join(_OPS)}")
    nbytes = float(nbytes)
    if not np.isfinite(nbytes) or nbytes < 0:
        raise SimError(f"{op}: bytes {nbytes} must be finite and >= 0")
    arr = logical.as_ranks(ranks)
    n = len(arr)
    if graph is not None and (server_of is None or model is None):
        g_server, g_model = graph_machine(graph, arr)
        server_of = g_server if server_of is None else server_of
        model = g_model if model is None else model
    model = model or tuning.CostModel()
    groups = logical.server_groups(arr, server_of)
    server = np.zeros(n, dtype=_I64)
    for k, g in enumerate(groups):
        server[g] = k
    nnodes = len(groups)
    if model.nvls and len({len(g) for g in groups}) > 1:
        model = dataclasses.replace(model, nvls=False)  # NVLS heads pair up GPUs of equal local rank
    if op in ("Send", "Recv") and n != 2:
        raise SimError(f"{op}: ranks must be [sender, receiver], got {n} ranks")
    if op in _ROOTED and not 0 <= root < n:
        raise SimError(f"{op}: root {root} is not a comm rank of a {n}-rank communicator")

    matrix = split_matrix(split_bytes, nbytes, n) if op == "AllToAll" else None
    size_for_choice = float(matrix.max()) if matrix is not None and n > 1 else nbytes
    algo, proto = tuning.choose_algorithm(op, size_for_choice, n, nnodes, algo, proto, model)
    total = float(matrix.sum()) if matrix is not None else nbytes
    if n <= 1 or total <= 0:
        return TransferPlan.empty(algo, proto)

    srv = {int(r): int(s) for r, s in zip(arr, server, strict=True)}

    # a Send/Recv's relay may be any GPU of the sender's server (pxn.server_mates)
    mates = pxn.server_mates(graph, list(srv), srv) if graph is not None and op in ("Send", "Recv") else srv

    def wired(plan: TransferPlan) -> TransferPlan:
        return _wire_bytes(pxn.relay_plan(plan, mates, graph, opts.pxn), mates, model)

    if algo == "direct":
        parts = int(nchannels or 1)
        if op == "AllToAll":
            i, j = np.nonzero(matrix)
            plan = wired(_direct(arr[i], arr[j], matrix[i, j], parts, srv, proto, algo))
        elif op in ("Send", "Recv"):
            plan = wired(_direct(arr[:1], arr[1:], np.array([nbytes]), parts, srv, proto, algo))
        else:
            others = np.delete(arr, root)
            rootv = np.full(n - 1, arr[root])
            s, d = (others, rootv) if op == "Gather" else (rootv, others)
            plan = wired(_direct(s, d, np.full(n - 1, nbytes), parts, srv, proto, algo))
        comm_n = max(2, int(comm_nranks or 2)) if op in ("Send", "Recv") else n
        return _p2p_caps(plan, mates, model, comm_n, parts, graph_nccl_version(graph))

    if algo in ("nvls", "nvls_tree") and op == "AllReduce":
        return wired(_nvls_plan(arr, groups, nbytes, nnodes, opts, model, proto))
    if algo == "nvls":
        return wired(pat_nvls.nvls_gather_plan(op, arr, groups, nbytes, model, opts))
    if algo == "pat":
        return wired(pat_nvls.pat_plan(op, arr, nbytes, model, opts))

    # edges per channel; a transfer is an edge x chunk
    if algo == "tree":
        per_channel = 2 * (n - 1)
    elif op in ("Broadcast", "Reduce"):
        per_channel = n - 1
    else:
        per_channel = (2 * (n - 1) if op == "AllReduce" else n - 1) * n
    nch = int(nchannels or tuning.channels_for(op, algo, proto, nbytes, n, max_channels))
    if nchannels is None and nnodes == 1 and merge_nvlink_channels:
        # Inside one NVLink domain every GPU has one NVSwitch port, so K channels only split that port's
        # bandwidth K ways: one channel gives the same link loads and step count with K times fewer flows.
        nch = 1
    elif nchannels is None:  # keep the plan under the transfer budget: fewer channels only if 1 chunk is too many
        # ... but keep one channel per GPU of the largest server on multi-server rings and trees: each
        # channel crosses the network from a different GPU, so fewer channels would idle NICs
        floor = min(nch, max(len(g) for g in groups)) if nnodes > 1 else 1
        nch = max(floor, min(nch, max_transfers // per_channel))
    ch_bytes = nbytes / nch
    grain = ch_bytes / n if (algo == "ring" and op == "AllReduce") else ch_bytes
    pipelined = algo == "tree" or op in ("Broadcast", "Reduce")
    if pipelined and max_chunks is None:
        unit = chunk_bytes if chunk_bytes is not None else tuning.nccl_chunk_bytes(op, algo, proto, nbytes, nch, n,
                                                                                  nnodes, model.simple_buff_bytes)
        # NCCL's chunk count, uncapped: a long pipeline becomes three weighted pieces per edge (assemble)
        nchunks = tuning.pipeline_chunks(ch_bytes, unit)
    else:
        nchunks = tuning.chunks_for(grain, proto, tuning.DEFAULT_MAX_CHUNKS if max_chunks is None else max_chunks,
                                    chunk_bytes or tuning.chunk_unit_bytes(proto, model.simple_buff_bytes))
        nchunks = max(1, min(nchunks, max_transfers // (nch * per_channel)))
    if algo == "tree":
        parents = [logical.rank_tree(arr, server, c, nch) for c in range(nch)]
        edges = _tree_edges(arr, parents, server, ch_bytes, proto, model)
        return wired(assemble(edges, nchunks, False, tuning.tree_base_latency_s(proto), algo, proto,
                              max_pipeline_transfers))

    ring_orders = logical.rings_for_channels(arr, nch, server, rings)
    base, per_step = tuning.ring_step_latency_s(op, proto, n, nnodes, nbytes, model)
    if op in ("Broadcast", "Reduce"):
        pos = np.argmax(ring_orders == arr[root], axis=1)
        shift = pos if op == "Broadcast" else pos + 1  # root first (Broadcast) or last (Reduce)
        orders = np.stack([np.roll(r, -int(s)) for r, s in zip(ring_orders, shift, strict=True)])
        return wired(assemble(_chain_edges(orders, ch_bytes, per_step), nchunks, False, base, algo, proto,
                              max_pipeline_transfers))
    # AllReduce: 2(n-1) steps of one n-th of the channel's data; AllGather / ReduceScatter: n-1 steps of
    # one rank's share
    nsteps = per_channel // n
    return wired(assemble(_ring_edges(ring_orders, nsteps, grain, per_step), nchunks, True, base, algo, proto))


def _nvls_plan(arr: np.ndarray, groups: list[np.ndarray], nbytes: float, nnodes: int, opts: PlanOptions,
               model: tuning.CostModel, proto: str) -> TransferPlan:
    """NVLS (one server, one channel: the NVLink loads do not depend on it) or NVLSTree (both trees).

    Latency: NCCL's, as for the ring family (the critical path totals the tuner's figure): the NVLink part
    (25 us) at the start, and each inter-node tree hop NCCL's NET latency plus the transport's physical
    latency (the net plugin's reported one, twice for Simple, unless the preset gives a physical one),
    on its first chunk.
    """
    algo = "nvls" if nnodes <= 1 else "nvls_tree"
    ppn = len(groups[0])
    nch = int(opts.nchannels or (1 if nnodes <= 1 else 2))
    base = tuning.algo_latency_s("AllReduce", "nvls", "Simple", ppn, 1, model)
    total = tuning.algo_latency_s("AllReduce", algo, "Simple", len(arr), nnodes, model, physical=True)
    hops = 2 * int(math.floor(math.log2(nnodes))) if nnodes > 1 else 0
    edges = nvls.nvls_edges(arr, groups, nch, nbytes / nch, net_hop_s=(total - base) / hops if hops else 0.0,
                            nvlink_factor=nvls.nvls_tree_kernel_factor(model, len(arr), nnodes))
    unit = opts.chunk_bytes or tuning.nvls_chunk_bytes(algo, nbytes, ppn, nnodes)
    nchunks = nvls.nvls_chunks(nbytes, ppn, unit)
    if opts.max_chunks is not None:
        nchunks = min(nchunks, opts.max_chunks)
    return assemble(edges, max(1, nchunks), False, base, algo, proto, opts.max_pipeline_transfers)


def _p2p_caps(plan: TransferPlan, server: dict[int, int], model: tuning.CostModel, comm_n: int, parts: int,
              version: tuple[int, int, int]) -> TransferPlan:
    """``plan`` with the rate ceiling of NCCL's p2p channels on its network transfers (:mod:`sim.planning.p2p`).

    A network send of a message runs on :func:`~sim.planning.p2p.message_channels` channels of
    ``NCCL_P2P_PER_CHANNEL_NET_BW`` each; a plan that splits a pair into ``parts`` transfers gives each a
    ``1 / parts`` share. A relayed send's network leg is the sender's connection and carries its cap;
    NVLink transfers have none (NCCL states no per-channel NVLink rate). The cap is on wire bytes, as
    NCCL compares the per-channel figure with its NICs' line rates.
    """
    if len(plan) == 0:
        return plan
    src, dst = plan.src.astype(_I64), plan.dst.astype(_I64)
    inter = np.fromiter((server.get(int(a), a) != server.get(int(b), b) for a, b in zip(src, dst, strict=True)),
                        dtype=bool, count=len(plan))
    if not inter.any():
        return plan
    # GPUs per server: of the communicator (AllToAll), of the pair's servers (Send/Recv: every GPU there)
    ppn = int(np.bincount(np.unique(np.fromiter(server.values(), dtype=_I64), return_inverse=True)[1]).max())
    nnodes = max(2, len(set(server.values())))
    per_peer, p2pn = p2p.p2p_net_channels(model, comm_n, nnodes, float(ppn), version)
    payload = plan.bytes[inter] / (_net_wire_factor(plan, model) if model.protocol_overhead else 1.0) * parts
    uniq, inv = np.unique(payload, return_inverse=True)
    ch = np.array([p2p.message_channels(float(b), per_peer, comm_n, p2pn) for b in uniq], dtype=np.float64)
    cap = np.full(len(plan), np.inf)
    cap[inter] = ch[inv] * p2p.P2P_PER_CHANNEL_NET_BW_GBS * 1e9 / parts
    return dataclasses.replace(plan, rate_cap_bytes_per_s=cap)


def _wire_bytes(plan: TransferPlan, server: dict[int, int], model: tuning.CostModel) -> TransferPlan:
    """The plan with each transfer's bytes as sent on the wire (protocol lines, link efficiency)."""
    if not model.protocol_overhead or len(plan) == 0:
        return plan
    inter = np.fromiter((server[int(a)] != server[int(b)] for a, b in zip(plan.src, plan.dst, strict=True)),
                        dtype=bool, count=len(plan))
    factor = np.where(inter, _net_wire_factor(plan, model), tuning.wire_factor(plan.proto, False, model, plan.algo))
    return dataclasses.replace(plan, bytes=plan.bytes * factor)


def _net_wire_factor(plan: TransferPlan, model: tuning.CostModel) -> float:
    """Wire bytes per payload byte of a plan's network transfers (direct plans: Simple, see :func:`_direct`)."""
    return tuning.wire_factor("Simple" if plan.algo == "direct" else plan.proto, True, model, plan.algo)
