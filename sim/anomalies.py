"""Network anomalies: failed and degraded links, straggler ranks (the measurement study's concern).

``--fail-links N`` removes N cables, ``--degrade-links N:FACTOR`` scales N cables' capacity; the N cables
are a seeded choice among switch-to-switch cables (so a GPU keeps its access link), or named cables
``u-v`` (``leaf0-spine1``). Routing is built on the damaged graph, so it avoids failed cables; a GPU pair
that can no longer reach each other is a :class:`SimError`. ``--straggler RANK:DELAY_US`` delays every op
the rank issues (slow compute before each op).

Time-varying anomalies: an item followed by ``@WINDOW`` acts only in that window (:class:`LinkWindow`):

``N@T1-T2`` / ``u-v@T1-T2``
    the cables fail at T1 and come back at T2 (``@T1``: from T1 to the end);
``N@T1-T2/PERIOD``
    a flapping port: from T1 to T2 the cables are down for the first half of every PERIOD, up for the second;
``N:F@T1-T2`` (``/PERIOD`` too)
    the cables run at factor F of their capacity in the window.

Times are numbers with a unit ``s``, ``ms`` or ``us`` (no unit: seconds), e.g. ``2@1ms-3ms``,
``leaf0-spine0@0.5ms-2ms/200us``, ``1:0.5@0-10ms``. A windowed cable stays in the graph, so routes are
planned over it as if it were healthy (NCCL does not re-route an established connection); while it is
down its flows stall at rate 0 and resume with the bytes they have left when it comes back. A failure
that never ends stalls them for good, and the replay ends with a deadlock error naming the op. The
windows run as simpy processes that change link capacities in the network (:func:`window_processes`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from sim.errors import SimError

__all__ = ["Damage", "LinkWindow", "apply", "check_reachable", "parse_degrade", "parse_link", "parse_stragglers",
           "parse_time_s", "parse_window", "switch_links", "window_processes"]

#: Node kinds whose cables are candidates for a seeded choice (both ends must be switches).
_SWITCH_KINDS = frozenset({"leaf", "spine", "core", "rail", "crossbar"})


_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_TIME = rf"{_NUM}(?:us|µs|ms|s)?"
_WINDOW = re.compile(rf"^\s*({_TIME})\s*(?:-\s*({_TIME}))?\s*(?:/\s*({_TIME}))?\s*$")
_PER_S = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "": 1.0}   # divide: 100 / 1e6 is 1e-4 exactly, 100 * 1e-6 is not


@dataclass(frozen=True)
class LinkWindow:
    """Cables at ``factor`` x capacity (0: down) from ``t1_s`` to ``t2_s``; with ``period_s``, only in the
    first half of every period from ``t1_s`` (a flapping port)."""

    cables: tuple[tuple[str, str], ...]
    factor: float
    t1_s: float
    t2_s: float = math.inf
    period_s: float | None = None

    def intervals(self) -> list[tuple[float, float]]:
        """The ``[start, end)`` stretches in which the factor applies.

        Examples
        --------
        >>> LinkWindow((), 0.0, 1.0, 3.0, 1.0).intervals()
        [(1.0, 1.5), (2.0, 2.5)]
        """
        if self.period_s is None:
            return [(self.t1_s, self.t2_s)]
        out, k = [], 0
        while self.t1_s + k * self.period_s < self.t2_s:
            a = self.t1_s + k * self.period_s
            out.append((a, min(a + 0.5 * self.period_s, self.t2_s)))
            k += 1
        return out

    def describe(self) -> str:
        what = "down" if self.factor == 0 else f"x{self.factor:g}"
        period = f"/{self.period_s:g}s" if self.period_s is not None else ""
        return f"{','.join(f'{u}-{v}' for u, v in self.cables)} {what} @{self.t1_s:g}s-{self.t2_s:g}s{period}"


@dataclass(frozen=True)
class Damage:
    """What :func:`apply` did: failed cables, degraded cables with their factor, time windows."""

    failed: list[tuple[str, str]] = field(default_factory=list)
    degraded: dict[tuple[str, str], float] = field(default_factory=dict)
    windows: list[LinkWindow] = field(default_factory=list)

    def describe(self) -> dict:
        out = {"failed_links": [f"{u}-{v}" for u, v in self.failed],
               "degraded_links": {f"{u}-{v}": f for (u, v), f in self.degraded.items()}}
        if self.windows:
            out["link_windows"] = [w.describe() for w in self.windows]
        return out


#: Most periods one flapping window may have (``1@0-1000/1e-12`` would ask for 10**15 events).
MAX_FLAPS = 100_000


def parse_time_s(text: str, what: str = "time") -> float:
    """``"2ms"``, ``"150us"``, ``"0.5"`` (seconds) -> seconds.

    Examples
    --------
    >>> parse_time_s("2ms"), parse_time_s("150us"), parse_time_s("1e-3")
    (0.002, 0.00015, 0.001)
    """
    m = re.fullmatch(rf"\s*({_NUM})\s*(us|µs|ms|s)?\s*", str(text))
    if not m:
        raise SimError(f"{what}: {text!r} is not a time (a number with unit s, ms or us)")
    return float(m.group(1)) / _PER_S[m.group(2) or ""]


def parse_window(text: str, what: str) -> tuple[float, float, float | None]:
    """``"T1-T2"``, ``"T1"`` or ``"T1-T2/PERIOD"`` -> ``(t1_s, t2_s, period_s)``.

    Raises
    ------
    SimError
        For a malformed window, ``T2 <= T1`` or a period that is not > 0.

    Examples
    --------
    >>> parse_window("1ms-3ms/500us", "--fail-links")
    (0.001, 0.003, 0.0005)
    """
    m = _WINDOW.match(text)
    if not m:
        raise SimError(f"{what}: window {text!r} is not T1-T2, T1 or T1-T2/PERIOD (times with unit s, ms, us)")
    t1 = parse_time_s(m.group(1), what)
    t2 = parse_time_s(m.group(2), what) if m.group(2) else math.inf
    period = parse_time_s(m.group(3), what) if m.group(3) else None
    if not t2 > t1:
        raise SimError(f"{what}: window {text!r} ends before it starts")
    if period is not None and not (period > 0 and math.isfinite(t2)):
        raise SimError(f"{what}: window {text!r}: a flapping period needs T2 and must be > 0")
    if period is not None and (t2 - t1) / period > MAX_FLAPS:  # each period is two events: bound them first
        raise SimError(f"{what}: window {text!r} flaps {(t2 - t1) / period:.3g} times, more than the limit of "
                       f"{MAX_FLAPS:,} periods (docs/limits.md)")
    return t1, t2, period


def _items(spec) -> list[str]:
    if isinstance(spec, (int, np.integer)):
        return [str(int(spec))]
    return [str(x).strip() for x in (spec.split(",") if isinstance(spec, str) else list(spec)) if str(x).strip()]


def _split_windows(spec) -> tuple[object, list[tuple[str, str]]]:
    """Items without a window (as one spec for the static path) and ``(item, window)`` pairs."""
    if spec is None or isinstance(spec, (int, np.integer, Mapping)):
        return spec, []
    static, timed = [], []
    for item in _items(spec):
        what, sep, window = item.rpartition("@")
        if sep:
            timed.append((what, window))
        else:
            static.append(item)
    if not timed:
        return spec, []
    return (",".join(static) if static else None), timed


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


def parse_degrade(graph: nx.Graph, spec, seed: int, salt: int = 2) -> dict[tuple[str, str], float]:
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
        for link in _choose(graph, what, seed, salt + k, "--degrade-links"):
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
    fail_links, fail_timed = _split_windows(fail_links)
    degrade_links, degrade_timed = _split_windows(degrade_links)
    windows = []
    for k, (what, window) in enumerate(fail_timed):
        t1, t2, period = parse_window(window, "--fail-links")
        cables = _choose(graph, what, seed, 11 + k, "--fail-links")
        windows.append(LinkWindow(tuple(cables), 0.0, t1, t2, period))
    for k, (what, window) in enumerate(degrade_timed):
        t1, t2, period = parse_window(window, "--degrade-links")
        for cable, f in parse_degrade(graph, what, seed, salt=31 + k).items():
            windows.append(LinkWindow((cable,), f, t1, t2, period))
    failed = _choose(graph, fail_links, seed, 1, "--fail-links")
    degraded = parse_degrade(graph, degrade_links, seed)
    if not failed and not degraded:
        return graph, Damage(windows=windows)
    out = graph.copy()
    for (u, v), f in degraded.items():
        out.edges[u, v]["capacity_gbps"] = float(out.edges[u, v]["capacity_gbps"]) * f
    out.remove_edges_from(failed)
    return out, Damage(failed=failed, degraded=degraded, windows=windows)


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


def window_processes(damage: Damage, links) -> list[Callable]:
    """One simpy process per time window: ``fn(env, net)`` that scales the cables' links in the network.

    Parameters
    ----------
    damage : Damage
    links : pandas.DataFrame
        The router's link table (``src``, ``dst`` per directed link).

    Returns
    -------
    list of callables
        Generators ``fn(env, net)`` for ``Engine(processes=...)``.
    """
    if not damage.windows:
        return []
    src, dst = links["src"].astype(str).to_numpy(), links["dst"].astype(str).to_numpy()
    out = []
    for window in damage.windows:
        mask = np.zeros(len(src), dtype=bool)
        for u, v in window.cables:
            mask |= ((src == u) & (dst == v)) | ((src == v) & (dst == u))
        out.append(_window_process(window, np.flatnonzero(mask)))
    return out


def _window_process(window: LinkWindow, link_ids: np.ndarray) -> Callable:
    def process(env, net):
        for a, b in window.intervals():
            if a > env.now:
                yield env.at(a)
            net.scale_links(link_ids, window.factor)
            if b == math.inf:
                return
            yield env.at(b)
            net.scale_links(link_ids, 1.0)
    return process


__all__ = [
    "Damage",
    "LinkWindow",
    "apply",
    "check_reachable",
    "parse_degrade",
    "parse_link",
    "parse_stragglers",
    "parse_time_s",
    "parse_window",
    "switch_links",
    "window_processes",
]
