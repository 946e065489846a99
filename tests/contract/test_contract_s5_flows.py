"""Conformance to SPEC.md §5 Raw flows: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from contract_support import (
    pair_fabric,
    path_latency_s,
    simrun,
)

import sim
import topologies


def test_s5_single_flow_closed_form():
    g = pair_fabric()
    flows = pd.DataFrame({"src": [0], "dst": [3], "bytes": [2_000_000], "start_s": [0.25]})
    out = sim.simulate_flows(g, flows, routing="ecmp", seed=0)
    assert {"src", "dst", "bytes", "start_s", "finish_s", "path"} <= set(out.columns)
    assert out["finish_s"].dtype == np.float64
    pd.testing.assert_frame_equal(out[list(flows.columns)], flows, check_dtype=False)
    path = list(out["path"].iloc[0])
    assert path[0] == "gpu0" and path[-1] == "gpu3"
    assert all(g.has_edge(u, v) for u, v in zip(path, path[1:], strict=False))
    expected = 0.25 + 2_000_000 * 8 / 100e9 + path_latency_s(g, path)
    assert out["finish_s"].iloc[0] == pytest.approx(expected, rel=1e-9)


def test_s5_max_min_sharing_closed_form():
    g = pair_fabric()
    cap_bytes_per_s = 100e9 / 8
    # two flows into gpu3 share its access link: each gets half until the small one ends, then the big one
    # gets the whole link (re-solved when a flow ends): small ends at 2*S/C, big at (S + L)/C.
    small, big = 10**6, 3 * 10**6
    flows = pd.DataFrame({"src": [0, 1], "dst": [3, 3], "bytes": [small, big], "start_s": [0.0, 0.0]})
    out = sim.simulate_flows(g, flows)
    expected = [2 * small / cap_bytes_per_s, (small + big) / cap_bytes_per_s]
    for i in range(2):
        lat = path_latency_s(g, list(out["path"].iloc[i]))
        assert out["finish_s"].iloc[i] == pytest.approx(expected[i] + lat, rel=1e-9)
    # a flow starting later takes its share from then on (re-solved when a flow starts)
    late = pd.DataFrame({"src": [0, 1], "dst": [3, 3], "bytes": [big, small], "start_s": [0.0, 1e-4]})
    out = sim.simulate_flows(g, late)
    t_join = 1e-4
    left = big - t_join * cap_bytes_per_s  # bytes of the first flow still to send when the second starts
    t_small = t_join + 2 * small / cap_bytes_per_s
    t_big = t_small + (left - small) / cap_bytes_per_s
    lats = [path_latency_s(g, list(p)) for p in out["path"]]
    assert out["finish_s"].iloc[1] == pytest.approx(t_small + lats[1], rel=1e-9)
    assert out["finish_s"].iloc[0] == pytest.approx(t_big + lats[0], rel=1e-9)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_s5_flows_command(tmp_path, fmt):
    flows = pd.DataFrame({"src": [0, 1], "dst": [2, 3], "bytes": [1000, 2000], "start_s": [0.0, 1e-6]})
    path = tmp_path / f"f.{fmt}"
    flows.to_csv(path, index=False) if fmt == "csv" else flows.to_parquet(path)
    code, _, err = simrun("flows", str(path), "--topo", "leaf_spine", "--set", "num_gpus=4", "--set",
                          "gpus_per_server=1", "--out", str(tmp_path / "o"))
    assert code == 0, err
    out = pd.read_parquet(tmp_path / "o" / "flows.parquet")
    assert {"src", "dst", "bytes", "start_s", "finish_s", "path"} <= set(out.columns)
    api = sim.simulate_flows(topologies.build("leaf_spine", num_gpus=4, gpus_per_server=1), flows)
    assert np.allclose(out["finish_s"], api["finish_s"], rtol=1e-12)
