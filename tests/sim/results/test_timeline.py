"""timeline.json against the Trace Event Format, and what Perfetto needs to open it whole."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import sim
import topologies
from sim.results import timeline

PHASES = {"X", "b", "e", "C", "M"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


@pytest.fixture(scope="module")
def result(small_step_trace):
    graph = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=1, gpus_per_leaf=4, oversubscription=2)
    return sim.simulate(small_step_trace, graph)


def validate_trace_events(doc: dict) -> dict[str, list[dict]]:
    """Check the JSON Object Format of the Trace Event Format; return the events by phase."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"} and doc["displayTimeUnit"] == "ms"
    by_ph: dict[str, list[dict]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        assert ev["ph"] in PHASES, ev
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str)
        by_ph[ev["ph"]].append(ev)
        if ev["ph"] == "M":
            assert ev["name"] in METADATA and isinstance(ev["args"], dict)
            continue
        assert isinstance(ev["ts"], int | float) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert isinstance(ev["tid"], int) and ev["dur"] >= 0
        if ev["ph"] in "be":
            assert isinstance(ev["id"], str | int) and ev.get("cat")
        if ev["ph"] == "C":
            assert ev["args"] and all(isinstance(v, int | float) for v in ev["args"].values())
    return by_ph


def test_structure_is_a_valid_trace(result, tmp_path):
    doc = json.loads(timeline.write_timeline(result, tmp_path / "t.json").read_text())
    by_ph = validate_trace_events(doc)
    assert by_ph["X"] and by_ph["b"] and by_ph["C"]


def test_complete_events_never_overlap_partially_on_a_track(result):
    by_ph = validate_trace_events(timeline.timeline_events(result))
    tracks = defaultdict(list)
    for ev in by_ph["X"]:
        tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False):
            assert b0 >= a1 - 1e-6 or b1 <= a1 + 1e-6  # disjoint or nested


def test_one_track_per_rank_with_every_collective_on_every_member(result):
    doc = timeline.timeline_events(result)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {names[(1, r)] for r in range(16)} == {f"rank {r}" for r in range(16)}
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
        seq.sort(key=lambda e: (e["ts"], e["ph"] == "b"))  # an end before a begin at the same instant
        assert [e["ph"] for e in seq] == ["b", "e"] * (len(seq) // 2)
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
