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

The edge builders are in :mod:`sim.planning.plan_edges`, direct plans and wire bytes in
:mod:`sim.planning.plan_wire`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.errors import SimError
from sim.planning import algo_bandwidth, logical, nvls, pat_nvls, pxn, tuning
from sim.planning.machine import graph_cost_model, graph_machine, graph_nccl_version
from sim.planning.options import PlanOptions
from sim.planning.plan import TransferPlan, assemble
from sim.planning.plan_edges import chain_edges, ring_edges, tree_edges
from sim.planning.plan_wire import direct_plan, p2p_caps, wire_bytes

__all__ = ["PlanOptions", "TransferPlan", "graph_cost_model", "graph_machine", "plan_collective", "split_matrix"]

_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Send", "Recv",
        "Gather", "Scatter")
_ROOTED = ("Broadcast", "Reduce", "Gather", "Scatter")
_I64 = np.int64


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
        return wire_bytes(pxn.relay_plan(plan, mates, graph, opts.pxn), mates, model)

    if algo == "direct":
        parts = int(nchannels or 1)
        if op == "AllToAll":
            i, j = np.nonzero(matrix)
            plan = wired(direct_plan(arr[i], arr[j], matrix[i, j], parts, srv, proto, algo, model))
        elif op in ("Send", "Recv"):
            plan = wired(direct_plan(arr[:1], arr[1:], np.array([nbytes]), parts, srv, proto, algo, model))
        else:
            others = np.delete(arr, root)
            rootv = np.full(n - 1, arr[root])
            s, d = (others, rootv) if op == "Gather" else (rootv, others)
            plan = wired(direct_plan(s, d, np.full(n - 1, nbytes), parts, srv, proto, algo, model))
        comm_n = max(2, int(comm_nranks or 2)) if op in ("Send", "Recv") else n
        return p2p_caps(plan, mates, model, comm_n, parts, graph_nccl_version(graph))

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
        # the tree kernel's efficiency and NCCL's medium-size correction on every leg; chunks as NCCL's
        factor = algo_bandwidth.tree_kernel_factor(model, proto, n, nnodes)
        if model.protocol_overhead:
            factor /= tuning.tree_correction(proto, nbytes, model)
        edges = tree_edges(arr, parents, server, ch_bytes * factor, proto, model)
        return wired(assemble(edges, nchunks, False, tuning.tree_base_latency_s(proto), algo, proto,
                              max_pipeline_transfers))

    ring_orders = logical.rings_for_channels(arr, nch, server, rings)
    base, per_step = tuning.ring_step_latency_s(op, proto, n, nnodes, nbytes, model)
    if op in ("Broadcast", "Reduce"):
        pos = np.argmax(ring_orders == arr[root], axis=1)
        shift = pos if op == "Broadcast" else pos + 1  # root first (Broadcast) or last (Reduce)
        orders = np.stack([np.roll(r, -int(s)) for r, s in zip(ring_orders, shift, strict=True)])
        return wired(assemble(chain_edges(orders, ch_bytes, per_step), nchunks, False, base, algo, proto,
                              max_pipeline_transfers))
    # AllReduce: 2(n-1) steps of one n-th of the channel's data; AllGather / ReduceScatter: n-1 steps of
    # one rank's share
    nsteps = per_channel // n
    return wired(assemble(ring_edges(ring_orders, nsteps, grain, per_step), nchunks, True, base, algo, proto))


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
