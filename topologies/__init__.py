"""collsim topologies: datacenter fabrics as networkx graphs (SPEC §4) and routing over them."""

from __future__ import annotations

from topologies.errors import TopologyError

__all__ = ["TopologyError", "build"]


def build(name_or_yaml, **params):  # placeholder: replaced by the topology issue
    raise TopologyError("topologies are not built yet")
