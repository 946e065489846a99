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


def test_s9_signatures_and_defaults():
    import inspect

    def defaults(fn):
        return {n: p.default for n, p in inspect.signature(fn).parameters.items()}

    assert list(defaults(sim.simulate))[:2] == ["trace_df", "topology"]
    assert {"algo": "auto", "routing": "ecmp", "seed": 0}.items() <= defaults(sim.simulate).items()
    assert any(p.kind is p.VAR_KEYWORD for p in inspect.signature(sim.simulate).parameters.values())  # **options
    assert list(defaults(sim.simulate_flows))[:2] == ["topology", "flows"]
    assert {"routing": "ecmp", "seed": 0}.items() <= defaults(sim.simulate_flows).items()
    assert defaults(traces.ingest)["format"] == "auto"
    assert list(defaults(topologies.fat_tree))[0] == "k"
    for builder in (topologies.fat_tree, topologies.leaf_spine, topologies.rail_optimized, topologies.rail_only):
        assert {"gpus_per_server", "link_gbps", "nvlink_gbps", "latency_us", "oversubscription"} <= set(defaults(builder))
        assert defaults(builder)["oversubscription"] == 1


def test_s9_result_frames_and_summary(result):
    assert isinstance(result.summary, dict)
    for name in ("collectives", "links", "link_timeseries", "incast"):
        assert isinstance(getattr(result, name), pd.DataFrame), name
    assert callable(result.write)
