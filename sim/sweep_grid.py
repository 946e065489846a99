"""A sweep's grid (SPEC §8): the points (:class:`Point`), the cartesian product of topologies, ``--set``
values, algorithms and routings (:func:`expand`), and each point's simulator options and topology
parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim.errors import SimError
from sim.options import ALGOS, ROUTINGS, SET_KEYS, SimOptions, check_seed, set_options

#: Separates the values of one grid key inside ``--set`` (``oversubscription=1|2|4``).
GRID_SEPARATOR = "|"
#: Columns of a row that describe the point (the rest are the §6 summary figures).
POINT_COLUMNS = ("point", "topo", "algo", "routing", "seed")


@dataclass(frozen=True)
class Point:
    """One grid point.

    Attributes
    ----------
    index : int
        Position in the grid (row order of ``sweep.parquet``).
    topo : str
        Topology preset name or YAML path, as given on the command line.
    params : tuple of (str, value)
        The ``--set`` values of this point, in command-line order.
    algo, routing : str
    seed : int
    """

    index: int
    topo: str
    params: tuple[tuple[str, Any], ...]
    algo: str
    routing: str
    seed: int

    def row(self) -> dict[str, Any]:
        """The point's columns: ``point, topo, <--set keys>, algo, routing, seed``."""
        return {"point": self.index, "topo": self.topo, **dict(self.params), "algo": self.algo,
                "routing": self.routing, "seed": self.seed}

    def label(self) -> str:
        """``fat_tree oversubscription=2 algo=ring routing=ecmp``."""
        parts = [self.topo, *(f"{k}={v}" for k, v in self.params), f"algo={self.algo}", f"routing={self.routing}"]
        return " ".join(parts)


def simulator_keys() -> frozenset[str]:
    """``--set`` keys that go to :func:`sim.simulate` as options (the rest go to the topology builder)."""
    return SET_KEYS


def split_grid_values(raw: Any, parse: Callable[[str], Any]) -> list[Any]:
    """Split one ``--set`` value on ``|`` into grid values, each parsed by ``parse``.

    Examples
    --------
    >>> split_grid_values("1|2|4", int)
    [1, 2, 4]
    >>> split_grid_values(8, int)
    [8]
    """
    if not isinstance(raw, str) or GRID_SEPARATOR not in raw:
        return [raw]
    parts = [part.strip() for part in raw.split(GRID_SEPARATOR)]
    if any(not part for part in parts):
        raise SimError(f"grid value {raw!r}: empty value between '{GRID_SEPARATOR}' separators")
    return [parse(part) for part in parts]


def expand(topos: Sequence[str], grid: Mapping[str, Sequence[Any]], algos: Sequence[str] = ("auto",),
           routings: Sequence[str] = ("ecmp",), seed: int = 0) -> list[Point]:
    """The cartesian product of the grid, topology outermost, then ``grid`` keys in order, algo, routing.

    Raises
    ------
    SimError
        When a dimension is empty, or an algo or routing is unknown.

    Examples
    --------
    >>> pts = expand(["fat_tree", "leaf_spine"], {"oversubscription": [1, 2]}, ["ring"])
    >>> [p.label() for p in pts][:2]
    ['fat_tree oversubscription=1 algo=ring routing=ecmp', 'fat_tree oversubscription=2 algo=ring routing=ecmp']
    >>> len(pts)
    4
    """
    dims = {"--topo": list(topos), **{f"--set {k}": list(v) for k, v in grid.items()}, "--algo": list(algos),
            "--routing": list(routings)}
    for name, values in dims.items():
        if not values:
            raise SimError(f"{name}: no values to sweep over")
    for name, values, known in (("--algo", algos, ALGOS), ("--routing", routings, ROUTINGS)):
        bad = [v for v in values if v not in known]
        if bad:
            raise SimError(f"{name} {bad[0]!r} is not one of: {', '.join(known)}")
    seed = check_seed(seed, "--seed")
    keys = list(grid)
    points = []
    for i, combo in enumerate(itertools.product(topos, *(grid[k] for k in keys), algos, routings)):
        topo, *values, algo, routing = combo
        points.append(Point(i, str(topo), tuple(zip(keys, values, strict=True)), str(algo), str(routing), int(seed)))
    return points


def split_params(params: Iterable[tuple[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(topology_params, simulate_options)`` of a point's ``--set`` values (options under their own names).

    Raises
    ------
    sim.errors.OptionError
        For an option given under two spellings, or one ``--set`` cannot give (``seed``).
    """
    options, _, topo = set_options(dict(params))
    return topo, options


def point_options(point: Point, trace_name: str = "") -> SimOptions:
    """The checked simulator options of one point (what :func:`run_point` passes to ``simulate``).

    Raises
    ------
    sim.errors.OptionError
        For a bad value (checked before any point runs, by :func:`check_points`).
    """
    topo_params, options = split_params(point.params)
    return SimOptions.from_mapping(options, algo=point.algo, routing=point.routing, seed=point.seed,
                                   trace_name=trace_name or None, topology_params=topo_params)


def naming_point(point: Point, call: Callable[[], Any]) -> Any:
    """Run ``call``; a bad-input error names the point.

    Examples
    --------
    >>> naming_point(expand(["fat_tree"], {})[0], lambda: int("x"))
    Traceback (most recent call last):
    ...
    ValueError: point 0 (fat_tree algo=auto routing=ecmp): invalid literal for int() with base 10: 'x'
    """
    try:
        return call()
    except ValueError as exc:
        raise type(exc)(f"point {point.index} ({point.label()}): {exc}") from None


__all__ = ["GRID_SEPARATOR", "POINT_COLUMNS", "Point", "expand", "naming_point", "point_options", "simulator_keys",
           "split_grid_values", "split_params"]
