"""SimOptions: one options object for simulate, simrun run and simrun sweep; every value used or refused.

Each bad value is tried through the CLI (exit code 2, one ``simrun: error:`` line, its first words) and
through the API (a :class:`sim.errors.OptionError`, so a ``ValueError`` and a ``CollsimError``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.cli import main
from sim.cli.run import DEFAULT_QUANTILE
from sim.errors import OptionError, SimError
from sim.options import MAX_CHANNELS, MAX_TIME_BINS, SET_KEYS, SimOptions, split_set
from topologies import fat_tree
from traces.errors import CollsimError
from traces.io import write_trace
from traces.schema import new_metadata

WORLD = 8


def _trace() -> pd.DataFrame:
    """An AllReduce and an AllToAll over 8 ranks on 2 servers of 4 GPUs, timed 1 ms apart."""
    rows = []
    for seq, (op, count) in enumerate([("AllReduce", 1 << 18), ("AllToAll", 1 << 12)]):
        rows += [dict(rank=r, comm="w", seq=seq, op=op, count=count, dtype="fp32", bytes=4 * count, root=-1,
                      nranks=WORLD, t_start_s=0.001 * seq) for r in range(WORLD)]
    df = pd.DataFrame(rows)
    for name, value in dict(duration_s=math.nan, host="", device=-1, context="", algo="", proto="").items():
        df[name] = value
    df.attrs["collsim"] = new_metadata(WORLD, {"w": list(range(WORLD))}, "test", gpus_per_node=4)
    return df


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    return write_trace(_trace(), tmp_path_factory.mktemp("opt") / "tiny.parquet")


def _cli(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return info.value.code, out, err


def _run(trace_path, tmp_path, capsys, *extra):
    return _cli(["run", "--trace", trace_path, "--topo", "fat_tree", "--out", tmp_path / "o", "--no-report",
                 "--json", *extra], capsys)


def _one_error(code, err, first_words):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"simrun: error: {first_words}"), lines[0]


# ---- the fail_links bug: the key is the simulator's through every entry point ----------------------------

def test_run_cli_sends_fail_links_to_the_simulator(trace_path, tmp_path, capsys):
    code, out, err = _run(trace_path, tmp_path, capsys, "--set", "fail_links=2", "--seed", "5")
    assert code == 0, err
    summary = json.loads(out)
    assert len(summary["failed_links"]) == 2
    direct = sim.simulate(_trace(), "fat_tree", seed=5, fail_links=2, completion_quantile=DEFAULT_QUANTILE).summary
    assert summary["failed_links"] == direct["failed_links"]
    assert summary["makespan_s"] == direct["makespan_s"]


def test_sweep_cli_sends_fail_links_to_the_simulator(trace_path, tmp_path, capsys):
    code, _, err = _cli(["sweep", "--trace", trace_path, "--topo", "fat_tree", "--set", "fail_links=0|2",
                         "--seed", "5", "--serial", "--out", tmp_path / "s"], capsys)
    assert code == 0, err
    table = pd.read_parquet(tmp_path / "s" / "sweep.parquet")
    for fail, row in zip([0, 2], table.to_dict("records"), strict=True):
        direct = sim.simulate(_trace(), "fat_tree", seed=5, fail_links=fail, trace_name="tiny.parquet").summary
        assert row["fail_links"] == fail and row["makespan_s"] == direct["makespan_s"]
    # a count too large is the simulator's error (the topology builder would say "unknown parameter")
    code, _, err = _cli(["sweep", "--trace", trace_path, "--topo", "fat_tree", "--set", "fail_links=1000",
                         "--serial", "--out", tmp_path / "t"], capsys)
    _one_error(code, err, "point 0 (fat_tree fail_links=1000")
    assert "cannot choose 1000" in err


def test_api_takes_fail_links_as_keyword_or_options():
    g = fat_tree(4, num_gpus=WORLD, gpus_per_server=4)
    kw = sim.simulate(_trace(), g, seed=5, fail_links=2, ideal=False).summary
    obj = sim.simulate(_trace(), g, options=SimOptions(seed=5, fail_links=2, ideal=False)).summary
    assert len(kw["failed_links"]) == 2 and kw["failed_links"] == obj["failed_links"]
    assert kw["makespan_s"] == obj["makespan_s"]


def test_set_keys_are_split_in_one_place():
    assert {"fail_links", "degrade_links", "stragglers", "quantile", "completion_quantile", "bin_s",
            "channels", "timing", "memoize", "ideal"} <= SET_KEYS
    assert split_set({"k": 4, "fail_links": 1, "oversubscription": 2}) == ({"fail_links": 1},
                                                                             {"k": 4, "oversubscription": 2})
    with pytest.raises(OptionError, match="--set seed: give it as --seed"):
        split_set({"seed": 1})


# ---- a value is used exactly ---------------------------------------------------------------------------

def test_quantile_zero_is_the_exact_solve_not_the_default(trace_path, tmp_path, capsys):
    code, out, err = _run(trace_path, tmp_path, capsys, "--set", "quantile=0")
    assert code == 0, err
    assert json.loads(out)["completion_quantile"] == 0.0
    code, out, err = _run(trace_path, tmp_path, capsys)
    assert code == 0 and json.loads(out)["completion_quantile"] == DEFAULT_QUANTILE  # the CLI's default
    assert SimOptions.from_mapping({"quantile": 0}).completion_quantile == 0.0


def test_an_option_given_twice_is_refused(trace_path, tmp_path, capsys):
    code, _, err = _run(trace_path, tmp_path, capsys, "--quantile", "0.1", "--set", "quantile=0")
    _one_error(code, err, "--quantile and --set quantile both given")
    with pytest.raises(OptionError, match="given twice"):
        SimOptions.from_mapping({"quantile": 0.1, "completion_quantile": 0.2})
    with pytest.raises(OptionError, match="beside options="):
        sim.simulate(_trace(), "fat_tree", options=SimOptions(), timing="asap")
    with pytest.raises(OptionError, match="disagrees with options.seed"):
        sim.simulate(_trace(), "fat_tree", seed=3, options=SimOptions(seed=4))


# ---- out of range: refused with the limit, through the CLI and the API ----------------------------------

BAD = [
    (["--set", "quantile=2"], {"completion_quantile": 2}, "completion_quantile=2: must be >= 0 and < 1"),
    (["--set", "quantile=-0.5"], {"quantile": -0.5}, "completion_quantile=-0.5: must be >= 0"),
    (["--set", "bin_s=0"], {"bin_s": 0}, "bin_s=0: must be a number of seconds > 0"),
    (["--set", "bin_s=-1"], {"bin_s": -1}, "bin_s=-1: must be a number of seconds > 0"),
    (["--set", "bin_s=1e-15"], {"bin_s": 1e-15}, "bin_s=1e-15: the trace spans 0.001 s, more than 65536 bins"),
    (["--set", "channels=1000000"], {"channels": 1000000}, "channels=1000000: must be from 1 to 64"),
    (["--set", "channels=0"], {"channels": 0}, "channels=0: must be from 1 to 64"),
    (["--set", "timing=later"], {"timing": "later"}, "timing 'later' is not one of"),
    (["--set", "memoize=maybe"], {"memoize": "maybe"}, "memoize='maybe': must be true or false"),
    (["--seed", "-1", "--fail-links", "1"], {"seed": -1, "fail_links": 1}, "seed=-1: must be an integer from 0"),
    (["--seed", str(2**70), "--fail-links", "1"], {"seed": 2**70, "fail_links": 1},
     f"seed={2**70}: must be an integer from 0 to 2**63-1"),
    (["--fail-links", "-2"], {"fail_links": -2}, "fail_links=-2: must be a count >= 0"),
    (["--degrade-links", "2:inf"], {"degrade_links": "2:inf"}, "degrade_links: factor 'inf' must be a finite"),
    (["--straggler", "1:inf"], {"stragglers": ["1:inf"]}, "straggler 1:inf: DELAY_US must be at most"),
    (["--straggler", "1:1e30"], {"stragglers": {1: 1e30}}, "straggler 1:1e+30: DELAY_US must be at most"),
]


@pytest.mark.parametrize(("argv", "kwargs", "first_words"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_value_through_the_cli(argv, kwargs, first_words, trace_path, tmp_path, capsys):
    code, _, err = _run(trace_path, tmp_path, capsys, *argv)
    _one_error(code, err, first_words)


@pytest.mark.parametrize(("argv", "kwargs", "first_words"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_value_through_the_api(argv, kwargs, first_words):
    with pytest.raises(OptionError) as info:
        sim.simulate(_trace(), "fat_tree", **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, CollsimError)
    assert str(info.value).startswith(first_words)


def test_seed_text_that_is_not_an_integer_is_one_line(trace_path, tmp_path, capsys):
    code, _, err = _run(trace_path, tmp_path, capsys, "--seed", "2**70")
    _one_error(code, err, "Invalid value for '--seed'")


def test_a_run_outgrowing_the_bins_stops_with_the_limit():
    """asap timing gives no span before the run: the bins are checked as the run grows, bounded in memory."""
    g = fat_tree(4, num_gpus=WORLD, gpus_per_server=4)
    with pytest.raises(OptionError, match=rf"bin_s=1e-12: the run spans .* more than {MAX_TIME_BINS} bins"):
        sim.simulate(_trace(), g, timing="asap", bin_s=1e-12, ideal=False)
    res = sim.simulate(_trace(), g, timing="asap", bin_s=1e-6, ideal=False)  # well inside the limit
    times = np.sort(res.link_timeseries["t_s"].unique())
    assert np.allclose(np.diff(times), 1e-6)


# ---- Dask: a bad scheduler address, a point failing on a worker ----------------------------------------

def test_scheduler_garbage_is_one_line(trace_path, tmp_path, capsys):
    code, _, err = _cli(["sweep", "--trace", trace_path, "--topo", "fat_tree", "--scheduler", "garbage://x",
                         "--out", tmp_path / "s"], capsys)
    _one_error(code, err, "--scheduler 'garbage://x': cannot connect")
    from sim.sweep import connect

    with pytest.raises(SimError, match="unknown address scheme"):
        connect("garbage://x")


def test_a_point_failing_on_a_worker_is_one_error_line(trace_path, tmp_path):
    """Through a real process cluster: the worker's log stays quiet and the CLI prints one line, even with
    Dask's default HTTP port taken (another cluster running)."""
    import socket

    argv = [sys.executable, "-m", "sim", "sweep", "--trace", str(trace_path), "--topo", "fat_tree",
            "--set", "fail_links=1000", "--workers", "1", "--out", str(tmp_path / "s")]
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        except OSError:
            pass  # already taken by someone else: the same situation
        # the options are fine, the topology builds: the point fails on the worker, in anomalies.apply
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=os.environ)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("simrun: error: point 0 (fat_tree fail_links=1000"), proc.stderr


def test_a_point_error_comes_back_as_a_value():
    from sim.sweep import expand, run_point_or_error

    point = expand(["fat_tree"], {"fail_links": [1000]})[0]
    value = run_point_or_error(_trace(), point)
    assert isinstance(value, SimError) and "cannot choose 1000" in str(value)


# ---- properties ---------------------------------------------------------------------------------------

ANY = st.one_of(st.none(), st.booleans(), st.integers(-2**80, 2**80), st.floats(allow_nan=True),
                st.text(max_size=8), st.lists(st.text(max_size=4), max_size=3),
                st.dictionaries(st.integers(-3, 3), st.floats(-10, 10), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(SET_KEYS)), ANY, max_size=4))
def test_any_value_is_accepted_or_refused_with_an_option_error(values):
    try:
        opts = SimOptions.from_mapping(values)
    except SimError as exc:  # OptionError, or SimError from the straggler parser
        assert str(exc) and "\n" not in str(exc)
        return
    assert 0.0 <= opts.completion_quantile < 1.0
    assert opts.bin_s is None or opts.bin_s > 0
    assert opts.channels is None or 1 <= opts.channels <= MAX_CHANNELS
    assert opts.replace() == opts


def test_every_family_is_one_root_and_the_cli_catches_it(monkeypatch, capsys):
    from topologies.errors import TopologyError
    from traces.schema import TraceError

    for family in (TraceError, TopologyError, SimError, OptionError):
        assert issubclass(family, CollsimError) and issubclass(family, ValueError)
    import sim.cli.traces as traces_cmd

    def boom(*_a, **_k):
        raise CollsimError("some bad input, line 3")

    monkeypatch.setattr(traces_cmd, "list_builtin", boom)
    code, _, err = _cli(["traces"], capsys)
    _one_error(code, err, "some bad input, line 3")


def test_bare_simrun_prints_its_usage():
    proc = subprocess.run([sys.executable, "-m", "sim"], capture_output=True, text=True, timeout=120,
                          env=os.environ)
    assert proc.returncode in (0, 2)
    text = proc.stdout + proc.stderr
    assert text.startswith("Usage: simrun [OPTIONS] COMMAND [ARGS]...")
    assert "\nCommands:\n" in text and "simrun: error" not in text


def test_flows_takes_the_same_seeds(tmp_path, capsys):
    flows = tmp_path / "f.csv"
    flows.write_text("src,dst,bytes,start_s\n0,5,1000000,0\n")
    code, _, err = _cli(["flows", flows, "--topo", "fat_tree", "--seed", "-1", "-o", tmp_path / "o"], capsys)
    _one_error(code, err, "--seed=-1: must be an integer from 0 to 2**63-1")
