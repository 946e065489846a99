"""NCCL profiler plugin (example plugin) traces. No real dump is stored here: inputs follow the
``fprintf`` layouts of ``ext-profiler/example/print_event.cc``, including the unquoted words that some
versions print (``"Stream": 0x...``, ``"datatype": ncclFloat32``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from traces.formats.nccl_profiler import looks_like_nccl_profiler, read_nccl_profiler
from traces.readers import detect_format, ingest
from traces.schema import TraceError

HASH = 1493613951195738943


def _ev(name: str, cat: str, ph: str, eid: int, pid: int, ts: float, args: dict | None = None) -> str:
    event = {"name": name, "cat": cat, "ph": ph, "id": eid, "pid": pid, "tid": 1, "ts": ts}
    if args is not None:
        event["args"] = args
    return json.dumps(event) + ","


def _file(path: Path, rank: int, nranks: int, *, int_dtype: bool = False) -> Path:
    pid = 500 + rank
    dtype = 7 if int_dtype else "ncclFloat32"
    lines = ["[", _ev("Group API", "GROUP_API", "b", 0, pid, 1.0, {"groupApiId": 0, "groupDepth": 1})]
    for i in range(3):
        api = _ev("AllReduce", "COLL_API", "b", i, pid, 10.0 + 100 * i,
                  {"count": 262144, "datatype": "@ncclFloat32", "root": 0, "GraphCaptured": 0, "Stream": "@0x4142e90"})
        lines.append(api.replace('"@', "").replace('@"', "").replace('32",', "32,").replace('e90"}', "e90}"))
        lines.append(_ev("AllReduce", "COLL", "b", i, pid, 11.0 + 100 * i,
                         {"SeqNum": i, "CommHash": HASH, "Rank": rank, "Count": 262144, "Datatype": dtype,
                          "Algorithm": "RING", "Protocol": "SIMPLE", "nChannels": 2}))
        lines.append(_ev("AllReduce", "COLL", "e", i, pid, 11.0 + 100 * i + 25.5))
    lines.append(_ev("Broadcast", "COLL_API", "b", 3, pid, 400.0,
                     {"count": 100, "datatype": "ncclInt8", "root": nranks - 1, "GraphCaptured": 0, "Stream": "0x1"}))
    lines.append(_ev("Broadcast", "COLL", "b", 3, pid, 401.0,
                     {"SeqNum": 3, "CommHash": HASH, "Rank": rank, "Count": 100, "Datatype": "ncclInt8",
                      "Algorithm": "RING", "Protocol": "LL", "nChannels": 1}))
    p2p = {"CommHash": HASH, "Rank": rank, "Count": 1024, "Datatype": "ncclBfloat16", "nChannels": 4}
    lines.append(_ev("Send", "P2P", "b", 0, pid, 500.0, dict(p2p, Peer=(rank + 1) % nranks)))
    lines.append(_ev("Send", "P2P", "e", 0, pid, 510.0))
    lines.append(_ev("Recv", "P2P", "b", 1, pid, 500.0, dict(p2p, Peer=(rank - 1) % nranks)))
    lines.append("{}]")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rows_bytes_durations(tmp_path: Path) -> None:
    for r in range(4):
        _file(tmp_path / f"prof-host-{r}.txt", r, 4)
    df = ingest(tmp_path)
    assert len(df) == 4 * 6
    per_rank = 3 * 262144 * 4 + 100 + 2 * 1024 * 2
    assert (df.groupby("rank")["bytes"].sum() == per_rank).all()
    ar = df[df["op"] == "AllReduce"]
    assert ar["duration_s"].map(lambda d: math.isclose(d, 25.5e-6)).all()
    assert set(ar["algo"]) == {"RING"} and set(ar["proto"]) == {"SIMPLE"}
    assert (df.loc[df["op"] == "Broadcast", "root"] == 3).all()  # from the preceding COLL_API event
    send = df[(df["op"] == "Send") & (df["rank"] == 3)].iloc[0]
    assert send["root"] == 0 and send["seq"] == 0
    assert df[df["op"] == "Recv"]["duration_s"].isna().all()  # no 'e' event written for it
    meta = df.attrs["collsim"]
    assert meta["comms"] == {str(HASH): [0, 1, 2, 3]} and meta["world_size"] == 4


def test_strict_json_and_integer_datatype(tmp_path: Path) -> None:
    path = _file(tmp_path / "p.txt", 0, 1, int_dtype=True)
    strict_json = [json.loads(line.rstrip(",")) for line in path.read_text().splitlines()
                   if line.startswith("{") and "COLL_API" not in line and "0x" not in line and line != "{}]"]
    path.write_text(json.dumps(strict_json + [{}]))  # the same events as one valid JSON array
    df, report = read_nccl_profiler([path])
    assert report.skipped_total == 0
    ar = df[df["op"] == "AllReduce"]
    assert len(ar) == 3 and set(ar["dtype"]) == {"fp32"}  # NCCL 2.23 printed the enum value 7


def test_malformed_line(tmp_path: Path) -> None:
    path = _file(tmp_path / "p.txt", 0, 2)
    lines = path.read_text().splitlines()
    lines[4] = '{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 9, "args": {"Count": [}},'
    path.write_text("\n".join(lines) + "\n")
    df, report = read_nccl_profiler([path])  # read what is valid, count the rest
    assert len(df) == 6 and report.skipped == {"malformed JSON event": 1}
    with pytest.raises(TraceError, match=r"p.txt:5: malformed JSON event"):
        read_nccl_profiler([path], strict=True)


def _rows(df):
    return df[["rank", "op", "count", "dtype", "root", "seq"]].values.tolist()


def test_truncated_tail_elision_and_stray_text_keep_the_valid_events(tmp_path: Path) -> None:
    want, _ = read_nccl_profiler([_file(tmp_path / "whole.txt", 0, 2)])
    lines = (tmp_path / "whole.txt").read_text().splitlines()
    # An elision line and stray characters between events (as pasted into issues), and the file cut in
    # the middle of its Recv event (the process was killed): 5 rows of 6 back, 3 things counted.
    damaged = lines[:4] + ["  ...", "#@!"] + lines[4:-3] + [lines[-3][:30]]
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(damaged))
    df, report = read_nccl_profiler([path])
    assert _rows(df) == _rows(want[want["op"] != "Recv"])
    assert report.skipped == {"text that is no JSON event (elision or stray characters)": 2,
                              "truncated last event (plugin stopped mid-write)": 1}
    assert report.examples["truncated last event (plugin stopped mid-write)"] == f"{path}:{len(damaged)}"


def test_pretty_printed_events_and_no_leading_bracket(tmp_path: Path) -> None:
    src = _file(tmp_path / "whole.txt", 0, 2)
    want, _ = read_nccl_profiler([src])
    lines = src.read_text().splitlines()
    headless = tmp_path / "headless.txt"  # the array's first line lost (a file cut at its start)
    headless.write_text("\n".join(lines[1:]) + "\n")
    assert detect_format(headless) == "profiler"
    strict = [json.loads(line.rstrip(",")) for line in lines if line.startswith("{") and "COLL_API" not in line
              and line != "{}]"]
    pretty = tmp_path / "pretty.txt"
    pretty.write_text(json.dumps(strict + [{}], indent=2))
    for path in (headless, pretty):
        df, report = read_nccl_profiler([path])
        assert report.skipped_total == 0
        got = _rows(df)
        assert got == _rows(want) if path is headless else len(got) == len(_rows(want))
    assert any("durations" in n or "sizes" in n for n in ingest(pretty).attrs["collsim"]["notes"])


def test_detection(tmp_path: Path) -> None:
    path = _file(tmp_path / "p.txt", 0, 2)
    assert looks_like_nccl_profiler(path.read_text())
    assert detect_format(path) == "profiler"
    assert not looks_like_nccl_profiler('[{"comms": "all_reduce"}]')
    assert not looks_like_nccl_profiler('{"traceEvents": [{"ph": "X"}]}')
