"""The background warm-up of numba's cache (sim.warmup): when it starts, what it starts, one at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import warmup
from sim.network import maxmin


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """A process that ran on numpy for longer than loading cached kernels costs, with a cold cache."""
    monkeypatch.delenv(warmup.BUILD_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(maxmin, "SOLVER", "auto")
    monkeypatch.setattr(maxmin, "kernels_cached_here", lambda: False)
    monkeypatch.setattr(maxmin, "numpy_excess_charged_s", lambda: maxmin.JIT_LOAD_S + 0.01)
    lock = tmp_path / "warm.lock"
    monkeypatch.setattr(warmup, "lock_path", lambda: lock)
    started = []

    class Popen:
        def __init__(self, argv, **kwargs):
            started.append((argv, kwargs))

    monkeypatch.setattr(subprocess, "Popen", Popen)
    return started, lock


def test_starts_one_detached_low_priority_warm_up(cold):
    started, lock = cold
    assert warmup.warm_in_background(0.01)
    (argv, kwargs), = started
    assert argv[1:] == ["-m", "sim.warmup", "--quantile", "0.01", "--lock", str(lock)]
    assert kwargs["start_new_session"] and kwargs["stdout"] == subprocess.DEVNULL
    assert Path(kwargs["cwd"]) == Path(warmup.__file__).resolve().parents[1]  # imports these sources
    assert lock.exists()
    # a second run while the first warm-up holds the lock starts nothing
    assert not warmup.warm_in_background(0.01)
    assert len(started) == 1


def test_a_stale_lock_is_taken_over(cold):
    started, lock = cold
    lock.write_text("")
    os.utime(lock, (0, 0))  # a warm-up that died long ago
    assert warmup.warm_in_background(0.0)
    assert len(started) == 1


@pytest.mark.parametrize("case", ["switched off", "numba loaded", "cache warm", "small run", "solver forced"])
def test_no_warm_up_where_it_would_not_pay(cold, monkeypatch, case):
    started, lock = cold
    if case == "switched off":
        monkeypatch.setenv(warmup.BUILD_ENV, "0")
    elif case == "numba loaded":
        monkeypatch.setitem(sys.modules, "numba", object())
    elif case == "cache warm":
        monkeypatch.setattr(maxmin, "kernels_cached_here", lambda: True)
    elif case == "small run":
        monkeypatch.setattr(maxmin, "numpy_excess_charged_s", lambda: maxmin.JIT_LOAD_S / 2)
    else:
        monkeypatch.setattr(maxmin, "SOLVER", "numpy")
    assert not warmup.should_warm()
    assert not warmup.warm_in_background(0.01)
    assert started == [] and not lock.exists()


@pytest.mark.slow
def test_warm_up_fills_an_empty_cache(tmp_path):
    """The warm-up process compiles the network's kernels into an empty cache (~1-2 min of CPU)."""
    root = Path(warmup.__file__).resolve().parents[1]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-m", "sim.warmup", "--quantile", "0.01"], cwd=root, env=env, check=True)
    probe = "from sim.network import maxmin; print(maxmin.kernels_cached_here())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "True"
