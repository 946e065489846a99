"""timeline.json against the Trace Event Format, and what Perfetto needs to open it whole."""

from __future__ import annotations

import copy
import json
import math
from collections import defaultdict

import pytest

import sim
import topologies
from sim.results import timeline


@pytest.fixture(scope="module")
def result(small_step_trace):
    graph = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=1, gpus_per_leaf=4, oversubscription=2)
    return sim.simulate(small_step_trace, graph)


#: Phases of the Trace Event Format (JSON Object Format) this validator knows.
PHASES = {"B", "E", "X", "i", "I", "b", "e", "n", "s", "t", "f", "C", "M"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}


def _ns(ts) -> int:
    """A µs timestamp as the loader keeps it: Perfetto rounds ``ts * 1000`` to whole nanoseconds."""
    return round(ts * 1000)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _nest(spans: list[tuple[int, int, str]], where) -> None:
    """Slices of one track must nest: each starts after the previous ends or ends inside it."""
    stack: list[tuple[int, int, str]] = []
    for a, b, name in sorted(spans, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1][1] <= a:
            stack.pop()
        assert not stack or b <= stack[-1][1], f"{where}: {name!r} [{a}, {b}] ns overlaps {stack[-1]} partially"
        stack.append((a, b, name))


def validate_trace_events(doc: dict) -> dict[str, list[dict]]:
    """Check a document against the Trace Event Format (JSON Object Format) and what Perfetto's JSON importer
    needs to show every event; return the events by phase.

    The rules, from the format's definition and the importer's behaviour: the document is JSON without NaN
    or Infinity; ``traceEvents`` a list, ``displayTimeUnit`` ms or ns; every event has a known ``ph``, an
    integer ``pid`` (and ``tid`` where given), a finite ``ts`` >= 0 (metadata aside); ``X`` has a finite
    ``dur`` >= 0; on one thread track ``X`` slices and ``B``/``E`` pairs nest (partial overlaps are dropped or
    moved off the track), ``E`` closes the innermost open ``B``; async ``b``/``e`` pair up per (pid, cat,
    name, id) with every ``e`` closing an open ``b`` and nothing left open, each key's slices nesting; v1
    flows (``s``/``t``/``f``) share (cat, name, id), start with one ``s`` inside a slice of its thread and
    do not go back in time; v2 flows (``bind_id``) have a direction, one ``flow_out`` per id and every
    ``flow_in`` at or after it; counters carry a non-empty object of finite numbers; metadata names are
    known and carry ``args.name`` (a string) or ``args.sort_index`` (an int). Times are compared in whole
    nanoseconds, as the loader keeps them.
    """
    json.dumps(doc, allow_nan=False)   # raises on NaN / Infinity, which JSON has no literal for
    assert isinstance(doc.get("traceEvents"), list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    by_ph: dict[str, list[dict]] = defaultdict(list)
    threads: dict[tuple, list] = defaultdict(list)
    be_open: dict[tuple, list] = defaultdict(list)
    asyncs: dict[tuple, list] = defaultdict(list)
    flows1: dict[tuple, list] = defaultdict(list)
    for ev in doc["traceEvents"]:
        ph = ev.get("ph")
        assert ph in PHASES, ev
        assert isinstance(ev.get("pid"), int) and not isinstance(ev["pid"], bool), ev
        assert "tid" not in ev or (isinstance(ev["tid"], int) and not isinstance(ev["tid"], bool)), ev
        assert isinstance(ev.get("name", ""), str) and isinstance(ev.get("cat", ""), str), ev
        assert isinstance(ev.get("args", {}), dict), ev
        by_ph[ph].append(ev)
        if ph == "M":
            assert ev["name"] in METADATA, ev
            key = "sort_index" if ev["name"].endswith("sort_index") else "name"
            want = int if key == "sort_index" else str
            assert isinstance(ev["args"].get(key), want), ev
            # Perfetto's JSON importer reads tid 0 as "not set" and uses the pid: a thread track needs tid != 0
            assert not ev["name"].startswith("thread") or ev.get("tid"), ev
            continue
        assert _number(ev.get("ts")) and ev["ts"] >= 0, ev
        t = _ns(ev["ts"])
        track = (ev["pid"], (ev.get("tid") or ev["pid"]))
        if ph == "X":
            assert ev.get("tid"), ev   # tid 0 would land on the process's main thread (tid == pid)
            assert _number(ev.get("dur")) and ev["dur"] >= 0, ev
            threads[track].append((t, t + _ns(ev["dur"]), ev["name"]))
        elif ph in "BE":
            threads.setdefault(track, [])
            be_open[track].append((t, ev))
        elif ph in "ben":
            assert ("id" in ev) != ("id2" in ev), f"async event needs one of id / id2: {ev}"
            ident = ev.get("id", json.dumps(ev.get("id2"), sort_keys=True))
            assert isinstance(ident, str | int) and not isinstance(ident, bool), ev
            asyncs[(ev["pid"], ev.get("cat", ""), ev["name"], ident)].append((t, ph, ev))
        elif ph in "stf":
            assert isinstance(ev.get("id"), str | int), ev
            flows1[(ev.get("cat", ""), ev["name"], ev["id"])].append((t, ph, ev))
        elif ph == "C":
            assert ev["args"] and all(_number(v) for v in ev["args"].values()), ev
    # B/E: stack per thread in time order (ties in file order), then nest together with the X slices
    for track, items in be_open.items():
        stack = []
        for t, ev in sorted(items, key=lambda x: x[0]):
            if ev["ph"] == "B":
                stack.append((t, ev["name"]))
            else:
                assert stack, f"E without an open B on {track}: {ev}"
                t0, name = stack.pop()
                assert ev.get("name", name) == name and t >= t0, (ev, name)
                threads[track].append((t0, t, name))
        assert not stack, f"B never closed on {track}: {stack}"
    for track, spans in threads.items():
        _nest(spans, track)
    for key, items in asyncs.items():
        stack, spans = [], []
        for t, ph, ev in sorted(items, key=lambda x: x[0]):
            if ph == "b":
                stack.append(t)
            elif ph == "e":
                assert stack, f"async end without a begin: {ev}"
                spans.append((stack.pop(), t, key[2]))
        assert not stack, f"async slice never ended: {key}"
        _nest(spans, key)
    for key, items in flows1.items():
        items.sort(key=lambda x: x[0])
        assert [ph for _, ph, _ in items].count("s") == 1 and items[0][1] == "s", key
        t, _, ev = items[0]
        spans = threads.get((ev["pid"], (ev.get("tid") or ev["pid"])), [])
        assert any(a <= t <= b for a, b, _ in spans), f"flow start outside any slice of its thread: {ev}"
    outs: dict = {}
    for ev in (e for evs in by_ph.values() for e in evs if "bind_id" in e):
        assert ev.get("flow_in") or ev.get("flow_out"), f"bind_id without flow_in / flow_out: {ev}"
        if ev.get("flow_out") and not ev.get("flow_in"):
            assert ev["bind_id"] not in outs, f"two flow_out for bind_id {ev['bind_id']}"
            outs[ev["bind_id"]] = _ns(ev["ts"])
    for ev in (e for evs in by_ph.values() for e in evs if e.get("flow_in") and not e.get("flow_out")):
        assert ev["bind_id"] in outs and _ns(ev["ts"]) >= outs[ev["bind_id"]], f"flow arrow into the past: {ev}"
    return by_ph


def test_structure_is_a_valid_trace(result, tmp_path):
    doc = json.loads(timeline.write_timeline(result, tmp_path / "t.json").read_text())
    by_ph = validate_trace_events(doc)
    assert by_ph["X"] and by_ph["b"] and by_ph["C"]


def test_complete_events_never_overlap_on_a_track_in_whole_nanoseconds(result):
    """Lanes are laid out on the times the loader keeps (ns), so rounding cannot make two slices overlap."""
    by_ph = validate_trace_events(timeline.timeline_events(result))
    tracks = defaultdict(list)
    for ev in by_ph["X"]:
        assert ev["ts"] * 1000 == pytest.approx(round(ev["ts"] * 1000), abs=1e-6)   # whole ns in the file
        tracks[(ev["pid"], ev["tid"])].append((_ns(ev["ts"]), _ns(ev["ts"]) + _ns(ev["dur"])))
    for spans in tracks.values():
        spans.sort()
        assert all(b0 >= a1 for (_, a1), (b0, _) in zip(spans, spans[1:], strict=False))


def test_one_track_per_rank_with_every_collective_on_every_member(result):
    doc = timeline.timeline_events(result)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert sorted(names.values()) == sorted(f"rank {r}" for r in range(16))   # one track each, no overflow
    assert 0 not in {tid for _, tid in names}   # Perfetto reads tid 0 as unset (the pid's main thread)
    coll = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(coll) == 16 * len(result.collectives)
    assert all(isinstance(e["args"]["bytes"], int) for e in coll)


def test_async_flows_pair_up_without_overlap_per_id_and_carry_integer_bytes(result):
    doc = timeline.timeline_events(result)
    evs = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] in "be":
            evs[(e["cat"], e["id"])].append(e)
    begins = 0
    for seq in evs.values():
        # one id's slices follow one another strictly: no end and begin share a timestamp, so the pairing
        # does not depend on how a loader orders equal timestamps
        seq.sort(key=lambda e: _ns(e["ts"]))
        assert [e["ph"] for e in seq] == ["b", "e"] * (len(seq) // 2)
        assert all(_ns(b["ts"]) > _ns(a["ts"]) for a, b in zip(seq[1::2], seq[2::2], strict=False))
        begins += len(seq) // 2
        for e in seq[::2]:
            assert isinstance(e["args"]["bytes"], int) and e["args"]["bytes"] > 0
    n = doc["otherData"]["flows_written"]
    assert begins == n == doc["otherData"]["flows_total"] == result.summary["flows"]


def test_flow_arrows_go_from_a_collective_to_its_flows(result):
    doc = timeline.timeline_events(result)
    outs = {e["bind_id"]: e for e in doc["traceEvents"] if e.get("flow_out")}
    ins = [e for e in doc["traceEvents"] if e.get("flow_in")]
    assert ins and all(e["bind_id"] in outs for e in ins)
    for e in ins:
        coll = outs[e["bind_id"]]
        assert coll["ts"] - 1e-3 <= e["ts"] <= coll["ts"] + coll["dur"] + 1e-3


def test_counter_tracks_for_the_hottest_links(result):
    doc = timeline.timeline_events(result)
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "C"}
    assert 0 < len(names) <= timeline.COUNTER_LINKS and all(n.startswith("util ") for n in names)


def test_sampling_is_stated_in_the_file(result, monkeypatch):
    monkeypatch.setattr(timeline, "MAX_TIMELINE_FLOWS", 100)
    doc = timeline.timeline_events(result)
    total = result.summary["flows"]
    stride = doc["otherData"]["flow_sampling_stride"]
    assert stride == timeline.flow_stride(total, 100) > 1
    assert doc["otherData"]["flows_written"] <= 100 and f"one flow in {stride}," in doc["otherData"]["sampling"]


def _grouped_trace():
    """Two ops of one group per rank, issued together, ending apart: the second goes to a second track."""
    import numpy as np
    import pandas as pd

    from traces.schema import new_metadata, validate

    rows = []
    for comm, size in (("a", 8 << 20), ("b", 1 << 20)):
        for r in range(4):
            rows.append(dict(rank=r, comm=comm, seq=0, op="AllReduce", count=size, dtype="uint8", bytes=size,
                             root=-1, nranks=4, t_start_s=0.0, duration_s=np.nan, host="", device=-1, context="",
                             algo="", proto="", group=7))
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(4, {"a": [0, 1, 2, 3], "b": [0, 2, 1, 3]}, "test", gpus_per_node=1)
    return validate(df)


def test_overlapping_group_ops_open_whole_on_a_second_track():
    res = sim.simulate(_grouped_trace(), topologies.build("leaf_spine", num_gpus=4, gpus_per_server=1))
    doc = timeline.timeline_events(res)
    by_ph = validate_trace_events(doc)
    assert len(by_ph["X"]) == 4 * len(res.collectives)
    names = {e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}
    # both ops start at 0 and have different ends: nested slices could mislead, so they never share a track
    assert names == {f"rank {r}" for r in range(4)} | {f"rank {r} (overlap 2)" for r in range(4)}


@pytest.mark.parametrize("breakage", ["partial_overlap", "dangling_end", "nan", "bool_pid", "arrow_without_out",
                                      "string_counter", "unknown_phase", "async_never_ends"])
def test_the_validator_rejects_what_a_loader_would_drop(result, breakage):
    """The checks are not vacuous: each breakage of a valid document is caught."""
    doc = copy.deepcopy(timeline.timeline_events(result))
    evs = doc["traceEvents"]
    x = next(e for e in evs if e["ph"] == "X")
    if breakage == "partial_overlap":
        evs.append({**x, "ts": x["ts"] + x["dur"] / 2 + 0.001, "bind_id": -1})
    elif breakage == "dangling_end":
        evs.append({"ph": "e", "pid": 2, "tid": 0, "cat": "flow", "name": "gpu0", "id": "nowhere", "ts": 1.0})
    elif breakage == "nan":
        evs.append({"ph": "C", "pid": 3, "name": "util x", "ts": 1.0, "args": {"percent": float("nan")}})
    elif breakage == "bool_pid":
        evs.append({**x, "pid": True})
    elif breakage == "arrow_without_out":
        evs.append({"ph": "b", "pid": 2, "tid": 0, "cat": "flow", "name": "gpuX", "id": "x/0", "ts": 1.0,
                    "bind_id": 10 ** 9, "flow_in": True})
        evs.append({"ph": "e", "pid": 2, "tid": 0, "cat": "flow", "name": "gpuX", "id": "x/0", "ts": 2.0})
    elif breakage == "string_counter":
        evs.append({"ph": "C", "pid": 3, "name": "util x", "ts": 1.0, "args": {"percent": "high"}})
    elif breakage == "unknown_phase":
        evs.append({**x, "ph": "Q"})
    elif breakage == "async_never_ends":
        evs.append({"ph": "b", "pid": 2, "tid": 0, "cat": "flow", "name": "gpuY", "id": "y/0", "ts": 1.0})
    with pytest.raises((AssertionError, ValueError)):
        validate_trace_events(doc)


def test_the_written_file_is_strict_json(result, tmp_path):
    text = timeline.write_timeline(result, tmp_path / "t.json").read_text()
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))   # no NaN / Infinity


@pytest.mark.slow
def test_the_main_jobs_timeline_passes_the_validator(tmp_path):
    """The built-in main job (sampled flows, hot-link counters, 32 ranks) against every rule above."""
    from traces import read_trace

    res = sim.simulate(read_trace("ds_v3.parquet"), "fat_tree", completion_quantile=0.01)
    doc = json.loads(timeline.write_timeline(res, tmp_path / "t.json").read_text())
    by_ph = validate_trace_events(doc)
    assert len(by_ph["X"]) > 0 and len(by_ph["b"]) == doc["otherData"]["flows_written"] > 0 and by_ph["C"]


def _cli(argv, capsys):
    from sim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return out


def test_the_terminal_states_the_files_own_sampling(tmp_path, capsys, monkeypatch):
    """The CLI's sampling line is read off the same statement the file carries (``otherData``)."""
    from traces import write_trace

    path = write_trace(_grouped_trace(), tmp_path / "step.parquet")   # 4 ranks, two AllReduces
    monkeypatch.setattr(timeline, "MAX_TIMELINE_FLOWS", 5)
    out = _cli(["--trace", str(path), "--topo", "leaf_spine", "--set", "num_gpus=4,gpus_per_server=1",
                "-o", str(tmp_path / "o"), "--no-report"], capsys)
    other = json.loads((tmp_path / "o" / "timeline.json").read_text())["otherData"]
    assert other["flow_sampling_stride"] > 1 and other["flows_skipped"] == 0
    assert (f"timeline.json holds one flow in {other['flow_sampling_stride']} ({other['flows_written']:,} of "
            f"{other['flows_total']:,}; all collectives)") in " ".join(out.split())


@pytest.mark.slow
def test_a_run_the_engine_samples_states_the_stride_it_wrote(tmp_path, capsys):
    """746,620 flows: the engine keeps every 8th (a power-of-two sample), the writer every 2nd of those, so
    the file holds one in 16; the terminal once said "one flow in 13" (its own ceil(total / limit))."""
    out = _cli(["--trace", "llama3_70b_train.parquet", "--topo", "fat_tree", "-o", str(tmp_path / "o"),
                "--no-report"], capsys)
    doc = json.loads((tmp_path / "o" / "timeline.json").read_text())
    other = doc["otherData"]
    assert other["flows_total"] == json.loads((tmp_path / "o" / "summary.json").read_text())["flows"]
    assert sum(e["ph"] == "b" for e in doc["traceEvents"]) == other["flows_written"]
    assert other["flows_written"] == -(-other["flows_total"] // other["flow_sampling_stride"])
    assert (f"timeline.json holds one flow in {other['flow_sampling_stride']} ({other['flows_written']:,} of "
            f"{other['flows_total']:,}; all collectives)") in " ".join(out.split())
