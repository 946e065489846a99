"""Routing invariants: valid shortest paths, NVLink inside servers, ECMP spread, spray, PXN, failures."""

from __future__ import annotations

import itertools
from collections import Counter

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

import topologies
from topologies import MAX_SPRAY_PATHS, Router, TopologyError, fat_tree, leaf_spine, rail_only, rail_optimized
from topologies.schema import SWITCH_KINDS


def network_only(graph):
    """The graph without NVSwitches: GPUs become leaves, so shortest paths cannot transit them."""
    return graph.subgraph(n for n, d in graph.nodes(data=True) if d["kind"] != "nvswitch")


def all_pairs(n):
    src, dst = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return src.ravel(), dst.ravel()


def paths_of(router, routes, flow):
    return [router.path_nodes(routes.links_of(j)) for j in range(routes.sub_ptr[flow], routes.sub_ptr[flow + 1])]


def check_path(graph, nodes, src, dst):
    assert nodes[0] == f"gpu{src}" and nodes[-1] == f"gpu{dst}"
    assert all(graph.has_edge(u, v) for u, v in itertools.pairwise(nodes))
    assert len(set(nodes)) == len(nodes)  # loop-free


def test_link_table_has_both_directions():
    g = fat_tree(4, gpus_per_server=2)
    links = topologies.link_table(g)
    assert len(links) == 2 * g.number_of_edges() and links.index.name == "link"
    assert list(links.columns) == ["src", "dst", "kind", "capacity_gbps", "latency_us"]
    assert (links["src"].values[0::2] == links["dst"].values[1::2]).all()
    router = Router(g)
    assert all(router.link_id[(u, v)] == i for i, (u, v) in enumerate(zip(links["src"], links["dst"], strict=True)))


@pytest.mark.parametrize("routing", ["ecmp", "spray", "single"])
@pytest.mark.parametrize("graph", [fat_tree(4, gpus_per_server=2), leaf_spine(48, gpus_per_server=4, gpus_per_leaf=16),
                                   rail_optimized(64, servers_per_unit=4)], ids=["fat_tree", "leaf_spine", "rail_opt"])
def test_paths_are_valid_shortest_paths(graph, routing):
    router = Router(graph, routing=routing, seed=3)
    n = graph.graph["num_gpus"]
    src, dst = all_pairs(n)
    routes = router.route(src, dst, np.arange(len(src)))
    assert len(routes.sub_ptr) == len(src) + 1 and len(routes.link_ptr) == len(routes.fraction) + 1
    np.testing.assert_allclose(np.add.reduceat(routes.fraction, routes.sub_ptr[:-1]), 1.0)
    net = network_only(graph)
    lengths = dict(nx.all_pairs_shortest_path_length(net))
    for flow in range(0, len(src), 7):
        s, d = int(src[flow]), int(dst[flow])
        for nodes in paths_of(router, routes, flow):
            if s == d:
                assert nodes == []
                continue
            check_path(graph, nodes, s, d)
            if graph.nodes[f"gpu{s}"]["server"] == graph.nodes[f"gpu{d}"]["server"]:
                assert nodes == [f"gpu{s}", f"nvs{graph.nodes[f'gpu{s}']['server']}", f"gpu{d}"]
            else:
                assert len(nodes) - 1 == lengths[f"gpu{s}"][f"gpu{d}"]
                assert all(graph.nodes[x]["kind"] in SWITCH_KINDS for x in nodes[1:-1])


@pytest.mark.parametrize("name", list(topologies.PRESETS))
@pytest.mark.parametrize("pxn", [False, True])
def test_every_gpu_reaches_every_gpu_on_every_preset(name, pxn):
    g = topologies.build(name, num_gpus=64, servers_per_unit=4) if name.startswith("rail") else \
        topologies.build(name, num_gpus=64)
    src, dst = all_pairs(64)
    for routing in ("ecmp", "spray"):
        router = Router(g, routing=routing, pxn=pxn)
        routes = router.route(src, dst, np.arange(len(src)))
        np.testing.assert_allclose(np.add.reduceat(routes.fraction, routes.sub_ptr[:-1]), 1.0)
        for flow in range(0, len(src), 3):
            for nodes in paths_of(router, routes, flow):
                if src[flow] != dst[flow]:
                    check_path(g, nodes, int(src[flow]), int(dst[flow]))
                    transit = [x for x in nodes[1:-1] if g.nodes[x]["kind"] == "gpu"]
                    assert len(transit) <= 2  # GPUs forward only as NVLink relays (one per side at most)


def test_ecmp_spreads_flows_evenly_over_equal_cost_uplinks():
    g = fat_tree(8, gpus_per_server=4)
    router = Router(g, routing="ecmp", seed=1)
    flows = 8000
    src = np.zeros(flows, dtype=int)  # gpu0 in pod 0 to GPUs of other pods: 16 equal-cost paths
    dst = np.random.default_rng(0).integers(16, 128, flows)
    routes = router.route(src, dst, np.arange(flows))
    paths = [router.path_nodes(routes.links_of(j)) for j in range(flows)]
    spines = Counter(p[2] for p in paths)
    cores = Counter(p[3] for p in paths)
    assert sorted(spines) == [f"spine{i}" for i in range(4)]  # every uplink of leaf0
    assert len(cores) == 16  # every core
    for counts in (spines, cores):  # uniform: chi-square goodness of fit
        assert chisquare(list(counts.values())).pvalue > 1e-3
    # distinct flow keys of one pair also spread (a hash of the 5-tuple), and collide as in real fabrics
    same_pair = router.route(np.zeros(400, int), np.full(400, 127), np.arange(400))
    used = Counter(router.path_nodes(same_pair.links_of(j))[3] for j in range(400))
    assert len(used) == 16 and chisquare(list(used.values())).pvalue > 1e-3


def test_ecmp_is_deterministic_for_a_seed_and_single_ignores_the_flow_key():
    g = fat_tree(8, gpus_per_server=4)
    src, dst = np.zeros(200, int), np.full(200, 100)
    keys = np.arange(200)
    a = Router(g, seed=7).route(src, dst, keys)
    b = Router(g, seed=7).route(src, dst, keys)
    c = Router(g, seed=8).route(src, dst, keys)
    np.testing.assert_array_equal(a.link_idx, b.link_idx)
    assert not np.array_equal(a.link_idx, c.link_idx)
    single = Router(g, routing="single", seed=7).route(src, dst, keys)
    assert len({tuple(single.links_of(j)) for j in range(200)}) == 1
    many = Router(g, routing="single").route(np.zeros(100, int), np.arange(28, 128), 0)
    assert len({tuple(many.links_of(j)[:2]) for j in range(100)}) == 4  # pairs spread over the uplinks


@pytest.mark.parametrize("k", [4, 8, 10])
def test_spray_takes_every_equal_cost_path_up_to_the_cap(k):
    g = fat_tree(k, gpus_per_server=1)
    router = Router(g, routing="spray", seed=0)
    last = g.graph["num_gpus"] - 1
    routes = router.route([0, 0], [last, 1], [0, 0])
    inter_pod, same_leaf = paths_of(router, routes, 0), paths_of(router, routes, 1)
    expected = len(list(nx.all_shortest_paths(network_only(g), "gpu0", f"gpu{last}")))
    assert expected == (k // 2) ** 2
    assert len(inter_pod) == min(expected, MAX_SPRAY_PATHS)
    assert len({tuple(p) for p in inter_pod}) == len(inter_pod)  # distinct paths
    for p in inter_pod:
        check_path(g, p, 0, last)
        assert len(p) == 7
    assert same_leaf == [["gpu0", "leaf0", "gpu1"]]
    fractions = routes.fraction[routes.sub_ptr[0]:routes.sub_ptr[1]]
    np.testing.assert_allclose(fractions, 1 / len(inter_pod))


def test_spray_counts_unequal_branches_exactly():
    g = fat_tree(4, gpus_per_server=1)
    g.remove_edge("spine0", "core0")  # spine0 now reaches pod 3 through core1 only: 3 paths, not 4
    router = Router(g, routing="spray")
    paths = paths_of(router, router.route(0, 15, 0), 0)
    assert len(paths) == len(list(nx.all_shortest_paths(network_only(g), "gpu0", "gpu15"))) == 3
    assert all(("spine0", "core0") not in set(itertools.pairwise(p)) for p in paths)


@given(st.integers(0, 2**31), st.sampled_from(["ecmp", "spray", "single"]))
def test_routing_after_removing_links_avoids_them(seed, routing):
    g = fat_tree(4, gpus_per_server=2)
    rng = np.random.default_rng(seed)
    fabric = [e for e in g.edges if g.edges[e]["kind"] in ("leaf-spine", "spine-core")]
    for i in rng.choice(len(fabric), 3, replace=False):  # cut three cables, keeping the network connected
        data = dict(g.edges[fabric[i]])
        g.remove_edge(*fabric[i])
        if not nx.is_connected(network_only(g)):
            g.add_edge(*fabric[i], **data)
    router = Router(g, routing=routing, seed=seed)
    src, dst = all_pairs(16)
    routes = router.route(src, dst, rng.integers(0, 1000, len(src)))
    links = router.links
    used = set(zip(links["src"].values[routes.link_idx], links["dst"].values[routes.link_idx], strict=True))
    assert all(g.has_edge(u, v) for u, v in used)
    net = network_only(g)
    for flow in range(0, len(src), 5):
        s, d = int(src[flow]), int(dst[flow])
        if s // 2 == d // 2:
            continue
        for nodes in paths_of(router, routes, flow):
            assert len(nodes) - 1 == nx.shortest_path_length(net, f"gpu{s}", f"gpu{d}")


@st.composite
def random_fabrics(draw):
    """A random connected switch graph with GPUs on one or two switches each (no NVLink)."""
    n_sw = draw(st.integers(2, 8))
    g = nx.Graph(name="random", gpus_per_server=1)
    g.add_nodes_from((f"s{i}" for i in range(n_sw)), kind="leaf")
    for i in range(1, n_sw):  # a random spanning tree keeps it connected
        g.add_edge(f"s{i}", f"s{draw(st.integers(0, i - 1))}", kind="fabric", capacity_gbps=100.0, latency_us=1.0)
    for a, b in draw(st.lists(st.tuples(st.integers(0, n_sw - 1), st.integers(0, n_sw - 1)), max_size=12)):
        if a != b:
            g.add_edge(f"s{a}", f"s{b}", kind="fabric", capacity_gbps=100.0, latency_us=1.0)
    n_gpu = draw(st.integers(2, 8))
    for i in range(n_gpu):
        g.add_node(f"gpu{i}", kind="gpu", server=i, local_rank=0)
        for sw in draw(st.sets(st.integers(0, n_sw - 1), min_size=1, max_size=2)):
            g.add_edge(f"gpu{i}", f"s{sw}", kind="access", capacity_gbps=100.0, latency_us=1.0)
    g.graph["num_gpus"] = n_gpu
    return topologies.validate_graph(g)


@given(random_fabrics(), st.sampled_from(["ecmp", "spray", "single"]), st.integers(0, 99))
def test_any_graph_routes_on_shortest_paths_and_spray_takes_them_all(g, routing, seed):
    router = Router(g, routing=routing, seed=seed)
    n = g.graph["num_gpus"]
    src, dst = all_pairs(n)
    routes = router.route(src, dst, np.arange(len(src)))
    np.testing.assert_allclose(np.add.reduceat(routes.fraction, routes.sub_ptr[:-1]), 1.0)
    for flow in np.nonzero(src != dst)[0]:
        s, d = int(src[flow]), int(dst[flow])
        no_transit = g.subgraph([x for x in g if not x.startswith("gpu")] + [f"gpu{s}", f"gpu{d}"])
        shortest = {tuple(p) for p in nx.all_shortest_paths(no_transit, f"gpu{s}", f"gpu{d}")}
        got = [tuple(p) for p in paths_of(router, routes, flow)]
        assert set(got) <= shortest  # shortest paths that no GPU forwards
        if routing == "spray":
            assert len(got) == len(set(got)) == min(len(shortest), MAX_SPRAY_PATHS)


def test_a_pair_without_path_names_both_gpus():
    g = fat_tree(4, gpus_per_server=1)
    g.remove_edge("gpu0", "leaf0")
    with pytest.raises(TopologyError, match="no path from gpu0 to gpu5"):
        Router(g).route([1, 0], [2, 5], 0)
    with pytest.raises(TopologyError, match="gpu16 is not in the topology"):
        Router(g).route(1, 16, 0)
    with pytest.raises(TopologyError, match="routing must be one of"):
        Router(g, routing="adaptive")


def test_pxn_hops_over_nvlink_to_the_destination_rail():
    g = rail_optimized(128, servers_per_unit=16)
    plain, pxn = Router(g), Router(g, pxn=True)
    # gpu0 (server 0, rail 0) -> gpu13 (server 1, rail 5)
    assert plain.path(0, 13)[1] == "su0_rail0" and plain.path(0, 13)[2].startswith("spine")
    assert pxn.path(0, 13) == ["gpu0", "nvs0", "gpu5", "su0_rail5", "gpu13"]
    assert pxn.path(0, 8) == plain.path(0, 8) == ["gpu0", "su0_rail0", "gpu8"]  # same rail: no detour
    assert pxn.path(0, 5) == ["gpu0", "nvs0", "gpu5"]  # same server: NVLink


_RELAY_FABRIC = leaf_spine(32, gpus_per_server=4, gpus_per_leaf=8)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["ecmp", "spray", "single"]))
def test_a_relayed_route_is_the_two_legs_one_after_the_other(seed, routing):
    """``route_via`` (a streamed PXN relay as one flow): every sub-flow is a sub-flow of src -> via followed by
    one of via -> dst (hashed with their own keys), all pairs once, fractions multiplied; no relay: ``route``."""
    router = Router(_RELAY_FABRIC, routing=routing, seed=seed % 7)
    rng = np.random.default_rng(seed)
    n = 16
    src, dst = rng.integers(0, 32, n), rng.integers(0, 32, n)
    via = np.where(rng.random(n) < 0.7, rng.integers(0, 32, n), -1)
    k_in, k_out = rng.integers(0, 1 << 20, n), rng.integers(0, 1 << 20, n)
    routes = router.route_via(src, via, dst, k_in, k_out)
    np.testing.assert_allclose(np.add.reduceat(routes.fraction, routes.sub_ptr[:-1]), 1.0)
    for i in range(n):
        got = sorted((tuple(p), round(f, 12)) for p, f in zip(paths_of(router, routes, i),
                                                             routes.fraction[routes.sub_ptr[i]:routes.sub_ptr[i + 1]], strict=True))
        if via[i] < 0:
            legs = router.route(src[i], dst[i], k_out[i])
            want = [(tuple(p), round(f, 12)) for p, f in zip(paths_of(router, legs, 0), legs.fraction, strict=True)]
        else:
            a, b = router.route(src[i], via[i], k_in[i]), router.route(via[i], dst[i], k_out[i])
            want = [(tuple(pa + pb[1:] if pa and pb else pa or pb), round(fa * fb, 12))
                    for pa, fa in zip(paths_of(router, a, 0), a.fraction, strict=True)
                    for pb, fb in zip(paths_of(router, b, 0), b.fraction, strict=True)]
        assert got == sorted(want)


def test_rail_only_crosses_nvlink_between_rails():
    g = rail_only(512, servers_per_unit=32)  # two units: per-rail spines
    router = Router(g, routing="ecmp")
    assert router.path(0, 13) == ["gpu0", "nvs0", "gpu5", "su0_rail5", "gpu13"]
    far = router.path(0, 300)  # server 37 (unit 1), rail 4
    assert far[:4] == ["gpu0", "nvs0", "gpu4", "su0_rail4"] and far[-2:] == ["su1_rail4", "gpu300"]
    assert g.nodes[far[4]]["kind"] == "spine" and g.nodes[far[4]]["rail"] == 4
    # the source server's rail-5 port is down: cross NVLink at the destination server instead
    g.remove_edge("gpu5", "su0_rail5")
    assert Router(g).path(0, 13) == ["gpu0", "su0_rail0", "gpu8", "nvs1", "gpu13"]
    src, dst = all_pairs(64)
    routes = Router(g, routing="spray").route(src, dst, 0)
    np.testing.assert_allclose(np.add.reduceat(routes.fraction, routes.sub_ptr[:-1]), 1.0)


def test_routing_on_an_explicit_graph_and_on_the_nonblocking_reference():
    g = nx.Graph(name="tiny", num_gpus=3, gpus_per_server=1)
    for i in range(3):
        g.add_node(f"gpu{i}", kind="gpu", server=i, local_rank=0)
    g.add_nodes_from(["a", "b"], kind="leaf")
    for gpu, sw in [("gpu0", "a"), ("gpu1", "a"), ("gpu1", "b"), ("gpu2", "b")]:
        g.add_edge(gpu, sw, kind="access", capacity_gbps=100.0, latency_us=1.0)
    g.add_edge("a", "b", kind="fabric", capacity_gbps=100.0, latency_us=1.0)
    router = Router(topologies.validate_graph(g))
    assert router.path(0, 2) == ["gpu0", "a", "b", "gpu2"]
    assert {tuple(router.path(1, 0, key)) for key in range(20)} == {("gpu1", "a", "gpu0")}
    ideal = Router(topologies.nonblocking(fat_tree(4, gpus_per_server=2, oversubscription=4.0)))
    src, dst = all_pairs(16)
    routes = ideal.route(src, dst, 0)
    lengths = np.diff(routes.link_ptr)
    assert set(lengths[src != dst]) == {2}  # NVLink (gpu-nvs-gpu) or access (gpu-xbar-gpu)
    assert ideal.path(0, 2) == ["gpu0", "xbar", "gpu2"]


def test_nvlink_domain_with_two_nvswitches_uses_the_shortest_nvlink_path(bridged_server):
    router = Router(bridged_server)
    assert router.path(0, 2) == ["gpu0", "nvsA", "gpu1", "nvsB", "gpu2"]
    routes = router.route([0, 1, 0], [1, 2, 2], 0)
    assert [len(router.path_nodes(routes.links_of(j))) for j in range(3)] == [3, 3, 5]


@pytest.mark.slow
def test_k32_fat_tree_routes_a_million_pairs_on_shortest_paths():
    g = fat_tree(32)
    router = Router(g)
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 8192, 10**6), rng.integers(0, 8192, 10**6)
    routes = router.route(src, dst, np.arange(10**6))
    lengths = np.diff(routes.link_ptr)
    leaf = lambda x: x // 16  # noqa: E731
    pod = lambda x: x // 256  # noqa: E731
    expected = np.where(src == dst, 0, np.where(src // 8 == dst // 8, 2, np.where(
        leaf(src) == leaf(dst), 2, np.where(pod(src) == pod(dst), 4, 6))))
    np.testing.assert_array_equal(lengths, expected)
