"""The ingest front door: path expansion, format detection, clear errors, torch-name helpers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from traces import ingest as api_ingest
from traces.readers import (
    FORMATS,
    RankMap,
    detect_format,
    expand_paths,
    ingest,
    split_bytes_of,
    torch_count,
    torch_op,
)
from traces.schema import TraceError

DATA = Path(__file__).parents[1] / "data" / "traces"
KINETO_FILE = DATA / "kineto" / "07_tracelens_b200_vllm_8rank_rank0_collective_subset.json"
ET_FILE = DATA / "pytorch_et" / "03_param_resnet_2gpu_chakra_et_collective_subset.json"

HEADS = {
    "inspector": '{"header":{"id":"0x7f","comm_name":"unknown","rank":2,"n_ranks":8,"nnodes":1},"metadata":{},'
                 '"coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8192,"coll_exec_time_us":6}}\n',
    "profiler": '[\n{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0, "pid": 2, "tid": 1, "ts": 1.0, '
                '"args": {"SeqNum": 0, "CommHash": 1, "Rank": 0, "Count": 2, "Datatype": "ncclFloat32"}},\n{}]\n',
    "kineto": '{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": []}',
    "param": '[{"comms": "all_reduce", "req": 3, "in_msg_size": 8, "out_msg_size": 8, "dtype": "float"}]',
}


@pytest.mark.parametrize("fmt", list(HEADS))
def test_detects_each_structured_format(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "trace.txt"  # the extension says nothing: content decides
    path.write_text(HEADS[fmt])
    assert detect_format(path) == fmt


def test_detects_real_files() -> None:
    assert detect_format(KINETO_FILE) == "kineto"
    assert detect_format(ET_FILE) == "param"


def test_detects_nccl_log(tmp_path: Path) -> None:
    if importlib.util.find_spec("traces.formats.nccl.reader") is None:
        pytest.skip("traces.formats.nccl.reader is not written yet")
    path = tmp_path / "rank0.log"
    path.write_text("host:123:456 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 "
                    "datatype 7 op 0 root 0 comm 0x55aa nranks 2 stream 0x0\n")
    assert detect_format(path) == "nccl"


def test_undetectable_names_file_and_formats(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# just some notes\nnothing to see\n")
    with pytest.raises(TraceError) as err:
        detect_format(path)
    message = str(err.value)
    assert "notes.md" in message and all(f in message for f in FORMATS)


@pytest.mark.parametrize("content, reason", [(b"", "empty file"), (b"   \n\n", "empty file"),
                                             (b"\x00\x01\x02\xff" * 64, "binary"), (b"\xff\xfe\xfa" * 99, "binary")])
def test_bad_files(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=f"bad.json: {reason}"):
        ingest(path)
    with pytest.raises(TraceError, match=f"bad.json: {reason}"):
        ingest(path, format="kineto")


def test_malformed_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text('{"traceEvents": [\n  {"ph": "X"},\n  {"ph": X}\n]}\n')
    with pytest.raises(TraceError, match=r"k.json:3: malformed JSON"):
        ingest(path)


def test_mixed_formats_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="mixed trace formats.*kineto.*param"):
        ingest([KINETO_FILE, ET_FILE])
    with pytest.raises(TraceError, match="unknown format 'csv'.*kineto"):
        ingest(KINETO_FILE, format="csv")


def test_paths_folders_and_missing(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text("[]")
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / ".hidden").write_text("x")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in expand_paths(tmp_path)] == ["a.json", "b.json"]
    assert [p.name for p in expand_paths([str(tmp_path / "b.json"), tmp_path / "a.json"])] == ["b.json", "a.json"]
    with pytest.raises(TraceError, match="nope.json: no such file"):
        expand_paths(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="holds no files"):
        expand_paths(tmp_path / "sub")
    with pytest.raises(TraceError, match="no input files"):
        expand_paths([])


def test_public_api_forwards_and_reports() -> None:
    seen: list[float] = []
    df = api_ingest([KINETO_FILE], progress=seen.append)
    assert sum(seen) == KINETO_FILE.stat().st_size
    meta = df.attrs["collsim"]
    assert meta["ingest"]["records"] == len(df) == 1
    assert meta["ingest"]["files"] == [str(KINETO_FILE)]
    assert isinstance(meta["notes"], list)


def test_torch_names_and_counts() -> None:
    assert [torch_op(n) for n in ("all_reduce", "_reduce_scatter_base", "alltoall_base", "recvanysource",
                                  "nccl:broadcast", "batch_isend_irecv", "wait")] == [
        "AllReduce", "ReduceScatter", "AllToAll", "Recv", "Broadcast", None, None]
    # AllGather: per-rank send count; ReduceScatter: per-rank receive count; AllToAll: per peer.
    assert torch_count("AllGather", 10, 80, 8) == 10
    assert torch_count("AllGather", 0, 80, 8) == 10
    assert torch_count("ReduceScatter", 80, 10, 8) == 10
    assert torch_count("AllToAll", 80, 80, 8) == 10
    assert split_bytes_of([1, 1], 8, 2, 4) == ()  # even: no split list
    assert split_bytes_of([1, 3], 8, 2, 4) == (8, 24)
    assert split_bytes_of([1, 3], 8, 3, 4) == ()  # not one entry per rank


def test_rank_map() -> None:
    # Two processes of a 2-rank world; a 2-rank comm where their ranks are swapped.
    seen = [("p0", "w", 0), ("p1", "w", 1), ("p0", "s", 1), ("p1", "s", 0)]
    m = RankMap.build(seen, {"w": 2, "s": 2, "lone": 2})
    assert m.world_comm == "w"  # equal sizes: the comm seen by most processes, then by name
    m = RankMap.build(seen + [("p0", "w", 0)], {"w": 4, "s": 2})
    assert m.world_comm == "w" and m.members["s"] == [1, 0]
    assert m.global_rank("p1", "s", 0) == 1
    m = RankMap.build(seen, {"w": 2, "s": 2, "big": 3})
    assert m.world_comm == "big" and m.unknown == {"w", "s"}


def test_et_and_kineto_of_one_process_agree() -> None:
    # kineto/01 is rank 0 and ET/03 is rank 1 of the same 2-rank DDP job: the same collectives.
    kin = ingest(DATA / "kineto" / "01_hta_ddp_2rank_rank0_collective_subset.json")
    et = ingest(ET_FILE)
    assert kin[["op", "count", "dtype"]].values.tolist() == et[["op", "count", "dtype"]].values.tolist()


def test_json_helpers_reject_non_json(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"traceEvents": "nope"}))
    with pytest.raises(TraceError, match="x.json: not a Kineto trace"):
        ingest(path)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-be-bom"])
def test_text_with_a_byte_order_mark_reads_as_the_plain_file(tmp_path: Path, encoding: str) -> None:
    # Windows PowerShell's `>` writes UTF-16 LE with a BOM, Notepad a UTF-8 BOM: same rows as the plain file
    log = Path(__file__).parents[1] / "data" / "nccl_logs" / "constructed_launchers.log"
    for source, name in ((log, "rank.log"), (KINETO_FILE, "rank0.json")):
        text = source.read_text(encoding="utf-8")
        raw = b"\xfe\xff" + text.encode("utf-16-be") if encoding == "utf-16-be-bom" else text.encode(encoding)
        marked = tmp_path / name
        marked.write_bytes(raw)
        assert detect_format(marked) == detect_format(source)
        got, want = ingest(marked), ingest(source)
        assert got.drop(columns=["context"], errors="ignore").equals(want.drop(columns=["context"], errors="ignore"))
    # FF FE followed by what is not text stays binary data
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\xff\xfe" + b"\xfa\xff\xfe" * 99)
    with pytest.raises(TraceError, match="junk.log: binary data"):
        ingest(junk)


def test_gzip_json_traces(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "rank0.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(KINETO_FILE.read_bytes()))
    assert detect_format(packed) == "kineto"
    assert ingest(packed)["bytes"].tolist() == ingest(KINETO_FILE)["bytes"].tolist()
    torn = tmp_path / "torn.json.gz"
    torn.write_bytes(packed.read_bytes()[:200])
    with pytest.raises(TraceError, match="torn.json.gz"):
        ingest(torn, format="kineto")


def test_api_raises_the_cli_error_with_the_readers_hint() -> None:
    # sample_02 (real, NVIDIA/nccl-era RADDet log): Init lines of 2 ranks, no COLL line.
    log = Path(__file__).parents[1] / "data" / "nccl_logs" / "sample_02.log"
    with pytest.raises(TraceError) as err:
        ingest(log)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{log}: no collective operations found")
    assert "NCCL_DEBUG_SUBSYS=COLL" in message
    df = ingest(log, allow_empty=True)  # the empty trace, with what the log said about communicators
    assert df.empty and df.attrs["collsim"]["comms"] == {"0x245d75cdaf12704b": [0, 1]}
