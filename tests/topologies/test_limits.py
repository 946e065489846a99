"""Topology input limits (issue 13): YAML aliases, encodings and sizes are checked before building."""

from __future__ import annotations

import pytest

import topologies
from topologies.builders.servers import MAX_GPUS, MAX_LINKS, MAX_NODES
from topologies.errors import TopologyError
from topologies.yamlfile import load_yaml_text


def test_merge_keys_and_small_aliases_still_load():
    doc = load_yaml_text("d: &d {capacity_gbps: 400, latency_us: 1}\nl: [{<<: *d, a: x}, {<<: *d, a: y}]\n", "t")
    assert doc["l"][1] == {"capacity_gbps": 400, "latency_us": 1, "a": "y"}


def test_recursive_alias_is_refused():
    with pytest.raises(TopologyError, match="recursive alias"):
        load_yaml_text("a: &a [1, *a]\n", "t.yaml")


def test_bad_yaml_names_the_line():
    with pytest.raises(TopologyError, match=r"t.yaml: line \d+: not valid YAML"):
        load_yaml_text("a: 1\nb: [\n", "t.yaml")


@pytest.mark.parametrize(("preset", "params", "words"), [
    ("fat_tree", {"num_gpus": MAX_GPUS + 1}, "above the limit of 65,536 GPUs"),
    ("fat_tree", {"k": 10**6}, "would have"),
    ("fat_tree", {"k": 10**6, "num_gpus": 8}, "nodes, above the limit"),
    ("leaf_spine", {"num_gpus": 64, "num_spines": MAX_LINKS}, "would have"),
    ("rail_optimized", {"num_gpus": 64, "num_spines": MAX_NODES}, "would have"),
    ("rail_only", {"num_gpus": 64, "num_units": MAX_NODES}, "would have"),
])
def test_sizes_are_refused_before_building(preset, params, words):
    with pytest.raises(TopologyError, match=words):
        topologies.build(preset, **params)


def test_the_limit_itself_still_builds_its_parameters_check():
    # the largest fat-tree allowed passes the size check (built in benchmarks, ~4 s): check the arithmetic only
    from topologies.builders.servers import check_size

    check_size("fat_tree", MAX_GPUS, MAX_GPUS + MAX_GPUS // 8 + 5 * 64 * 64 // 4, 4 * MAX_GPUS, "k=64")


def test_explicit_yaml_checks_types(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("nodes:\n  - {name: [1, 2], kind: gpu}\nlinks: []\n")
    with pytest.raises(TopologyError, match=r"nodes\[0\]: name must be a string"):
        topologies.build(p)
    p.write_text("preset: [fat_tree]\n")
    with pytest.raises(TopologyError, match="unknown preset"):
        topologies.build(p)
