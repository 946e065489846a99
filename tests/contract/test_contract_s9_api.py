"""Conformance to SPEC.md §9 Python API: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from contract_support import (
    GPUS_PER_NODE,
    WORLD,
    pair_fabric,
    tiny_trace,
    without_wall,
)

import sim
import topologies
import traces


def test_s9_api_names():
    for module, names in ((traces, ["read_trace", "write_trace", "ingest", "synthesize"]),
                          (topologies, ["build", "fat_tree", "leaf_spine", "rail_optimized", "rail_only"]),
                          (sim, ["simulate", "simulate_flows", "Result"])):
        for name in names:
            assert callable(getattr(module, name)), name


def test_s9_errors_are_value_errors(tmp_path):
    g = pair_fabric()
    bad_calls = [
        lambda: traces.read_trace(tmp_path / "missing.parquet"),
        lambda: traces.ingest([tmp_path / "missing.log"]),
        lambda: traces.synthesize("no-such-model"),
        lambda: topologies.build("no_such_preset"),
        lambda: topologies.fat_tree(3, num_gpus=8),
        lambda: sim.simulate_flows(g, pd.DataFrame({"src": [0]})),
        lambda: sim.simulate_flows(g, pd.DataFrame({"src": [0], "dst": [99], "bytes": [1], "start_s": [0.0]})),
        lambda: sim.simulate(tiny_trace(), g, algo="bogus"),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value).strip() and "\n" not in str(info.value).strip()


def test_s9_simulate_accepts_seed_and_routing(tiny):
    g = topologies.build("leaf_spine", num_gpus=WORLD, gpus_per_server=GPUS_PER_NODE)
    df = traces.read_trace(tiny)
    a = sim.simulate(df, g, algo="ring", routing="single", seed=3)
    b = sim.simulate(df, g, algo="ring", routing="single", seed=3)
    assert without_wall(a.summary) == without_wall(b.summary)
    assert not math.isnan(a.summary["makespan_s"])
