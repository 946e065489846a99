"""Direct (point-to-point) plans and the bytes a plan puts on the wire.

:func:`direct_plan` builds the independent transfers of AllToAll, Send/Recv, Gather and Scatter;
:func:`wire_bytes` scales any plan's payload to wire bytes (protocol lines, link efficiency) and
:func:`p2p_caps` gives direct plans' network transfers the rate ceiling of NCCL's p2p channels.
:mod:`sim.planning.collectives` calls them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sim.planning import p2p, tuning
from sim.planning.plan import TransferPlan

__all__ = ["direct_plan", "net_wire_factor", "p2p_caps", "server_ids", "wire_bytes"]

_I32 = np.int32
_I64 = np.int64


def server_ids(server: dict[int, int], gpus: np.ndarray, strict: bool = False) -> np.ndarray:
    """The server of each GPU of ``gpus`` in one lookup (the planners' per-transfer dict lookups, vectorised).

    Parameters
    ----------
    server : dict
        Server of each GPU.
    gpus : numpy.ndarray
        GPU ids, any shape (``np.stack((src, dst))`` looks both ends of a plan up in one call).
    strict : bool
        Raise ``KeyError`` for a GPU not in ``server`` (as ``server[g]``); otherwise such a GPU is its own
        server (as ``server.get(g, g)``).

    Returns
    -------
    numpy.ndarray
        int64 server ids, one per GPU, in the shape of ``gpus``.

    Examples
    --------
    >>> server_ids({0: 0, 1: 0, 2: 1}, np.array([2, 0, 7])).tolist()
    [1, 0, 7]
    >>> server_ids({0: 0, 1: 0, 2: 1}, np.stack(([0, 1], [2, 0]))).tolist()
    [[0, 0], [1, 0]]
    """
    gpus = np.asarray(gpus, dtype=_I64)
    if not server:
        if strict and len(gpus):
            raise KeyError(int(gpus[0]))
        return gpus.copy()
    keys = np.fromiter((int(k) for k in server), dtype=_I64, count=len(server))
    values = np.fromiter((int(v) for v in server.values()), dtype=_I64, count=len(server))
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    pos = np.minimum(np.searchsorted(keys, gpus), len(keys) - 1)
    known = keys[pos] == gpus
    if strict and not known.all():
        raise KeyError(int(gpus[~known][0]))
    return np.where(known, values[pos], gpus)


def direct_plan(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, parts: int, server: dict[int, int],
            proto: str, algo: str, model: tuning.CostModel | None = None) -> TransferPlan:
    """Independent transfers, each split over ``parts`` channels.

    A network transfer runs Simple whatever ``proto`` says: NCCL allocates no LL buffers for p2p network
    connections (``NCCL_ALLOC_P2P_NET_LL_BUFFERS`` = 0, ``src/init.cc``; the shared p2p buffers of
    ``src/transport/net.cc`` are Simple's), and ``addP2pToPlan`` takes LL only where the connection has
    them (``protoLL &= buffs[NCCL_PROTO_LL] != nullptr``, ``src/enqueue.cc``; 2.19 - 2.29). So it pays
    Simple's latency and wire bytes (:func:`wire_bytes`); NVLink pairs keep ``proto``. With ``model``, a
    network transfer also pays the transport's physical step latency
    (:func:`~sim.planning.plan_latency.p2p_latency_s`: 0 on NCCL's own IB / RoCE / socket transports, the
    plugin's step on EFA), as a tree's network hop does.

    Parameters
    ----------
    src, dst, nbytes : numpy.ndarray
        The pairs and their bytes (zero-byte pairs are left out).
    parts : int
        Channels each pair is split over.
    server : dict
        Server of each GPU (a GPU not in it is its own server).
    proto, algo : str
        Protocol and algorithm label of the plan.
    model : CostModel, optional
        The fabric's cost model (the net transport's step latency); None adds nothing.

    Returns
    -------
    TransferPlan
        ``parts`` transfers per non-zero pair, without dependencies.

    Examples
    --------
    >>> p = direct_plan(np.array([0]), np.array([1]), np.array([8.0]), 2, {0: 0, 1: 0}, "LL", "direct")
    >>> p.bytes.tolist(), p.proto
    ([4.0, 4.0], 'LL')
    """
    keep = nbytes > 0
    src, dst, nbytes = src[keep], dst[keep], nbytes[keep].astype(np.float64)
    m = len(src) * parts
    s = np.repeat(src, parts)
    d = np.repeat(dst, parts)
    ends = server_ids(server, np.stack((src, dst)))
    inter = ends[0] != ends[1]
    if len(inter) and inter.all():
        proto = "Simple"   # every transfer crosses the network (a Send/Recv between servers): label it so
    lat = np.where(inter, tuning.p2p_latency_s("Simple", True, model), tuning.p2p_latency_s(proto, False))
    return TransferPlan(src=s.astype(_I32), dst=d.astype(_I32), bytes=np.repeat(nbytes / parts, parts),
                        channel=np.tile(np.arange(parts, dtype=_I32), len(src)),
                        delay_s=np.repeat(lat, parts), dep_ptr=np.zeros(m + 1, _I64),
                        dep_idx=np.zeros(0, _I64), algo=algo, proto=proto, step=np.zeros(m, _I32),
                        chunk=np.zeros(m, _I32))


def p2p_caps(plan: TransferPlan, server: dict[int, int], model: tuning.CostModel, comm_n: int, parts: int,
              version: tuple[int, int, int]) -> TransferPlan:
    """``plan`` with the rate ceiling of NCCL's p2p channels on its network transfers (:mod:`sim.planning.p2p`).

    A network send of a message runs on :func:`~sim.planning.p2p.message_channels` channels of
    ``NCCL_P2P_PER_CHANNEL_NET_BW`` each; a plan that splits a pair into ``parts`` transfers gives each a
    ``1 / parts`` share. A relayed send's network leg is the sender's connection and carries its cap;
    NVLink transfers have none (NCCL states no per-channel NVLink rate). The cap is on wire bytes, as
    NCCL compares the per-channel figure with its NICs' line rates.

    Parameters
    ----------
    plan : TransferPlan
        A direct plan (wire bytes already applied).
    server : dict
        Server of each GPU.
    model : CostModel
        The cost model (protocol overhead, p2p channels).
    comm_n, parts : int
        Ranks of the communicator; transfers per pair.
    version : tuple of int
        NCCL version (p2p channel rules differ by release).

    Returns
    -------
    TransferPlan
        ``plan`` with ``rate_cap_bytes_per_s`` set (``inf`` on NVLink transfers).
    """
    if len(plan) == 0:
        return plan
    src, dst = plan.src.astype(_I64), plan.dst.astype(_I64)
    ends = server_ids(server, np.stack((src, dst)))
    inter = ends[0] != ends[1]
    if not inter.any():
        return plan
    # GPUs per server: of the communicator (AllToAll), of the pair's servers (Send/Recv: every GPU there)
    ppn = int(np.bincount(np.unique(np.fromiter(server.values(), dtype=_I64), return_inverse=True)[1]).max())
    nnodes = max(2, len(set(server.values())))
    per_peer, p2pn = p2p.p2p_net_channels(model, comm_n, nnodes, float(ppn), version)
    payload = plan.bytes[inter] / (net_wire_factor(plan, model) if model.protocol_overhead else 1.0) * parts
    uniq, inv = np.unique(payload, return_inverse=True)
    ch = np.array([p2p.message_channels(float(b), per_peer, comm_n, p2pn) for b in uniq], dtype=np.float64)
    cap = np.full(len(plan), np.inf)
    cap[inter] = ch[inv] * p2p.P2P_PER_CHANNEL_NET_BW_GBS * 1e9 / parts
    return dataclasses.replace(plan, rate_cap_bytes_per_s=cap)


def wire_bytes(plan: TransferPlan, server: dict[int, int], model: tuning.CostModel) -> TransferPlan:
    """The plan with each transfer's bytes as sent on the wire (protocol lines, link efficiency).

    Parameters
    ----------
    plan : TransferPlan
        Payload bytes per transfer.
    server : dict
        Server of each GPU (network transfers use the network's factor).
    model : CostModel
        The cost model; without ``protocol_overhead`` the plan is returned as is.

    Returns
    -------
    TransferPlan
        ``plan`` with ``bytes`` scaled by :func:`~sim.planning.plan_latency.wire_factor`.
    """
    if not model.protocol_overhead or len(plan) == 0:
        return plan
    ends = server_ids(server, np.stack((plan.src, plan.dst)), strict=True)
    inter = ends[0] != ends[1]
    factor = np.where(inter, net_wire_factor(plan, model), tuning.wire_factor(plan.proto, False, model, plan.algo))
    return dataclasses.replace(plan, bytes=plan.bytes * factor)


def net_wire_factor(plan: TransferPlan, model: tuning.CostModel) -> float:
    """Wire bytes per payload byte of a plan's network transfers (direct plans: Simple, see :func:`direct_plan`).

    Parameters
    ----------
    plan : TransferPlan
        The plan (its ``algo`` and ``proto``).
    model : CostModel
        The cost model.

    Returns
    -------
    float
        The factor :func:`~sim.planning.plan_latency.wire_factor` gives a network transfer.
    """
    return tuning.wire_factor("Simple" if plan.algo == "direct" else plan.proto, True, model, plan.algo)
