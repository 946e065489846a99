"""Network anomalies: failed and degraded links, straggler ranks (the measurement study's concern).

``--fail-links N`` removes N cables, ``--degrade-links N:FACTOR`` scales N cables' capacity; the N cables
are a seeded choice among switch-to-switch cables (so a GPU keeps its access link), or named cables
``u-v`` (``leaf0-spine1``). Routing is built on the damaged graph, so it avoids failed cables; a GPU pair
that can no longer reach each other is a :class:`SimError`. ``--straggler RANK:DELAY_US`` delays every op
the rank issues (slow compute before each op).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from sim.errors import SimError

#: Node kinds whose cables are candidates for a seeded choice (both ends must be switches).
_SWITCH_KINDS = frozenset({"leaf", "spine", "core", "rail", "crossbar"})


@dataclass(frozen=True)
class Damage:
    """What :func:`apply` did: failed cables and degraded cables with their factor."""

    failed: list[tuple[str, str]] = field(default_factory=list)
    degraded: dict[tuple[str, str], float] = field(default_factory=dict)

    def describe(self) -> dict:
        return {"failed_links": [f"{u}-{v}" for u, v in self.failed],
                "degraded_links": {f"{u}-{v}": f for (u, v), f in self.degraded.items()}}


def switch_links(graph: nx.Graph) -> list[tuple[str, str]]:
    """Cables between two switches, sorted (the pool of a seeded choice)."""
    kind = nx.get_node_attributes(graph, "kind")
    out = [tuple(sorted((str(u), str(v)))) for u, v in graph.edges()
           if kind.get(u) in _SWITCH_KINDS and kind.get(v) in _SWITCH_KINDS]
    return sorted(out)


def parse_link(graph: nx.Graph, text: str) -> tuple[str, str]:
    """A cable named ``u-v`` (either order); node names may themselves contain ``-``.

    Raises
    ------
    SimError
        When no split of ``text`` at a ``-`` names a cable of the graph.

    Examples
    --------
    >>> g = nx.Graph([("leaf0", "spine1")])
    >>> parse_link(g, "spine1-leaf0")
    ('leaf0', 'spine1')
    """
    text = text.strip()
    for i, ch in enumerate(text):
        if ch == "-":
            u, v = text[:i], text[i + 1:]
            if graph.has_edge(u, v):
                return tuple(sorted((u, v)))
    raise SimError(f"link {text!r} is not a cable of the topology (write it as NODE-NODE, e.g. leaf0-spine0)")


def _choose(graph: nx.Graph, spec, seed: int, salt: int, what: str) -> list[tuple[str, str]]:
    """Links from an int N (seeded choice among switch links) or link names."""
    if spec is None or spec == 0 or spec == "":
        return []
    if isinstance(spec, (int, np.integer)) or (isinstance(spec, str) and spec.strip().isdigit()):
        n = int(spec)
        pool = switch_links(graph)
        if n < 0 or n > len(pool):
            raise SimError(f"{what}: cannot choose {n} of the {len(pool)} switch-to-switch links")
        rng = np.random.default_rng([int(seed), salt])
        pick = rng.choice(len(pool), size=n, replace=False)
        return [pool[i] for i in sorted(pick.tolist())]
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    return [parse_link(graph, str(s)) for s in names if str(s).strip()]


def parse_degrade(graph: nx.Graph, spec, seed: int) -> dict[tuple[str, str], float]:
    """``"N:FACTOR"``, ``"u-v:FACTOR,..."`` or ``{link: factor}`` -> ``{cable: factor}``.

    FACTOR below 1 is the capacity left (0.25 = a quarter); above 1 it divides the capacity (4 = four
    times slower).

    Raises
    ------
    SimError
        For a malformed spec or a factor that is not a positive number.
    """
    if not spec:
        return {}
    items: list[tuple[object, str]] = []
    if isinstance(spec, Mapping):
        items = [(k, str(v)) for k, v in spec.items()]
    else:
        for part in (spec.split(",") if isinstance(spec, str) else list(spec)):
            what, sep, factor = str(part).strip().rpartition(":")
            if not sep or not what:
                raise SimError(f"--degrade-links {part!r}: expected N:FACTOR or NODE-NODE:FACTOR")
            items.append((what, factor))
    out: dict[tuple[str, str], float] = {}
    for k, (what, factor) in enumerate(items):
        try:
            f = float(factor)
        except ValueError:
            raise SimError(f"--degrade-links: factor {factor!r} is not a number") from None
        if not f > 0:
            raise SimError(f"--degrade-links: factor {factor!r} must be > 0")
        f = f if f <= 1 else 1.0 / f
        for link in _choose(graph, what, seed, 2 + k, "--degrade-links"):
            out[link] = f
    return out


def apply(graph: nx.Graph, fail_links=None, degrade_links=None, seed: int = 0) -> tuple[nx.Graph, Damage]:
    """Return a damaged copy of ``graph`` (the input is not changed) and what was done.

    Parameters
    ----------
    graph : networkx.Graph
    fail_links : int, str or list of str, optional
        How many switch-to-switch cables to fail (seeded), or their names.
    degrade_links : str or mapping, optional
        See :func:`parse_degrade`.
    seed : int

    Examples
    --------
    >>> g = nx.Graph()
    >>> g.add_nodes_from(["a", "b"], kind="leaf"); g.add_edge("a", "b", capacity_gbps=100.0)
    >>> h, d = apply(g, degrade_links="a-b:0.5")
    >>> h.edges["a", "b"]["capacity_gbps"], g.edges["a", "b"]["capacity_gbps"]
    (50.0, 100.0)
    """
    failed = _choose(graph, fail_links, seed, 1, "--fail-links")
    degraded = parse_degrade(graph, degrade_links, seed)
    if not failed and not degraded:
        return graph, Damage()
    out = graph.copy()
    for (u, v), f in degraded.items():
        out.edges[u, v]["capacity_gbps"] = float(out.edges[u, v]["capacity_gbps"]) * f
    out.remove_edges_from(failed)
    return out, Damage(failed=failed, degraded=degraded)


def check_reachable(graph: nx.Graph, world_size: int, damage: Damage) -> None:
    """Every GPU of the trace must still reach every other one.

    Raises
    ------
    SimError
        Naming a GPU pair that the failed links cut apart.
    """
    if world_size < 2:
        return
    comp = nx.node_connected_component(graph, "gpu0")
    for r in range(1, world_size):
        if f"gpu{r}" not in comp:
            names = ", ".join(f"{u}-{v}" for u, v in damage.failed[:4])
            raise SimError(f"failed links cut gpu0 off from gpu{r} (failed: {names}"
                           + (", ..." if len(damage.failed) > 4 else "") + ")")


def parse_stragglers(spec) -> dict[int, float]:
    """``["RANK:DELAY_US", ...]``, ``"R:D,R:D"`` or ``{rank: delay_us}`` -> ``{rank: delay_us}``.

    Raises
    ------
    SimError
        For a malformed item or a negative delay.

    Examples
    --------
    >>> parse_stragglers(["3:50", "5:10.5"])
    {3: 50.0, 5: 10.5}
    """
    if not spec:
        return {}
    if isinstance(spec, Mapping):
        items: Iterable = [f"{k}:{v}" for k, v in spec.items()]
    elif isinstance(spec, str):
        items = spec.split(",")
    else:
        items = spec
    out: dict[int, float] = {}
    for item in items:
        rank, sep, delay = str(item).strip().partition(":")
        try:
            r, d = int(rank), float(delay)
        except ValueError:
            r, d = -1, -1.0
        if not sep or r < 0 or not d >= 0:
            raise SimError(f"--straggler {item!r}: expected RANK:DELAY_US with RANK >= 0 and DELAY_US >= 0")
        out[r] = out.get(r, 0.0) + d
    return out


__all__ = [
    "Damage",
    "apply",
    "check_reachable",
    "parse_degrade",
    "parse_link",
    "parse_stragglers",
    "switch_links",
]
