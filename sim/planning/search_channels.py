"""NCCL's topology search across servers, as far as the tuner needs it: the search's channel count and
speed (which scale ``tuning.cc``'s per-channel caps) and the tree graph's pattern.

References
----------
NVIDIA/nccl ``src/graph/search.cc``, ``src/graph/tuning.cc``, ``src/init.cc``, ``src/graph/connect.cc``
(v2.23.4-1); NVIDIA/nccl#1041.
"""

from __future__ import annotations

from sim.planning.cost_model import CostModel
from sim.planning.nccl_tables import (
    RING_SEARCH_MAX_CHANNELS,
    SM90_SPEED_ARRAY_INTER,
    SPEED_ARRAY_INTER,
    TREE_PATTERN_FACTOR,
)

__all__ = ["graph_channels", "net_graph_channels", "tree_pattern_factor"]


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
