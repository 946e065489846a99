"""Cases at the topology boundary: YAML alias bombs, encodings, sizes, graphs handed to the API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from bad_inputs_cases.common import Case, check_short, small_trace

__all__ = ["CASES"]


def bomb_lines(depth: int, anchor: str = "a") -> list[str]:
    """Billion laughs: ``depth`` levels of ten aliases each (10**depth leaves)."""
    lines = [f"&{anchor}0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, depth):
        lines.append(f"&{anchor}{i} [" + ", ".join([f"*{anchor}{i - 1}"] * 10) + "]")
    return lines


def explicit_bomb(folder: Path, field_name: str) -> Path:
    levels = bomb_lines(9)
    nodes = [f"  - {{name: gpu{i}, kind: gpu, note: {lv}}}" for i, lv in enumerate(levels)]
    if field_name == "kind":
        nodes.append("  - {name: gpu9, kind: *a8}")
    else:
        nodes.append("  - {name: *a8, kind: gpu}")
    path = folder / f"bomb_{field_name}.yaml"
    path.write_text("nodes:\n" + "\n".join(nodes) + "\nlinks: []\n")
    return path


def preset_bomb(folder: Path, depth: int = 9, key: str = "preset") -> Path:
    levels = bomb_lines(depth)
    value = f"*a{depth - 1}"
    text = "description:\n" + "".join(f"  - {lv}\n" for lv in levels)
    text += f"preset: {value}\n" if key == "preset" else f"preset: fat_tree\n{key}: {value}\n"
    path = folder / f"bomb_{key}.yaml"
    path.write_text(text)
    return path


def graph_without_capacity():
    import networkx as nx

    import topologies

    g = nx.Graph(topologies.build("fat_tree", num_gpus=4, gpus_per_server=4))
    for _, _, d in g.edges(data=True):
        d.pop("capacity_gbps")
    return g



def big_yaml(d: Path) -> Path:
    path = d / "big.yaml"
    n = 200_000
    with path.open("w") as f:
        f.write("nodes:\n")
        f.writelines(f"  - {{name: gpu{i}, kind: gpu}}\n" for i in range(n))
        f.write("  - {name: sw, kind: leaf}\nlinks:\n")
        f.writelines(f"  - {{a: gpu{i}, b: sw, capacity_gbps: 400, latency_us: 1}}\n" for i in range(n))
    return path


def build_later(path: Path) -> Callable[[], Any]:
    import topologies

    return lambda: topologies.build(path)


def call_simulate(topology_of: Callable[[], Any]) -> Callable[[Path], Callable[[], Any]]:
    def call(d: Path) -> Callable[[], Any]:
        import sim
        from traces import read_trace

        df = read_trace(small_trace(d))
        return lambda: sim.simulate(df, topology_of())
    return call


def negative_latency(d: Path) -> Callable[[], Any]:
    import sim
    import topologies

    g = topologies.build("leaf_spine", num_gpus=16)
    next(iter(g.edges(data=True)))[2]["latency_us"] = -5.0
    flows = pd.DataFrame({"src": [0], "dst": [9], "bytes": [10**6], "start_s": [0.0]})
    return lambda: sim.simulate_flows(g, flows)



def bad_utf8(d: Path) -> Path:
    p = d / "latin1.yaml"
    p.write_bytes("preset: fat_tree\nname: r\xe9seau\n".encode("latin-1"))
    return p



CASES: list[Case] = [
    # 2. the topology boundary
    Case("yaml-bomb-kind", "alias bomb as a node kind", argv=lambda d: ["topo", str(explicit_bomb(d, "kind"))],
         expect="YAML aliases expand to more than"),
    Case("yaml-bomb-name", "alias bomb as a node name", argv=lambda d: ["topo", str(explicit_bomb(d, "name"))],
         expect="YAML aliases expand to more than"),
    Case("yaml-bomb-preset", "alias bomb as the preset name", argv=lambda d: ["topo", str(preset_bomb(d))],
         expect="YAML aliases expand to more than"),
    Case("yaml-bomb-api", "alias bomb through topologies.build",
         call=lambda d: build_later(preset_bomb(d)), error="TopologyError"),
    Case("yaml-echo", "a 10k-item alias value echoed in the error is cut short",
         argv=lambda d: ["topo", str(preset_bomb(d, depth=4, key="k"))], expect="parameter 'k' of fat_tree must be",
         check=check_short(400)),
    Case("yaml-utf8", "topology file that is not UTF-8", argv=lambda d: ["topo", str(bad_utf8(d))],
         expect="not UTF-8 text"),
    Case("yaml-200k", "explicit YAML of 200k GPUs", argv=lambda d: ["topo", str(big_yaml(d))],
         expect="limit of a topology file"),
    Case("topo-num-gpus", "--set num_gpus=1000000", argv=lambda d: ["topo", "fat_tree", "--set", "num_gpus=1000000"],
         expect="num_gpus=1000000 is above the limit"),
    Case("topo-k", "--set k=1000000", argv=lambda d: ["topo", "fat_tree", "--set", "k=1000000"],
         expect="k=1000000 would have"),
    Case("topo-k-num", "--set k=1000,num_gpus=32", argv=lambda d: ["topo", "fat_tree", "--set", "k=1000,num_gpus=32"],
         expect="would have 1,250,000 nodes"),
    Case("topo-draw-txt", "--draw x.txt", argv=lambda d: ["topo", "fat_tree", "--draw", str(d / "x.txt")],
         expect="cannot draw a '.txt' file"),
    Case("build-int", "topologies.build(42)", call=lambda d: (lambda: __import__("topologies").build(42)),
         error="TopologyError"),
    Case("sim-no-capacity", "simulate on a graph without capacity_gbps",
         call=call_simulate(graph_without_capacity), error="TopologyError"),
    Case("sim-digraph", "simulate on a DiGraph",
         call=call_simulate(lambda: __import__("networkx").DiGraph(__import__("topologies").build("fat_tree", num_gpus=4))),
         error="TopologyError"),
    Case("sim-list", "simulate on a list", call=call_simulate(lambda: [1, 2, 3]), error="TopologyError"),
    Case("flows-negative-latency", "simulate_flows with a negative latency", call=negative_latency,
         error="TopologyError"),
]
