"""A large topology YAML reports progress while it parses and builds, and Ctrl-C stops it cleanly (issue 13)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import topologies
from topologies.config import build_progress


def star_yaml(path: Path, gpus: int) -> Path:
    """An explicit fabric: ``gpus`` GPUs on one switch."""
    with path.open("w") as f:
        f.write("nodes:\n")
        f.writelines(f"  - {{name: gpu{i}, kind: gpu}}\n" for i in range(gpus))
        f.write("  - {name: sw, kind: leaf}\nlinks:\n")
        f.writelines(f"  - {{a: gpu{i}, b: sw, capacity_gbps: 400, latency_us: 1}}\n" for i in range(gpus))
    return path


def test_parsing_and_building_report_their_stages_in_order(tmp_path):
    path = star_yaml(tmp_path / "star.yaml", 9000)
    seen = []
    with build_progress(lambda stage, done, total: seen.append((stage, done, total))):
        graph = topologies.build(path)
    assert graph.graph["num_gpus"] == 9000
    stages = list(dict.fromkeys(stage for stage, _, _ in seen))
    assert stages == ["parsing YAML", "adding nodes", "adding links", "finding servers"]
    parse = [(done, total) for stage, done, total in seen if stage == "parsing YAML"]
    assert len(parse) > 3  # read in chunks, reported as it goes
    assert all(a[0] <= b[0] for a, b in zip(parse, parse[1:], strict=False))
    assert parse[-1][0] == parse[-1][1] == len(path.read_text())
    links = [done for stage, done, _ in seen if stage == "adding links"]
    assert links[0] == 0 and len(links) == 3  # every 4,096 links of 9,000


def test_progress_is_off_outside_the_block(tmp_path):
    seen = []
    with build_progress(lambda *a: seen.append(a)):
        pass
    topologies.build(star_yaml(tmp_path / "s.yaml", 10))
    assert seen == []


def test_a_preset_build_reports_its_stage():
    seen = []
    with build_progress(lambda stage, done, total: seen.append(stage)):
        topologies.build("fat_tree", num_gpus=16)
    assert seen == ["building fat_tree", "checking the graph"]


def test_ctrl_c_while_a_large_yaml_parses_exits_130_with_one_line(tmp_path):
    path = star_yaml(tmp_path / "big.yaml", 35_000)  # 3.2 MB: ~8 s of parsing alone
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "sim", "topo", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # even if ignored here
    time.sleep(4.0)  # past the imports, inside the parse or the build
    assert proc.poll() is None, "the topology was described before Ctrl-C: make the file larger"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    # 130 (128 + SIGINT), or death by SIGINT itself, which a shell also reports as 130
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert err.strip().splitlines() == ["simrun: interrupted"], err
    assert out == ""
