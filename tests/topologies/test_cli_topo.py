"""`simrun topo`: the description, --json, --draw, and one `simrun: error:` line with exit 2 on bad input."""

from __future__ import annotations

import json

import pytest

from sim.cli import main


def run(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_topo_prints_tiers_bisection_oversubscription_and_diameter(capsys):
    code, out, err = run(["topo", "leaf_spine", "--set", "num_gpus=160", "--set", "oversubscription=2"], capsys)
    assert code == 0 and err == ""
    assert "leaf 4" in out and "spine 20" in out  # 40 GPUs per leaf on a 64-port leaf at 2:1
    assert "bisection bandwidth: 16,000.0 Gbps" in out  # two leaves' uplinks: 2 x 40 x 400 / 2
    assert "2:1 measured" in out and "diameter: 4 hops" in out


def test_topo_json_and_draw(tmp_path, capsys):
    picture = tmp_path / "ft.png"
    code, out, _ = run(["topo", "fat_tree", "--set", "k=4,gpus_per_server=4", "--json", "--draw", str(picture)], capsys)
    info = json.loads(out)
    assert code == 0
    assert info["tiers"] == {"nvswitch": 4, "gpu": 16, "leaf": 8, "spine": 8, "core": 4}
    assert info["bisection_gbps"] == 8 * 400.0 and info["bisection_ratio"] == 1.0 and info["diameter_hops"] == 6
    assert info["drawing"]["style"] == "layered"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_topo_draws_a_summary_for_large_fabrics(tmp_path, capsys):
    picture = tmp_path / "big.png"
    code, out, _ = run(["topo", "rail_optimized", "--set", "num_gpus=512", "--draw", str(picture)], capsys)
    assert code == 0 and "drawing (summary)" in out and picture.stat().st_size > 0


@pytest.mark.parametrize("argv, words", [
    (["topo", "fat_tree", "--set", "k=5"], "k must be even"),
    (["topo", "fat_tree", "--set", "k=4", "--set", "num_gpus=32"], "holds 16 GPUs, fewer than num_gpus=32"),
    (["topo", "leaf_spine", "--set", "oversubscription=0.5"], "oversubscription must be >= 1"),
    (["topo", "leaf_spine", "--set", "link_gbps=0"], "link_gbps must be > 0"),
    (["topo", "fat_tree", "--set", "radix=8"], "unknown parameter 'radix'"),
    (["topo", "fat_tree", "--set", "k=eight"], "parameter 'k' of fat_tree must be an int"),
    (["topo", "dragonfly"], "unknown topology 'dragonfly'"),
    (["topo", "fat_tree", "--draw", "fabric"], "fabric: cannot draw a file without a suffix"),
])
def test_bad_input_is_one_error_line_and_exit_2(argv, words, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:") and words in lines[0]
