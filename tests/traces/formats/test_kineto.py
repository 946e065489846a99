"""Kineto reader on real PyTorch profiler traces: expected rows and bytes are counted here with plain json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from traces.formats.kineto import looks_like_kineto, read_kineto
from traces.readers import ingest
from traces.schema import TraceError

KINETO = Path(__file__).parents[2] / "data" / "traces" / "kineto"
NEW_FORMAT = [
    "01_hta_ddp_2rank_rank0_collective_subset.json",
    "06_tracelens_mi300_rccl_8rank_rank0_collective_subset.json",
    "07_tracelens_b200_vllm_8rank_rank0_collective_subset.json",
]
# Element sizes of the c10 type names that occur in these files (bytes).
C10_BYTES = {"Float": 4, "Long": 8, "BFloat16": 2, "float": 4, "long": 8, "long int": 8, "int": 4}


def _events(name: str) -> list[dict]:
    return json.loads((KINETO / name).read_text())["traceEvents"]


def _expected_new(name: str) -> tuple[int, int, int]:
    """(rows, bytes, ignored waits) from the record_param_comms args, by SPEC's count rules."""
    rows = total = waits = 0
    for e in _events(name):
        a = e.get("args", {})
        if e.get("name") != "record_param_comms" or "Collective name" not in a:
            continue
        coll = a["Collective name"]
        if coll == "wait":
            waits += 1
            continue
        # allreduce / broadcast / allgather: the input element count is the per-rank count
        assert coll in ("allreduce", "broadcast", "_allgather_base")
        rows += 1
        total += a["In msg nelems"] * C10_BYTES[a["dtype"]]
    return rows, total, waits


@pytest.mark.parametrize("name", NEW_FORMAT)
def test_new_format_rows_and_bytes(name: str) -> None:
    rows, total, waits = _expected_new(name)
    df = ingest(KINETO / name)
    assert len(df) == rows
    assert int(df["bytes"].sum()) == total
    meta = df.attrs["collsim"]
    assert meta["ingest"]["skipped"] == {}
    if waits:
        assert any(f"ignored {waits} non-data record(s) 'wait'" in n for n in meta["notes"])


def test_hand_counted_totals_of_file_01() -> None:
    # By hand from the file: 3 × (2049000 + 7875584 + 6563840 + 6637568 + 2431040) fp32 AllReduces,
    # 3 × (53120 fp32 + 53 int64) Broadcasts.
    df = ingest(KINETO / NEW_FORMAT[0])
    allreduce = 3 * (2049000 + 7875584 + 6563840 + 6637568 + 2431040) * 4
    broadcast = 3 * (53120 * 4 + 53 * 8)
    assert df.groupby("op")["bytes"].sum().to_dict() == {"AllReduce": allreduce, "Broadcast": broadcast}
    assert (df.groupby("op").size().to_dict()) == {"AllReduce": 15, "Broadcast": 6}


def test_process_groups_and_seq() -> None:
    df = ingest(KINETO / NEW_FORMAT[2])
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"pg:3": list(range(8))}
    assert meta["world_size"] == 8
    row = df.iloc[0]
    # _allgather_base: In msg nelems 25136 (per rank), Out 201088 = 8 × 25136
    assert (row["op"], row["count"], row["dtype"], row["nranks"]) == ("AllGather", 25136, "bf16", 8)
    df1 = ingest(KINETO / NEW_FORMAT[0])
    assert list(df1["seq"]) == list(range(len(df1)))  # one comm, one rank: 0..n-1 in issue order
    assert np.all(np.diff(df1["t_start_s"].to_numpy()) >= 0)


def test_durations_are_the_linked_gpu_kernels() -> None:
    # Every collective of file 01 launched exactly one NCCL kernel: durations sum to the kernels' time.
    kernels = [e for e in _events(NEW_FORMAT[0]) if e.get("cat") == "kernel" and "nccl" in e["name"]]
    df = ingest(KINETO / NEW_FORMAT[0])
    assert len(kernels) == len(df)
    assert math.isclose(df["duration_s"].sum(), sum(k["dur"] for k in kernels) / 1e6, rel_tol=1e-9)
    assert (df["device"] == 0).all()


def _expected_old(name: str, world: int) -> tuple[int, int]:
    rows = total = 0
    for e in _events(name):
        if e.get("cat") != "user_annotation" or not e.get("name", "").startswith("nccl:"):
            continue
        a = e["args"]
        numel = int(np.prod(a["Input Dims"][0]))
        size = C10_BYTES[a["Input type"][0]]
        rows += 1
        total += (numel // world if e["name"] == "nccl:all_to_all" else numel) * size
    return rows, total


def test_old_format_two_ranks_merge() -> None:
    names = ["04_param_dlrm_8rank_worker0_whole.pt.trace.json", "05_param_dlrm_8rank_worker1_whole.pt.trace.json"]
    df = ingest([KINETO / n for n in names])
    rows0, bytes0 = _expected_old(names[0], 8)
    rows1, bytes1 = _expected_old(names[1], 8)
    assert len(df) == rows0 + rows1 == 16
    assert int(df["bytes"].sum()) == bytes0 + bytes1
    assert sorted(df["rank"].unique()) == [0, 1]
    # The same collective (comm, seq) has the same op and size on both ranks.
    pivot = df.pivot_table(index=["comm", "seq"], columns="rank", values="bytes", aggfunc="first")
    assert (pivot[0] == pivot[1]).all()
    assert df["duration_s"].notna().all()  # kernels found through the launches inside each annotation


def test_old_format_without_world_size() -> None:
    name = "02_hta_trace_compare_rank1_old_format_whole.json"
    rows, total = _expected_old(name, 2)
    df = ingest(KINETO / name)
    assert (len(df), int(df["bytes"].sum())) == (rows, total) == (2, 2 * 4432073 * 4)
    assert any("world_size" in n for n in df.attrs["collsim"]["notes"])


def test_detection() -> None:
    head = (KINETO / NEW_FORMAT[0]).read_text()[:4096]
    assert looks_like_kineto(head)
    assert not looks_like_kineto('[{"comms": "all_reduce"}]')


def test_trace_without_rank_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "norank.json"
    bad.write_text(json.dumps({"traceEvents": [{"name": "x", "ph": "X", "ts": 1}]}))
    with pytest.raises(TraceError, match="norank.json.*rank"):
        read_kineto([bad])


def test_skipped_records_are_counted_and_strict_raises(tmp_path: Path) -> None:
    ev = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 10, "dur": 1, "pid": 1, "tid": 1,
          "args": {"Collective name": "allreduce", "dtype": "ComplexFloat", "In msg nelems": 4,
                   "Out msg nelems": 4, "Group size": 2, "Process Group Name": "0",
                   "Process Group Ranks": "[0, 1]"}}
    ok = dict(ev, ts=20, args=dict(ev["args"], dtype="Float"))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": [ev, ok]}))
    df = ingest(path)
    assert len(df) == 1 and df["bytes"].iloc[0] == 16 and df["rank"].iloc[0] == 1
    skipped = df.attrs["collsim"]["ingest"]["skipped"]
    assert skipped == {"dtype not in the schema (ComplexFloat)": 1}
    with pytest.raises(TraceError, match="t.json:record_param_comms#0"):
        ingest(path, strict=True)


def test_uneven_all_to_all_split_bytes(tmp_path: Path) -> None:
    args = {"Collective name": "all_to_allv", "dtype": "Float", "In msg nelems": 60, "Out msg nelems": 40,
            "Group size": 4, "Process Group Name": "7", "Process Group Ranks": "[4, 5, 6, 7]",
            "In split size": "[1, 2, 3, 4]", "Out split size": "[1, 1, 1, 1]"}
    ev = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 5, "dur": 1, "pid": 1, "tid": 1,
          "args": args}
    path = tmp_path / "a2a.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 5, "world_size": 8}, "traceEvents": [ev]}))
    row = ingest(path).iloc[0]
    # 10 rows of 6 elements: 6, 12, 18, 24 elements of fp32 to comm ranks 0..3
    assert tuple(row["split_bytes"]) == (24, 48, 72, 96)
    assert row["count"] == 60 // 4 and row["bytes"] == 60


def test_send_recv_peer_from_rank_arg(tmp_path: Path) -> None:
    def rec(ts: int, coll: str, peer: int) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 1, "pid": 1, "tid": 1,
                "args": {"Collective name": coll, "dtype": "Half", "In msg nelems": 8, "Out msg nelems": 8,
                         "Group size": 2, "Process Group Name": "5", "Process Group Ranks": "[2, 6]", "Rank": peer}}

    path = tmp_path / "pp.json"
    events = [rec(1, "send", 1), rec(2, "recv", 1), rec(3, "send", 1)]
    path.write_text(json.dumps({"distributedInfo": {"rank": 2, "world_size": 8}, "traceEvents": events}))
    df = ingest(path)
    assert df["op"].tolist() == ["Send", "Recv", "Send"]
    assert df["root"].tolist() == [1, 1, 1]  # the peer's comm rank (global rank 6)
    assert df["seq"].tolist() == [0, 0, 1]  # per peer and direction
    assert df.attrs["collsim"]["comms"] == {"pg:5": [2, 6]}


def _with(tmp_path: Path, change) -> Path:
    data = json.loads((KINETO / NEW_FORMAT[0]).read_text())
    for event in data["traceEvents"]:
        if event.get("name") == "record_param_comms":
            change(event)
    path = tmp_path / "k.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("key, value", [("ts", "abc"), ("dur", [1]), ("dur", -5), ("args", [1, 2]), ("ts", math.inf)])
def test_events_with_fields_of_the_wrong_type_are_counted_not_crashed_on(tmp_path, key, value):
    path = _with(tmp_path, lambda e: e.__setitem__(key, value))
    changed = sum(e.get("name") == "record_param_comms" for e in _events(NEW_FORMAT[0]))
    df, report = read_kineto([path])
    reason = "Kineto event with a field of the wrong type (ts, dur, args, name, cat or ph)"
    assert len(df) == 0 and report.skipped[reason] == changed > 0
    assert report.examples[reason].startswith(f"{path}:event#")


def test_a_count_beyond_int64_and_a_bad_distributed_info_name_the_file(tmp_path):
    path = _with(tmp_path, lambda e: e["args"].__setitem__("In msg nelems", 10**30))
    with pytest.raises(TraceError, match=r"k\.json: rank 0 .*element count 1000000000000000000000000000000 is outside"):
        read_kineto([path])
    data = json.loads((KINETO / NEW_FORMAT[0]).read_text())
    path.write_text(json.dumps({**data, "distributedInfo": [1]}))
    with pytest.raises(TraceError, match=r"k\.json: 'distributedInfo' must be a JSON object"):
        read_kineto([path])


def test_json_nested_too_deeply_is_one_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceError, match=r"deep\.json: JSON nested too deeply"):
        ingest([path], format="kineto")
