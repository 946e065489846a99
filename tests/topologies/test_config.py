"""`topologies.build`: presets, YAML files (preset and explicit forms), parameter checks."""

from __future__ import annotations

import textwrap

import pytest

import topologies
from sim.cli.common import parse_set_options
from topologies import TopologyError, build

EXPLICIT = """
name: two-boxes
nodes:
  - {name: gpu0, kind: gpu}
  - {name: gpu1, kind: gpu}
  - {name: gpu2, kind: gpu}
  - {name: gpu3, kind: gpu}
  - {name: nvsA, kind: nvswitch}
  - {name: nvsB, kind: nvswitch}
  - {name: tor, kind: leaf}
links:
  - {a: gpu0, b: nvsA, capacity_gbps: 3600, latency_us: 0.5}
  - {a: gpu1, b: nvsA, capacity_gbps: 3600, latency_us: 0.5}
  - {a: gpu2, b: nvsB, capacity_gbps: 3600, latency_us: 0.5}
  - {a: gpu3, b: nvsB, capacity_gbps: 3600, latency_us: 0.5}
  - {a: gpu0, b: tor, capacity_gbps: 400, latency_us: 1}
  - {a: gpu2, b: tor, capacity_gbps: 400, latency_us: 1, kind: access}
"""


def write(tmp_path, text, name="topo.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("name", list(topologies.PRESETS))
def test_every_preset_builds_with_defaults_and_the_spec_attributes(name):
    g = build(name)
    assert g.graph["name"] == name and g.graph["num_gpus"] == 128 and g.graph["gpus_per_server"] == 8
    assert g.graph["oversubscription"] == 1.0 and g.graph["link_gbps"] == 400.0 and g.graph["nvlink_gbps"] == 3600.0
    for _, data in g.nodes(data=True):
        assert data["kind"] in topologies.schema.NODE_KINDS
    for _, _, data in g.edges(data=True):
        assert set(data) == {"capacity_gbps", "latency_us", "kind"}


def test_parameters_are_type_checked_and_named():
    with pytest.raises(TopologyError, match="unknown parameter 'radix' for fat_tree"):
        build("fat_tree", radix=8)
    with pytest.raises(TopologyError, match="parameter 'k' of fat_tree must be an int, got 4.5"):
        build("fat_tree", k=4.5)
    with pytest.raises(TopologyError, match="parameter 'k' of fat_tree must be an int, got True"):
        build("fat_tree", k=True)
    with pytest.raises(TopologyError, match="parameter 'oversubscription' of leaf_spine must be a number"):
        build("leaf_spine", oversubscription="lots")
    g = build("leaf_spine", num_gpus=64, oversubscription=2)  # an int is a number
    assert g.graph["oversubscription"] == 2.0


def test_set_strings_from_the_command_line_reach_the_builder():
    g = build("fat_tree", **parse_set_options(["k=4,gpus_per_server=2", "link_gbps=100"]))
    assert (g.graph["k"], g.graph["num_gpus"], g.graph["link_gbps"]) == (4, 16, 100.0)
    with pytest.raises(TopologyError, match="'k'"):
        build("fat_tree", **parse_set_options(["k=four"]))


def test_unknown_topology_names_the_choices():
    with pytest.raises(TopologyError, match="unknown topology 'torus'.*fat_tree"):
        build("torus")


def test_yaml_preset_with_overrides(tmp_path):
    path = write(tmp_path, """
        preset: leaf_spine
        name: my-pod
        num_gpus: 64
        oversubscription: 2
    """)
    g = build(path)
    assert g.graph["name"] == "my-pod" and g.graph["oversubscription"] == 2.0 and g.graph["num_gpus"] == 64
    g = build(str(path), oversubscription=4.0, num_gpus=128)
    assert g.graph["oversubscription"] == 4.0 and g.graph["num_gpus"] == 128
    bad = write(tmp_path, "preset: leaf_spine\nspines: 3\n", "bad.yaml")
    with pytest.raises(TopologyError, match=r"bad.yaml: unknown parameter 'spines'"):
        build(bad)


def test_yaml_explicit_graph(tmp_path):
    g = build(write(tmp_path, EXPLICIT))
    assert g.graph["name"] == "two-boxes" and g.graph["num_gpus"] == 4 and g.graph["gpus_per_server"] == 2
    assert g.edges["gpu0", "nvsA"]["kind"] == "nvlink" and g.edges["gpu0", "tor"]["kind"] == "access"
    assert [g.nodes[f"gpu{i}"]["server"] for i in range(4)] == [0, 0, 1, 1]
    assert [g.nodes[f"gpu{i}"]["local_rank"] for i in range(4)] == [0, 1, 0, 1]
    assert build(write(tmp_path, EXPLICIT), num_gpus=4).number_of_nodes() == 7
    with pytest.raises(TopologyError, match="holds 4 GPUs, fewer than num_gpus=8"):
        build(write(tmp_path, EXPLICIT), num_gpus=8)
    with pytest.raises(TopologyError, match="unknown parameter 'k' for an explicit topology"):
        build(write(tmp_path, EXPLICIT), k=4)


@pytest.mark.parametrize("edit, words", [
    (("capacity_gbps: 400, latency_us: 1}", "capacity_gbps: 0, latency_us: 1}"), r"links\[4\]: capacity_gbps must be a number > 0"),
    (("{a: gpu0, b: tor,", "{a: gpu0, b: tor2,"), r"links\[4\]: node 'tor2' is not declared"),
    (("kind: access}", "kind: ethernet}"), r"links\[5\]: kind 'ethernet'"),
    (("{name: tor, kind: leaf}", "{name: tor, kind: router}"), r"nodes\[6\]: kind 'router'"),
    (("latency_us: 1, kind: access}", "kind: access}"), r"links\[5\]: missing 'latency_us'"),
    (("  - {a: gpu2, b: tor, capacity_gbps: 400, latency_us: 1, kind: access}\n", ""), "gpu2 is not connected to gpu0"),
    (("name: two-boxes", "name: two-boxes\nextra: 1"), "unknown key 'extra'"),
    (("gpu3", "gpu7"), "GPU slots must be 0..3, but gpu3 is missing"),
    (("{a: gpu0, b: tor,", "{a: gpu0, b: gpu0,"), r"links\[4\]: gpu0-gpu0 is a self-loop"),
])
def test_yaml_explicit_errors_name_the_field(tmp_path, edit, words):
    text = EXPLICIT.replace(*edit)
    assert text != EXPLICIT
    path = write(tmp_path, text)
    with pytest.raises(TopologyError, match=words):
        build(path)


def test_yaml_nvlink_domains_follow_the_nvswitches(tmp_path):
    text = EXPLICIT.replace("  - {a: gpu2, b: tor", "  - {a: gpu3, b: nvsA, capacity_gbps: 1, latency_us: 0}\n  - {a: gpu2, b: tor")
    g = build(write(tmp_path, text))  # gpu3 now bridges both NVSwitches: one domain of four GPUs
    assert g.graph["gpus_per_server"] == 4
    assert [g.nodes[f"gpu{i}"]["server"] for i in range(4)] == [0, 0, 0, 0]


def test_yaml_syntax_error_names_the_line_and_safe_load_only(tmp_path):
    with pytest.raises(TopologyError, match=r"broken.yaml: line \d+"):
        build(write(tmp_path, "preset: fat_tree\nk: [4\n", "broken.yaml"))
    evil = write(tmp_path, "preset: !!python/object/apply:os.system ['echo hacked']\n", "evil.yaml")
    with pytest.raises(TopologyError, match="evil.yaml"):
        build(evil)
    with pytest.raises(TopologyError, match="missing.yaml: cannot read"):
        build(tmp_path / "missing.yaml")
    with pytest.raises(TopologyError, match="expected 'preset: NAME' or both"):
        build(write(tmp_path, "nodes: []\n", "half.yaml"))
