"""Rings and trees over ranks (sim.planning.logical): invariants, NCCL's double-binary-tree properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.errors import SimError
from sim.planning import logical


def _children(parent: np.ndarray) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in parent]
    for v, p in enumerate(parent):
        if p >= 0:
            kids[p].append(v)
    return kids


def _is_tree(parent: np.ndarray) -> bool:
    """One root, every node reaches it."""
    if (parent < 0).sum() != 1:
        return False
    for v in range(len(parent)):
        seen = 0
        while parent[v] >= 0:
            v = parent[v]
            seen += 1
            if seen > len(parent):
                return False
    return True


servers = st.lists(st.integers(1, 5), min_size=1, max_size=5)  # GPUs per server


def _layout(sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    server_of = np.repeat(np.arange(len(sizes)), sizes)
    ranks = np.arange(len(server_of)) * 3 + 7  # global ranks need not be 0..n-1
    return ranks, server_of


@given(servers, st.integers(0, 20))
def test_nvlink_ring_keeps_servers_contiguous(sizes, channel):
    ranks, server_of = _layout(sizes)
    ring = logical.nvlink_ring(ranks, server_of, channel)
    assert sorted(ring.tolist()) == sorted(ranks.tolist())
    srv = dict(zip(ranks.tolist(), server_of.tolist(), strict=True))
    along = np.array([srv[r] for r in ring])
    # cyclic server changes: one per server boundary, so the ring crosses the network once per server
    changes = int((along != np.roll(along, -1)).sum())
    assert changes == (len(sizes) if len(sizes) > 1 else 0)


def test_ring_channels_leave_servers_from_every_gpu():
    ranks, server_of = _layout([4, 4, 4])
    exits = set()
    for c in range(4):
        ring = logical.nvlink_ring(ranks, server_of, c)
        pos = {r: i for i, r in enumerate(ring)}
        # the GPU of server 0 whose successor is on another server
        exits.update(r for r in ranks[:4] if ring[(pos[r] + 1) % len(ring)] not in ranks[:4])
    assert exits == set(ranks[:4].tolist())


def test_servers_ordered_by_first_appearance():
    ring = logical.nvlink_ring([5, 6, 7, 8], [9, 2, 9, 2])
    assert ring.tolist() == [5, 7, 8, 6]  # server 9 first; server 2 (odd) runs backward: rail-aligned


@given(st.integers(2, 6).map(lambda m: 2 * (m // 2)), st.integers(1, 8), st.integers(0, 15))
def test_rings_are_rail_aligned(servers, gpus, channel):
    # every network hop joins equal local ranks (an even server count closes the ring on a rail too)
    ranks, server_of = _layout([gpus] * servers)
    ring = logical.nvlink_ring(ranks, server_of, channel)
    local = {int(r): i % gpus for i, r in enumerate(ranks)}
    srv = {int(r): int(s) for r, s in zip(ranks, server_of, strict=True)}
    hops = list(zip(ring, np.roll(ring, -1), strict=True))
    cross = [(a, b) for a, b in hops if srv[int(a)] != srv[int(b)]]
    assert len(cross) == servers
    assert all(local[int(a)] == local[int(b)] for a, b in cross)
    assert sorted(ring.tolist()) == sorted(ranks.tolist())


def test_logged_rings_replace_built_ones_and_are_checked():
    rings = logical.rings_for_channels([0, 1, 2, 3], 3, logged=[[3, 2, 1, 0], [0, 2, 1, 3]])
    assert rings.tolist() == [[3, 2, 1, 0], [0, 2, 1, 3], [3, 2, 1, 0]]
    with pytest.raises(SimError, match="rings"):
        logical.rings_for_channels([0, 1, 2, 3], 1, logged=[[0, 1, 2]])
    with pytest.raises(SimError, match="rings"):
        logical.rings_for_channels([0, 1, 2, 3], 1, logged=[[0, 1, 2, 2]])


def test_bad_inputs():
    with pytest.raises(SimError):
        logical.server_groups([0, 1, 2], [0, 1])
    with pytest.raises(SimError):
        logical.nvlink_ring([0, 0, 1])
    with pytest.raises(SimError):
        logical.btree_parents(0)


@given(st.integers(1, 300))
def test_btree_shape(m):
    parent = logical.btree_parents(m)
    assert _is_tree(parent) and parent[0] == -1
    kids = _children(parent)
    assert all(len(k) <= 2 for k in kids)
    assert len(kids[0]) == (1 if m > 1 else 0)
    for v in range(1, m):
        # in-order: at most one child on each side
        assert sum(w < v for w in kids[v]) <= 1 and sum(w > v for w in kids[v]) <= 1
        # leaves are exactly the odd nodes
        assert (len(kids[v]) == 0) == (v % 2 == 1)
    assert logical.tree_depth(parent) == (math.ceil(math.log2(m)) if m > 1 else 0)


@given(st.integers(1, 300))
def test_double_binary_tree_is_complementary(m):
    t0, t1 = logical.double_binary_tree(m)
    assert _is_tree(t0) and _is_tree(t1)
    interior0 = {int(p) for p in t0 if p >= 0}
    interior1 = {int(p) for p in t1 if p >= 0}
    both = interior0 & interior1
    if m % 2 == 0:
        assert not both  # every node is a leaf in one of the trees
    else:
        assert both <= {0}  # the shift leaves at most node 0 interior twice
    assert abs(logical.tree_depth(t0) - logical.tree_depth(t1)) <= 1


@given(servers, st.integers(0, 7), st.integers(1, 8))
def test_rank_tree_is_chains_under_a_server_tree(sizes, channel, nchannels):
    ranks, server_of = _layout(sizes)
    parent = logical.rank_tree(ranks, server_of, channel, nchannels)
    assert _is_tree(parent)
    crossing = [(v, p) for v, p in enumerate(parent) if p >= 0 and server_of[v] != server_of[p]]
    assert len(crossing) == len(sizes) - 1  # one network edge per non-root server
    for _, p in crossing:  # network edges end at heads: the parent has no parent in its own server
        assert parent[p] == -1 or server_of[parent[p]] != server_of[p]
    kids = _children(parent)
    for v in range(len(parent)):
        assert sum(server_of[w] == server_of[v] for w in kids[v]) <= 1  # intra-server: a chain
    if len(set(sizes)) == 1:
        node_tree = logical.double_binary_tree(len(sizes))[logical.tree_of_channel(channel, nchannels)]
        assert logical.tree_depth(parent) == sizes[0] - 1 + logical.tree_depth(node_tree)


def test_tree_of_channel_splits_channels_in_halves():
    assert [logical.tree_of_channel(c, 8) for c in range(8)] == [0] * 4 + [1] * 4
    assert logical.tree_of_channel(0, 1) == 0
