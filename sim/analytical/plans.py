"""Transfer plans for the analytical tier: :func:`sim.planning.collectives.plan_collective`, with a vectorised
path for AllToAll.

The planner's direct plan (every non-zero off-diagonal pair of the split matrix, each split over ``parts``
channels, software delay :func:`sim.planning.tuning.p2p_latency_s` by intra/inter server) classifies
pairs in a Python loop, which costs about a second per all-to-all at 1,024 GPUs; :func:`alltoall_plan`
builds the same arrays with numpy, and :func:`plan_op_pair` gives them the planner's wire bytes from the
fabric's cost model (``tests/sim/analytical/test_plans.py`` checks equality with the planner,
on fabrics with and without hardware presets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sim.errors import SimError
from sim.planning import pxn, tuning
from sim.planning.collectives import TransferPlan, plan_collective, split_matrix
from sim.planning.machine import graph_machine
from sim.planning.plan_wire import wire_bytes

__all__ = ["alltoall_plan", "plan_op", "plan_op_pair", "servers_of", "split_pairs"]


def servers_of(graph, ranks: np.ndarray) -> np.ndarray:
    """Server id of each rank's GPU node (``server`` attribute; the rank itself when absent)."""
    nodes = graph.nodes
    out = np.empty(len(ranks), dtype=np.int64)
    for i, r in enumerate(ranks.tolist()):
        name = f"gpu{r}"
        if name not in nodes:
            raise SimError(f"topology {graph.graph.get('name', '')!r} has no node {name} for rank {r}")
        out[i] = int(nodes[name].get("server", r))
    return out


def alltoall_plan(nbytes: float, ranks: np.ndarray, split_bytes, server: np.ndarray, parts: int = 1,
                  proto: str | None = None, model: tuning.CostModel | None = None) -> TransferPlan:
    """The planner's direct AllToAll plan, vectorised.

    Parameters
    ----------
    nbytes : float
        Bytes to each peer (when ``split_bytes`` is None).
    ranks : numpy.ndarray
        Global ranks in comm order.
    split_bytes : array-like (n, n) or None
    server : numpy.ndarray
        Server of each comm rank.
    parts : int
        Channels each pair's bytes are split over.
    proto : str, optional
        Protocol asked for (None: the tuner's choice).
    model : CostModel, optional
        The fabric's cost model (:func:`sim.planning.machine.graph_machine`): the tuner's protocols and the
        net transport's step latency of network pairs, as the planner's ``direct_plan``; None: the
        defaults. Payload bytes: wire bytes and rate caps are :func:`plan_op_pair`'s.

    Returns
    -------
    TransferPlan

    Examples
    --------
    >>> p = alltoall_plan(1 << 20, np.arange(4), None, np.array([0, 0, 1, 1]))
    >>> len(p), p.algo, p.proto, float(p.bytes.sum()) == 12 * (1 << 20)
    (12, 'direct', 'Simple', True)
    """
    n = len(ranks)
    i, j, b, size_for_choice = split_pairs(split_bytes, nbytes, n)
    algo, proto = tuning.choose_algorithm("AllToAll", size_for_choice, n, len(np.unique(server)), "direct", proto,
                                          model)
    if n <= 1 or not len(i):
        return TransferPlan.empty(algo, proto)
    inter = server[i] != server[j]
    if inter.all():
        proto = "Simple"   # network p2p has no LL buffers (sim.planning.plan_wire.direct_plan's rule)
    lat = np.where(inter, tuning.p2p_latency_s("Simple", True, model), tuning.p2p_latency_s(proto, False))
    k = len(i) * parts
    return TransferPlan(src=np.repeat(ranks[i], parts).astype(np.int32), dst=np.repeat(ranks[j], parts).astype(np.int32),
                        bytes=np.repeat(b / parts, parts), channel=np.tile(np.arange(parts, dtype=np.int32), len(i)),
                        delay_s=np.repeat(lat, parts), dep_ptr=np.zeros(k + 1, np.int64),
                        dep_idx=np.zeros(0, np.int64), algo=algo, proto=proto, step=np.zeros(k, np.int32),
                        chunk=np.zeros(k, np.int32))


def split_pairs(split_bytes, nbytes: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The non-zero off-diagonal entries of :func:`sim.planning.collectives.split_matrix` (row-major, as
    ``np.nonzero``): their rows, columns, bytes, and the matrix's largest entry (``nbytes`` for ``n <= 1``).

    An int64 ``n x n`` matrix (what the op table builds) is read in place: only its non-zero entries are
    converted to float (the same conversion ``split_matrix``'s float copy makes of each entry), so no float
    copy, finiteness test or 2-D ``nonzero`` of a 1,024 x 1,024 matrix is made; a negative entry (diagonal
    too) raises ``split_matrix``'s error. Anything else goes through ``split_matrix``.

    Examples
    --------
    >>> i, j, b, top = split_pairs(np.array([[9, 0, 3], [0, 0, 0], [5, 0, 0]]), 0.0, 3)
    >>> i.tolist(), j.tolist(), b.tolist(), top
    ([0, 2], [2, 0], [3.0, 5.0], 5.0)
    """
    if n > 1 and isinstance(split_bytes, np.ndarray) and split_bytes.dtype == np.int64 and (
            split_bytes.shape == (n, n)):
        flat = split_bytes.ravel()
        if int(flat.min()) < 0:
            split_matrix(split_bytes, nbytes, n)  # raises the planner's error for the negative entry
        nz = np.flatnonzero(flat)
        i, j = np.divmod(nz, n)
        off = i != j  # a rank's own share stays local (split_matrix zeroes the diagonal)
        i, j, nz = i[off], j[off], nz[off]
        b = flat[nz].astype(np.float64)
        # split_matrix's max: entries >= 0 and a zero diagonal, so 0.0 when no pair sends
        return i, j, b, float(b.max()) if len(b) else 0.0
    m = split_matrix(split_bytes, nbytes, n)
    i, j = np.nonzero(m) if m.sum() > 0 else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    size_for_choice = float(m.max()) if n > 1 else float(nbytes)
    return i, j, m[i, j], size_for_choice


def plan_op(rec: Mapping, split, algo: str, graph, meta: Mapping, options: Mapping[str, Any],
            servers: dict | None = None) -> TransferPlan:
    """The transfer plan of one op instance (a row of :func:`sim.replay.build_ops`), as the flow tier plans it.

    ``servers`` (optional) caches the servers and cost model of each member list across calls.
    """
    return plan_op_pair(rec, split, algo, graph, meta, options, servers)[0]


def plan_op_pair(rec: Mapping, split, algo: str, graph, meta: Mapping, options: Mapping[str, Any],
                 servers: dict | None = None) -> tuple[TransferPlan, TransferPlan | None]:
    """:func:`plan_op`'s plan and, for a vectorised AllToAll, the same plan without NCCL's p2p PXN relays
    (what :func:`plan_op` gives with ``pxn=False``; None for other ops), both from one direct plan.

    The vectorised AllToAll takes the fabric's cost model as the planner does (``graph_machine``): the
    tuner's protocol, the network pairs' transport step, then the planner's wire bytes
    (:func:`sim.planning.plan_wire.wire_bytes`), so on a fabric with hardware presets it is the flow
    tier's plan too in every field the tier's bound reads. It leaves out the p2p rate caps
    (:func:`~sim.planning.plan_wire.p2p_caps`): the bound takes no per-transfer cap (a lower bound without
    them), and they cost about four times the plan (0.10 s against 0.03 s at 1,024 GPUs, 30 % of the
    pairs non-zero).

    Examples
    --------
    >>> import topologies
    >>> g = topologies.build("leaf_spine", num_gpus=16)
    >>> rec = {"kind": "coll", "op": "AllToAll", "members": list(range(16)), "rank_bytes": 1024, "comm": "w"}
    >>> plan, bare = plan_op_pair(rec, None, "auto", g, {}, {})
    >>> len(bare) == 16 * 15 <= len(plan)
    True
    """
    if rec["kind"] == "p2p":
        return plan_collective("Send", int(rec["rank_bytes"]), [int(rec["src"]), int(rec["dst"])], algo=algo,
                               graph=graph, **options), None
    if rec["op"] == "AllToAll" and set(options) <= {"channels", "pxn"}:
        ranks = np.asarray(rec["members"], dtype=np.int64)
        key = tuple(ranks.tolist())
        hit = None if servers is None else servers.get(key)
        if hit is None:
            server, model = graph_machine(graph, ranks)
            hit = (server, dict(zip(key, server.tolist(), strict=True)), model)
            if servers is not None:
                servers[key] = hit
        server, server_of, model = hit
        parts = int(options.get("channels") or 1)
        bare = alltoall_plan(float(rec["rank_bytes"]), ranks, split, server, parts, model=model)
        # NCCL's p2p PXN, then the wire bytes, as the planner's direct plans (sim.planning.pxn, plan_wire)
        plan = wire_bytes(pxn.relay_plan(bare, server_of, graph, options.get("pxn")), server_of, model)
        return plan, wire_bytes(bare, server_of, model)
    rings = (meta.get("rings") or {}).get(rec["comm"])
    return plan_collective(rec["op"], int(rec["rank_bytes"]), rec["members"], algo=algo, root=int(rec["root"]),
                           split_bytes=split, rings=rings, graph=graph, **options), None
