"""Conformance to SPEC.md §1 Set-up and the main job: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import pytest
from contract_support import (
    ROOT,
    WORLD,
    simrun,
    simrun_process,
)

import traces


def test_s1_readme_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert [line.strip() for line in lines[:2]] == [
        "pip install -e . && simrun --trace ds_v3.parquet --topo fat_tree",
        "pip install -e '.[test]' && pytest",
    ]


def test_s1_python_3_11_or_newer():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"].replace(" ", "") == ">=3.11"
    assert project["scripts"]["simrun"]  # the console script of the two commands


def test_s1_ci_runs_the_second_command():
    text = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]' && pytest" in text


def test_s1_builtin_names_resolve_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("ds_v3.parquet", "ds_v3_tp16.parquet", "llama3_70b_train.parquet"):
        assert traces.resolve_trace_path(name).is_file()
    df = traces.read_trace("ds_v3_tp16.parquet")
    assert len(df) > 0 and df.attrs["collsim"]["world_size"] == 16
    code, out, _ = simrun("traces")
    assert code == 0 and "ds_v3" in out


def test_s1_a_file_in_the_working_folder_wins_over_the_builtin(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    traces.write_trace(traces.read_trace(tiny), tmp_path / "ds_v3_tp16.parquet")
    assert traces.read_trace("ds_v3_tp16.parquet").attrs["collsim"]["world_size"] == WORLD


@pytest.mark.slow
def test_s1_main_job_runs(tmp_path):
    proc = simrun_process("--trace", "ds_v3.parquet", "--topo", "fat_tree", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "simrun-out").is_dir()
