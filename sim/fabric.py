"""The fabric a trace replays over: a graph as given, or a preset / YAML file sized to the trace, and the
check that the trace fits it (shared by the flow and the analytical tier)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from sim.errors import SimError

__all__ = ["check_fit", "load_topology"]


def load_topology(topology, world_size: int, gpus_per_node: int, params: Mapping[str, Any]) -> nx.Graph:
    """The fabric a trace replays over: a graph as given, or a preset / YAML file built with ``params``.

    Presets (and preset YAML files) are sized to the trace (``num_gpus=world_size``,
    ``gpus_per_server=gpus_per_node``) unless ``params`` says otherwise; an explicit YAML graph keeps its
    own size.

    Raises
    ------
    topologies.TopologyError
        Unknown preset, bad or unknown parameter.
    """
    import topologies

    if isinstance(topology, nx.Graph):  # a caller's graph: checked like a built one (SPEC §4)
        return topologies.validate_graph(topology, str(topology.graph.get("name") or "topology"))
    if not isinstance(topology, str | Path):
        raise topologies.TopologyError(f"a topology is a networkx.Graph, a preset name or a YAML path, got "
                                       f"{type(topology).__name__}")
    name = str(topology)
    kw = {"num_gpus": world_size, "gpus_per_server": gpus_per_node}
    kw.update(params or {})
    if Path(name).suffix.lower() in (".yaml", ".yml"):
        from topologies.errors import TopologyError

        try:  # size a preset YAML to the trace; an explicit graph may fix its own server size
            return topologies.build(name, **kw)
        except TopologyError:
            return topologies.build(name, **dict(params or {}))
    return topologies.build(name, **kw)


def check_fit(graph: nx.Graph, world_size: int) -> None:
    """The trace must fit the topology, and the topology's GPUs must reach each other.

    Raises
    ------
    SimError
        When the trace's world size exceeds the GPUs, or the graph is disconnected.
    """
    gpus = [n for n, d in graph.nodes(data=True) if d.get("kind") == "gpu"]
    name = graph.graph.get("name", "topology")
    if world_size > len(gpus):
        raise SimError(f"trace world_size {world_size} exceeds the {len(gpus)} GPUs of topology {name!r} "
                       f"(size it to the trace: --set num_gpus={world_size})")
    missing = [f"gpu{r}" for r in range(world_size) if f"gpu{r}" not in graph]
    if missing:
        raise SimError(f"topology {name!r} has no node {missing[0]} for rank {missing[0][3:]}")
    if world_size > 1:
        comp = nx.node_connected_component(graph, "gpu0")
        cut = [f"gpu{r}" for r in range(world_size) if f"gpu{r}" not in comp]
        if cut:
            raise SimError(f"topology {name!r} is disconnected: gpu0 cannot reach {cut[0]}"
                           + (f" (and {len(cut) - 1} more GPUs)" if len(cut) > 1 else ""))
