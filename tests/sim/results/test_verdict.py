"""The ranking rule shared by compare and sweep: winners, margins, ties within the stated error."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from sim.results.verdict import STATED_ERROR_REL, rank, sentence, verdicts


def test_a_clear_winner_and_its_margin_over_the_runner_up():
    r = rank(["a", "b", "c"], [3.0, 2.0, 4.0])
    assert r.order == ("b", "a", "c") and r.winners == ("b",) and not r.tie
    assert math.isclose(r.margin_rel, 1 / 3)
    assert sentence("makespan", r) == "makespan: b wins (2), 33.3 % lower than a (3)."


def test_figures_within_the_stated_error_are_a_tie():
    r = rank(["fat_tree", "leaf_spine"], [1.0, 1.0 + 0.5 * STATED_ERROR_REL])
    assert r.tie and r.winners == ("fat_tree", "leaf_spine")
    assert "tie" in sentence("makespan", r) and "wins" not in sentence("makespan", r)


def test_equal_figures_tie_regardless_of_listing_order():
    for names in (["a", "b"], ["b", "a"]):
        r = rank(names, [5.0, 5.0])
        assert r.tie and set(r.winners) == {"a", "b"}


def test_a_single_candidate_is_named_without_a_comparison():
    assert sentence("makespan", rank(["a"], [2.0])) == "makespan: a (2); nothing else to compare with."


def test_missing_figures_never_win():
    r = rank(["a", "b"], [None, 2.0])
    assert r.winners == ("b",) and r.order == ("b", "a")
    assert rank(["a"], [float("nan")]).winners == ()


def test_verdicts_answer_each_question_present():
    rows = [{"topo": "x", "exposed_comm_s": 1e-3, "slowdown_p99": 1.5, "incast_events": 10, "makespan_s": 2e-3},
            {"topo": "y", "exposed_comm_s": 2e-3, "slowdown_p99": 1.5, "incast_events": 0, "makespan_s": 3e-3}]
    out = {key: (r, text) for key, r, text in verdicts(rows)}
    assert out["exposed_comm_s"][0].winners == ("x",)
    assert out["slowdown_p99"][0].tie
    assert out["incast_events"][0].winners == ("y",)
    assert "1.000 ms" in out["exposed_comm_s"][1]


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=6), st.randoms())
def test_winners_are_the_minimum_and_those_within_the_error_of_it(values, rnd):
    names = [f"f{i}" for i in range(len(values))]
    r = rank(names, values)
    best = min(values)
    assert values[names.index(r.winners[0])] == best
    for n, v in zip(names, values, strict=True):
        assert (n in r.winners) == (abs(v - best) <= STATED_ERROR_REL * max(v, best) or v == best)
    perm = list(range(len(values)))
    rnd.shuffle(perm)
    shuffled = rank([names[i] for i in perm], [values[i] for i in perm])
    assert set(shuffled.winners) == set(r.winners)  # the listing order decides nothing
