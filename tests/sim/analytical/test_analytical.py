"""The analytical tier: alpha-beta closed forms on a non-blocking fabric, a lower bound of the flow tier on
contended ones, and the ``--model both`` table."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies
from sim import simulate
from sim.analytical import TIER_COLUMNS
from sim.analytical.bounds import critical_path_s
from sim.cli import main
from sim.errors import SimError
from sim.planning import tuning
from traces import write_trace
from traces.schema import DTYPE_BYTES, new_metadata, normalize

GBPS = 100.0
B = GBPS * 1e9 / 8  # bytes per second of every GPU port


def _trace(world: int, ops: list[tuple], gpus_per_node: int = 1) -> pd.DataFrame:
    """``ops`` = [(comm ranks, op, bytes per rank or (n, n) split)], all issued at t = 0 by their members."""
    rows, comms, seq = [], {}, {}
    for k, (ranks, op, size) in enumerate(ops):
        comm = f"c{k}"
        comms[comm] = list(ranks)
        n = len(ranks)
        for i, r in enumerate(ranks):
            split = ()
            count = int(size) if np.isscalar(size) else int(np.asarray(size)[i].sum()) // n
            if not np.isscalar(size):
                split = tuple(int(x) for x in np.asarray(size)[i])
            rows.append(dict(rank=r, comm=comm, seq=seq.setdefault((comm, r), 0), op=op, count=count,
                             dtype="uint8", bytes=count * DTYPE_BYTES["uint8"], root=-1, nranks=n, t_start_s=0.0,
                             duration_s=np.nan, host="", device=-1, context="", algo="", proto="", group=-1,
                             split_bytes=split))
    df = pd.DataFrame(rows)
    return normalize(df, new_metadata(world, comms, "test", gpus_per_node=gpus_per_node))


def _crossbar(n: int) -> nx.Graph:
    """A non-blocking fabric of ``n`` single-GPU servers, every port ``GBPS``, no latency."""
    g = topologies.nonblocking(topologies.leaf_spine(n, gpus_per_server=1, link_gbps=GBPS))
    for _, _, d in g.edges(data=True):
        d["latency_us"] = 0.0
    return g


def test_critical_path_against_a_hand_dag():
    # diamond 0 -> {1, 2} -> 3
    w = np.array([1.0, 2.0, 5.0, 1.0])
    assert critical_path_s(w, np.array([0, 0, 1, 2, 4]), np.array([0, 0, 1, 2])) == 7.0


@pytest.mark.parametrize("n", [4, 8])
@pytest.mark.parametrize(("op", "size"), [("AllReduce", 8 << 20), ("AllGather", 1 << 20),
                                          ("ReduceScatter", 1 << 20)])
def test_ring_on_a_nonblocking_fabric_is_the_alpha_beta_closed_form(n, op, size):
    """Alone on a non-blocking fabric a ring's time is its critical path: the alpha-beta bandwidth term
    plus the latency NCCL's model charges, exactly as the event-driven flow tier replays the same plan
    (whose own closed-form tests are in tests/sim/test_replay.py and tests/sim/planning)."""
    df = _trace(n, [(range(n), op, size)])
    res = simulate(df, _crossbar(n), algo="ring", model="analytical", channels=1)
    flow = simulate(df, _crossbar(n), algo="ring", channels=1, ideal=False)
    row, frow = res.collectives.iloc[0], flow.collectives.iloc[0]
    bandwidth_s = tuning.ideal_time_s(op, float(size), n, B, "ring")
    assert row["algo"] == "ring" == frow["algo"]
    assert row["duration_s"] == pytest.approx(frow["duration_s"], rel=1e-9)
    assert bandwidth_s < row["duration_s"] < bandwidth_s + tuning.algo_latency_s(op, "ring", "Simple", n, n) * 2


def test_alltoall_on_a_nonblocking_fabric_is_the_busiest_port():
    n = 6
    rng = np.random.default_rng(3)
    split = rng.integers(0, 4 << 20, size=(n, n))
    np.fill_diagonal(split, 0)
    df = _trace(n, [(range(n), "AllToAll", split)])
    res = simulate(df, _crossbar(n), model="analytical")
    delay = tuning.p2p_latency_s(res.collectives.iloc[0]["algo"] and "Simple", True)
    expected = tuning.ideal_time_s("AllToAll", 0, n, B, split_bytes=split, alpha_s=delay)
    assert res.collectives.iloc[0]["duration_s"] == pytest.approx(expected, rel=1e-9)
    # the per-port ideal of the same fabric is the same bound
    assert res.collectives.iloc[0]["ideal_s"] == pytest.approx(expected, rel=1e-9)


case = st.fixed_dictionaries({
    "topo": st.sampled_from(["leaf_spine", "fat_tree", "rail_optimized"]),
    "gps": st.sampled_from([1, 2, 4]),
    "over": st.sampled_from([1.0, 2.0, 4.0]),
    "routing": st.sampled_from(["ecmp", "spray"]),
    "ops": st.lists(st.tuples(st.sampled_from(["AllReduce", "AllGather", "ReduceScatter", "AllToAll"]),
                              st.integers(2, 8), st.integers(1, 8 << 20), st.integers(0, 2 ** 16)),
                    min_size=1, max_size=3),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_analytical_is_a_lower_bound_of_the_flow_tier(c):
    world = 8
    ops = []
    for op, n, size, s in c["ops"]:
        rng = np.random.default_rng(s)
        ranks = sorted(rng.choice(world, size=n, replace=False).tolist())
        if op == "AllToAll":
            split = rng.integers(0, size + 1, size=(n, n))
            np.fill_diagonal(split, 0)
            ops.append((ranks, op, split))
        else:
            ops.append((ranks, op, size))
    df = _trace(world, ops, gpus_per_node=c["gps"])
    graph = topologies.build(c["topo"], num_gpus=world, gpus_per_server=c["gps"], oversubscription=c["over"])
    flow = simulate(df, graph, routing=c["routing"], ideal=False, completion_quantile=0.0)
    ana = simulate(df, graph, routing=c["routing"], model="analytical")
    f, a = flow.collectives["duration_s"].to_numpy(), ana.collectives["duration_s"].to_numpy()
    assert (a <= f * (1 + 1e-9) + 1e-12).all(), (a, f)
    assert ana.summary["makespan_s"] <= flow.summary["makespan_s"] * (1 + 1e-9) + 1e-12


def test_unknown_model_is_an_error():
    df = _trace(2, [([0, 1], "AllReduce", 1024)])
    with pytest.raises(SimError, match="model"):
        simulate(df, "leaf_spine", model="fluid")


def test_cli_model_both_writes_the_tier_table(tmp_path, capsys):
    df = _trace(8, [(range(8), "AllToAll", 1 << 20), (range(8), "AllReduce", 4 << 20)], gpus_per_node=4)
    trace = write_trace(df, tmp_path / "t.parquet")
    with pytest.raises(SystemExit) as exc:
        main(["run", "--trace", str(trace), "--topo", "leaf_spine", "--model", "both", "--no-report",
              "--out", str(tmp_path / "o"), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    summary = json.loads(out)
    assert summary["model"] == "both" and summary["analytical_makespan_s"] <= summary["makespan_s"] * 1.01
    tiers = pd.read_parquet(tmp_path / "o" / "tiers.parquet")
    assert list(tiers.columns) == list(TIER_COLUMNS) and len(tiers) == 2
    assert np.allclose(tiers["disagreement"], tiers["flow_s"] / tiers["analytical_s"] - 1)
    with pytest.raises(SystemExit) as exc:
        main(["run", "--trace", str(trace), "--topo", "leaf_spine", "--model", "analytical",
              "--out", str(tmp_path / "a"), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    assert json.loads(out)["model"] == "analytical"
    assert (tmp_path / "a" / "collectives.parquet").exists() and not (tmp_path / "a" / "report.html").exists()
