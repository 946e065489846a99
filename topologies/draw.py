"""Pictures of a topology: a layered drawing (servers grouped) or, for large fabrics, a tier summary."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import networkx as nx
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from topologies.errors import TopologyError
from topologies.schema import TIER_ORDER
from traces.atomic import atomic_output

#: Above this many nodes the picture is a summary of the tiers.
MAX_DRAWN_NODES = 400
_EDGE_COLORS = {"nvlink": "#76b900", "access": "#1f77b4", "leaf-spine": "#ff7f0e", "rail-spine": "#ff7f0e",
                "spine-core": "#d62728", "fabric": "#7f7f7f"}


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name))]


def draw(graph: nx.Graph, path: str | Path) -> str:
    """Draw ``graph`` into an image file (format from the suffix, e.g. ``.png``).

    Up to :data:`MAX_DRAWN_NODES` nodes: every node, tiers bottom-up (NVSwitch, GPU, leaf/rail, spine,
    core), each server's GPUs boxed together, edges coloured by kind. Beyond: one box per tier with its
    node count, and one line per pair of joined tiers with the cable count and capacity.

    Returns
    -------
    str
        ``"layered"`` or ``"summary"``: which picture was drawn.

    Raises
    ------
    TopologyError
        When the suffix names no image format matplotlib writes (checked before drawing).
    """
    fmt = image_format(path)
    fig = Figure(figsize=(12, 6.5), dpi=110)
    ax = fig.add_subplot()
    ax.set_axis_off()
    style = "layered" if graph.number_of_nodes() <= MAX_DRAWN_NODES else "summary"
    (_draw_layered if style == "layered" else _draw_summary)(graph, ax)
    ax.set_title(f"{graph.graph.get('name', 'topology')}: {graph.graph.get('num_gpus', '?')} GPUs "
                 f"({style} view)")
    fig.tight_layout()
    with atomic_output(path) as tmp:  # a complete picture or none (the format is given: tmp has no suffix)
        fig.savefig(tmp, format=fmt)
    return style


def image_format(path: str | Path) -> str:
    """The image format named by ``path``'s suffix (``png``, ``svg``, ``pdf``, ...).

    Raises
    ------
    TopologyError
        For a missing or unsupported suffix, listing the supported ones.

    Examples
    --------
    >>> image_format("fabric.PNG")
    'png'
    """
    supported = sorted(Figure().canvas.get_supported_filetypes())
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in supported:
        what = f"a '.{fmt}' file" if fmt else "a file without a suffix"
        raise TopologyError(f"{path}: cannot draw {what}; use an image suffix: "
                            + ", ".join(f".{s}" for s in supported))
    return fmt


def _tier(kind: str) -> int:
    return TIER_ORDER.index(kind) if kind in TIER_ORDER else len(TIER_ORDER)


def _draw_layered(graph: nx.Graph, ax) -> None:
    layers: dict[int, list] = defaultdict(list)
    for node, data in graph.nodes(data=True):
        layers[_tier(data.get("kind", ""))].append(node)
    pos = {}
    for level, (_, nodes) in enumerate(sorted(layers.items())):
        nodes.sort(key=lambda n: (graph.nodes[n].get("server", -1), _natural(n)))
        for i, node in enumerate(nodes):
            pos[node] = ((i + 0.5) / len(nodes), float(level))
    for node, data in graph.nodes(data=True):  # NVSwitch under the middle of its GPUs
        if data.get("kind") == "nvswitch":
            xs = [pos[g][0] for g in graph.neighbors(node) if graph.nodes[g].get("kind") == "gpu"]
            if xs:
                pos[node] = (sum(xs) / len(xs), pos[node][1])
    servers: dict[int, list] = defaultdict(list)
    for node, data in graph.nodes(data=True):
        if data.get("kind") in ("gpu", "nvswitch") and "server" in data:
            servers[data["server"]].append(pos[node])
    for points in servers.values():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        pad = 0.25 / max(1, len(layers.get(_tier("gpu"), [])))
        ax.add_patch(Rectangle((min(xs) - pad, min(ys) - 0.2), max(xs) - min(xs) + 2 * pad,
                               max(ys) - min(ys) + 0.4, facecolor="#eeeeee", edgecolor="#bbbbbb", zorder=0))
    for kind in sorted({d.get("kind", "") for _, _, d in graph.edges(data=True)}):
        edges = [(u, v) for u, v, d in graph.edges(data=True) if d.get("kind", "") == kind]
        nx.draw_networkx_edges(graph, pos, edgelist=edges, ax=ax, width=0.6, alpha=0.6,
                               edge_color=_EDGE_COLORS.get(kind, "#7f7f7f"), label=kind)
    size = max(8, min(120, 6000 / max(1, graph.number_of_nodes())))
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=size, node_color="#333333")
    if graph.number_of_nodes() <= 80:
        nx.draw_networkx_labels(graph, {n: (x, y - 0.18) for n, (x, y) in pos.items()}, ax=ax, font_size=6)
    for level, (tier, _) in enumerate(sorted(layers.items())):
        ax.text(-0.02, level, TIER_ORDER[tier] if tier < len(TIER_ORDER) else "other", ha="right", va="center")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_xlim(-0.12, 1.02)


def _draw_summary(graph: nx.Graph, ax) -> None:
    counts = Counter(d.get("kind", "") for _, d in graph.nodes(data=True))
    links: dict[tuple, list] = defaultdict(lambda: [0, 0.0])
    for u, v, d in graph.edges(data=True):
        pair = tuple(sorted((graph.nodes[u].get("kind", ""), graph.nodes[v].get("kind", "")), key=_tier))
        links[pair][0] += 1
        links[pair][1] += d["capacity_gbps"]
    kinds = sorted(counts, key=_tier)
    pos = {k: (0.3, float(i)) for i, k in enumerate(kinds)}
    for (a, b), (count, cap) in links.items():
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.plot([xa, xb], [ya, yb], color="#888888", zorder=1)
        ax.text((xa + xb) / 2 + 0.02, (ya + yb) / 2, f"{count} {a}-{b} links, {cap / 1000:,.1f} Tbps",
                fontsize=8, va="center")
    for kind, (x, y) in pos.items():
        ax.text(x, y, f"{kind} x {counts[kind]}", ha="center", va="center", fontsize=10, zorder=2,
                bbox=dict(boxstyle="round", facecolor="white", edgecolor="#333333"))
    ax.set_xlim(0, 1.2)
    ax.set_ylim(-0.6, len(kinds) - 0.4)


__all__ = ["MAX_DRAWN_NODES", "draw"]
