"""Shared fixtures. ``DATA`` is ``tests/data``: small real files copied in, each with its source line."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")  # no screen on CI
os.environ.setdefault("MPLBACKEND", "Agg")

DATA = Path(__file__).parent / "data"

# CI runs on 2 cores: keep property tests bounded and free of wall-clock deadlines.
settings.register_profile("ci", max_examples=40, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(params=["numpy", "jit"])
def nccl_engine(request, monkeypatch) -> str:
    """Run a test on both NCCL-log chunk readers (the compiled one needs numba)."""
    from traces.formats.nccl import scan as nccl_log_scan

    if request.param == "jit":
        pytest.importorskip("numba")
    monkeypatch.setattr(nccl_log_scan, "ENGINE", request.param)
    return request.param
