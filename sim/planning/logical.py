"""Logical topologies over ranks, in NCCL's orders: rings per channel and the double binary tree.

Everything here is a pure function of the communicator (its global ranks in comm-rank order and the
server of each); nothing knows the network. ``sim.planning.collectives`` turns these shapes into transfers.

Rings
    NVLink-aware: a server's GPUs are adjacent and servers follow each other in order of first
    appearance in the communicator, so a ring crosses the network once per server. NCCL builds one ring
    per channel and varies them so the network hops use different GPUs (and so different NICs): here
    channel ``c`` rotates every server's GPU order by ``c``, so the ring enters server ``k`` at its
    ``c``-th GPU and leaves from the one before. Rings logged in a trace (metadata ``rings``) replace
    the built ones.

Double binary tree
    NCCL's AllReduce tree: a binary tree over servers (nodes) in which every interior node has an even
    index, and a second tree that mirrors it (even node count) or shifts it by one (odd), so no node is
    interior in both trees. Inside a server the GPUs form a chain hanging from the server's head GPU, the
    one that talks to the network.

References
----------
NVIDIA/nccl ``src/graph/trees.cc`` (double binary tree), ``src/graph/connect.cc`` (rings, chains);
Sanders, Speck, Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan" (2009).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.errors import SimError

__all__ = [
    "as_ranks",
    "btree_parents",
    "cross_nic_ring",
    "double_binary_tree",
    "logged_ring",
    "nvlink_ring",
    "rank_tree",
    "rings_for_channels",
    "server_groups",
    "tree_depth",
    "tree_of_channel",
]


def as_ranks(ranks: Sequence[int] | np.ndarray) -> np.ndarray:
    """A communicator's global ranks as a flat int64 array.

    Raises
    ------
    SimError
        When a rank is listed twice.

    Examples
    --------
    >>> as_ranks([3, 1, 2]).tolist()
    [3, 1, 2]
    """
    arr = np.asarray(ranks, dtype=np.int64).reshape(-1)
    if len(np.unique(arr)) != len(arr):
        raise SimError("ranks: a communicator lists the same global rank twice")
    return arr


def server_groups(ranks: Sequence[int] | np.ndarray,
                  server_of: Sequence[int] | np.ndarray | None = None) -> list[np.ndarray]:
    """Comm-rank positions grouped by server, servers in order of first appearance.

    Parameters
    ----------
    ranks : sequence of int
        Global ranks in comm-rank order.
    server_of : sequence of int, optional
        Server index of each of those ranks; ``None`` puts every rank on one server.

    Returns
    -------
    list of ndarray
        One array of comm-rank positions per server, each in comm-rank order.

    Examples
    --------
    >>> [g.tolist() for g in server_groups([10, 11, 12, 13], [1, 0, 1, 0])]
    [[0, 2], [1, 3]]
    """
    n = len(as_ranks(ranks))
    if server_of is None:
        return [np.arange(n, dtype=np.int64)]
    srv = np.asarray(server_of).reshape(-1)
    if len(srv) != n:
        raise SimError(f"server_of: {len(srv)} entries for {n} ranks")
    _, first, inverse = np.unique(srv, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # servers by first appearance
    return [np.flatnonzero(inverse == s) for s in order]


def nvlink_ring(ranks: Sequence[int] | np.ndarray, server_of: Sequence[int] | np.ndarray | None = None,
                channel: int = 0) -> np.ndarray:
    """NVLink-aware ring of one channel: global ranks in ring order.

    A server's GPUs are adjacent, and the ring is rail-aligned as NCCL builds it: the GPU with local
    rank r that leaves a server talks to local rank r of the next server (same rail, same NIC index).
    Servers alternate direction: an even server (in order of appearance) runs from local rank ``c`` up to
    ``c - 1``, an odd one from ``c - 1`` down to ``c`` (``c`` = channel mod the server's GPUs), so every
    network hop joins equal local ranks (with an odd server count, the closing hop cannot). Successive
    channels cross the network from different GPUs.

    Examples
    --------
    >>> nvlink_ring([0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1]).tolist()
    [0, 1, 2, 5, 4, 3]
    >>> nvlink_ring([0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1], channel=1).tolist()
    [1, 2, 0, 3, 5, 4]
    """
    arr = as_ranks(ranks)
    parts = []
    for k, g in enumerate(server_groups(arr, server_of)):
        c = channel % len(g)
        if k % 2 == 0:
            parts.append(np.roll(g, -c))
        else:  # from local rank c - 1 down to c: enters on the rail the previous server left from
            rev = g[::-1]
            parts.append(np.roll(rev, -(len(g) - 1 - (c - 1) % len(g))))
    return arr[np.concatenate(parts)] if parts else arr


def cross_nic_ring(ranks: Sequence[int] | np.ndarray, server_of: Sequence[int] | np.ndarray | None = None,
                   channel: int = 0) -> np.ndarray:
    """Ring of one channel as NCCL's cross-NIC ring graph builds it (``crossNic`` 2, ``search.cc``).

    Every server runs the same GPU order (NCCL's graph is per node and the rings join server ``k``'s
    last GPU to server ``k + 1``'s first). Channels come in pairs: channel ``2j`` enters at local rank
    ``2j`` and leaves from ``2j + 1`` (through that GPU's own NIC), channel ``2j + 1`` is its reverse, as
    ``ncclTopoSearchCheckNet`` requires (an odd channel starts at the NIC the previous one left from and
    leaves through the one it entered). So every network hop joins local rank ``2j + 1`` of one server
    to ``2j`` of the next, or back: another rail. Pair ``j`` is ``(channel mod ppn) // 2``; servers need
    the same even GPU count (else :func:`nvlink_ring`). The plans do not use it by default
    (:func:`sim.planning.search_channels.ring_crosses_nics` says when NCCL would).

    Examples
    --------
    >>> cross_nic_ring([0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 1, 1, 1, 1]).tolist()
    [0, 2, 3, 1, 4, 6, 7, 5]
    >>> cross_nic_ring([0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 1, 1, 1, 1], channel=3).tolist()
    [3, 1, 0, 2, 7, 5, 4, 6]
    """
    arr = as_ranks(ranks)
    groups = server_groups(arr, server_of)
    ppn = len(groups[0]) if groups else 0
    if ppn < 2 or ppn % 2 or any(len(g) != ppn for g in groups):
        return nvlink_ring(arr, server_of, channel)
    c = channel % ppn
    a, b = c - c % 2, c - c % 2 + 1
    local = [a, *[i for i in range(ppn) if i not in (a, b)], b]
    if c % 2:
        local = local[::-1]
    return arr[np.concatenate([g[local] for g in groups])]


def logged_ring(ring: Sequence[int], ranks: Sequence[int] | np.ndarray) -> np.ndarray:
    """Check a ring taken from trace metadata: it must list every member exactly once.

    Raises
    ------
    SimError
        The ring is not a permutation of ``ranks``.

    Examples
    --------
    >>> logged_ring([2, 0, 1], [0, 1, 2]).tolist()
    [2, 0, 1]
    """
    arr = as_ranks(ranks)
    r = np.asarray(ring, dtype=np.int64).reshape(-1)
    if len(r) != len(arr) or not np.array_equal(np.sort(r), np.sort(arr)):
        raise SimError(f"metadata field 'rings': ring {r.tolist()[:8]}... is not a permutation of the "
                       f"communicator's {len(arr)} ranks")
    return r


def rings_for_channels(ranks: Sequence[int] | np.ndarray, nchannels: int,
                       server_of: Sequence[int] | np.ndarray | None = None,
                       logged: Sequence[Sequence[int]] | None = None, cross_nic: bool = False) -> np.ndarray:
    """Ring order of every channel, shape ``(nchannels, n)`` of global ranks.

    Channel ``c`` uses logged ring ``c mod len(logged)`` when rings were logged, else
    :func:`cross_nic_ring` of channel ``c`` when ``cross_nic`` (NCCL's search keeps its cross-NIC graph,
    ``sim.planning.search_channels.ring_crosses_nics``), else :func:`nvlink_ring` with rotation ``c``.

    Examples
    --------
    >>> rings_for_channels([0, 1, 2, 3], 2, [0, 0, 1, 1]).tolist()
    [[0, 1, 3, 2], [1, 0, 2, 3]]
    """
    if nchannels < 1:
        raise SimError(f"nchannels {nchannels} must be >= 1")
    arr = as_ranks(ranks)
    if logged:
        checked = [logged_ring(r, arr) for r in logged]
        return np.stack([checked[c % len(checked)] for c in range(nchannels)])
    build = cross_nic_ring if cross_nic else nvlink_ring
    return np.stack([build(arr, server_of, c) for c in range(nchannels)])


def _cartesian_tree(lo: int, hi: int, parent: np.ndarray, up: int) -> None:
    """Attach the in-order tree of nodes lo..hi (inclusive) under ``up``.

    The root of an interval is its member with the most trailing zero bits (unique in any interval), so
    leaves are the odd numbers and each level up doubles the power of two.
    """
    stack = [(lo, hi, up)]
    while stack:
        a, b, p = stack.pop()
        if a > b:
            continue
        # the member of [a, b] with the most trailing zeros: clear low bits of b while staying >= a
        x = b
        bit = 1
        while True:
            y = x & ~bit
            if y < a or y == 0:
                break
            x = y
            bit <<= 1
        parent[x] = p
        stack.append((a, x - 1, x))
        stack.append((x + 1, b, x))


def btree_parents(m: int) -> np.ndarray:
    """Parent of each of ``m`` nodes in NCCL's first binary tree (``-1`` at the root).

    Node 0 is the root and has one child; nodes ``1..m-1`` form the in-order binary tree whose interval
    roots are the members with the most trailing zero bits (``8`` over 1..13, then ``4`` and ``12``...).
    Leaves are the odd nodes, so depth is about ``log2(m)``.

    Examples
    --------
    >>> btree_parents(8).tolist()
    [-1, 2, 4, 2, 0, 6, 4, 6]
    >>> btree_parents(1).tolist()
    [-1]
    """
    if m < 1:
        raise SimError(f"a tree needs at least one node, got {m}")
    parent = np.full(m, -1, dtype=np.int64)
    if m > 1:
        _cartesian_tree(1, m - 1, parent, 0)
    return parent


def double_binary_tree(m: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's two complementary binary trees over ``m`` nodes, as parent arrays.

    The second tree mirrors the first (node ``i`` plays ``m-1-i``) when ``m`` is even and shifts it by one
    (``i`` plays ``i-1``) when odd, so (for even ``m``) every node is a leaf in at least one tree.

    Examples
    --------
    >>> t0, t1 = double_binary_tree(4)
    >>> t0.tolist(), t1.tolist()
    ([-1, 2, 0, 2], [1, 3, 1, -1])
    """
    t0 = btree_parents(m)
    idx = np.arange(m)
    if m % 2 == 0:
        play = m - 1 - idx          # node i plays role m-1-i in the first tree
        unplay = play               # the map is its own inverse
    else:
        play = (idx - 1) % m
        unplay = (idx + 1) % m
    p_role = t0[play]
    t1 = np.where(p_role < 0, -1, unplay[np.maximum(p_role, 0)])
    return t0, t1.astype(np.int64)


def tree_depth(parent: np.ndarray) -> int:
    """Edges on the longest root-to-leaf path of a parent array.

    Examples
    --------
    >>> tree_depth(btree_parents(8))
    3
    """
    parent = np.asarray(parent)
    depth = np.full(len(parent), -1, dtype=np.int64)
    for v in range(len(parent)):
        path = []
        u = v
        while u >= 0 and depth[u] < 0:
            path.append(u)
            u = parent[u]
            if len(path) > len(parent):
                raise SimError("tree: the parent array has a cycle")
        d = -1 if u < 0 else depth[u]
        for w in reversed(path):
            d += 1
            depth[w] = d
    return int(depth.max()) if len(depth) else 0


def tree_of_channel(channel: int, nchannels: int) -> int:
    """Which of the two trees channel ``channel`` uses: the first half of the channels tree 0, the
    second half tree 1 (NCCL duplicates its channels, one copy per tree).

    Examples
    --------
    >>> [tree_of_channel(c, 4) for c in range(4)]
    [0, 0, 1, 1]
    """
    nchannels = max(nchannels, 1)
    return (2 * (channel % nchannels)) // nchannels


def rank_tree(ranks: Sequence[int] | np.ndarray, server_of: Sequence[int] | np.ndarray | None = None,
              channel: int = 0, nchannels: int = 1) -> np.ndarray:
    """Rank-level tree of one channel: parent comm-rank position of every rank (``-1`` at the root).

    Servers are the nodes of tree :func:`tree_of_channel`; each server's GPUs form a chain whose first
    GPU, the head, links to the parent server's head. The chains rotate by the channel's index within
    its half, so channel ``c`` of tree 0 and channel ``c + K/2`` of tree 1 share their head GPU and its
    NIC, as NCCL's channel ``c`` and its duplicate ``c + nChannels`` share one search channel
    (``connect.cc`` ``connectTrees``, v2.23.4-1): every NIC then carries one channel of each tree, and a
    server interior in one tree is a leaf in the other on every NIC (with one channel per NIC and tree,
    the NICs of a server's interior tree would carry three times their leaf neighbours' bytes).

    Examples
    --------
    Two servers of two GPUs; tree 0 is server 0 above server 1:

    >>> rank_tree([0, 1, 2, 3], [0, 0, 1, 1]).tolist()
    [-1, 0, 0, 2]
    """
    arr = as_ranks(ranks)
    half = -(-max(nchannels, 1) // 2)  # channels per tree (the first half is tree 0)
    groups = [np.roll(g, -((channel % half) % len(g))) for g in server_groups(arr, server_of)]
    trees = double_binary_tree(len(groups))
    node_parent = trees[tree_of_channel(channel, nchannels)]
    parent = np.full(len(arr), -1, dtype=np.int64)
    heads = np.array([g[0] for g in groups], dtype=np.int64)
    for k, g in enumerate(groups):
        parent[g[1:]] = g[:-1]  # the intra-server chain
        if node_parent[k] >= 0:
            parent[g[0]] = heads[node_parent[k]]
    return parent
