"""NCCL's topology search across servers, as far as the tuner needs it: the search's channel count and
speed (which scale ``tuning.cc``'s per-channel caps) and the tree graph's pattern.

References
----------
NVIDIA/nccl ``src/graph/search.cc``, ``src/graph/tuning.cc``, ``src/init.cc``, ``src/graph/connect.cc``
(v2.23.4-1; the cross-NIC rule read at v2.29.2-1); NVIDIA/nccl#1041.
"""

from __future__ import annotations

from sim.planning.cost_model import CostModel
from sim.planning.nccl_tables import (
    RING_SEARCH_MAX_CHANNELS,
    SM90_SPEED_ARRAY_INTER,
    SPEED_ARRAY_INTER,
    TREE_PATTERN_FACTOR,
)

__all__ = ["graph_channels", "net_graph_channels", "ring_crosses_nics", "tree_pattern_factor"]


def net_graph_channels(model: CostModel, ppn: float) -> tuple[int, float]:
    """(channels, GB/s per channel) of the ring / tree graph NCCL's search finds across servers.

    ``search.cc`` (v2.23.4-1) with ``model.nics_per_gpu`` NICs per GPU: a channel enters and leaves the
    server through one NIC, so the search tries the speeds of ``speedArrayInter``
    (``sm90SpeedArrayInter`` on Hopper and later) from the fastest, and the first that one NIC's line rate
    holds gives one channel per NIC (``ppn x nics_per_gpu``, at most ``MAXCHANNELS / 2`` = 16; the tree graph
    takes the ring's channel count, ``init.cc``); ``ncclTopoDupChannels`` then doubles the channels and
    halves the speed when the speed is at least 25 GB/s, except on sm90 below 50 GB/s with more than 4
    channels. These are the *search* channels, which scale NCCL's per-channel caps in ``tuning.cc``; NCCL
    runs twice as many (one copy per tree, ``connect.cc``), and NVIDIA/nccl#1041 confirms 8 search
    channels on 8 x H100 with 8 NICs.

    Examples
    --------
    8 H100s with one 400 Gb/s NIC each (50 GB/s line rate): 8 channels of 48 GB/s, not duplicated.

    >>> net_graph_channels(CostModel(), 8)
    (8, 48.0)

    One GPU per server: the single 48 GB/s channel is duplicated into two of 24.

    >>> net_graph_channels(CostModel(), 1)
    (2, 24.0)
    """
    line_gbs = model.inter_bw_bytes_per_s / model.nic_efficiency / 1e9 / model.nics_per_gpu  # one NIC's
    sm90 = model.arch == "hopper"  # collsim's "hopper" row also stands for Blackwell (compute capability >= 90)
    speeds = SM90_SPEED_ARRAY_INTER if sm90 else SPEED_ARRAY_INTER
    speed = next((s for s in speeds if s <= line_gbs + 1e-9), speeds[-1])
    n = max(1, min(RING_SEARCH_MAX_CHANNELS, int(round(ppn * model.nics_per_gpu))))
    if speed >= 25.0 and not (sm90 and speed < 50.0 and n > 4):
        dup = min(2 * n, RING_SEARCH_MAX_CHANNELS)
        speed /= -(-dup // n)
        n = dup
    return n, float(speed)


def graph_channels(model: CostModel, nnodes: int, ppn: float) -> int:
    """The channel count that scales NCCL's per-channel caps: the search's (:func:`net_graph_channels`)
    across servers; inside one server the caps do not bind at NVLink rates, so ``model.nchannels`` stays.

    Examples
    --------
    >>> graph_channels(CostModel(), 2, 8), graph_channels(CostModel(), 1, 8)
    (8, 16)
    """
    return model.nchannels if nnodes <= 1 else net_graph_channels(model, ppn)[0]


def tree_pattern_factor(model: CostModel, nnodes: int, ppn: float) -> float:
    """NCCL's bandwidth factor of the tree graph's pattern: 0.85 for ``NCCL_TOPO_PATTERN_TREE``, else 1.

    Examples
    --------
    >>> tree_pattern_factor(CostModel(), 4, 8), tree_pattern_factor(CostModel(arch="ampere"), 4, 8)
    (0.85, 1.0)
    """
    # NCCL's tree graph is NCCL_TOPO_PATTERN_TREE (x 0.85 in tuning.cc) with one GPU per node (search.cc
    # forces it) and, on sm90+, when the balanced tree finds no path: when each NIC sits beside one GPU (as
    # in collsim's fabrics) the second GPU of a balanced tree has no PIX path to it, and the search tries the simpler tree
    # before it relaxes the path type (search.cc, "Try a simpler tree"). Ampere keeps the balanced tree.
    if nnodes <= 1:
        return 1.0
    return TREE_PATTERN_FACTOR if (ppn <= 1 or model.arch == "hopper") else 1.0


def ring_crosses_nics(model: CostModel, ppn: int, nvlink_gbs: float | None = None) -> bool:
    """Whether NCCL's ring graph across servers leaves a server through another NIC than it entered.

    ``ncclTopoCompute`` (``src/graph/search.cc`` v2.29.2-1, ``NCCL_CROSS_NIC`` = 2 by default) first
    searches rings that enter and leave each server through the same NIC (``crossNic`` 0). With one NIC
    beside each GPU (PIX), the last GPU of such a ring reaches the first GPU's NIC only through PXN (NVLink
    to the NIC's GPU), so every channel puts one NVLink hop on *every* GPU, and the NVLink credit
    (``nvlink_gbs``, e.g. 18 x 20.6 on H100) holds ``floor(nvlink / speed)`` channels. Only then does the
    search retry with ``crossNic`` 2: pairs of channels enter at NIC n and leave at NIC m, then the
    reverse, each exit through the exit GPU's own NIC, so a GPU carries ``n - floor(n / ppn)`` of the
    ``n`` channels' NVLink hops. Each channel starts at a NIC whose remaining rate holds the speed
    (``net.bw -= bw``), at most ``MAXCHANNELS / 2`` = 16. ``ncclTopoCompareGraphs`` keeps the cross-NIC
    graph only when ``channels x speed`` is strictly larger (a tie keeps the first graph); the search
    stops at 16 channels or once ``channels x speed`` reaches the GPU's total (``totalBw``), and tries
    slower speeds while the next one is above 0.49 of the best.

    Not used by collsim's ring plans, which stay rail-aligned (:func:`sim.planning.logical.nvlink_ring`):
    on the rail fabrics the cross-NIC hops take the spines, where collsim's per-flow ECMP loses 40-80% of
    the rings' rate and ``spray`` routing nothing, while the measured tables lose 13%: the cost is the
    fabric's (docs/validation.md, "Session 22: mechanisms").

    Parameters
    ----------
    model : CostModel
        Its NIC rate per GPU (line rate: ``inter_bw_bytes_per_s / nic_efficiency``), ``nics_per_gpu`` and
        ``arch`` (the speed array); its ``intra_bw_bytes_per_s`` is NCCL's NVLink credit unless
        ``nvlink_gbs`` is given.
    ppn : int
        GPUs per server (ranks of the communicator on each server).
    nvlink_gbs : float, optional
        One GPU's NVLink credit in GB/s.

    Returns
    -------
    bool
        True when the ring graph NCCL keeps is the cross-NIC one.

    Examples
    --------
    8 H100s (18 x 20.6 = 370.8 GB/s of NVLink) with eight 400 Gb/s NICs: the same-NIC rings fit 7 channels
    of 48 GB/s (8 x 48 = 384 > 370.8 through PXN), the cross-NIC ones 8 (7 x 48 = 336 per GPU): the
    ``crossNic 2, nChannels 8, bw 48`` graph NCCL logs on such servers.

    >>> ring_crosses_nics(CostModel(), 8, 18 * 20.6), ring_crosses_nics(CostModel(), 4, 18 * 20.6)
    (True, False)

    With 200 Gb/s NICs (24 GB/s channels) or B200's NVLink (18 x 40.1) both searches find 8 channels
    and the same-NIC graph stays; with one GPU per server there is no second GPU to leave from.

    >>> ring_crosses_nics(CostModel(inter_bw_bytes_per_s=25e9), 8, 18 * 20.6)
    False
    >>> ring_crosses_nics(CostModel(), 8, 18 * 40.1), ring_crosses_nics(CostModel(), 1, 18 * 20.6)
    (False, False)
    """
    if ppn < 2:
        return False
    nvl = float(model.intra_bw_bytes_per_s / 1e9 if nvlink_gbs is None else nvlink_gbs)
    line_gbs = model.inter_bw_bytes_per_s / model.nic_efficiency / 1e9 / model.nics_per_gpu  # one NIC's
    nics = ppn * model.nics_per_gpu
    speeds = SM90_SPEED_ARRAY_INTER if model.arch == "hopper" else SPEED_ARRAY_INTER
    usable = [s for s in speeds if s <= line_gbs + 1e-9]  # system->maxBw: a GPU's path to its NIC
    best, best_speed, cross = 0.0, 0.0, False
    for i, speed in enumerate(usable):
        cap = min(RING_SEARCH_MAX_CHANNELS, nics * int(line_gbs / speed + 1e-9))
        same = min(cap, int(nvl / speed + 1e-9))  # every GPU's NVLink once per channel (PXN exit)
        if same * speed > best + 1e-9:
            best, best_speed, cross = same * speed, speed, False
        if same >= RING_SEARCH_MAX_CHANNELS or best >= nvl - 1e-9:
            break
        other = max((n for n in range(cap, 0, -1) if (n - n // ppn) * speed <= nvl + 1e-9), default=0)
        if other * speed > best + 1e-9:
            best, best_speed, cross = other * speed, speed, True
        if best >= nvl - 1e-9 or (i + 1 < len(usable) and best_speed and usable[i + 1] / best_speed <= 0.49):
            break
    return cross
