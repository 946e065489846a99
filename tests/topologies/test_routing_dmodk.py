"""``dmodk`` routing (InfiniBand destination routing, D-mod-k): paths, destination-only choice, shift
permutations without contention on full-bisection fat trees, and the other modes' routes unchanged."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies.routing as routing_mod
from topologies import ROUTING_MODES, Router, fat_tree, leaf_spine, rail_optimized
from topologies.route_walk import dmodk_digit

GRAPHS = {"fat_tree": fat_tree(4, gpus_per_server=2), "fat_tree_k6": fat_tree(6, gpus_per_server=1),
          "leaf_spine": leaf_spine(48, gpus_per_server=4, gpus_per_leaf=16),
          "rail_opt": rail_optimized(64, servers_per_unit=4)}


def all_pairs(n):
    src, dst = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return src.ravel(), dst.ravel()


def hops_by_destination(router, src, dst, key):
    """{(node, dst): next node} over every flow's path; fails on a node sending one destination two ways."""
    routes = router.route(src, dst, key)
    table = {}
    for f in range(len(src)):
        nodes = router.path_nodes(routes.links_of(f))
        for u, v in itertools.pairwise(nodes[1:]):  # from the first switch on (the GPU's own hop is its NIC)
            assert table.setdefault((u, int(dst[f])), v) == v, (u, int(dst[f]), table[(u, int(dst[f]))], v)
    return table


def test_dmodk_is_a_routing_mode_and_an_option():
    from sim.option_values import ROUTINGS
    assert "dmodk" in ROUTING_MODES and "dmodk" in ROUTINGS


def test_digit_is_the_mixed_radix_digit():
    # d = 2 + 3 * (1 + 2 * 4): digits 2 (radix 3), 1 (radix 2), 4 (radix 5); a fan-out of 1 takes digit 0
    d = np.array([2 + 3 * (1 + 2 * 4)])
    radix = np.ones(1, dtype=np.int64)
    assert [int(dmodk_digit(d, radix, np.array([c]))[0]) for c in (3, 1, 2, 5)] == [2, 0, 1, 4]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_dmodk_paths_are_shortest_and_ignore_key_and_seed(name):
    graph = GRAPHS[name]
    n = graph.graph["num_gpus"]
    src, dst = all_pairs(n)
    ecmp = Router(graph, routing="ecmp", seed=1).route(src, dst, np.arange(len(src)))
    a = Router(graph, routing="dmodk", seed=1).route(src, dst, np.arange(len(src)))
    b = Router(graph, routing="dmodk", seed=99).route(src, dst, np.arange(len(src)) * 31 + 5)
    assert np.array_equal(a.link_ptr, b.link_ptr) and np.array_equal(a.link_idx, b.link_idx)
    assert np.array_equal(a.sub_ptr, np.arange(len(src) + 1)) and (a.fraction == 1.0).all()
    # the same number of links as ECMP's shortest paths, flow by flow, and each path a connected walk
    assert np.array_equal(np.diff(a.link_ptr), np.diff(ecmp.link_ptr))
    router = Router(graph, routing="dmodk")
    for f in range(0, len(src), 37):
        nodes = router.path_nodes(a.links_of(f))
        if src[f] != dst[f]:
            assert nodes[0] == f"gpu{src[f]}" and nodes[-1] == f"gpu{dst[f]}" and len(set(nodes)) == len(nodes)
            assert all(graph.has_edge(u, v) for u, v in itertools.pairwise(nodes))


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(GRAPHS)), data=st.data())
def test_dmodk_next_hop_depends_only_on_the_destination(name, data):
    """Hypothesis: any batch of flows (sources, destinations, keys) obeys one forwarding table per switch."""
    graph = GRAPHS[name]
    n = graph.graph["num_gpus"]
    size = data.draw(st.integers(1, 60))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=size, max_size=size)))
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=size, max_size=size)))
    key = np.array(data.draw(st.lists(st.integers(0, 2**40), min_size=size, max_size=size)))
    router = Router(graph, routing="dmodk", seed=data.draw(st.integers(0, 1000)))
    table = hops_by_destination(router, src, dst, key)
    # and the batch's table is the one of all pairs (a flow's route does not depend on its batch-mates)
    full = hops_by_destination(router, *all_pairs(n), np.zeros(n * n, dtype=np.int64))
    assert all(full[k] == v for k, v in table.items())


@pytest.mark.parametrize("k", [4, 6, 8])
def test_shift_permutations_are_contention_free_on_a_fat_tree(k):
    """Zahavi et al. 2010: D-mod-k routes every shift i -> (i + s) mod N over distinct links of a full
    fat tree (one GPU per host port, so no NVLink shortcut); ECMP's hashing collides on most shifts."""
    graph = fat_tree(k, gpus_per_server=1)
    n = graph.graph["num_gpus"]
    assert n == k**3 // 4
    loads = {}
    for mode in ("dmodk", "ecmp"):
        router = Router(graph, routing=mode, seed=0)
        src = np.arange(n)
        loads[mode] = [int(np.bincount(router.route(src, (src + s) % n, src).link_idx).max()) for s in range(1, n)]
    assert max(loads["dmodk"]) == 1
    assert sum(x > 1 for x in loads["ecmp"]) > (n - 1) // 2  # the property is D-mod-k's, not the fabric's


def test_dmodk_on_rails_uses_the_leaf_order():
    """Rail fabrics: the destination index counts GPUs leaf by leaf (OpenSM's host order), so the servers
    of one rail spread over the spines; numbered by slot they would all take spine ``rail mod spines``."""
    graph = rail_optimized(64, servers_per_unit=4)  # 16 servers x 8 rails, 4 servers per rail leaf, 4 spines
    router = Router(graph, routing="dmodk")
    n = graph.graph["num_gpus"]
    assert sorted(router._tables.leaf_rank.tolist()) == list(range(n))
    src = np.arange(n)
    dst = (src + 9) % n  # every GPU to the next server's next rail: every flow crosses a spine
    assert np.bincount(router.route(src, dst, src).link_idx).max() == 1
    router._tables.leaf_rank = np.arange(n)  # the slot order instead: a rail's 4 servers on one spine link
    assert np.bincount(router.route(src, dst, src).link_idx).max() == 4


def test_dmodk_walks_in_numpy_when_the_compiled_walk_is_forced(monkeypatch):
    graph = GRAPHS["fat_tree"]
    src, dst = all_pairs(graph.graph["num_gpus"])
    want = Router(graph, routing="dmodk").route(src, dst, 0)
    monkeypatch.setattr(routing_mod, "WALK", "jit")
    monkeypatch.setattr(routing_mod, "use_compiled_walk", lambda flows=0: pytest.fail("dmodk asked for the compiled walk"))
    got = Router(graph, routing="dmodk").route(src, dst, 0)
    assert np.array_equal(got.link_idx, want.link_idx)


def route_digest(graph, mode):
    router = Router(graph, routing=mode, seed=5)
    src, dst = all_pairs(graph.graph["num_gpus"])
    routes = router.route(src, dst, np.arange(len(src)) * 7)
    h = hashlib.sha256()
    for a in (routes.sub_ptr, routes.link_ptr, routes.link_idx):
        h.update(np.asarray(a, dtype=np.int64).tobytes())
    h.update(np.round(np.asarray(routes.fraction, dtype=np.float64), 12).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("name", "mode", "digest"), [
    ("fat_tree", "ecmp", "692a108adc0b101e"), ("fat_tree", "single", "52aaf40a585f63c3"),
    ("fat_tree", "spray", "29a5399eff0cdcd5"), ("rail_opt", "ecmp", "40f2b8adb4c3ab3c"),
    ("rail_opt", "single", "57f569d5ef4b69a4"), ("rail_opt", "spray", "f1ee153fa8a69f5d")])
def test_other_modes_route_as_before(name, mode, digest):
    """Digests of every pair's routes computed on the commit before ``dmodk`` (0504f41, numpy walk)."""
    assert route_digest(GRAPHS[name], mode) == digest
