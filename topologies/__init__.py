"""collsim topologies: datacenter fabrics as networkx graphs (SPEC §4) and routing over them.

>>> import topologies
>>> g = topologies.build("fat_tree", num_gpus=32, gpus_per_server=8)
>>> router = topologies.Router(g, routing="ecmp", seed=0)
>>> router.path(0, 31)[:2]
['gpu0', 'leaf0']

Attributes of nodes, edges and graphs: :mod:`topologies.schema`.
"""

from __future__ import annotations

from typing import Any

from topologies.errors import TopologyError

# The builders and the router (networkx, scipy) load on first use, so `import topologies.errors` (the CLI's
# error handling) and `import topologies` stay quick.
_LAZY = {
    "PRESETS": "topologies.config", "build": "topologies.config", "check_parameters": "topologies.config",
    "preset_parameters": "topologies.config", "summary": "topologies.describe", "fat_tree": "topologies.builders.fat_tree",
    "nonblocking": "topologies.builders.ideal", "leaf_spine": "topologies.builders.leaf_spine", "rail_only": "topologies.builders.rails",
    "rail_optimized": "topologies.builders.rails", "MAX_SPRAY_PATHS": "topologies.routing",
    "ROUTING_MODES": "topologies.routing", "Router": "topologies.routing", "Routes": "topologies.routing",
    "link_table": "topologies.routing", "validate_graph": "topologies.schema",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topologies' has no attribute {name!r}")


__all__ = [
    "MAX_SPRAY_PATHS",
    "PRESETS",
    "ROUTING_MODES",
    "Router",
    "Routes",
    "TopologyError",
    "build",
    "check_parameters",
    "fat_tree",
    "leaf_spine",
    "link_table",
    "nonblocking",
    "preset_parameters",
    "rail_only",
    "rail_optimized",
    "summary",
    "validate_graph",
]
