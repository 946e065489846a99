"""Per-transfer costs of plans: the software latency a plan step charges (``TransferPlan.delay_s``) and
the bytes a transfer puts on the wire, from NCCL 2.23's tables (:mod:`sim.planning.nccl_tables`).

The ring family's per-step latency (``ring_step_latency_s``) stays in :mod:`sim.planning.tuning`, beside
the NCCL latency formula it spreads; :mod:`sim.planning.tuning` re-exports everything here.
"""

from __future__ import annotations

import numpy as np

from sim.errors import SimError
from sim.planning.cost_model import DEFAULT_MODEL, CostModel
from sim.planning.nccl_tables import (
    BASE_LAT_US,
    HW_LAT_US,
    NVLS_ALGBW_RATIO,
    PROTOS,
    WIRE_BYTES_PER_PAYLOAD,
)

__all__ = ["p2p_latency_s", "paid_path_latency_s", "pxn_store_latency_s", "tree_base_latency_s", "tree_hop_latency_s",
           "wire_factor"]


def _proto_index(proto: str) -> int:
    if proto not in PROTOS:
        raise SimError(f"protocol {proto!r} is not one of: {', '.join(PROTOS)}")
    return PROTOS.index(proto)


def wire_factor(proto: str, inter_node: bool, model: CostModel | None = None, algo: str = "ring") -> float:
    """Wire bytes per payload byte of a transfer: the protocol's lines and the link's efficiency.

    1 unless ``model.protocol_overhead``; then LL 16/8, LL128 128/120, Simple 1, divided by the NVLink
    or NIC efficiency, and for the NVLink legs of NVLS / NVLSTree by NCCL's 5/6 (its NVLS bandwidth ratio:
    the multimem reductions and multicasts reach 5/6 of the bandwidth NCCL's search gives the NVLS graph).
    NVLSTree's network legs are a plain tree between the servers' NICs and pay the NIC efficiency only:
    NCCL's tuner (tuning.cc, 2.28 on) puts its NVLS efficiency on ``bwIntra`` alone, never on ``bwInter``.

    Examples
    --------
    >>> wire_factor("LL", True)
    1.0
    >>> wire_factor("LL", True, CostModel(protocol_overhead=True, nic_efficiency=0.5))
    4.0
    >>> wire_factor("Simple", False, CostModel(protocol_overhead=True), algo="nvls")
    1.2
    >>> wire_factor("Simple", True, CostModel(protocol_overhead=True), algo="nvls_tree")
    1.0
    """
    p = _proto_index(proto)
    model = model or DEFAULT_MODEL
    if not model.protocol_overhead:
        return 1.0
    eff = model.nic_efficiency if inter_node else model.nvlink_efficiency
    if algo in ("nvls", "nvls_tree") and not inter_node:
        eff *= NVLS_ALGBW_RATIO
    return WIRE_BYTES_PER_PAYLOAD[PROTOS[p]] / eff


def tree_hop_latency_s(proto: str, inter_node: bool, model: CostModel | None = None) -> float:
    """Per-hop latency of a tree plan (seconds): NCCL's tree latency per NVLink or network hop; a network
    hop also pays the transport's physical latency (``model.net_step_latency_us(proto, physical=True)``).

    Examples
    --------
    >>> round(tree_hop_latency_s("LL", True) * 1e6, 2)
    5.0
    >>> efa = CostModel(net_latency_us=75.0, net_phys_latency_us=20.0, net_phys_simple_extra_us=3.0)
    >>> round(tree_hop_latency_s("LL", True, efa) * 1e6, 2), round(tree_hop_latency_s("Simple", True, efa) * 1e6, 2)
    (25.0, 37.0)
    """
    p = _proto_index(proto)
    extra = (model or DEFAULT_MODEL).net_step_latency_us(proto, physical=True) if inter_node else 0.0
    return (HW_LAT_US["net" if inter_node else "nvlink"]["tree"][p] + extra) * 1e-6


def tree_base_latency_s(proto: str) -> float:
    """Base (launch) latency of a tree collective (seconds)."""
    return BASE_LAT_US["tree"][_proto_index(proto)] * 1e-6


def p2p_latency_s(proto: str = "Simple", inter_node: bool = True, model: CostModel | None = None) -> float:
    """Software latency of one direct transfer (Send/Recv, all-to-all pair): one ring base + one step.

    NCCL's tuner has no p2p latency (``tuning.cc`` models collectives only; 2.19 - 2.29); this charges
    what one ring step costs: the ring's base latency plus one hardware step on the link type. A
    network pair is always Simple (NCCL gives p2p network connections no LL buffers,
    ``NCCL_ALLOC_P2P_NET_LL_BUFFERS`` = 0, so ``addP2pToPlan`` cannot pick LL there;
    ``sim.planning.collectives`` passes ``Simple`` for them): 8.4 + 14 µs. Measured floors across
    servers are higher (about 28 - 33 µs at 1 - 32 KiB on 4 x 8 B200, ``docs/validation.md``).

    With ``model``, a network transfer also pays the transport's physical step latency, as a tree's network
    hop does (``model.net_step_latency_us(proto, physical=True)``; 0 for NCCL's own IB / RoCE / socket
    transports and without presets): a network send is one step of the net plugin (aws-ofi-nccl: one
    ``fi_tsend`` / ``fi_trecv`` pair, and on Ampere the receive's GDR flush). Both tiers' direct plans pass
    the fabric's model (``sim.planning.plan_wire.direct_plan``, ``sim.analytical.plans.alltoall_plan``).

    Examples
    --------
    >>> round(p2p_latency_s() * 1e6, 1)
    22.4
    >>> p4d = CostModel(net_latency_us=75.0, net_phys_latency_us=20.0, net_phys_simple_extra_us=23.0)
    >>> round(p2p_latency_s("Simple", True, p4d) * 1e6, 1), round(p2p_latency_s("LL", False, p4d) * 1e6, 1)
    (65.4, 7.2)
    """
    p = _proto_index(proto)
    extra = (model or DEFAULT_MODEL).net_step_latency_us(proto, physical=True) if inter_node else 0.0
    return (BASE_LAT_US["ring"][p] + HW_LAT_US["net" if inter_node else "nvlink"]["ring"][p] + extra) * 1e-6


def pxn_store_latency_s() -> float:
    """What a PXN-relayed direct message waits at its relay before the network leg starts (seconds).

    NCCL's proxy on the relay (``sendProxyProgress``, ``src/transport/net.cc``) ``isend``s a buffer slot
    only once the sending GPU's write of that slot shows in ``recvTail``: the first
    ``NCCL_P2P_NET_CHUNKSIZE`` chunk is stored at the relay over NVLink before it is forwarded, and the
    later chunks stream behind it. So the message pays one NVLink Simple step on top of its network step
    (the relayed connection is a network one: Simple, :func:`p2p_latency_s`), NCCL's own per-step figure
    for it: ``hwLat`` NVLink / Ring / Simple, 3.4 us (``src/graph/tuning.cc``, 2.19 - 2.29 alike). The
    first chunk's flight over NVLink (128 KiB at NVLink rate: 0.2 - 0.4 us) is not added.

    Examples
    --------
    >>> round(pxn_store_latency_s() * 1e6, 1), round((p2p_latency_s() + pxn_store_latency_s()) * 1e6, 1)
    (3.4, 25.8)
    """
    return HW_LAT_US["nvlink"]["ring"][PROTOS.index("Simple")] * 1e-6


def paid_path_latency_s(path_latency_s, delay_s, chunk=None) -> np.ndarray:
    """The part of each transfer's path propagation a plan still pays at arrival (seconds).

    NCCL's step latencies (``tuning.cc`` hwLat, which a plan charges as ``delay_s``) are measured end to
    end on real fabrics, the wire included, so a transfer that pays one pays its path's propagation only
    beyond it: ``max(path - delay, 0)`` (the step takes ``max(step latency, propagation)``). A pipelined
    chunk (``chunk > 0``) pays none: its bytes follow its step's first chunk down the same path, which
    paid the step's latency, and the sender's next chunk waits for the previous one to leave, not to land
    (otherwise a step of ``C`` chunks would pay ``C`` propagations in series).

    Parameters
    ----------
    path_latency_s : array-like
        One-way propagation of each transfer's path (sum of its links' ``latency_us``).
    delay_s : array-like
        The plan's software delay of each transfer (0 where it pays none).
    chunk : array-like, optional
        Chunk index within its step or edge (``TransferPlan.chunk``); ``None``: every transfer is a first chunk.

    Returns
    -------
    ndarray of float64

    Examples
    --------
    A 1 us NVLink path: a ring LL step (0.6 us) pays 0.4 us more, a Simple step (3.4 us) nothing, a
    pipelined chunk nothing; a transfer with no software delay pays its whole path.

    >>> paid_path_latency_s([1e-6, 1e-6, 1e-6, 1e-6], [0.6e-6, 3.4e-6, 0.0, 0.0], [0, 0, 3, 0]).round(9).tolist()
    [4e-07, 0.0, 0.0, 1e-06]
    """
    path = np.asarray(path_latency_s, dtype=np.float64)
    paid = np.maximum(path - np.asarray(delay_s, dtype=np.float64), 0.0)
    if chunk is not None:
        paid = np.where(np.asarray(chunk) > 0, 0.0, paid)
    return paid
