"""Failed and degraded links, stragglers: parsing, seeded choice, routing around failures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim import anomalies
from sim.errors import SimError
from topologies import fat_tree, leaf_spine
from traces.schema import new_metadata, validate

MIB = 1 << 20


def _trace(world: int, op: str = "AllToAll", nbytes: int = MIB) -> pd.DataFrame:
    rows = [dict(rank=r, comm="w", seq=0, op=op, count=nbytes, dtype="uint8", bytes=nbytes, root=-1, nranks=world,
                 t_start_s=np.nan, duration_s=np.nan, host="", device=-1, context="", algo="", proto="")
            for r in range(world)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"w": list(range(world))}, "test", gpus_per_node=1)
    return validate(df)


def test_seeded_choice_is_reproducible_and_only_switch_links():
    g = fat_tree(4, num_gpus=16, gpus_per_server=1)
    a, da = anomalies.apply(g, fail_links=3, seed=7)
    b, db = anomalies.apply(g, fail_links=3, seed=7)
    assert da.failed == db.failed and len(da.failed) == 3
    kinds = {n: d["kind"] for n, d in g.nodes(data=True)}
    assert all(kinds[u] != "gpu" and kinds[v] != "gpu" for u, v in da.failed)
    assert g.number_of_edges() - a.number_of_edges() == 3
    assert g.number_of_edges() == fat_tree(4, num_gpus=16, gpus_per_server=1).number_of_edges()  # input kept


def test_routing_avoids_failed_links():
    g = fat_tree(4, num_gpus=16, gpus_per_server=1)
    res = sim.simulate(_trace(16), g, fail_links=4, seed=1, ideal=False)
    failed = {tuple(x.split("-")) for x in res.summary["failed_links"]}
    assert len(failed) == 4
    used = res.links[res.links["bytes"] > 0]
    assert not any((u, v) in failed or (v, u) in failed for u, v in zip(used["src"], used["dst"], strict=True))


def test_degraded_links_slow_the_fabric():
    g = leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4)
    spines = [f"{u}-{v}" for u, v in anomalies.switch_links(g)]
    base = sim.simulate(_trace(16), g, ideal=False).summary["makespan_s"]
    slow = sim.simulate(_trace(16), g, degrade_links=",".join(f"{x}:0.25" for x in spines), ideal=False)
    assert slow.summary["makespan_s"] > 2.5 * base
    assert set(slow.summary["degraded_links"].values()) == {0.25}


def test_factor_above_one_divides_capacity():
    g = leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4)
    link = anomalies.switch_links(g)[0]
    h, d = anomalies.apply(g, degrade_links=f"{link[0]}-{link[1]}:4")
    assert h.edges[link]["capacity_gbps"] == pytest.approx(g.edges[link]["capacity_gbps"] / 4)


def test_cut_off_gpu_pair_is_a_clear_error():
    g = leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4)
    leaf_links = ",".join(f"{u}-{v}" for u, v in anomalies.switch_links(g) if "leaf0" in (u, v))
    with pytest.raises(SimError, match="cut gpu0 off from gpu4"):
        sim.simulate(_trace(16), g, fail_links=leaf_links)


@pytest.mark.parametrize("bad", ["nolink", "leaf0-gpu99"])
def test_unknown_link_name_is_an_error(bad):
    with pytest.raises(SimError, match="not a cable"):
        anomalies.apply(leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4), fail_links=bad)


def test_too_many_links_is_an_error():
    with pytest.raises(SimError, match="cannot choose"):
        anomalies.apply(leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4), fail_links=10_000)


@pytest.mark.parametrize("spec", ["3", "x:1", "3:-1", ["1:2:3"]])
def test_bad_straggler_is_an_error(spec):
    with pytest.raises(SimError, match="RANK:DELAY_US"):
        anomalies.parse_stragglers(spec)


def test_straggler_delays_the_collective():
    g = leaf_spine(16, gpus_per_server=1, gpus_per_leaf=4)
    base = sim.simulate(_trace(16), g, ideal=False).collectives
    late = sim.simulate(_trace(16), g, stragglers=["5:100"], ideal=False).collectives
    assert late["start_s"].iloc[0] == pytest.approx(base["start_s"].iloc[0] + 100e-6)
    assert late["duration_s"].iloc[0] == pytest.approx(base["duration_s"].iloc[0])


def test_a_malformed_window_is_one_clear_cli_error(tmp_path):
    import subprocess
    import sys

    from traces import write_trace

    path = tmp_path / "t.parquet"
    write_trace(_trace(4), path)
    out = subprocess.run([sys.executable, "-m", "sim", "--trace", str(path), "--topo", "leaf_spine",
                          "--fail-links", "1@soon", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("simrun: error: --fail-links: window 'soon'")
    assert "Traceback" not in out.stderr


def test_named_and_seeded_windows_pick_cables_and_keep_them_in_the_graph():
    g = fat_tree(4, num_gpus=16, gpus_per_server=1)
    out, damage = anomalies.apply(g, fail_links="2@1ms-2ms", seed=3)
    again = anomalies.apply(g, fail_links="2@1ms-2ms", seed=3)[1]
    assert out is g and damage.failed == [] and damage.windows == again.windows
    (w,) = damage.windows
    assert len(w.cables) == 2 and set(w.cables) <= set(anomalies.switch_links(g))
    assert (w.factor, w.t1_s, w.t2_s) == (0.0, 1e-3, 2e-3)
