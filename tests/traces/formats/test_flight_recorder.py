"""PyTorch Flight Recorder dumps (pickle and JSON), built from the definition in PyTorch's
``torch/csrc/distributed/c10d/FlightRecorderDetail.hpp`` (``getCollectiveTrace``, ``getPgConfig``,
``dump_json``): no real dump is public, so each field is written as that code writes it."""

from __future__ import annotations

import json
import pickle
import sys
import types
from pathlib import Path

import pytest

from traces.formats.flight_recorder import load_dump, read_flight_recorder
from traces.readers import detect_format, ingest
from traces.schema import TraceError

WORLD = 4


def _entry(k, pg, name, in_sizes, out_sizes, dtype="Float", duration=None, p2p=False):
    e = {"record_id": k, "pg_id": 0 if pg[0] == "0" else 1, "process_group": pg, "thread_name": "pt_main",
         "thread_id": "140", "collective_seq_id": k, "p2p_seq_id": 0, "op_id": k, "profiling_name": name,
         "time_created_ns": 1_700_000_000_000_000_000 + 1000 * k, "input_sizes": in_sizes, "input_dtypes": [dtype],
         "output_sizes": out_sizes, "output_dtypes": [dtype], "state": "completed",
         "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "retired": True,
         "timeout_ms": 600000, "is_p2p": p2p}
    if duration is not None:
        e["duration_ms"] = duration
    return e


def _dump(rank, timed=True):
    world, tp = ("0", "default_pg"), ("1", "tp")
    tp_ranks = [0, 1] if rank < 2 else [2, 3]
    me = tp_ranks.index(rank)
    entries = [
        _entry(0, world, "nccl:all_reduce", [[1024, 4]], [[1024, 4]], duration=0.5 if timed else None),
        _entry(1, tp, "nccl:_all_gather_base", [[256]], [[512]], dtype="BFloat16", duration=0.25 if timed else None),
        _entry(2, world, "nccl:broadcast", [[8]], [[8]], dtype="Long"),
        _entry(3, world, "nccl:coalesced", [], []),
        _entry(4, tp, f"nccl:send {me}->{1 - me}", [[64]], [], p2p=True),
        _entry(5, tp, f"nccl:recv {me}<-{1 - me}", [], [[64]], p2p=True),
    ]
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(WORLD)))},
           "1": {"name": "1", "desc": "tp", "ranks": str(tp_ranks)}}
    status = {"0": {"last_enqueued_collective": 3, "last_started_collective": 3, "last_completed_collective": 3}}
    return {"version": "2.4", "comm_lib_version": "2.21.5", "pg_config": cfg, "pg_status": status, "entries": entries}


def _write(folder: Path, as_json: bool, timed: bool = True) -> list[Path]:
    folder.mkdir(exist_ok=True)
    out = []
    for rank in range(WORLD):
        path = folder / f"nccl_trace_rank_{rank}"
        dump = _dump(rank, timed)
        if as_json:  # dump_json: tuples become lists
            path.write_text(json.dumps(dump))
        else:  # torch's pickler writes protocol 2 with plain dicts, lists, tuples, strings, numbers
            path.write_bytes(pickle.dumps(dump, protocol=2))
        out.append(path)
    return out


@pytest.mark.parametrize("as_json", [False, True])
def test_dump_rows_ranks_and_groups(tmp_path, as_json):
    files = _write(tmp_path / "fr", as_json)
    assert detect_format(files[0]) == "flight_recorder"
    df = ingest(tmp_path / "fr")
    meta = df.attrs["collsim"]
    # group "1" is [0, 1] in the dumps of ranks 0-1 and [2, 3] in those of ranks 2-3: two communicators
    assert meta["comms"] == {"pg:0": [0, 1, 2, 3], "pg:1@0": [0, 1], "pg:1@2": [2, 3]}
    assert meta["world_size"] == 4 and len(df) == 4 * 5  # the coalesced marker is no row
    r0 = df[df["rank"] == 0].set_index("op")
    assert r0.loc["AllReduce", "count"] == 4096 and r0.loc["AllReduce", "dtype"] == "fp32"
    assert r0.loc["AllReduce", "duration_s"] == pytest.approx(0.5e-3)
    assert r0.loc["AllGather", "count"] == 256 and r0.loc["AllGather", "dtype"] == "bf16"
    assert r0.loc["Broadcast", "root"] == 0 and r0.loc["Broadcast", "dtype"] == "int64"
    assert r0.loc["Send", "root"] == 1 and r0.loc["Recv", "root"] == 1
    # the two TP groups share the name "1" on different ranks: each process's group holds its own ranks
    r2 = df[(df["rank"] == 2) & (df["op"] == "Send")]
    assert r2["root"].tolist() == [1]
    assert df[df["op"] == "AllReduce"]["t_start_s"].min() == 0.0
    assert any("coalesced" in n for n in meta["notes"])
    assert any("roots not recorded" in n for n in meta["notes"])
    assert df.attrs["collsim"]["ingest"]["disagreeing_collectives"] == 0


def test_missing_durations_are_noted(tmp_path):
    _write(tmp_path / "fr", as_json=False, timed=False)
    notes = ingest(tmp_path / "fr").attrs["collsim"]["notes"]
    assert any("without duration_ms" in n and "TORCH_NCCL_ENABLE_TIMING" in n for n in notes)
    assert any("no durations in the input" in n for n in notes)


class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/collsim_pwned"),))


def test_pickle_with_objects_is_refused_without_running_them(tmp_path):
    dump = _dump(0)
    dump["entries"][0]["frames"] = _Boom()
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    Path("/tmp/collsim_pwned").unlink(missing_ok=True)
    with pytest.raises(TraceError, match="nccl_trace_rank_0: not a readable Flight Recorder pickle .refusing"):
        load_dump(path)
    with pytest.raises(TraceError, match="refusing to load __builtin__.getattr"):  # Path.touch via getattr
        ingest(path)
    assert not Path("/tmp/collsim_pwned").exists()


def test_torch_list_builders_make_plain_lists(tmp_path, monkeypatch):
    # torch's pickler writes typed lists as torch.jit._pickle.build_intlist([...]): allowed, a plain list.
    fake = types.ModuleType("torch.jit._pickle")

    def build_intlist(values):
        return values

    build_intlist.__module__ = "torch.jit._pickle"
    build_intlist.__qualname__ = "build_intlist"
    fake.build_intlist = build_intlist
    for name in ("torch", "torch.jit"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch.jit._pickle", fake)

    class IntList(list):
        def __reduce__(self):
            return (build_intlist, (list(self),))

    dump = _dump(1)
    dump["entries"][0]["input_sizes"] = [IntList([1024, 4])]
    raw = pickle.dumps(dump, protocol=2)
    assert b"build_intlist" in raw
    path = tmp_path / "nccl_trace_rank_1"
    path.write_bytes(raw)
    monkeypatch.delitem(sys.modules, "torch.jit._pickle")  # the reader never imports anything
    assert load_dump(path)["entries"][0]["input_sizes"] == [[1024, 4]]


def test_rank_must_be_in_the_file_name(tmp_path):
    path = tmp_path / "trace.pkl"
    path.write_bytes(pickle.dumps(_dump(0), protocol=2))
    with pytest.raises(TraceError, match="does not record its rank"):
        read_flight_recorder([path])


def test_tutorial_mismatch_is_reported_and_seq_follows_collective_seq_id(tmp_path):
    # PyTorch's Flight Recorder tutorial (docs/source/... "End-to-End Example: Debugging a Mismatched
    # Collective"): 2 ranks all_reduce a (3, 4) tensor twice, rank 0 alone then all_reduces a (4, 5) one, then
    # both all_reduce (3, 4) twice more. Rank 1's ring buffer is taken to have dropped its first entry.
    world = ("0", "default_pg")
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    ops = {0: [[3, 4]] * 2 + [[4, 5]] + [[3, 4]] * 2, 1: [[3, 4]] * 4}
    for rank, shapes in ops.items():
        entries = [_entry(k, world, "nccl:all_reduce", [s], [s]) for k, s in enumerate(shapes)]
        for k, e in enumerate(entries):
            e["collective_seq_id"] = k + 1
        if rank == 1:
            entries = entries[1:]
        dump = {"version": "2.5", "pg_config": cfg, "pg_status": {}, "entries": entries}
        (tmp_path / f"trace_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    df = ingest(tmp_path)
    per_rank = {r: list(zip(g["seq"], g["count"], strict=True)) for r, g in df.groupby("rank")}
    assert per_rank == {0: [(0, 12), (1, 12), (2, 20), (3, 12), (4, 12)], 1: [(1, 12), (2, 12), (3, 12)]}
    rep = df.attrs["collsim"]["ingest"]
    # collective 2: rank 0 all_reduces 20 elements, rank 1 12: the mismatch the tutorial's analyser finds
    assert rep["disagreeing_collectives"] == 1
    assert rep["disagreeing_example"] == "comm pg:0 seq 2: rank 0 AllReduce 20 fp32, rank 1 AllReduce 12 fp32"
