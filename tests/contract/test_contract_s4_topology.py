"""Conformance to SPEC.md §4 Topology: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import json

import networkx as nx
import pandas as pd
import pytest
from contract_support import (
    WORLD,
    run_json_and_links,
    simrun,
)

import sim
import topologies


@pytest.mark.parametrize("preset", ["fat_tree", "leaf_spine", "rail_optimized", "rail_only"])
@pytest.mark.parametrize("num_gpus", [8, 32])
def test_s4_presets_size_themselves_and_carry_attributes(preset, num_gpus):
    g = topologies.build(preset, num_gpus=num_gpus, gpus_per_server=4)
    assert isinstance(g, nx.Graph) and not g.is_directed()
    assert {"name", "num_gpus", "gpus_per_server"} <= set(g.graph)
    assert g.graph["num_gpus"] == num_gpus and g.graph["gpus_per_server"] == 4
    gpus = sorted((n for n, d in g.nodes(data=True) if d["kind"] == "gpu"), key=lambda n: int(n[3:]))
    assert gpus == [f"gpu{i}" for i in range(num_gpus)]
    for i in range(num_gpus):
        d = g.nodes[f"gpu{i}"]
        assert isinstance(d["server"], int) and isinstance(d["local_rank"], int)
        assert 0 <= d["local_rank"] < 4
    # GPUs of one server share a server id and have distinct local ranks
    by_server: dict[int, list[int]] = {}
    for i in range(num_gpus):
        by_server.setdefault(g.nodes[f"gpu{i}"]["server"], []).append(g.nodes[f"gpu{i}"]["local_rank"])
    assert all(sorted(v) == list(range(len(v))) for v in by_server.values())
    for _, d in g.nodes(data=True):
        assert isinstance(d["kind"], str) and d["kind"]
    for _, _, d in g.edges(data=True):
        assert d["capacity_gbps"] > 0 and d["latency_us"] >= 0 and isinstance(d["kind"], str)


@pytest.mark.parametrize("preset", ["fat_tree", "leaf_spine", "rail_optimized", "rail_only"])
def test_s4_every_preset_takes_oversubscription(preset):
    assert topologies.build(preset, num_gpus=16).graph["oversubscription"] == 1
    assert topologies.build(preset, num_gpus=16, oversubscription=2).graph["oversubscription"] == 2
    with pytest.raises(ValueError):
        topologies.build(preset, num_gpus=16, oversubscription=0.5)


def test_s4_fat_tree_tiers_and_edge_kinds():
    g = topologies.fat_tree(4, num_gpus=16, gpus_per_server=1)
    kinds = {d["kind"] for _, d in g.nodes(data=True)}
    assert {"gpu", "leaf", "spine", "core"} <= kinds
    edge_kinds = {d["kind"] for *_, d in g.edges(data=True)}
    assert {"access", "leaf-spine", "spine-core"} <= edge_kinds
    assert (4 // 2) ** 2 == sum(d["kind"] == "core" for _, d in g.nodes(data=True))  # k-ary: (k/2)^2 cores


@pytest.mark.parametrize("builder", [topologies.fat_tree, topologies.leaf_spine, topologies.rail_optimized,
                                     topologies.rail_only])
def test_s4_builders_common_parameters(builder):
    g = builder(num_gpus=16, gpus_per_server=8, link_gbps=100.0, nvlink_gbps=900.0, latency_us=3.0)
    nv = [d for *_, d in g.edges(data=True) if d["kind"] == "nvlink"]
    other = [d for *_, d in g.edges(data=True) if d["kind"] != "nvlink"]
    assert nv and all(d["capacity_gbps"] == 900.0 for d in nv)
    assert other and all(d["latency_us"] == 3.0 for d in other)
    assert any(d["capacity_gbps"] == 100.0 for d in other)
    # gpus_per_server=1: no NVLink domain, each GPU stands alone
    g1 = builder(num_gpus=16, gpus_per_server=1)
    assert not any(d["kind"] == "nvswitch" for _, d in g1.nodes(data=True))
    assert not any(d["kind"] == "nvlink" for *_, d in g1.edges(data=True))
    assert len({g1.nodes[f"gpu{i}"]["server"] for i in range(16)}) == 16


def test_s4_yaml_preset_form(tmp_path):
    path = tmp_path / "fabric.yaml"
    path.write_text("preset: leaf_spine\nnum_gpus: 16\ngpus_per_server: 4\noversubscription: 2\n")
    g = topologies.build(path)
    direct = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=4, oversubscription=2)
    assert g.graph["oversubscription"] == 2
    assert nx.utils.graphs_equal(nx.Graph(g.edges()), nx.Graph(direct.edges()))


def test_s4_yaml_explicit_form(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "nodes:\n"
        "  - {name: gpu0, kind: gpu, server: 0, local_rank: 0}\n"
        "  - {name: gpu1, kind: gpu, server: 1, local_rank: 0}\n"
        "  - {name: sw, kind: leaf}\n"
        "links:\n"
        "  - {a: gpu0, b: sw, capacity_gbps: 100, latency_us: 2, kind: access}\n"
        "  - {a: gpu1, b: sw, capacity_gbps: 50, latency_us: 3}\n")
    g = topologies.build(path)
    assert set(g.nodes) == {"gpu0", "gpu1", "sw"}
    assert g.edges["gpu0", "sw"]["capacity_gbps"] == 100 and g.edges["gpu0", "sw"]["kind"] == "access"
    assert g.edges["gpu1", "sw"]["latency_us"] == 3
    assert isinstance(g.edges["gpu1", "sw"].get("kind"), str)  # kind optional in YAML, present in the graph
    flows = pd.DataFrame({"src": [0], "dst": [1], "bytes": [10**6], "start_s": [0.0]})
    out = sim.simulate_flows(g, flows)
    # bottleneck 50 Gbit/s, path latency 2 + 3 us
    assert out["finish_s"].iloc[0] == pytest.approx(10**6 * 8 / 50e9 + 5e-6, rel=1e-9)


def test_s4_yaml_accepted_by_the_cli(tiny, tmp_path):
    path = tmp_path / "fabric.yaml"
    path.write_text("preset: fat_tree\ngpus_per_server: 4\n")
    code, out, err = simrun("run", "--trace", str(tiny), "--topo", str(path), "--json", "--no-report", "--out",
                            str(tmp_path / "o"))
    assert code == 0, err
    assert json.loads(out)["world_size"] == WORLD


def test_s4_topo_command(tmp_path):
    png = tmp_path / "fabric.png"
    code, out, err = simrun("topo", "fat_tree", "--set", "num_gpus=16", "--set", "oversubscription=2", "--draw",
                            str(png))
    assert code == 0, err
    assert png.is_file() and png.stat().st_size > 0
    assert "bisection" in out.lower() and "oversubscription" in out.lower()
    g = topologies.build("fat_tree", num_gpus=16, oversubscription=2)
    kinds = [d["kind"] for _, d in g.nodes(data=True)]
    for kind in ("gpu", "leaf", "spine", "core"):  # the counts per tier, as the graph has them
        assert f"{kind} {kinds.count(kind)}" in out, kind


def test_s4_preset_sizes_to_trace_unless_told(tiny, tmp_path):
    summary, links = run_json_and_links(tiny, tmp_path / "o", "--set", "num_gpus=16")
    gpus = {n for n in set(links["src"]) if n.startswith("gpu")}
    assert gpus == {f"gpu{i}" for i in range(16)}


@pytest.mark.parametrize("preset, up_kind", [("fat_tree", "leaf-spine"), ("leaf_spine", "leaf-spine"),
                                              ("rail_optimized", "rail-spine")])
def test_s4_oversubscription_scales_uplinks(preset, up_kind):
    def up_gbps(over):
        g = topologies.build(preset, num_gpus=128, oversubscription=over)
        return sum(d["capacity_gbps"] for *_, d in g.edges(data=True) if d["kind"] == up_kind), g

    full, _ = up_gbps(1)
    half, g2 = up_gbps(2)
    if preset == "leaf_spine":  # exact per leaf: host-facing ports x link rate / uplink capacity
        for leaf in (n for n, d in g2.nodes(data=True) if d["kind"] == "leaf"):
            up = sum(g2.edges[leaf, s]["capacity_gbps"] for s in g2[leaf] if g2.nodes[s]["kind"] == "spine")
            assert g2.graph["gpus_per_leaf"] * g2.graph["link_gbps"] / up == pytest.approx(2)
    else:
        assert half == pytest.approx(full / 2)
