"""timeline.json opened by real loaders: what they built must be what the file holds, nothing dropped.

Two loaders, each run only where it is installed (the tests skip otherwise; all are marked slow):

* Perfetto's ``trace_processor_shell`` (the engine behind ui.perfetto.dev), found as ``$TRACE_PROCESSOR_SHELL``
  or on PATH: slices per rank track, async flow slices, counter samples per track, flow arrows, the trace
  bounds, and its import-error statistics;
* catapult's trace-viewer importer (the loader of chrome://tracing), from a catapult checkout named by
  ``$CATAPULT_DIR``, run in Node by ``catapult_model.js``: the same counts (its importer binds v2 flow arrows
  to complete and B/E slices only, so it draws none into async slices: arrows are checked with Perfetto).

The expected counts are read off the file itself (:func:`file_counts`), independently of the writer.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import sim
import topologies
from sim.results import timeline

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent


def _ns(ts_us: float) -> int:
    return round(ts_us * 1000)


def file_counts(doc: dict) -> dict:
    """What a loader must show of ``doc``: complete slices per named rank track, async slices, counter
    samples per counter name (and per name and argument), flow arrows (``flow_in`` ends whose ``bind_id`` has a ``flow_out``), and the
    time bounds in whole nanoseconds."""
    evs = doc["traceEvents"]
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    rank = Counter(thread_names[(e["pid"], e["tid"])] for e in evs if e["ph"] == "X")
    outs = {e["bind_id"] for e in evs if e.get("flow_out")}
    timed = [e for e in evs if e["ph"] != "M"]
    return {"rank_slices": dict(rank),
            "async_slices": sum(e["ph"] == "b" for e in evs),
            "counters": dict(Counter(e["name"] for e in evs if e["ph"] == "C")),
            # Perfetto makes one track per counter name and argument: "<name> <arg>"
            "counter_series": dict(Counter(f"{e['name']} {k}" for e in evs if e["ph"] == "C" for k in e["args"])),
            "flows": sum(1 for e in evs if e.get("flow_in") and e["bind_id"] in outs),
            "bounds_ns": [min(_ns(e["ts"]) for e in timed),
                          max(_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in timed)]}


# --- Perfetto trace processor ---------------------------------------------------------------------------

#: One result table (kind, key, value); ``-q`` prints the last statement's rows as CSV.
PERFETTO_QUERY = """
select 'thread' as kind, coalesce(th.name, '') as key, count(*) as value
  from slice s join thread_track tt on s.track_id = tt.id join thread th using (utid) group by tt.id
union all select 'slices', '', count(*) from slice
union all select 'counter', ct.name, count(*) from counter c join counter_track ct on c.track_id = ct.id
  group by ct.id
union all select 'flows', '', count(*) from flow
union all select 'bounds', 'start', start_ts from trace_bounds
union all select 'bounds', 'end', end_ts from trace_bounds
union all select 'stat', name || ' (' || severity || ')', value from stats
  where value > 0 and severity in ('error', 'data_loss')
"""


def _perfetto_shell() -> str | None:
    return os.environ.get("TRACE_PROCESSOR_SHELL") or shutil.which("trace_processor_shell")


def perfetto_counts(path: Path, tmp_path: Path) -> dict:
    """Load ``path`` in trace_processor_shell and read back the same counts as :func:`file_counts`."""
    query = tmp_path / "counts.sql"
    query.write_text(PERFETTO_QUERY)
    out = subprocess.run([_perfetto_shell(), "-q", str(query), str(path)], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) == 3 and r[0] != "kind"]
    got = {"rank_slices": {}, "counters": {}, "errors": {}, "bounds_ns": [0, 0]}
    thread_total = 0
    for kind, key, value in rows:
        v = int(float(value))
        if kind == "thread":   # one row per thread track: a second track of a thread is an overflow track
            if key in got["rank_slices"]:
                got["errors"][f"slices of {key} moved to a second track"] = v
            got["rank_slices"][key] = got["rank_slices"].get(key, 0) + v
            thread_total += v
        elif kind == "slices":
            got["all_slices"] = v
        elif kind == "counter":
            got["counters"][key] = v
        elif kind == "flows":
            got["flows"] = v
        elif kind == "bounds":
            got["bounds_ns"][0 if key == "start" else 1] = v
        elif kind == "stat":
            got["errors"][key] = v
    got["async_slices"] = got.pop("all_slices") - thread_total   # slices on process (async) tracks
    return got


# --- catapult trace-viewer --------------------------------------------------------------------------

def _catapult() -> Path | None:
    root = os.environ.get("CATAPULT_DIR")
    if not root or not shutil.which("node") or not (Path(root) / "catapult_build" / "node_bootstrap.js").exists():
        return None
    return Path(root)


def catapult_counts(path: Path, tmp_path: Path) -> dict:
    """Load ``path`` with catapult's trace-event importer (in Node) and read back the same counts."""
    root = _catapult()
    paths = tmp_path / "source_paths.json"
    paths.write_text(subprocess.run(
        [sys.executable, "-c", "import json, tracing_project; "
                               "print(json.dumps(tracing_project.TracingProject().source_paths))"],
        cwd=root / "tracing", capture_output=True, text=True, check=True, timeout=120).stdout)
    out = subprocess.run(["node", str(HERE / "catapult_model.js"), str(root), str(paths), str(path)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    model = json.loads(out.strip().splitlines()[-1])
    rank = {t["name"]: t["slices"] for t in model["threads"] if t["slices"]}
    return {"rank_slices": rank, "async_slices": sum(t["async_slices"] for t in model["threads"]),
            "counters": model["counters"], "flows": model["flows"], "bounds_ns": model["bounds_ns"],
            "errors": model["warnings"]}


# --- the runs ---------------------------------------------------------------------------------------

def _grouped_run():
    from test_timeline import _grouped_trace  # noqa: PLC0415 (a sibling test module's small trace)

    return sim.simulate(_grouped_trace(), topologies.build("leaf_spine", num_gpus=4, gpus_per_server=1))


@pytest.fixture(scope="module")
def small_run(small_step_trace):
    graph = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=1, gpus_per_leaf=4, oversubscription=2)
    return sim.simulate(small_step_trace, graph)


def _written(res, path: Path, monkeypatch=None, limit=None) -> tuple[Path, dict]:
    if limit is not None:
        monkeypatch.setattr(timeline, "MAX_TIMELINE_FLOWS", limit)
    timeline.write_timeline(res, path)
    return path, json.loads(path.read_text())


def _check(got: dict, want: dict, doc: dict, *, arrows: bool = True, shift: bool = False,
           counters: str = "counters") -> None:
    assert got["errors"] in ({}, []), got["errors"]
    assert got["rank_slices"] == want["rank_slices"]
    assert got["async_slices"] == want["async_slices"] == doc["otherData"]["flows_written"]
    assert got["counters"] == want[counters]
    if arrows:
        assert got["flows"] == want["flows"] > 0
    lo, hi = want["bounds_ns"]
    if shift:   # catapult shifts the model so that it starts at 0
        assert got["bounds_ns"][1] - got["bounds_ns"][0] == pytest.approx(hi - lo, abs=1)
    else:
        assert got["bounds_ns"] == [lo, hi]


LOADERS = {
    "perfetto": (_perfetto_shell, perfetto_counts, {"arrows": True, "counters": "counter_series"}),
    "catapult": (_catapult, catapult_counts, {"arrows": False, "shift": True}),
}


@pytest.fixture(params=sorted(LOADERS))
def loader(request):
    find, load, opts = LOADERS[request.param]
    if find() is None:
        pytest.skip(f"{request.param} loader not installed (see docs/report.md, timeline.json)")
    return load, opts


@pytest.mark.parametrize("case", ["small", "sampled", "overlap_tracks"])
def test_a_real_loader_shows_every_event_of_the_file(loader, case, small_run, tmp_path, monkeypatch):
    load, opts = loader
    if case == "small":
        path, doc = _written(small_run, tmp_path / "t.json")
    elif case == "sampled":   # fewer flows than the run has: the file states the stride, the loader agrees
        path, doc = _written(small_run, tmp_path / "t.json", monkeypatch, limit=100)
        assert doc["otherData"]["flow_sampling_stride"] > 1
    else:
        path, doc = _written(_grouped_run(), tmp_path / "t.json")
        assert any("(overlap 2)" in e["args"].get("name", "") for e in doc["traceEvents"] if e["ph"] == "M")
    _check(load(path, tmp_path), file_counts(doc), doc, **opts)


def test_a_real_loader_shows_the_main_jobs_timeline_whole(loader, tmp_path):
    """The built-in main job through the CLI: the loader's counts, the file's statement and the CLI's line."""
    load, opts = loader
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "sim", "--trace", "ds_v3.parquet", "--topo", "fat_tree",
                           "--out", str(out), "--no-report"], capture_output=True, text=True, timeout=1200,
                          check=True)
    doc = json.loads((out / "timeline.json").read_text())
    other = doc["otherData"]
    stride = other["flow_sampling_stride"]
    line = f"timeline.json holds one flow in {stride} ({other['flows_written']:,} of {other['flows_total']:,}"
    assert (line in proc.stdout) == (stride > 1)
    summary = json.loads((out / "summary.json").read_text())
    assert other["flows_total"] == summary["flows"] and other["flows_skipped"] == 0
    _check(load(out / "timeline.json", tmp_path), file_counts(doc), doc, **opts)
