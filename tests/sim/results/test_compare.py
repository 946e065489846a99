"""`simrun compare`: one run per fabric, compare.parquet / compare.html, each fabric's §6 folder; sweep's verdict."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim.cli import main
from traces import write_trace


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory, small_step_trace):
    return write_trace(small_step_trace, tmp_path_factory.mktemp("t") / "step.parquet")


FABRICS = ["--topo", "leaf_spine,leaf_spine", "--set", "gpus_per_server=1,gpus_per_leaf=4"]


def test_compare_writes_table_page_and_one_folder_per_fabric(trace_path, tmp_path, capsys):
    out = tmp_path / "c"
    code, stdout, err = _run(["compare", "--trace", str(trace_path), "--topo", "fat_tree,leaf_spine", "--serial",
                              "--set", "gpus_per_server=1", "-o", str(out)], capsys)
    assert code == 0, err
    table = pd.read_parquet(out / "compare.parquet")
    assert table["topo"].tolist() == ["fat_tree", "leaf_spine"]
    for col in ("makespan_s", "exposed_comm_s", "fabric_delay_s", "comm_time_s", "slowdown_p99", "switches",
                "optics", "role_DP_fabric_delay_s"):
        assert col in table.columns, col
    for name in table["folder"]:
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["timing"] == "gaps" and (out / name / "report.html").is_file()
    page = (out / "compare.html").read_text()
    assert page.index("Verdict") < page.index("Figures per fabric") < page.index("Cost proxy")
    assert "exposed communication:" in page and "incast events:" in page
    assert "exposed communication:" in stdout


def test_the_same_fabric_twice_is_a_tie_and_stable_for_a_seed(trace_path, tmp_path, capsys):
    tables, lines = [], []
    for k in range(2):
        code, stdout, err = _run(["compare", "--trace", str(trace_path), *FABRICS, "--serial", "--seed", "3",
                                  "--no-report", "-o", str(tmp_path / f"c{k}")], capsys)
        assert code == 0, err
        tables.append(pd.read_parquet(tmp_path / f"c{k}" / "compare.parquet").drop(columns="sim_wall_s"))
        lines.append([ln for ln in stdout.splitlines() if ln.startswith(("exposed", "makespan:", "p99"))])
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert lines[0] == lines[1]
    assert tables[0]["folder"].tolist() == ["leaf_spine-0", "leaf_spine-1"]
    assert all(" tie " in ln for ln in lines[0]), lines[0]


def test_compare_ranks_oversubscription_by_exposed_communication(trace_path, tmp_path, capsys):
    yaml = tmp_path / "over4.yaml"
    yaml.write_text("preset: leaf_spine\noversubscription: 4\n")
    code, stdout, err = _run(["compare", "--trace", str(trace_path), "--topo", f"leaf_spine,{yaml}", "--serial",
                              "--no-report", "--set", "gpus_per_server=1,gpus_per_leaf=4", "-o",
                              str(tmp_path / "o")], capsys)
    assert code == 0, err
    table = pd.read_parquet(tmp_path / "o" / "compare.parquet")
    assert table["exposed_comm_s"].iloc[0] < table["exposed_comm_s"].iloc[1]
    assert "exposed communication: leaf_spine wins" in stdout


@pytest.mark.slow
def test_compare_on_dask_equals_serial(trace_path, tmp_path, capsys):
    frames = []
    for mode, extra in (("serial", ["--serial"]), ("dask", ["--workers", "2"])):
        code, _, err = _run(["compare", "--trace", str(trace_path), *FABRICS, "--no-report", *extra, "-o",
                             str(tmp_path / mode)], capsys)
        assert code == 0, err
        frames.append(pd.read_parquet(tmp_path / mode / "compare.parquet").drop(columns="sim_wall_s"))
    pd.testing.assert_frame_equal(*frames)


@pytest.mark.slow
def test_a_headless_browser_renders_the_compare_page(trace_path, tmp_path, capsys):
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    out = tmp_path / "c"
    code, _, err = _run(["compare", "--trace", str(trace_path), "--topo", "fat_tree,leaf_spine", "--serial",
                         "--set", "gpus_per_server=1", "--no-report", "-o", str(out)], capsys)
    assert code == 0, err
    shot = tmp_path / "compare.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1400,2400", (out / "compare.html").as_uri()], check=True, timeout=120,
                   capture_output=True)
    from PIL import Image

    img = Image.open(shot).convert("L")
    hist = img.histogram()
    # rendered text, tables and the utilisation plot, not a blank page or a broken image
    assert img.size == (1400, 2400) and sum(1 for h in hist if h) > 50 and sum(hist[:64]) > 2000
