"""The replay's progress: collectives done out of the total, and the simulated time reached (issue 11)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

import sim
from sim.cli import common
from traces.schema import new_metadata, validate


def _steps(world: int = 4, steps: int = 40) -> pd.DataFrame:
    rows = [dict(rank=r, comm="dp", seq=k, op="AllReduce", count=1 << 16, dtype="uint8", bytes=1 << 16, root=-1,
                 nranks=world, t_start_s=k * 1e-4, duration_s=np.nan, host="", device=-1, context="", algo="",
                 proto="") for r in range(world) for k in range(steps)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"dp": list(range(world))}, "test", gpus_per_node=1)
    return validate(df)


def test_a_two_argument_callback_hears_the_fraction_and_the_simulated_time():
    seen = []
    res = sim.simulate(_steps(), "leaf_spine", progress=lambda fraction, t_s: seen.append((fraction, t_s)))
    fractions, times = np.array(seen).T
    assert fractions[-1] == 1.0 and times[-1] == pytest.approx(res.summary["makespan_s"])
    assert (np.diff(fractions) >= 0).all() and (np.diff(times) >= 0).all()
    assert 0 < fractions[0] <= 1.0


def test_the_documented_one_argument_callback_still_works():
    seen = []
    sim.simulate(_steps(steps=3), "leaf_spine", progress=seen.append)
    assert seen[-1] == 1.0 and all(0 < f <= 1 for f in seen)


def test_the_bar_names_what_it_counts_and_the_simulated_time():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160)
    with common.progress_bar(3, "replaying", unit="collectives done", status="at 0.000 ms simulated",
                             console=console) as advance:
        for k in range(3):
            advance(1, f"at {k + 1:.3f} ms simulated")
    text = buf.getvalue()
    assert "3/3 collectives done" in text and "at 3.000 ms simulated" in text


def test_the_cli_bar_follows_the_replay(monkeypatch, tmp_path):
    """simrun's bar: the total is the trace's collectives (one replay: the reference is a bound, not a
    second replay), the status the simulated time."""
    from sim.cli import run as run_cmd
    from traces import write_trace

    calls = []

    class Bar:
        def __init__(self, total, description, unit="", status=None, console=None):
            calls.append(("open", total, unit, status))

        def __enter__(self):
            return lambda amount=1.0, status=None: calls.append(("advance", amount, status))

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(run_cmd, "progress_bar", Bar)
    monkeypatch.setattr(common, "show_progress", lambda: True)
    trace = write_trace(_steps(steps=5), tmp_path / "t.parquet")
    from sim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--trace", str(trace), "--topo", "leaf_spine", "--no-report", "-o", str(tmp_path / "o")])
    assert exc.value.code == 0
    assert calls[0] == ("open", 5, "collectives done", "at 0.000 ms simulated")
    advances = [c for c in calls if c[0] == "advance"]
    assert sum(a for _, a, _ in advances) == 5
    assert advances[-1][2].endswith("ms simulated")
