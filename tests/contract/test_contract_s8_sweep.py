"""Conformance to SPEC.md §8 sweep: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from contract_support import (
    SUMMARY_KEYS,
    simrun,
)


def test_s8_sweep_one_row_per_point(tiny, tmp_path):
    code, _, err = simrun("sweep", "--trace", str(tiny), "--topo", "fat_tree,leaf_spine", "--set",
                          "oversubscription=1|2", "--serial", "--out", str(tmp_path))
    assert code == 0, err
    t = pd.read_parquet(tmp_path / "sweep.parquet")
    assert len(t) == 4
    assert {"makespan_s", "ideal_makespan_s", "max_link_utilization", "slowdown_p99"} <= set(t.columns)
    assert "oversubscription" in t.columns
    assert set(SUMMARY_KEYS) - {"hot_links"} <= set(t.columns)  # every §6 summary figure
    topo_col = next(c for c in ("topo", "topology") if c in t.columns)
    assert set(zip(t[topo_col], t["oversubscription"].astype(float), strict=True)) == {
        (topo, float(o)) for topo in ("fat_tree", "leaf_spine") for o in (1, 2)}
    assert list(tmp_path.glob("*.png"))


def test_s8_sweep_comma_form_of_set(tiny, tmp_path):
    code, _, err = simrun("sweep", "--trace", str(tiny), "--topo", "fat_tree", "--set",
                          "oversubscription=1|2,gpus_per_server=4|8", "--serial", "--out", str(tmp_path))
    assert code == 0, err
    t = pd.read_parquet(tmp_path / "sweep.parquet")
    assert set(zip(t["oversubscription"].astype(float), t["gpus_per_server"].astype(int), strict=True)) == {
        (1.0, 4), (1.0, 8), (2.0, 4), (2.0, 8)}


def test_s8_sweep_point_equals_a_run(tiny, tmp_path):
    code, _, err = simrun("sweep", "--trace", str(tiny), "--topo", "leaf_spine", "--set", "oversubscription=2",
                          "--seed", "5", "--serial", "--out", str(tmp_path / "sw"))
    assert code == 0, err
    row = pd.read_parquet(tmp_path / "sw" / "sweep.parquet").iloc[0]
    code, out, err = simrun("run", "--trace", str(tiny), "--topo", "leaf_spine", "--set", "oversubscription=2",
                            "--seed", "5", "--json", "--no-report", "--out", str(tmp_path / "r"))
    assert code == 0, err
    summary = json.loads(out)
    for key in ("makespan_s", "ideal_makespan_s", "bytes_on_wire", "max_link_utilization", "slowdown_p99"):
        assert row[key] == pytest.approx(summary[key], rel=1e-12), key


@pytest.mark.slow
def test_s8_sweep_on_local_dask_matches_serial(tiny, tmp_path):
    args = ["sweep", "--trace", str(tiny), "--topo", "fat_tree,leaf_spine", "--set", "oversubscription=1|2"]
    assert simrun(*args, "--serial", "--out", str(tmp_path / "s"))[0] == 0
    assert simrun(*args, "--workers", "2", "--out", str(tmp_path / "d"))[0] == 0
    cols = ["makespan_s", "ideal_makespan_s", "bytes_on_wire", "max_link_utilization"]
    a = pd.read_parquet(tmp_path / "s" / "sweep.parquet")
    b = pd.read_parquet(tmp_path / "d" / "sweep.parquet")
    assert len(a) == len(b) == 4
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))


def test_s8_set_grid_forms_agree():
    """``k=1|2,j=4|8`` in one --set, or one --set per key: the same grid (§10, last item)."""
    from sim.cli.sweep import parse_grid

    expected = {"oversubscription": [1, 2], "gpus_per_server": [4, 8]}
    assert parse_grid(("oversubscription=1|2,gpus_per_server=4|8",)) == expected
    assert parse_grid(("oversubscription=1|2", "gpus_per_server=4|8")) == expected
