"""collsim topologies: datacenter fabrics as networkx graphs (SPEC §4) and routing over them.

>>> import topologies
>>> g = topologies.build("fat_tree", num_gpus=32, gpus_per_server=8)
>>> router = topologies.Router(g, routing="ecmp", seed=0)
>>> router.path(0, 31)[:2]
['gpu0', 'leaf0']

Attributes of nodes, edges and graphs: :mod:`topologies.schema`.
"""

from __future__ import annotations

from topologies.config import PRESETS, build, check_parameters, preset_parameters
from topologies.describe import summary
from topologies.errors import TopologyError
from topologies.fat_tree import fat_tree
from topologies.ideal import nonblocking
from topologies.leaf_spine import leaf_spine
from topologies.rails import rail_only, rail_optimized
from topologies.routing import MAX_SPRAY_PATHS, ROUTING_MODES, Router, Routes, link_table
from topologies.schema import validate_graph

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
