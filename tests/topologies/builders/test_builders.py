"""Structural invariants of the preset builders, as networkx tests its generators."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import topologies
from topologies import TopologyError, fat_tree, leaf_spine, nonblocking, rail_only, rail_optimized
from topologies.builders.fat_tree import smallest_k
from topologies.schema import SWITCH_KINDS, validate_graph


def kinds(graph):
    return Counter(d["kind"] for _, d in graph.nodes(data=True))


def of_kind(graph, kind):
    return [n for n, d in graph.nodes(data=True) if d["kind"] == kind]


def capacity_to(graph, node, neighbour_kinds):
    return sum(d["capacity_gbps"] for _, v, d in graph.edges(node, data=True)
               if graph.nodes[v]["kind"] in neighbour_kinds)


def check_servers(graph):
    """Every server has one NVSwitch joined to its GPUs by NVLink (none with one GPU per server)."""
    gps = graph.graph["gpus_per_server"]
    for gpu in of_kind(graph, "gpu"):
        slot = int(gpu[3:])
        data = graph.nodes[gpu]
        assert (data["server"], data["local_rank"]) == divmod(slot, gps)
        nvlinks = [v for v in graph.neighbors(gpu) if graph.edges[gpu, v]["kind"] == "nvlink"]
        assert nvlinks == ([] if gps == 1 else [f"nvs{data['server']}"])
    last = (graph.graph["num_gpus"] - 1) // gps
    for nvs in of_kind(graph, "nvswitch"):
        full = graph.nodes[nvs]["server"] < last or graph.graph["num_gpus"] % gps == 0
        assert graph.degree(nvs) == (gps if full else graph.graph["num_gpus"] % gps)
        assert all(graph.edges[nvs, g]["capacity_gbps"] == graph.graph["nvlink_gbps"] for g in graph.neighbors(nvs))


# ------------------------------------------------------------------------------------------ fat-tree
@pytest.mark.parametrize("k, gps", [(2, 1), (4, 1), (4, 2), (6, 3), (8, 8)])
def test_fat_tree_counts_degrees_and_connectivity(k, gps):
    g = fat_tree(k, gpus_per_server=gps)
    c = kinds(g)
    hosts = k**3 // 4
    assert (c["leaf"], c["spine"], c["core"]) == (k * k // 2, k * k // 2, (k // 2) ** 2)
    assert c["gpu"] == hosts // gps * gps == g.graph["num_gpus"]
    assert c["nvswitch"] == (0 if gps == 1 else c["gpu"] // gps)
    for leaf in of_kind(g, "leaf"):
        assert sum(1 for v in g.neighbors(leaf) if g.nodes[v]["kind"] == "spine") == k // 2
        assert sum(1 for v in g.neighbors(leaf) if g.nodes[v]["kind"] == "gpu") == k // 2
    for spine in of_kind(g, "spine"):
        assert g.degree(spine) == k
        assert {g.nodes[v]["pod"] for v in g.neighbors(spine) if g.nodes[v]["kind"] == "leaf"} == {g.nodes[spine]["pod"]}
    for core in of_kind(g, "core"):
        assert g.degree(core) == k  # one aggregation switch in every pod
        assert sorted(g.nodes[v]["pod"] for v in g.neighbors(core)) == list(range(k))
    assert nx.is_connected(g)
    check_servers(g)
    validate_graph(g)


@pytest.mark.parametrize("over", [1.0, 2.0, 3.0])
def test_fat_tree_oversubscription_is_the_leaf_capacity_ratio(over):
    g = fat_tree(8, gpus_per_server=4, oversubscription=over)
    for leaf in of_kind(g, "leaf"):
        assert capacity_to(g, leaf, {"gpu"}) / capacity_to(g, leaf, {"spine"}) == pytest.approx(over)
    info = topologies.summary(g)
    # max-flow on integer Mbps capacities: within 1 Mbps per cut link
    assert info["bisection_gbps"] == pytest.approx(g.graph["num_gpus"] / 2 * 400 / over, abs=1e-3 * 64)
    assert info["diameter_hops"] == 6


@given(st.integers(1, 30_000))
def test_smallest_k_is_smallest(n):
    k = smallest_k(n)
    assert k % 2 == 0 and k**3 // 4 >= n
    assert k == 2 or (k - 2) ** 3 // 4 < n


@pytest.mark.parametrize("name", list(topologies.PRESETS))
def test_a_partial_last_server_is_allowed(name):
    g = topologies.build(name, num_gpus=12, gpus_per_server=8)  # a job on one and a half servers
    assert g.graph["num_gpus"] == 12 and kinds(g)["nvswitch"] == 2
    assert g.degree("nvs1") == 4 and g.nodes["gpu11"]["local_rank"] == 3
    check_servers(g)
    validate_graph(g)
    assert topologies.build(name, num_gpus=2).graph["num_gpus"] == 2


def test_build_sizes_fat_tree_from_num_gpus():
    g = topologies.build("fat_tree", num_gpus=32, gpus_per_server=8)
    assert g.graph["k"] == 6 and g.graph["num_gpus"] == 32 and len(of_kind(g, "gpu")) == 32
    assert kinds(g)["nvswitch"] == 4


# ---------------------------------------------------------------------------------------- leaf-spine
@given(servers=st.integers(2, 40), gps=st.sampled_from([1, 2, 4, 8]), over=st.floats(1.0, 6.0))
def test_leaf_spine_capacity_ratio_is_exact(servers, gps, over):
    g = leaf_spine(servers * gps, gpus_per_server=gps, oversubscription=over)
    leaves, spines = of_kind(g, "leaf"), of_kind(g, "spine")
    assert len(leaves) == g.graph["num_leaves"] and len(spines) == g.graph["num_spines"]
    per_leaf = g.graph["gpus_per_leaf"]
    for leaf in leaves:
        assert sorted(v for v in g.neighbors(leaf) if g.nodes[v]["kind"] == "spine") == sorted(spines)
        up = capacity_to(g, leaf, {"spine"})
        assert per_leaf * 400.0 / up == pytest.approx(over)  # host-facing ports over uplink capacity
    assert per_leaf % gps == 0  # servers are whole on a leaf
    for gpu in of_kind(g, "gpu"):
        (leaf,) = (v for v in g.neighbors(gpu) if g.nodes[v]["kind"] == "leaf")
        assert leaf == f"leaf{int(gpu[3:]) // per_leaf}"
    assert nx.is_connected(g)
    check_servers(g)


def test_leaf_spine_default_shape_uses_radix():
    g = leaf_spine(256)
    assert (g.graph["gpus_per_leaf"], g.graph["num_leaves"], g.graph["num_spines"]) == (32, 8, 32)
    g = leaf_spine(256, oversubscription=3.0)  # 48 host ports + 16 uplinks on a 64-port leaf
    assert (g.graph["gpus_per_leaf"], g.graph["num_spines"]) == (48, 16)
    assert all(d["capacity_gbps"] == 400.0 for _, _, d in g.edges(data=True) if d["kind"] == "leaf-spine")
    small = leaf_spine(32)  # fits one leaf: two leaves so the spine tier exists
    assert small.graph["num_leaves"] == 2


# -------------------------------------------------------------------------------------- rail fabrics
@pytest.mark.parametrize("builder", [rail_optimized, rail_only])
@pytest.mark.parametrize("num_gpus, gps, spu", [(64, 8, None), (512, 8, 16), (96, 4, 8), (12, 1, 4)])
def test_rail_membership(builder, num_gpus, gps, spu):
    g = builder(num_gpus, gpus_per_server=gps, servers_per_unit=spu)
    spu = g.graph["servers_per_unit"]
    units = math.ceil(num_gpus // gps / spu)
    assert g.graph["num_units"] == units and kinds(g)["rail"] == units * gps
    for gpu in of_kind(g, "gpu"):
        data = g.nodes[gpu]
        (rail,) = (v for v in g.neighbors(gpu) if g.nodes[v]["kind"] == "rail")
        assert g.nodes[rail]["rail"] == data["local_rank"]
        assert g.nodes[rail]["unit"] == data["server"] // spu
    assert nx.is_connected(g)
    check_servers(g)
    validate_graph(g)


def test_rail_optimized_spines_join_every_rail_switch():
    g = rail_optimized(512, servers_per_unit=16, oversubscription=2.0)
    rails, spines = of_kind(g, "rail"), of_kind(g, "spine")
    assert len(spines) == 8
    for spine in spines:
        assert sorted(g.neighbors(spine)) == sorted(rails)
    for rail in rails:
        assert capacity_to(g, rail, {"gpu"}) / capacity_to(g, rail, {"spine"}) == pytest.approx(2.0)


def test_rail_only_has_no_path_between_rails_without_nvlink():
    g = rail_only(1024, servers_per_unit=32)
    network = g.subgraph(n for n, d in g.nodes(data=True) if d["kind"] in SWITCH_KINDS)
    components = list(nx.connected_components(network))
    assert len(components) == 8
    for comp in components:
        assert len({g.nodes[n]["rail"] for n in comp}) == 1
    assert kinds(rail_only(64))["spine"] == 0


# ------------------------------------------------------------------------------------------ reference
@pytest.mark.parametrize("name", list(topologies.PRESETS))
def test_nonblocking_keeps_servers_and_access_capacity(name):
    g = topologies.build(name, num_gpus=64, link_gbps=200.0)
    ideal = nonblocking(g)
    assert kinds(ideal) == Counter(gpu=64, nvswitch=8, crossbar=1)
    for gpu in of_kind(g, "gpu"):
        assert ideal.edges[gpu, "xbar"]["capacity_gbps"] == capacity_to(g, gpu, SWITCH_KINDS)
    nv = {tuple(sorted(e)) for e in g.edges if g.edges[e]["kind"] == "nvlink"}
    assert nv == {tuple(sorted(e)) for e in ideal.edges if ideal.edges[e]["kind"] == "nvlink"}
    assert topologies.summary(ideal)["bisection_ratio"] == 1.0
    validate_graph(ideal)


def test_validate_graph_rejects_broken_graphs():
    g = fat_tree(4, gpus_per_server=2)
    g.edges["leaf0", "spine0"]["capacity_gbps"] = 0.0
    with pytest.raises(TopologyError, match="link leaf0-spine0: capacity_gbps must be a positive number"):
        validate_graph(g)
    g = fat_tree(4, gpus_per_server=2)
    g.nodes["core0"]["kind"] = "router"
    with pytest.raises(TopologyError, match="node 'core0' has kind 'router'"):
        validate_graph(g)
    g = fat_tree(4, gpus_per_server=1)
    g.remove_edge("gpu3", "leaf1")
    with pytest.raises(TopologyError, match="gpu3 is not connected to gpu0"):
        validate_graph(g)
    g = fat_tree(4, gpus_per_server=2)
    g.edges["gpu0", "nvs0"]["kind"] = "pcie"
    with pytest.raises(TopologyError, match="link gpu0-nvs0 has kind 'pcie'"):
        validate_graph(g)


# ------------------------------------------------------------------------------------ bad parameters
@pytest.mark.parametrize("call, words", [
    (lambda: fat_tree(5), "k must be even"),
    (lambda: fat_tree(0), "k must be >= 2"),
    (lambda: fat_tree(4, num_gpus=32, gpus_per_server=8), "holds 16 GPUs, fewer than num_gpus=32"),
    (lambda: fat_tree(4, link_gbps=0), "link_gbps must be > 0"),
    (lambda: fat_tree(4, nvlink_gbps=-1.0), "nvlink_gbps must be > 0"),
    (lambda: fat_tree(4, latency_us=-1.0), "latency_us must be >= 0"),
    (lambda: fat_tree(4, oversubscription=0.5), "oversubscription must be >= 1"),
    (lambda: fat_tree(4, num_gpus=0), "num_gpus must be >= 1"),
    (lambda: leaf_spine(8.5), "num_gpus must be an int"),
    (lambda: leaf_spine(4096), "exceed the 64 ports"),
    (lambda: leaf_spine(64, num_leaves=1, gpus_per_leaf=32), "fewer than num_gpus=64"),
    (lambda: leaf_spine(64, oversubscription=float("nan")), "oversubscription must be a finite number"),
    (lambda: rail_optimized(512, num_units=1, servers_per_unit=32), "fewer than num_gpus=512"),
    (lambda: rail_only(64, gpus_per_server=0), "gpus_per_server must be >= 1"),
    (lambda: rail_only(64, num_spines=0), "num_spines must be >= 1"),
])
def test_bad_parameters_raise_a_clear_topology_error(call, words):
    with pytest.raises(TopologyError, match=words):
        call()
