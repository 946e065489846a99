"""The contract tests' fixtures: the hand-made trace written once, one full ``simrun run`` of it, and its API
replay (session-wide: each xdist worker makes them once for all the section files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from contract_support import (
    GPUS_PER_NODE,
    WORLD,
    simrun,
    tiny_trace,
)

import sim
import topologies
import traces


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "tiny.parquet"
    traces.write_trace(tiny_trace(), path)
    return path


@pytest.fixture(scope="session")
def run_out(tiny, tmp_path_factory) -> tuple[Path, dict]:
    """One full ``simrun run`` (with the report) of the tiny trace; returns (out dir, --json summary)."""
    out = tmp_path_factory.mktemp("run") / "out"
    code, stdout, stderr = simrun("run", "--trace", str(tiny), "--topo", "fat_tree", "--out", str(out), "--json")
    assert code == 0, stderr
    return out, json.loads(stdout)


@pytest.fixture(scope="session")
def result(tiny):
    """The API replay of the tiny trace over an 8-GPU fat tree."""
    g = topologies.build("fat_tree", num_gpus=WORLD, gpus_per_server=GPUS_PER_NODE)
    return sim.simulate(traces.read_trace(tiny), g, algo="auto", routing="ecmp", seed=0)
