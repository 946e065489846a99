"""Random schema violations fed to ``traces.schema.validate``: a TraceError (a ValueError) or a clean run,
never another exception (issue 13)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.schema import COLUMNS, TraceError, validate

NASTY = [None, math.nan, math.inf, -math.inf, 0.5, -1, 0, 2**31, 2**32 + 3, 2**63, 2**64, -(2**70), 1e300, True,
         "text", "", "3", b"bytes", [1, 2], (), {"a": 1}, np.int64(7), np.float32(1.5), "x" * 10_000]
META_KEYS = ["world_size", "gpus_per_node", "comms", "source", "schema_version"]
META_VALUES = [None, "four", 10**7, -3, 0, 4, 2.5, True, [0, 1], {"c0": [0, 1, 2, 3]}, {"c0": "abc"},
               {"c0": [0, 0]}, {"c0": [9]}, {"c0": []}, {"c0": [-5]}, {(1, 2): 3}.keys(), "x" * 5000]


def _valid() -> pd.DataFrame:
    rows = [dict(rank=r, comm="c0", seq=s, op="AllReduce", count=256, dtype="fp32", bytes=1024, root=-1, nranks=4,
                 t_start_s=s * 1e-3, duration_s=math.nan, host="h", device=r, context="", algo="", proto="")
            for s in range(2) for r in range(4)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = {"schema_version": 1, "world_size": 4, "gpus_per_node": 8,
                           "comms": {"c0": [0, 1, 2, 3]}, "source": "fuzz"}
    return df


cell = st.tuples(st.sampled_from([*COLUMNS, "group", "split_bytes"]), st.integers(0, 7), st.sampled_from(NASTY))
column = st.tuples(st.sampled_from([*COLUMNS, "group", "split_bytes"]),
                   st.sampled_from(["object", "float64", "int8", "uint64", "bool", "str", "drop"]))
meta = st.tuples(st.sampled_from(META_KEYS), st.sampled_from(META_VALUES))


def _apply(df: pd.DataFrame, cells, columns, metas, duplicate: bool) -> pd.DataFrame:
    for name, kind in columns:
        if name not in df.columns:
            df[name] = -1 if name == "group" else [()] * len(df)
        if kind == "drop":
            df = df.drop(columns=[name])
        else:
            try:
                df[name] = df[name].astype(kind)
            except (TypeError, ValueError, OverflowError):
                pass  # a cast pandas refuses is not a violation we can build
    for name, row, value in cells:
        values = df[name].astype(object).tolist() if name in df.columns else [None] * len(df)
        values[row] = value
        df[name] = pd.Series(values, dtype=object)
    if duplicate:
        df = pd.concat([df, df.iloc[[3]]], ignore_index=True)
    m = dict(df.attrs.get("collsim") or _valid().attrs["collsim"])
    for key, value in metas:
        m[key] = value
    df.attrs["collsim"] = m
    return df


@settings(max_examples=150, deadline=None)
@given(st.lists(cell, max_size=4), st.lists(column, max_size=2), st.lists(meta, max_size=2), st.booleans())
def test_random_violations_raise_trace_error_or_pass(cells, columns, metas, duplicate):
    df = _apply(_valid(), cells, columns, metas, duplicate)
    try:
        out = validate(df)
    except TraceError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 600, text[:200]  # one short line, values cut short
        return
    # accepted: then it is a well-formed trace
    assert list(out.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert all(str(out[c].dtype) == (t if t != "string" else "object") for c, t in COLUMNS.items())


def test_the_valid_base_passes():
    assert len(validate(_valid())) == 8


@pytest.mark.parametrize(("column", "value", "words"), [
    ("rank", 0.5, "field 'rank' is not a whole number"),
    ("rank", 2**32 + 3, "field 'rank' does not fit int32"),
    # 2**63 as a float: float(int64 max) rounds up to it, so a plain `> max` let it through to wrap negative
    ("count", 2.0**63, "field 'count' does not fit int64"),
    ("seq", "3", "field 'seq' is not a number"),
    ("t_start_s", "soon", "field 't_start_s' is not a number"),
    ("count", True, "field 'count' is not a number"),
])
def test_values_are_used_exactly_or_refused(column, value, words):
    df = _apply(_valid(), [(column, 1, value)], [], [], False)
    with pytest.raises(TraceError, match=words):
        validate(df)
