"""The dependency edges of ring, chain and tree plans (pure functions over numpy arrays).

Each builder returns :class:`~sim.planning.plan.Edges` for one chunk of every channel: who sends to whom,
at which step, with which predecessors (the data a send forwards) and which previous send of the same
rank (NCCL's slot flow control); :func:`~sim.planning.plan.assemble` then pipelines the chunks.
:mod:`sim.planning.collectives` picks the builder for an op and algorithm.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from sim.planning import tuning
from sim.planning.plan import Edges, excl_cumsum

__all__ = ["chain_edges", "ring_edges", "tree_edges"]

_I64 = np.int64


# --- rings ------------------------------------------------------------------------------------------------

def ring_edges(rings: np.ndarray, nsteps: int, step_bytes: float, step_delay_s: float) -> Edges:
    """Every step, every rank sends to its ring successor; step s forwards what arrived at step s−1.

    Parameters
    ----------
    rings : numpy.ndarray
        ``(K, n)`` ring orders, one row per channel.
    nsteps : int
        Steps of the ring (``2(n−1)`` for AllReduce, ``n−1`` for AllGather / ReduceScatter).
    step_bytes, step_delay_s : float
        Bytes and software latency of one step's send.

    Returns
    -------
    Edges
        ``nsteps · K · n`` edges in the order ``(step, channel, position)``.

    Examples
    --------
    >>> e = ring_edges(np.array([[0, 1, 2]]), 2, 8.0, 0.0)
    >>> e.src.tolist(), e.dst.tolist()
    ([0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0])
    """
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


def chain_edges(orders: np.ndarray, hop_bytes: float, hop_delay_s: float) -> Edges:
    """A pipelined chain along each channel's order: hop h forwards what hop h−1 delivered.

    Parameters
    ----------
    orders : numpy.ndarray
        ``(K, n)`` chain orders (root first), one row per channel.
    hop_bytes, hop_delay_s : float
        Bytes and software latency of one hop.

    Returns
    -------
    Edges
        ``(n−1) · K`` edges in the order ``(hop, channel)``.

    Examples
    --------
    >>> e = chain_edges(np.array([[2, 0, 1]]), 4.0, 0.0)
    >>> e.src.tolist(), e.dst.tolist()
    ([2, 0], [0, 1])
    """
    k, n = orders.shape
    h, ch = (a.reshape(-1) for a in np.meshgrid(np.arange(n - 1), np.arange(k), indexing="ij"))
    has_pred = h >= 1
    pred_idx = ((h - 1) * k + ch)[has_pred]
    return Edges(src=orders[ch, h], dst=orders[ch, h + 1], channel=ch, step=h,
                  bytes=np.full(len(h), float(hop_bytes)), delay_s=np.full(len(h), hop_delay_s),
                  pred_ptr=excl_cumsum(has_pred.astype(_I64)), pred_idx=pred_idx.astype(_I64),
                  prev=np.full(len(h), -1, _I64), pos=h)


# --- trees ------------------------------------------------------------------------------------------------

def tree_edges(ranks: np.ndarray, parents: list[np.ndarray], server: np.ndarray, ch_bytes: float,
                proto: str, model: tuning.CostModel | None = None) -> Edges:
    """Reduce up every channel's tree, then broadcast down it, chunk by chunk.

    Parameters
    ----------
    ranks : numpy.ndarray
        GPU of each tree position.
    parents : list of numpy.ndarray
        Per channel, each position's parent (``-1`` at the root).
    server : numpy.ndarray
        Server of each position (a hop between servers pays the network's latency).
    ch_bytes : float
        Bytes of one channel's share.
    proto : str
        NCCL protocol, for the hop latencies.
    model : CostModel, optional
        The cost model (default :data:`~sim.planning.cost_model.DEFAULT_MODEL`).

    Returns
    -------
    Edges
        Per channel the up edges (child → parent) then the down edges (parent → child).

    Examples
    --------
    >>> e = tree_edges(np.array([5, 6]), [np.array([-1, 0])], np.zeros(2, dtype=np.int64), 8.0, "Simple")
    >>> e.src.tolist(), e.dst.tolist()
    ([6, 5], [5, 6])
    """
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
