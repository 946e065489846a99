"""simulate_flows (SPEC §5) and `simrun flows`: closed forms on real topologies, conservation, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.cli import main
from sim.errors import SimError
from sim.flows import run_flows, simulate_flows

GBPS = 1e9 / 8.0  # bytes per second in one Gbit/s


def all_to_all(num_gpus: int, size: int = 2**20) -> pd.DataFrame:
    src, dst = np.meshgrid(np.arange(num_gpus), np.arange(num_gpus), indexing="ij")
    keep = src != dst
    return pd.DataFrame({"src": src[keep], "dst": dst[keep], "bytes": size, "start_s": 0.0})


def path_latency_s(graph, path) -> float:
    return sum(graph.edges[a, b]["latency_us"] for a, b in zip(path[:-1], path[1:], strict=False)) * 1e-6


@pytest.fixture(scope="module")
def fat_tree16():
    return topologies.build("fat_tree", k=4, gpus_per_server=1, link_gbps=100.0, latency_us=2.0)


def test_one_flow_takes_bytes_over_link_rate_plus_path_latency(fat_tree16):
    flows = pd.DataFrame({"src": [0], "dst": [15], "bytes": [125_000_000], "start_s": [0.5]})
    out = simulate_flows(fat_tree16, flows)
    path = out.path[0]
    assert path[0] == "gpu0" and path[-1] == "gpu15" and len(path) == 7   # gpu-edge-agg-core-agg-edge-gpu
    assert all(fat_tree16.has_edge(a, b) for a, b in zip(path[:-1], path[1:], strict=False))
    expected = 0.5 + 125e6 / (100 * GBPS) + 6 * 2e-6
    assert out.finish_s[0] == pytest.approx(expected, rel=1e-12)


def test_flow_to_itself_and_empty_flow(fat_tree16):
    flows = pd.DataFrame({"src": [3, 1], "dst": [3, 2], "bytes": [1000, 0], "start_s": [1.0, 2.0]})
    out = simulate_flows(fat_tree16, flows)
    assert out.path[0] == ["gpu3"] and out.finish_s[0] == 1.0
    assert out.finish_s[1] == pytest.approx(2.0 + path_latency_s(fat_tree16, out.path[1]), rel=1e-12)


def test_flows_sharing_an_access_link_split_it(fat_tree16):
    # four senders to gpu0: its access link is the bottleneck, shared four ways
    flows = pd.DataFrame({"src": [4, 8, 12, 1], "dst": 0, "bytes": 10**7, "start_s": 0.0})
    out = simulate_flows(fat_tree16, flows)
    latency = np.array([path_latency_s(fat_tree16, p) for p in out.path])
    np.testing.assert_allclose(out.finish_s - latency, 4 * 1e7 / (100 * GBPS), rtol=1e-9)


@pytest.mark.parametrize("routing", ["ecmp", "spray", "single"])
def test_all_to_all_finishes_at_the_busiest_link_bound(fat_tree16, routing):
    result = run_flows(fat_tree16, all_to_all(16), routing=routing)
    links = result.links
    bound = (links["bytes"] / (links["capacity_gbps"] * GBPS)).max()
    assert bound <= result.window_s * (1 + 1e-9)
    assert result.window_s == pytest.approx(bound, rel=0.02)
    assert links["peak_utilization"].max() <= 1 + 1e-9
    assert (links["busy_above_90_s"] <= result.window_s * (1 + 1e-9)).all()


def test_spray_balances_an_oversubscribed_leaf_spine_exactly():
    graph = topologies.build("leaf_spine", num_gpus=32, gpus_per_server=1, oversubscription=4.0)
    result = run_flows(graph, all_to_all(32), routing="spray")
    per_leaf = graph.graph["gpus_per_leaf"]
    uplink_bytes_per_s = sum(d["capacity_gbps"] for _, _, d in graph.edges("leaf0", data=True)
                             if d["kind"] == "leaf-spine") * GBPS
    crossing_bytes = per_leaf * (32 - per_leaf) * 2**20          # leaf0 -> other leaves
    assert result.window_s == pytest.approx(crossing_bytes / uplink_bytes_per_s, rel=1e-9)


def test_bytes_on_links_equal_bytes_times_hops(fat_tree16):
    rng = np.random.default_rng(0)
    flows = pd.DataFrame({"src": rng.integers(0, 16, 60), "dst": rng.integers(0, 16, 60),
                          "bytes": rng.integers(0, 10**6, 60), "start_s": rng.uniform(0, 1e-3, 60).round(5)})
    result = run_flows(fat_tree16, flows, routing="ecmp", seed=3)
    hops = result.flows.path.map(len) - 1
    assert result.links["bytes"].sum() == pytest.approx(float((flows.bytes * hops).sum()), rel=1e-9)
    assert (result.flows.finish_s >= flows.start_s).all()


def test_same_seed_same_result_and_input_kept(fat_tree16):
    flows = all_to_all(8).assign(tag="x")
    flows.index = flows.index + 100
    a = simulate_flows(fat_tree16, flows, routing="ecmp", seed=5)
    b = simulate_flows(fat_tree16, flows, routing="ecmp", seed=5)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == ["src", "dst", "bytes", "start_s", "tag", "finish_s", "path"]
    assert a.index.equals(flows.index)


def test_completion_quantile_is_close_to_exact():
    graph = topologies.build("fat_tree", k=4, gpus_per_server=1)
    flows = all_to_all(16)
    flows["bytes"] = np.random.default_rng(1).integers(2**19, 2**21, len(flows))
    exact = run_flows(graph, flows)
    fast = run_flows(graph, flows, completion_quantile=0.01)
    assert fast.makespan_s == pytest.approx(exact.makespan_s, rel=0.002)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**31), routing=st.sampled_from(["ecmp", "spray", "single"]))
def test_simulate_flows_equals_run_flows_without_the_link_statistics(fat_tree16, n, seed, routing):
    # simulate_flows skips the meter and the link table: the flows, finishes and paths must not change
    rng = np.random.default_rng(seed)
    flows = pd.DataFrame({"src": rng.integers(0, 16, n), "dst": rng.integers(0, 16, n),
                          "bytes": rng.integers(0, 10**6, n), "start_s": rng.choice([0.0, 1e-5, 3e-5], n)})
    lean = simulate_flows(fat_tree16, flows, routing=routing, seed=seed % 7)
    full = run_flows(fat_tree16, flows, routing=routing, seed=seed % 7).flows
    assert lean.finish_s.tolist() == full.finish_s.tolist()
    assert lean.path.tolist() == full.path.tolist()
    hops = [list(zip(p[:-1], p[1:], strict=False)) for p in lean.path]
    assert all(fat_tree16.has_edge(a, b) for path in hops for a, b in path)
    assert all(p[0] == f"gpu{s}" and p[-1] == f"gpu{d}" for p, s, d in zip(lean.path, flows.src, flows.dst,
                                                                            strict=True))


@pytest.mark.parametrize(("change", "message"), [
    (lambda f: f.drop(columns="start_s"), "missing column 'start_s'"),
    (lambda f: f.assign(bytes=[10, -1]), r"column 'bytes', row 1"),
    (lambda f: f.assign(dst=[1, 99]), r"column 'dst', row 1: gpu99 is not in the topology"),
    (lambda f: f.assign(src=[0.5, 1]), r"column 'src', row 0"),
    (lambda f: f.assign(start_s=[0.0, np.nan]), r"column 'start_s', row 1"),
    (lambda f: f.assign(bytes=[10, 1e30]), r"column 'bytes', row 1: 1e\+30 is not a whole number in 0\.\.9007199254740992"),
    (lambda f: f.assign(start_s=[0.0, 1e300]), r"column 'start_s', row 1: 1e\+300 is not a number in 0\.\.1e\+06"),
])
def test_bad_input_names_column_and_row(fat_tree16, change, message):
    flows = pd.DataFrame({"src": [0, 1], "dst": [1, 2], "bytes": [10, 20], "start_s": [0.0, 0.0]})
    with pytest.raises(SimError, match=message):
        simulate_flows(fat_tree16, change(flows))


def test_seed_is_checked_as_simulate_checks_it(fat_tree16):
    from sim.errors import OptionError

    flows = pd.DataFrame({"src": [0], "dst": [1], "bytes": [10], "start_s": [0.0]})
    with pytest.raises(OptionError, match="seed='x': must be an integer"):
        simulate_flows(fat_tree16, flows, seed="x")


# ----------------------------------------------------------------------------- CLI
def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_cli_writes_flows_parquet_and_prints_a_summary(tmp_path, capsys):
    src = tmp_path / "a2a.csv"
    all_to_all(16).to_csv(src, index=False)
    out = tmp_path / "res"
    code, stdout, err = _run(["flows", str(src), "--topo", "fat_tree", "--set", "gpus_per_server=4",
                              "--routing", "spray", "-o", str(out)], capsys)
    assert code == 0, err
    flows = pd.read_parquet(out / "flows.parquet")
    assert len(flows) == 240 and {"finish_s", "path"} <= set(flows.columns)
    assert list(flows.path[0])[0] == f"gpu{flows.src[0]}"
    assert (pd.read_parquet(out / "links.parquet")["bytes"] >= 0).all()
    assert "flows       240" in stdout and "makespan" in stdout and "max link" in stdout


def test_cli_sizes_the_topology_from_the_flows(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"src": [0], "dst": [11], "bytes": [1000], "start_s": [0.0]}).to_parquet("f.parquet")
    code, stdout, err = _run(["flows", "f.parquet", "--topo", "leaf_spine", "--json"], capsys)
    assert code == 0, err
    assert '"num_gpus": 16' in stdout          # 12 GPUs needed, rounded up to servers of 8
    assert (tmp_path / "simrun-out" / "f-leaf_spine" / "flows.parquet").is_file()


@pytest.mark.parametrize(("content", "message"), [
    ("src,dst,bytes\n0,1,5\n", "missing column 'start_s'"),
    ("src,dst,bytes,start_s\n0,1,-5,0\n", "column 'bytes', row 0"),
    ('src,dst\n"0,1', "cannot read flows"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    code, _, err = _run(["flows", str(path), "--topo", "fat_tree", "-o", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.startswith("simrun: error: ") and message in err and len(err.strip().splitlines()) == 1


def test_cli_routes_dmodk_contention_free_on_a_shift(tmp_path, capsys):
    # D-mod-k's known property: a shift permutation on a full-bisection fat tree puts at most one flow on
    # a link, so every flow of equal size finishes together; per-flow ECMP hashing collides on some shift.
    n_gpus, shift = 16, 4
    src = tmp_path / "shift.csv"
    pd.DataFrame({"src": range(n_gpus), "dst": [(i + shift) % n_gpus for i in range(n_gpus)],
                  "bytes": [8_000_000] * n_gpus, "start_s": [0.0] * n_gpus}).to_csv(src, index=False)
    finish = {}
    for routing in ("dmodk", "ecmp"):
        out = tmp_path / routing
        code, _, err = _run(["flows", str(src), "--topo", "fat_tree", "--set", "gpus_per_server=4",
                             "--routing", routing, "-o", str(out)], capsys)
        assert code == 0, err
        finish[routing] = pd.read_parquet(out / "flows.parquet")["finish_s"]
    assert finish["dmodk"].max() == pytest.approx(finish["dmodk"].min(), rel=1e-9)
    assert finish["ecmp"].max() >= finish["dmodk"].max() * (1 - 1e-9)
