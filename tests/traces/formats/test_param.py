"""PARAM basic comms traces and PyTorch Execution Traces.

Real ETs: the expected rows and bytes are computed here from the tensor descriptors
``[id, storage, offset, numel, elem_bytes, device]`` with plain json. PARAM basic traces: no real sample
is available, so the inputs are written here from the documented record layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traces.formats.param import looks_like_param, read_param
from traces.readers import ingest
from traces.schema import TraceError

ET = Path(__file__).parents[2] / "data" / "traces" / "pytorch_et"
DLRM = [ET / "01_param_dlrm_8rank_rank0_et_whole.json", ET / "02_param_dlrm_8rank_rank1_et_whole.json"]
CHAKRA = ET / "03_param_resnet_2gpu_chakra_et_collective_subset.json"


def _tensor_list(value):
    if isinstance(value, list) and len(value) == 6 and isinstance(value[5], str):
        return [value]
    return [t for v in value for t in _tensor_list(v)] if isinstance(value, list) else []


def _expected_dlrm(path: Path, world: int = 8) -> tuple[int, int]:
    rows = total = 0
    for node in json.loads(path.read_text())["nodes"]:
        if node["name"] != "record_param_comms" or "wait" in node["inputs"]:
            continue
        name = node["inputs"][4]
        data_bytes = sum(t[3] * t[4] for t in _tensor_list(node["inputs"][0]))
        rows += 1
        # all_to_all(v): count is per peer, so bytes = input bytes / world (divisible in this file)
        if name.startswith("all_to_all"):
            assert data_bytes % world == 0
            data_bytes //= world
        total += data_bytes
    return rows, total


def test_et_schema_101_two_ranks() -> None:
    df = ingest(DLRM)
    rows0, bytes0 = _expected_dlrm(DLRM[0])
    rows1, bytes1 = _expected_dlrm(DLRM[1])
    assert len(df) == rows0 + rows1 == 16
    assert int(df["bytes"].sum()) == bytes0 + bytes1
    assert sorted(df["rank"].unique()) == [0, 1]
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 8 and meta["source"] == "pytorch-et"
    assert df["t_start_s"].isna().all()
    # The uneven all_to_allv with in_split [96, 224, 288, 1664, 592, 96, 192, 240] int32 elements.
    uneven = df[df["split_bytes"].map(len) > 0]
    assert len(uneven) == 2
    assert tuple(uneven.iloc[0]["split_bytes"]) == tuple(4 * s for s in (96, 224, 288, 1664, 592, 96, 192, 240))
    assert uneven.iloc[0]["count"] == 3392 // 8
    # Rank 0 and rank 1 issue the same sequence of collectives.
    pivot = df.pivot_table(index=["comm", "seq"], columns="rank", values="op", aggfunc="first")
    assert (pivot[0] == pivot[1]).all()


def test_et_chakra_schema() -> None:
    nodes = json.loads(CHAKRA.read_text())["nodes"]
    expected_rows = expected_bytes = 0
    sizes = {"Float": 4, "Long": 8}
    for node in nodes:
        if node["name"] != "record_param_comms":
            continue
        attrs = {a["name"]: a["value"] for a in node["attrs"]}
        if attrs["collective_name"] == "wait":
            continue
        expected_rows += 1
        expected_bytes += attrs["in_msg_nelems"] * sizes[attrs["dtype"]]
    df = ingest(CHAKRA)
    assert (len(df), int(df["bytes"].sum())) == (expected_rows, expected_bytes) == (21, 307323096)
    assert set(df["rank"]) == {1}  # rank 1 of 2, from the calls' own rank argument
    assert df.attrs["collsim"]["comms"] == {"pg:0": [0, 1]}
    bcast = df[df["op"] == "Broadcast"]
    assert len(bcast) == 6 and (bcast["root"] == 0).all()
    assert (df["device"] == 1).all()


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text(json.dumps(records))
    return path


def test_param_basic_trace(tmp_path: Path) -> None:
    ranks = [0, 1, 2, 3]
    for r in ranks:
        peer = r ^ 1
        recs = [
            {"comms": "init", "req": -1},
            {"comms": "all_reduce", "in_msg_size": 1000, "out_msg_size": 1000, "dtype": "float",
             "world_size": 4, "pg_id": 0, "startTime_ns": 1_000_000 + r},
            {"comms": "all_gather_base", "in_msg_size": 10, "out_msg_size": 40, "dtype": "bfloat16",
             "world_size": 4, "pg_id": 0, "startTime_ns": 2_000_000},
            {"comms": "reduce_scatter", "in_msg_size": 40, "out_msg_size": 10, "dtype": "half",
             "world_size": 4, "pg_id": 0, "startTime_ns": 3_000_000},
            {"comms": "all_to_allv", "in_msg_size": 10, "out_msg_size": 10, "dtype": "int",
             "in_split": [1, 2, 3, 4], "out_split": [1, 2, 3, 4], "world_size": 4, "pg_id": 0,
             "startTime_ns": 4_000_000},
            {"comms": "broadcast", "in_msg_size": 8, "out_msg_size": 8, "dtype": "long", "root": 2,
             "world_size": 4, "pg_id": 0, "startTime_ns": 5_000_000},
            {"comms": "send" if r % 2 == 0 else "recv", "in_msg_size": 5, "out_msg_size": 5, "dtype": "float",
             "src_rank": r if r % 2 == 0 else peer, "dst_rank": peer if r % 2 == 0 else r,
             "global_ranks": [min(r, peer), max(r, peer)], "pg_id": 1 + r // 2, "startTime_ns": 6_000_000},
            {"comms": "wait", "req": 3},
            {"comms": "barrier", "req": 4},
        ]
        _write(tmp_path / f"{r}.json", recs)
    df = ingest(tmp_path)
    assert len(df) == 4 * 6
    per_rank = 1000 * 4 + 10 * 2 + 10 * 2 + (10 // 4) * 4 + 8 * 8 + 5 * 4
    assert (df.groupby("rank")["bytes"].sum() == per_rank).all()
    a2a = df[df["op"] == "AllToAll"].iloc[0]
    assert tuple(a2a["split_bytes"]) == (4, 8, 12, 16)
    bcast = df[df["op"] == "Broadcast"]
    assert (bcast["root"] == 2).all()
    p2p = df[df["op"].isin(["Send", "Recv"])]
    assert (p2p["nranks"] == 2).all() and (p2p["seq"] == 0).all()
    send0 = p2p[p2p["rank"] == 0].iloc[0]
    assert (send0["op"], send0["root"]) == ("Send", 1)  # peer's comm rank in [0, 1]
    meta = df.attrs["collsim"]
    assert meta["comms"]["pg:0"] == ranks and meta["world_size"] == 4
    starts = df.loc[df["op"] == "AllReduce", "t_start_s"].to_numpy()
    assert np.allclose(starts, [0.0, 1e-9, 2e-9, 3e-9], rtol=0, atol=1e-12)  # startTime_ns from the earliest
    notes = " ".join(meta["notes"])
    assert "'wait'" in notes and "'barrier'" in notes and "'init'" in notes


def test_param_basic_skips_are_counted(tmp_path: Path) -> None:
    recs = [{"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "complex64", "world_size": 2},
            {"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "float", "world_size": 2},
            {"comms": "send", "in_msg_size": 4, "dtype": "float", "world_size": 2}]
    path = _write(tmp_path / "rank1.json", recs)
    df, report = read_param([path])
    assert len(df) == 1 and report.skipped_total == 2
    assert report.examples["Send without its peer rank"].endswith("rank1.json:record 2")
    with pytest.raises(TraceError, match="rank1.json:record"):
        read_param([path], strict=True)


def test_detection_and_mixed_kinds(tmp_path: Path) -> None:
    assert looks_like_param('[{"comms": "all_reduce", "in_msg_size": 1}]')
    assert looks_like_param(DLRM[0].read_text()[:2000])
    assert not looks_like_param('{"traceEvents": []}')
    basic = _write(tmp_path / "0.json", [{"comms": "all_reduce", "in_msg_size": 1, "dtype": "float"}])
    with pytest.raises(TraceError, match="mixed"):
        read_param([basic, CHAKRA])


def _et_node(nid: int, name: str, values: list, types: list[str], out_values: list | None = None) -> dict:
    return {"id": nid, "name": name, "ctrl_deps": 1,
            "inputs": {"values": values, "shapes": [], "types": types},
            "outputs": {"values": out_values or [], "shapes": [], "types": []}, "attrs": []}


def test_et_process_group_init_and_p2p(tmp_path: Path) -> None:
    # Schema 1.0.3+ layout without attrs: members come from the process_group:init node.
    groups = [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [], "group_size": 4, "group_count": 2},
              {"pg_name": "1", "pg_desc": "pp", "ranks": [1, 3], "group_size": 2, "group_count": 2}]
    t = [5, 77, 0, 6, 2, "cuda:3"]  # 6 bf16 elements on cuda:3
    nodes = [
        _et_node(2, "process_group:init", [json.dumps(groups)], ["String"]),
        _et_node(10, "record_param_comms", [[t], 1, ["0", "default_pg"], 3, "allreduce", [], []],
                 ["GenericList[Tensor(c10::BFloat16)]"], [[t]]),
        _et_node(11, "record_param_comms", [t, 2, ["1", "pp"], 0, "recv", [], []], ["Tensor(c10::BFloat16)"], [t]),
        _et_node(12, "record_param_comms", [t, 3, ["1", "pp"], 0, "send", [], []], ["Tensor(c10::BFloat16)"], [t]),
        _et_node(13, "record_param_comms", [4, ["1", "pp"], 1, "wait", [], []], ["Int"]),
    ]
    path = tmp_path / "et_rank3.json"
    path.write_text(json.dumps({"schema": "1.0.3-chakra.0.0.4", "pid": 1, "nodes": nodes}))
    df = ingest(path)
    assert df["op"].tolist() == ["AllReduce", "Recv", "Send"]
    assert set(df["rank"]) == {3} and set(df["device"]) == {3} and set(df["bytes"]) == {12}
    assert df.attrs["collsim"]["comms"] == {"pg:0": [0, 1, 2, 3], "pg:1": [1, 3]}
    p2p = df[df["comm"] == "pg:1"]
    assert p2p["root"].tolist() == [0, 0] and p2p["nranks"].tolist() == [2, 2]
    assert p2p["seq"].tolist() == [0, 0]  # first Recv from and first Send to global rank 1
