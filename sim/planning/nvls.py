"""NVLS and NVLSTree AllReduce: the NVSwitch reduces and multicasts (NVLink SHARP, H100/H200/B200).

NCCL's data path (``src/device/all_reduce.h``, ``src/transport/nvls.cc``, 2.23) for the slice of each
*head* (every GPU of a server is the head of ``1/ppn`` of the data):

1. *reduce*: the head's ``multimem.ld_reduce`` makes the switch read the slice from every GPU of the
   server (each GPU -> switch, the head's own copy too) and return the sum (switch -> head);
2. NVLSTree only: the head sends its server's sum up the inter-node tree to the head of the same local
   rank (same rail) of the parent server, which adds its children's sums; the root's total comes back
   down the tree (NCCL's double binary tree over servers; channel ``c`` uses tree ``c % 2``);
3. *multicast*: the head's ``multimem.st`` of the result (head -> switch) reaches every GPU of its server
   (switch -> each GPU).

Scatter and gather copy between the user buffers and the NVLS buffers on the GPU itself (no link).
So a GPU's NVLink carries ``S (ppn + 1) / ppn`` each way, and the NVSwitch appears in the plan as the
party that reduces: legs GPU -> switch and switch -> GPU (:data:`~sim.planning.plan.LEG_UP`,
:data:`~sim.planning.plan.LEG_DOWN`). The reduce legs of one GPU (one per head) start together and share
its link, so they are one leg carrying every head's slice; likewise the multicasts into one GPU.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError
from sim.planning import logical
from sim.planning.cost_model import CostModel
from sim.planning.nccl_tables import NVLS_ALGBW_RATIO, NVLS_CHANNELS, NVLS_TREE_MAX_PER_CH
from sim.planning.plan import LEG_DOWN, LEG_PATH, LEG_UP, Edges, excl_cumsum

__all__ = ["nvls_chunks", "nvls_edges", "nvls_tree_kernel_factor"]

_I64 = np.int64


class _Builder:
    """Edges appended one by one (the NVLS shapes are irregular; sizes stay in the hundreds)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {k: [] for k in ("src", "dst", "channel", "step", "bytes", "leg", "delay")}
        self.preds: list[list[int]] = []

    def add(self, src: int, dst: int, channel: int, step: int, nbytes: float, leg: int, preds,
            delay_s: float = 0.0) -> int:
        for key, value in (("src", src), ("dst", dst), ("channel", channel), ("step", step),
                           ("bytes", nbytes), ("leg", leg), ("delay", delay_s)):
            self.cols[key].append(value)
        self.preds.append(list(preds))
        return len(self.preds) - 1

    def edges(self) -> Edges:
        m = len(self.preds)
        c = self.cols
        return Edges(src=np.array(c["src"], _I64), dst=np.array(c["dst"], _I64), channel=np.array(c["channel"], _I64),
                     step=np.array(c["step"], _I64), bytes=np.array(c["bytes"], np.float64),
                     delay_s=np.array(c["delay"], np.float64),
                     pred_ptr=excl_cumsum(np.array([len(p) for p in self.preds], _I64)),
                     pred_idx=np.array([x for p in self.preds for x in p], _I64), prev=np.full(m, -1, _I64),
                     pos=np.arange(m, dtype=_I64), leg=np.array(c["leg"], np.int8))


def _depths(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth, height) of every node of a parent array (root depth 0, leaves height 0)."""
    m = len(parent)
    depth = np.zeros(m, _I64)
    for v in range(m):
        u, d = v, 0
        while parent[u] >= 0:
            u, d = parent[u], d + 1
        depth[v] = d
    height = np.zeros(m, _I64)
    for v in np.argsort(-depth, kind="stable"):
        if parent[v] >= 0:
            height[parent[v]] = max(height[parent[v]], height[v] + 1)
    return depth, height


def nvls_tree_kernel_factor(model: CostModel, nranks: int, nnodes: int) -> float:
    """Factor (>= 1) on the NVLink legs' bytes of an NVLSTree plan: the kernel's own ceiling.

    The plan's NVLink carries ``S (ppn + 1) / ppn`` each way at the credited NVLink rate x NCCL's 5/6,
    which on one server is what NVLS delivers (8 x H100: 274.7 GB/s algbw; 270.6 measured at 4 GiB,
    NVIDIA/nccl-tests#290). Across servers the NVLSTree kernel delivers less for the same NVLink loads:
    its warps split into reduce-to-network and network-to-multicast groups, and the root's reduce warps
    also add the children's sums (``all_reduce.h``). NCCL 2.28 bounds it by a bus bandwidth per NVLS
    channel (:data:`~sim.planning.nccl_tables.NVLS_TREE_MAX_PER_CH`, Hopper 57.7 GB/s on two servers,
    45.5 beyond) for the one NVLS channel of each of the server's ``ppn`` heads, so the algorithm
    bandwidth is at most ``ppn x cap x nranks / (2 (nranks - 1))``. Where that is below the NVLink
    bound the NVLink legs carry the ratio more bytes, so the legs take as long as the kernel does (the
    flow engine has no per-flow ceiling); the network legs are untouched. 1 without the protocol
    overhead (no hardware preset: the closed forms stay exact), on one server, and where the
    generation has no row.

    Examples
    --------
    2 x 8 H100 (NVLink credited 18 x 20.6 GB/s): 274.7 GB/s algbw on NVLink, 8 x 57.7 x 16/30 = 246.2
    the kernel's.

    >>> h100 = CostModel(intra_bw_bytes_per_s=370.8e9, protocol_overhead=True, nvls=True)
    >>> round(nvls_tree_kernel_factor(h100, 16, 2), 4)
    1.1157
    >>> nvls_tree_kernel_factor(h100, 8, 1), nvls_tree_kernel_factor(CostModel(nvls=True), 16, 2)
    (1.0, 1.0)
    """
    arch = model.gpu_arch or model.arch
    if not model.protocol_overhead or nnodes <= 1 or arch not in NVLS_TREE_MAX_PER_CH or nranks < 2:
        return 1.0
    ppn = nranks / nnodes
    nvlink_bps = model.intra_bw_bytes_per_s * NVLS_ALGBW_RATIO * ppn / (ppn + 1.0)
    cap_gbs = NVLS_TREE_MAX_PER_CH[arch][0 if nnodes <= 2 else 1]
    kernel_bps = ppn * cap_gbs * 1e9 * nranks / (2.0 * (nranks - 1))
    return max(1.0, nvlink_bps / kernel_bps)


def nvls_edges(ranks: np.ndarray, groups: list[np.ndarray], nchannels: int, ch_bytes: float,
               net_hop_s: float = 0.0, nvlink_factor: float = 1.0) -> Edges:
    """Pipeline stages of an NVLS (one server) or NVLSTree (several) AllReduce, per channel.

    Parameters
    ----------
    ranks : ndarray of int
        Global ranks in comm-rank order.
    groups : list of ndarray
        Comm-rank positions of each server (``sim.planning.logical.server_groups``), all of one size.
    nchannels : int
        Channels; with several servers channel ``c`` uses tree ``c % 2``.
    ch_bytes : float
        Bytes of the buffer each channel reduces.
    net_hop_s : float
        Latency of each hop of the inter-node tree (paid by its first chunk, as a tree's hops).
    nvlink_factor : float
        Multiplier of the switch legs' bytes (:func:`nvls_tree_kernel_factor`; 1: the data).

    Returns
    -------
    Edges
        Chunk them with :func:`sim.planning.plan.assemble` (``step_major=False``).

    Raises
    ------
    SimError
        Servers with different numbers of GPUs.

    Examples
    --------
    One server of 4 GPUs: 4 reduce legs up, 4 down (one per head), 4 multicast legs up, 4 down.

    >>> e = nvls_edges(np.arange(4), [np.arange(4)], 1, 4096.0)
    >>> len(e.src), e.leg.tolist().count(1), float(e.bytes.sum())
    (16, 8, 40960.0)
    """
    ppn = len(groups[0])
    if any(len(g) != ppn for g in groups):
        raise SimError("NVLS needs the same number of GPUs on every server of the communicator")
    if not nvlink_factor >= 1.0:
        raise SimError(f"nvlink_factor {nvlink_factor} must be >= 1")
    m = len(groups)
    slice_bytes = ch_bytes / ppn
    leg_bytes, leg_slice = ch_bytes * nvlink_factor, slice_bytes * nvlink_factor
    trees = logical.double_binary_tree(m) if m > 1 else (np.array([-1]), np.array([-1]))
    b = _Builder()
    for ch in range(nchannels):
        parent = trees[ch % 2]
        depth, height = _depths(parent)
        top = int(height.max())
        red_down: dict[tuple[int, int], int] = {}
        for k, g in enumerate(groups):
            ups = [b.add(ranks[x], ranks[x], ch, 0, leg_bytes, LEG_UP, ()) for x in g]
            for h, x in enumerate(g):
                red_down[k, h] = b.add(ranks[x], ranks[x], ch, 1, leg_slice, LEG_DOWN, ups)
        # the sums climb the tree (deepest servers first), then the total comes down from the root
        net_up: dict[tuple[int, int], int] = {}
        for k in np.argsort(-depth, kind="stable").tolist():
            if parent[k] < 0:
                continue
            for h in range(ppn):
                kids = [net_up[c, h] for c in np.flatnonzero(parent == k).tolist()]
                net_up[k, h] = b.add(ranks[groups[k][h]], ranks[groups[parent[k]][h]], ch, 2 + int(height[k]),
                                     slice_bytes, LEG_PATH, [red_down[k, h], *kids], net_hop_s)
        root = int(np.flatnonzero(parent < 0)[0])
        ready = {h: [red_down[root, h], *(net_up[c, h] for c in np.flatnonzero(parent == root).tolist())]
                 for h in range(ppn)}
        got: dict[tuple[int, int], list[int]] = {(root, h): ready[h] for h in range(ppn)}
        for k in np.argsort(depth, kind="stable").tolist():
            if parent[k] < 0:
                continue
            for h in range(ppn):
                p = int(parent[k])
                got[k, h] = [b.add(ranks[groups[p][h]], ranks[groups[k][h]], ch, 3 + top + int(depth[p]),
                                   slice_bytes, LEG_PATH, got[p, h], net_hop_s)]
        for k, g in enumerate(groups):
            mc = [b.add(ranks[x], ranks[x], ch, 3 + top + int(depth[k]), leg_slice, LEG_UP, got[k, h])
                  for h, x in enumerate(g)]
            for x in g:
                b.add(ranks[x], ranks[x], ch, 4 + top + int(depth[k]), leg_bytes, LEG_DOWN, mc)
    return b.edges()


def nvls_chunks(nbytes: float, ppn: int, chunk_bytes: float, edges_per_plan: int = 1,
                max_transfers: int | None = None) -> int:
    """Chunks per channel of an NVLS plan: NCCL's loop count ``ceil(S / (16 channels x ppn heads x
    chunk))`` (``max_transfers``, when given, caps ``edges_per_plan x chunks``).

    A plan with fewer channels than NCCL's 16 keeps NCCL's number of loops, so every stage of the
    pipeline takes as long as one of NCCL's and the fill costs the same time.

    Examples
    --------
    >>> nvls_chunks(1 << 30, 8, 128 << 10)
    64
    >>> nvls_chunks(1 << 34, 8, 128 << 10, 32, 16384)
    512
    """
    if not chunk_bytes > 0:
        raise SimError(f"chunk_bytes {chunk_bytes} must be > 0")
    want = max(1, math.ceil(nbytes / (NVLS_CHANNELS * max(ppn, 1) * chunk_bytes)))
    if max_transfers is None:
        return int(want)
    return int(max(1, min(want, max_transfers // max(1, edges_per_plan))))
