"""Radix-pass sorting by several keys (``sim.results.sortkeys``) and the grouped running maximum of the
incast sweeps: the same permutation as ``np.lexsort`` and the same values as a loop, on any input."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.results.incast import group_running_max
from sim.results.sortkeys import lex_order, stable_order


def _key(draw, n: int) -> np.ndarray:
    """One key of ``n`` rows: a narrow or very wide integer span (one, three digits, past the radix
    limit), booleans, or floats with many ties (a few distinct values, signed zeros, infinities)."""
    kind = draw(st.sampled_from(["small", "wide", "huge", "bool", "float"]))
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if kind == "float":
        pool = draw(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=6)) + [0.0, -0.0]
        return np.array(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype=np.float64)
    hi = {"small": 40, "wide": 1 << 40, "huge": (1 << 62)}[kind]
    return np.array(draw(st.lists(st.integers(-hi, hi), min_size=n, max_size=n)), dtype=np.int64)


@st.composite
def _keys(draw):
    n = draw(st.integers(0, 60))
    return [_key(draw, n) for _ in range(draw(st.integers(1, 3)))]


@settings(max_examples=40, deadline=None)
@given(_keys())
def test_lex_order_is_lexsorts_permutation(keys):
    assert lex_order(keys).tolist() == np.lexsort(keys).tolist()


def test_stable_order_keeps_the_given_order_of_ties():
    key = np.array([5, 5, 1, 5, 1])
    order = np.array([4, 3, 2, 1, 0])   # a previous pass's order: ties must keep it
    assert stable_order(key, order).tolist() == [4, 2, 3, 1, 0]
    # a key spanning three 16-bit digits: every digit decides somewhere
    wide = np.array([1 << 33, 1, (1 << 33) + (1 << 16), 1 << 16, 0])
    assert stable_order(wide).tolist() == np.argsort(wide, kind="stable").tolist()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(allow_nan=False, allow_infinity=False)), max_size=50))
def test_group_running_max_is_the_loops(rows):
    rows = sorted(rows, key=lambda r: r[0])   # groups are contiguous runs
    gid = np.array([g for g, _ in rows], dtype=np.int64)
    vals = np.array([v for _, v in rows], dtype=np.float64)
    want, cur, prev = [], None, None
    for g, v in zip(gid.tolist(), vals.tolist(), strict=True):
        cur = v if g != prev else max(cur, v)
        prev = g
        want.append(cur)
    assert group_running_max(gid, vals).tolist() == want
