"""Shared graphs of the topology tests."""

from __future__ import annotations

import networkx as nx
import pytest

import topologies


@pytest.fixture
def bridged_server() -> nx.Graph:
    """An NVLink-only server (no network switch) of three GPUs, two NVSwitches bridged by gpu1."""
    g = nx.Graph(name="bridged", num_gpus=3, gpus_per_server=3)
    for i in range(3):
        g.add_node(f"gpu{i}", kind="gpu", server=0, local_rank=i)
    g.add_nodes_from(["nvsA", "nvsB"], kind="nvswitch", server=0)
    for gpu, nvs in [("gpu0", "nvsA"), ("gpu1", "nvsA"), ("gpu1", "nvsB"), ("gpu2", "nvsB")]:
        g.add_edge(gpu, nvs, kind="nvlink", capacity_gbps=3600.0, latency_us=0.5)
    return topologies.validate_graph(g)
