"""NCCL's point-to-point channels: how many a network peer gets, and the rate ceiling they set.

Every p2p connection between two ranks runs on ``p2pnChannelsPerPeer`` channels at most, and each
channel's proxy progresses one connection at a time, so a pair's rate over the network is at most
``channels x per-channel rate``. The per-channel rate is NCCL's own figure,
``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s (``src/graph/paths.cc`` v2.29.2-1, the bandwidth NCCL
assumes one channel drives when it sizes a network peer's channels against its NICs); collsim applies
it to every version (earlier versions give the peer fewer or more channels, not faster ones).

The channel count per network peer, from NCCL's source (``ncclTopoGetNchannels`` and
``ncclTopoComputeP2pChannels`` in ``src/graph/paths.cc``, ``addP2pToPlan`` in ``src/enqueue.cc``):

2.19 (v2.19.4-1)
    ``NCCL_NCHANNELS_PER_NET_PEER`` = 2.
2.20 - 2.28 (v2.20.3-1 .. v2.28.9-1; read at v2.23.4-1)
    2, halved while ``2 nRanks > 4 p2pnChannels``, at least the NICs the GPU needs
    (``getLocalNetCountByBw``).
2.29 (v2.29.2-1)
    ``max(NICs, ceil(netBw / 14))``, where ``netBw`` sums the GPU's local NICs (each at ``min(PCIe, NIC)``)
    until it reaches the GPU's PCIe bandwidth; rounded up to a power of two, then on several nodes halved
    while ``channels x ceil(nRanks / 8) > p2pnChannels`` (8 = ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``).

In every version the count is the minimum over the communicator's peers (NVLink peers get
``2 max(1, bw / nvlBw)``, far more) and over ``p2pnChannels = pow2Up(min(nChannels, MAXCHANNELS))``. A
message then uses ``nChannelsMin`` channels, doubled while a part exceeds one ``NCCL_P2P_NET_CHUNKSIZE``
(128 KiB) up to the per-peer count (``addP2pToPlan``: parts of 64 - 128 KiB across nodes).

The communicator's ``nChannels`` across servers is the ring search's channel count doubled
(``ncclTopoPostset``, ``src/graph/connect.cc``), doubled again on sm90+ when the ring's intra bandwidth is
above 45 GB/s and fewer than 16 channels result ("4 compute channels per search channel").
"""

from __future__ import annotations

import math
import re

from sim.errors import SimError
from sim.planning.cost_model import CostModel
from sim.planning.search_channels import net_graph_channels

__all__ = ["CURRENT_NCCL_VERSION", "P2P_NET_CHUNK_BYTES", "P2P_PER_CHANNEL_NET_BW_GBS", "comm_channels",
           "message_channels", "net_peer_channels", "p2p_net_channels", "parse_nccl_version",
           "pcie_gbs"]

#: NCCL's current release (NVIDIA/nccl tag v2.29.7-1): what a fabric without ``nccl_version`` runs.
CURRENT_NCCL_VERSION = (2, 29, 7)
#: ``NCCL_P2P_PER_CHANNEL_NET_BW`` (GB/s), ``src/graph/paths.cc`` v2.29.2-1.
P2P_PER_CHANNEL_NET_BW_GBS = 14.0
#: ``NCCL_P2P_NET_CHUNKSIZE`` (``src/init.cc``, 128 KiB in 2.19 - 2.29).
P2P_NET_CHUNK_BYTES = 1 << 17
#: ``NCCL_NCHANNELS_PER_NET_PEER`` of 2.19 (``src/graph/paths.cc`` v2.19.4-1); 2.20+ start from it too.
_NET_PEER_CHANNELS_219 = 2
#: ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (``src/include/device.h`` v2.29.2-1).
_P2P_PER_BATCH = 8
#: A GPU's PCIe x16 bandwidth in NCCL's topology, ``width x speed / 80`` GB/s (``src/graph/topo.cc``,
#: ``kvDictPciGen``: 16 GT/s -> 120, 32 GT/s -> 240): Gen4 on A100, Gen5 on H100 / H200 / B200.
_PCIE_GBS = {"volta": 12.0, "ampere": 24.0, "hopper": 48.0}


def parse_nccl_version(value) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of an NCCL version: ``"2.29.2"``, ``"2.23"``, NCCL's code ``22902``, or
    ``None`` (the current release).

    Raises
    ------
    SimError
        A value that is no NCCL 2.x version.

    Examples
    --------
    >>> parse_nccl_version("2.29.2"), parse_nccl_version(22305), parse_nccl_version("2.19")
    ((2, 29, 2), (2, 23, 5), (2, 19, 0))
    """
    if value is None:
        return CURRENT_NCCL_VERSION
    text = str(value).strip()
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-\d+)?", text)
    if m:
        out = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    elif re.fullmatch(r"\d{5}", text):   # NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch
        code = int(text)
        out = (code // 10000, code // 100 % 100, code % 100)
    else:
        raise SimError(f"nccl_version {value!r} is not an NCCL version such as 2.29.2 or 22902")
    if out[0] != 2:
        raise SimError(f"nccl_version {value!r}: only NCCL 2.x is modelled")
    return out


def pcie_gbs(arch: str) -> float:
    """A GPU's PCIe bandwidth (GB/s) as NCCL's topology gives it, by generation.

    Examples
    --------
    >>> pcie_gbs("hopper"), pcie_gbs("ampere")
    (48.0, 24.0)
    """
    return _PCIE_GBS.get(arch, _PCIE_GBS["hopper"])


def _pow2_up(v: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(v, 1))))


def _max_channels(version: tuple[int, int, int]) -> int:
    # MAXCHANNELS: 32 up to 2.25, 64 from 2.26 (src/include/device.h)
    return 64 if version >= (2, 26, 0) else 32


def comm_channels(model: CostModel, nnodes: int, ppn: float, version=None) -> int:
    """The communicator's ``nChannels`` across servers (``ncclTopoPostset``, see the module docstring).

    Examples
    --------
    8 H100 per server, one 400 Gb/s NIC each: 8 search channels, doubled; one GPU per server: 2 doubled.

    >>> comm_channels(CostModel(), 10, 8), comm_channels(CostModel(), 10, 1)
    (16, 4)
    """
    version = parse_nccl_version(version) if not isinstance(version, tuple) else version
    n, speed = net_graph_channels(model, ppn)
    ch = min(_max_channels(version), 2 * n)
    if nnodes > 1 and model.arch == "hopper" and speed > 45.0 and ch < 16:
        ch = min(_max_channels(version), 2 * ch)
    return ch


def net_peer_channels(version, nranks: int, nnodes: int, nchannels: int, net_count: int = 1,
                      net_bw_gbs: float = 48.0) -> int:
    """``p2pnChannelsPerPeer`` of a communicator with network peers (the module docstring's rules).

    Parameters
    ----------
    version : tuple or str
        NCCL version.
    nranks, nnodes : int
        The communicator's ranks and servers.
    nchannels : int
        Its ``nChannels`` (:func:`comm_channels`).
    net_count, net_bw_gbs : int, float
        The GPU's local NICs NCCL counts and their bandwidth (``getLocalNetCountByBw``).

    Examples
    --------
    The three SendRecv tables of the suite (NCCL 2.29): 80 ranks, 10 ranks on one NIC each, 32 ranks.

    >>> v = (2, 29, 2)
    >>> net_peer_channels(v, 80, 10, 16), net_peer_channels(v, 10, 10, 4), net_peer_channels(v, 32, 4, 16)
    (1, 2, 4)
    >>> net_peer_channels((2, 19, 4), 80, 10, 16), net_peer_channels((2, 23, 4), 80, 10, 16)
    (2, 1)
    """
    version = parse_nccl_version(version) if not isinstance(version, tuple) else version
    p2pn = min(nchannels, _max_channels(version))
    if version < (2, 20, 0):
        per_peer = min(p2pn, _NET_PEER_CHANNELS_219)
        return _pow2_up(per_peer)
    if version < (2, 29, 0):
        cmax = _NET_PEER_CHANNELS_219
        while cmax * nranks > p2pn * 4 and cmax > 1:   # "we loose the sync warp" beyond 8+ ops a channel
            cmax //= 2
        per_peer = min(p2pn, max(net_count, cmax))
        return min(_pow2_up(per_peer), _pow2_up(p2pn))
    per_peer = _pow2_up(max(net_count, math.ceil(int(net_bw_gbs) / P2P_PER_CHANNEL_NET_BW_GBS)))
    p2pn = _pow2_up(p2pn)
    if nnodes > 1:   # the network is the bottleneck: fit every peer into one round of p2pnChannels
        while per_peer * -(-nranks // _P2P_PER_BATCH) > p2pn and per_peer > 1:
            per_peer //= 2
    return min(per_peer, p2pn)


def message_channels(nbytes: float, per_peer: int, nranks: int, p2pn: int) -> int:
    """Channels one network send of ``nbytes`` runs on (``addP2pToPlan``, ``src/enqueue.cc``).

    ``nChannelsMin`` is the per-peer count halved while ``nChannelsMin x nRanks > p2pnChannels``; a send
    starts at ``min(nChannelsMin, ceil(bytes / 64 KiB))`` channels and doubles while a part is above
    128 KiB, up to the per-peer count.

    Examples
    --------
    >>> message_channels(1 << 30, 4, 32, 16), message_channels(64 << 10, 4, 32, 16), message_channels(0, 4, 2, 16)
    (4, 1, 1)
    """
    cmin = per_peer
    while cmin * nranks > p2pn and cmin > 1:
        cmin //= 2
    if nbytes <= 0:
        return 1
    lo, hi = P2P_NET_CHUNK_BYTES // 2, P2P_NET_CHUNK_BYTES
    n = max(1, min(cmin, math.ceil(nbytes / lo)))   # divUp of a positive size is at least 1
    part = max(lo, math.ceil(nbytes / n))
    while part > hi and n <= per_peer // 2:
        n *= 2
        part = math.ceil(nbytes / n)
    return n


def p2p_net_channels(model: CostModel, nranks: int, nnodes: int, ppn: float, version=None
                            ) -> tuple[int, int]:
    """(channels per network peer, ``p2pnChannels``) of a communicator; the cap of a pair is the channels
    a message uses (:func:`message_channels`) x :data:`P2P_PER_CHANNEL_NET_BW_GBS`.

    The GPU's local NICs: ``model.nics_per_gpu`` NICs of ``inter_bw / nic_efficiency / nics_per_gpu``
    line rate each, counted as ``getLocalNetCountByBw`` does (each at ``min(PCIe, NIC)``, until their sum
    reaches the GPU's PCIe bandwidth).

    Examples
    --------
    >>> p2p_net_channels(CostModel(), 80, 10, 8, "2.29.2"), p2p_net_channels(CostModel(), 32, 4, 8)
    ((1, 16), (4, 16))
    """
    version = parse_nccl_version(version) if not isinstance(version, tuple) else version
    nch = comm_channels(model, nnodes, ppn, version)
    nic_gbs = model.inter_bw_bytes_per_s / model.nic_efficiency / 1e9 / model.nics_per_gpu
    gpu_gbs = pcie_gbs(model.arch)
    count, total = 0, 0.0
    for _ in range(model.nics_per_gpu):
        total += min(gpu_gbs, nic_gbs)
        count += 1
        if total >= gpu_gbs:
            break
    per_peer = net_peer_channels(version, nranks, nnodes, nch, count, total)
    return per_peer, _pow2_up(min(nch, _max_channels(version)))
