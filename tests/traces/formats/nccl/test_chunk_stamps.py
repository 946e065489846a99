"""Outer timestamps and launcher prefixes (docs/nccl_formats.md section 1; traces.formats.nccl.chunk_stamps):
the positional path, the per-line parser, and the vectorised path for many lines."""

from __future__ import annotations

import pytest
from nccl_text import coll, pre, read_lines

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        (["[2025-07-25 19:54:57] ", "[2025-07-25 19:54:59] "], [0.0, 2.0]),  # 2.26 default
        (["[2025-07-25 19:54:57.5] ", "[2025-07-25 19:54:57.625] "], [0.0, 0.125]),  # %Nf, N < 6
        (["2025-07-25 19:54:57.101122 ", "2025-07-25 19:54:58.101123 "], [0.0, 1.000001]),  # external
        (["2025-07-25 19:54:57.1 [2025-07-25 19:54:50] ", "[2025-07-25 19:54:51] "], [0.0, 1.0]),  # NCCL's wins
        (["(RayTrainWorker pid=1, ip=1.2.3.4) ", "[1,3]<stdout>:"], [float("nan")] * 2),
    ],
)
def test_timestamps(tmp_path, stamps, expected):
    lines = [stamps[0] + pre(pid=1) + coll(), stamps[1] + pre(pid=1) + coll()]
    df, report = read_lines(tmp_path, lines)
    assert report.skipped_total == 0 and df["host"].tolist() == ["h", "h"]
    assert df["t_start_s"].tolist() == pytest.approx(expected, nan_ok=True)


def test_many_timestamps_take_the_vectorised_path(tmp_path):
    lines = [f"[2025-07-25 19:{m:02d}:{s:02d}.{m * 60 + s:06d}] " + pre() + coll()
             for m in range(10) for s in range(0, 60, 3)]
    df, _ = read_lines(tmp_path, lines)
    t0 = 19 * 3600
    expected = [(19 * 3600 + m * 60 + s - t0) + (m * 60 + s) / 1e6 for m in range(10) for s in range(0, 60, 3)]
    assert df["t_start_s"].tolist() == pytest.approx(expected, abs=1e-9)
