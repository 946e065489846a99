"""Conformance to SPEC.md §7 analyze: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from contract_support import (
    SEND_BYTES,
    SENDS,
    TINY_OPS,
    WORLD,
    simrun,
)


@pytest.fixture(scope="module")
def analyzed(tiny, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("analyze")
    code, _, err = simrun("analyze", str(tiny), "--out", str(out))
    assert code == 0, err
    return out


def test_s7_op_counts(analyzed):
    t = pd.read_csv(analyzed / "op_counts.csv").set_index("op")
    assert {"calls", "rank_calls", "bytes_total"} <= set(t.columns)
    for op, (_, _, rank_bytes) in TINY_OPS.items():
        assert t.loc[op, "calls"] == 1  # one (comm, seq) group
        assert t.loc[op, "rank_calls"] == WORLD
        assert t.loc[op, "bytes_total"] == WORLD * rank_bytes
    for op in ("Send", "Recv"):
        assert t.loc[op, "calls"] == SENDS  # one per matched pair
        assert t.loc[op, "rank_calls"] == SENDS
        assert t.loc[op, "bytes_total"] == SENDS * SEND_BYTES


def test_s7_sizes(analyzed):
    t = pd.read_csv(analyzed / "sizes.csv").set_index("op")
    assert {"min", "p50", "p90", "max"} <= set(t.columns)
    for op, (_, _, rank_bytes) in TINY_OPS.items():
        assert list(t.loc[op, ["min", "p50", "p90", "max"]]) == [rank_bytes] * 4


def test_s7_bandwidth(analyzed):
    t = pd.read_csv(analyzed / "bandwidth.csv")
    assert {"t_s", "bytes_per_s", "window"} <= set(t.columns)
    total = WORLD * sum(b for *_, b in TINY_OPS.values()) + 2 * SENDS * SEND_BYTES
    assert (t["bytes_per_s"] * t["window"]).sum() == pytest.approx(total, rel=1e-9)
    assert t["t_s"].is_monotonic_increasing


def test_s7_plots(analyzed):
    pngs = list(analyzed.glob("*.png"))
    assert len(pngs) >= 4 and all(p.stat().st_size > 0 for p in pngs)
