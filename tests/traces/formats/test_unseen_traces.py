"""Kineto traces and Execution Traces first read in session 22 (tests/data/traces, README rows 08-13, 04-05).

Expected rows come from the JSON with plain ``json`` (event and node names, ``Input Dims``), or from the
other format of the same program (the ResNet benchmark of param/HTA traced by both Kineto and ET).
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest

from traces.readers import ingest
from traces.schema import TraceError

DATA = Path(__file__).parents[2] / "data" / "traces"
K08 = DATA / "kineto" / "08_hta_ns_resolution_1gpu_rank0_pg_id_collective_subset.json"
K09 = DATA / "kineto" / "09_hta_ws16_rank0_old_format_collective_subset.json"
K10 = DATA / "kineto" / "10_hta_sampled_ws128_rank1_old_format_collective_subset.json"
K11 = DATA / "kineto" / "11_hta_trace_compare_test_rank1_old_format_whole.json"
K12 = DATA / "kineto" / "12_hta_no_record_shapes_rank1_first10_subset.json"
K13 = DATA / "kineto" / "13_hta_no_distributed_info_collective_subset.json"
ET04 = DATA / "pytorch_et_single_rank" / "04_param_resnet_1gpu_chakra_1.0.3_et_collective_subset.json"
ET05 = DATA / "pytorch_et_single_rank" / "05_param_linear_et_no_collectives_first40.json"
OPS = {"allreduce": "AllReduce", "broadcast": "Broadcast", "nccl:all_reduce": "AllReduce",
       "nccl:all_to_all": "AllToAll", "nccl:_all_gather_base": "AllGather",
       "nccl:_reduce_scatter_base": "ReduceScatter"}


def _events(path: Path) -> list[dict]:
    return json.loads(path.read_text())["traceEvents"]


def test_process_group_id_names_the_communicator():
    # The args hold `Process Group ID` 0 and no `Process Group Name`; distributedInfo.pg_config has uid 0,
    # pg_name "0". 25 allreduce + 10 broadcast records (10 `wait` records carry no data).
    names = Counter(e["args"]["Collective name"] for e in _events(K08) if e.get("name") == "record_param_comms")
    assert names == {"allreduce": 25, "broadcast": 10, "wait": 10}
    df = ingest([K08])
    assert df["op"].value_counts().to_dict() == {"AllReduce": 25, "Broadcast": 10}
    assert set(df["comm"]) == {"pg:0"} and df.attrs["collsim"]["comms"] == {"pg:0": [0]}


def test_kineto_and_execution_trace_of_one_program_agree():
    # HTA's ns-resolution trace and param's 1.0.3 ET come from the same 1-GPU ResNet benchmark: the ET's 21
    # collectives are the first 21 of the Kineto trace, op by op, and both readers name the group pg:0.
    k, e = ingest([K08]), ingest([ET04])
    key = ["op", "count", "dtype", "nranks", "comm"]
    assert len(e) == 21
    assert k[key].head(21).reset_index(drop=True).equals(e[key].reset_index(drop=True))


@pytest.mark.parametrize("path, world", [(K09, 16), (K10, 128)])
def test_old_format_rows_are_the_nccl_annotations(path, world):
    events = _events(path)
    ann = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("nccl:")]
    df = ingest([path])
    assert df["op"].value_counts().to_dict() == dict(Counter(OPS[e["name"]] for e in ann))
    assert df.attrs["collsim"]["world_size"] == world
    # An all_reduce's count is the product of its first Input Dims (fp32, 4 bytes each).
    dims = [math.prod(e["args"]["Input Dims"][0]) for e in ann if e["name"] == "nccl:all_reduce"]
    assert df[df["op"] == "AllReduce"]["count"].tolist() == dims


def test_old_format_annotation_without_kernel_has_no_duration():
    # K09: 80 NCCL kernels for 85 annotations; the 10 all_to_all annotations that launched none keep NaN.
    events = _events(K09)
    kernels = [e for e in events if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    assert len(kernels) == 80
    df = ingest([K09])
    assert df["duration_s"].isna().sum() == 10
    assert set(df[df["duration_s"].isna()]["op"]) == {"AllToAll"}


def test_single_annotation_trace_reads_its_one_row():
    (ann,) = [e for e in _events(K11) if e.get("name", "").startswith("nccl:")]
    df = ingest([K11])
    assert len(df) == 1 and df["rank"].tolist() == [1]
    assert df["count"].tolist() == [math.prod(ann["args"]["Input Dims"][0])]


def test_trace_without_shapes_is_refused_with_the_reason():
    # 10 nccl:all_reduce annotations with only `External id` and `Ev Idx` args (no record_shapes).
    with pytest.raises(TraceError, match=r"no collective operations.*10 nccl annotation without input shape"
                                         r".*record_shapes=True"):
        ingest([K12])


def test_trace_without_distributed_info_is_refused_naming_the_file():
    with pytest.raises(TraceError, match=r"13_hta_no_distributed_info.*no 'distributedInfo.rank'"):
        ingest([K13])


def test_execution_trace_without_collectives_beside_others(tmp_path):
    # A rank that made no collective call, named as param names it (no digits: no rank from the name either):
    # not an error about its rank; in a folder with another rank's ET, that one's rows.
    assert not any(n.get("name") == "record_param_comms" for n in json.loads(ET05.read_text())["nodes"])
    shutil.copy(ET05, tmp_path / "linear_et.json")
    with pytest.raises(TraceError, match="no collective operations found"):
        ingest([tmp_path / "linear_et.json"])
    shutil.copy(ET04, tmp_path / ET04.name)
    df = ingest([tmp_path])
    assert len(df) == 21
    assert any("linear_et.json" in n and "no record_param_comms node" in n for n in df.attrs["collsim"]["notes"])


FR = Path(__file__).parents[2] / "data" / "flight_recorder" / "tutorial_printed_dump_rank_0"


def test_flight_recorder_dump_printed_by_python_is_refused_with_the_reason():
    # PyTorch's tutorial shows the unpickled dump as Python prints it: `"process_group": ("0", "default_pg")`
    # at line 38, column 22 (the '(' of the tuple).
    text = FR.read_text()
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '("0", "default_pg")' in t)
    with pytest.raises(TraceError, match=rf"line {line} column 22 .*a '\(' there is a Python tuple"):
        ingest([FR])


def test_flight_recorder_tutorial_dump_as_json_reads_its_entry(tmp_path):
    # The same text with the tuple as a list and the `...` elision cut: one all_reduce of a [3, 4] Float tensor
    # (12 elements) on group "0" of ranks [0, 1]; the rank is the file name's trailing 0.
    text = FR.read_text().replace('("0", "default_pg")', '["0", "default_pg"]').replace("},\n    ...\n", "}\n")
    path = tmp_path / "nccl_trace_rank_0"
    path.write_text(text)
    df = ingest([path])
    assert df[["rank", "comm", "op", "count", "dtype", "nranks"]].values.tolist() == [
        [0, "pg:0", "AllReduce", 12, "fp32", 2]]
    assert df.attrs["collsim"]["comms"] == {"pg:0": [0, 1]}
