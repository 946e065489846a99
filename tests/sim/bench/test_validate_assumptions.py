"""What `simrun validate` says it assumed: the device names of the suite's own files, and the CLI's lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from sim.cli import cli
from sim.cli.validate import assumptions
from topologies.hardware import GPU_PRESETS, gpu_preset_for

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl_tests"
_DEVICE = re.compile(r"#\s+Rank\s+\d+.*device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")


def test_every_device_name_in_the_suite_maps_to_its_fabric_preset():
    """Each file's printed device names (read with a regex, not the reader) give the gpu= of fabrics.json."""
    fabrics = json.loads((DATA / "fabrics.json").read_text())
    checked = 0
    for name, fab in fabrics.items():
        if name.startswith("_"):
            continue
        names = {m.group(1) for line in (DATA / name).read_text(errors="replace").splitlines()
                 if (m := _DEVICE.search(line))}
        gpu = fab.get("set", {}).get("gpu")
        for device in names:
            key = gpu_preset_for(device)
            assert key is None or key in GPU_PRESETS
            if gpu and key:
                assert key == gpu, (name, device, gpu)
                checked += 1
    assert checked >= 10


def test_pcie_and_unknown_parts_get_no_preset():
    assert gpu_preset_for("NVIDIA H100 PCIe") is None
    assert gpu_preset_for("NVIDIA H100 NVL") is None
    assert gpu_preset_for("NVIDIA GB10") is None
    assert gpu_preset_for("") is None


def test_set_options_silence_the_assumptions():
    entry = {"nranks": 4, "gpus_per_node": None, "gpu": "NVIDIA A100-SXM4-80GB"}
    lines = assumptions([entry], {})
    assert any("4 GPUs per server assumed" in line for line in lines)
    assert any("--set gpu=a100" in line for line in lines)
    assert assumptions([entry], {"gpu": "a100", "gpus_per_server": 4}) == []


def test_cli_prints_the_assumption_before_the_table(tmp_path):
    src = DATA / "dgx_spark_2x1_gb10_allgather.txt"
    out = CliRunner().invoke(cli, ["validate", str(src), "--topo", "rail_optimized", "-o", str(tmp_path / "v")])
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    assert first.startswith("# the file names the GPU 'NVIDIA GB10'") and "no preset describes it" in first
