"""A sweep's grid (sim.sweep_grid, SPEC §8): values split on '|' and parsed like run, the cartesian product in
order, simulator and topology keys apart."""

from __future__ import annotations

import pytest

from sim.cli.sweep import parse_grid
from sim.errors import SimError
from sim.sweep_grid import Point, expand, split_grid_values, split_params


def test_grid_values_split_on_bar_and_parse_like_run():
    grid = parse_grid(("oversubscription=1|2|4,k=8", "name=a|b", "x=1.5|true"))
    assert grid == {"oversubscription": [1, 2, 4], "k": [8], "name": ["a", "b"], "x": [1.5, True]}
    with pytest.raises(SimError, match="empty value"):
        split_grid_values("1||2", int)


def test_expand_is_the_cartesian_product_in_order():
    points = expand(["a", "b"], {"x": [1, 2, 3], "y": ["u"]}, ["ring", "tree"], ["ecmp"], seed=7)
    assert len(points) == 2 * 3 * 1 * 2 * 1
    assert [p.index for p in points] == list(range(12))
    assert len({(p.topo, p.params, p.algo, p.routing) for p in points}) == 12
    assert all(p.seed == 7 for p in points)
    assert points[0] == Point(0, "a", (("x", 1), ("y", "u")), "ring", "ecmp", 7)
    assert points[1].algo == "tree" and points[2].params[0] == ("x", 2) and points[6].topo == "b"
    with pytest.raises(SimError, match="--algo"):
        expand(["a"], {}, [], ["ecmp"])


def test_params_split_between_simulator_and_topology():
    topo, sim = split_params((("oversubscription", 2), ("completion_quantile", 0.1), ("k", 4)))
    assert topo == {"oversubscription": 2, "k": 4} and sim == {"completion_quantile": 0.1}
