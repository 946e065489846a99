"""Determinism (issue 13): the same inputs and seed give byte-identical files across processes and through Dask.

``summary.json`` differs only in ``sim_wall_s`` and the sweep table only in its ``sim_wall_s`` column: the
measured wall time that SPEC §6 asks for. Every other byte, report.html and the PNGs included, must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def small_trace(folder: Path) -> Path:
    from traces.io import write_trace
    from traces.schema import new_metadata

    rows = [dict(rank=r, comm="c0" if r < 4 else "c1", seq=s, op=op, count=1 << 18, dtype="fp32", bytes=1 << 20,
                 root=-1, nranks=4, t_start_s=s * 1e-3, duration_s=float("nan"), host=f"node{r // 4}", device=r % 4,
                 context="", algo="", proto="")
            for s, op in enumerate(["AllReduce", "AllGather", "ReduceScatter"]) for r in range(8)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world_size=8, gpus_per_node=4, comms={"c0": [0, 1, 2, 3], "c1": [4, 5, 6, 7]},
                                       source="test")
    path = folder / "t.parquet"
    write_trace(df, path)
    return path


def simrun(argv: list[str], hash_seed: int, cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": str(hash_seed)}
    res = subprocess.run([sys.executable, "-m", "sim", *argv], capture_output=True, text=True, env=env, cwd=cwd,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-500:]


def files(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def without_wall_time(rel: Path, data: bytes):
    if rel.name == "summary.json":
        value = json.loads(data)
        value.pop("sim_wall_s")
        return value
    return data


def test_a_run_with_its_report_is_byte_identical_across_processes(tmp_path):
    trace = small_trace(tmp_path)
    outs = []
    for k in (1, 2):  # a different hash seed in each process
        out = tmp_path / f"run{k}"
        simrun(["run", "--trace", str(trace), "--topo", "leaf_spine", "--fail-links", "1", "--out", str(out)], k,
               tmp_path)
        outs.append(files(out))
    assert set(outs[0]) == set(outs[1])
    assert {"report.html", "summary.json", "timeline.json"} <= {p.name for p in outs[0]}
    assert any(p.suffix == ".png" for p in outs[0])
    for rel in outs[0]:
        assert without_wall_time(rel, outs[0][rel]) == without_wall_time(rel, outs[1][rel]), f"{rel} differs"


def sweep_table(folder: Path) -> pd.DataFrame:
    table = pd.read_parquet(folder / "sweep.parquet")
    assert "sim_wall_s" in table.columns
    return table.drop(columns="sim_wall_s")


@pytest.mark.slow
def test_a_sweep_gives_the_same_table_and_plot_serially_and_on_a_local_dask_cluster(tmp_path):
    trace = small_trace(tmp_path)
    grid = ["sweep", "--trace", str(trace), "--topo", "fat_tree,leaf_spine", "--set", "oversubscription=1|2",
            "--seed", "3"]
    simrun([*grid, "--serial", "-o", str(tmp_path / "serial")], 1, tmp_path)
    simrun([*grid, "--workers", "2", "-o", str(tmp_path / "dask")], 2, tmp_path)  # a local Dask cluster
    serial, dask = sweep_table(tmp_path / "serial"), sweep_table(tmp_path / "dask")
    assert len(serial) == 4
    pd.testing.assert_frame_equal(serial, dask, check_exact=True)
    assert (tmp_path / "serial" / "sweep.png").read_bytes() == (tmp_path / "dask" / "sweep.png").read_bytes()
