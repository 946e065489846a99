"""Real NCCL logs (tests/data/nccl_logs/sample_*.log, first line `# source:`) and two constructed ones.

Every expected number below was counted by hand from the file text, as each comment says.
"""

from __future__ import annotations

import math

import pytest

from tests.conftest import DATA
from traces.formats.nccl.reader import read_nccl_logs

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every sample through both chunk readers (conftest)

LOGS = DATA / "nccl_logs"


def read(name):
    return read_nccl_logs([LOGS / name])


def test_samples_keep_their_source_line():
    for path in sorted(LOGS.glob("sample_*.log")):
        assert path.read_text().startswith("# source: https://"), path.name


@pytest.mark.parametrize("name", ["sample_02.log", "sample_12.log", "sample_13.log", "sample_14.log",
                                  "sample_18.log", "sample_20.log"])
def test_samples_without_coll_lines_give_no_rows_and_skip_nothing(name):
    # grep ': opCount ' finds nothing in these six files.
    df, report = read(name)
    assert len(df) == 0
    assert report.skipped_total == 0
    assert any("no usable COLL lines" in n for n in df.attrs["collsim"]["notes"])


def test_sample_04_old_send_form():
    # 7 COLL lines: 6 `Send:` (4 on comm 0x7f5128002e10 with root 1, 2 on 0x7f516c002e10 with root 0) and
    # 1 `Recv:` (0x7f5128002e10, root 1); each count 2420736 datatype 7 (fp32) = 9682944 bytes; 7 x = 67780608.
    df, report = read("sample_04.log")
    assert len(df) == 7 and report.skipped_total == 0
    assert df["bytes"].sum() == 67_780_608
    assert (df["bytes"] == 9_682_944).all()
    assert sorted(df["op"]) == ["Recv"] + ["Send"] * 6
    a = df[df["comm"] == "comm-0x7f5128002e10"]
    b = df[df["comm"] == "comm-0x7f516c002e10"]
    # Sends to peer 1 on comm A are the 0th..3rd to that peer; the Recv is the 0th from peer 1.
    assert a[a["op"] == "Send"]["seq"].tolist() == [0, 1, 2, 3]
    assert a[a["op"] == "Recv"][["seq", "root"]].values.tolist() == [[0, 1]]
    assert b["seq"].tolist() == [0, 1] and (b["root"] == 0).all()
    # opCounts 12,14,16,18 / d60,d62 all differ on each comm and the Recv is not next to a same-opCount
    # line of its comm: no group.
    assert (df["group"] == -1).all()
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 1 and set(meta["comms"]) == {"comm-0x7f5128002e10", "comm-0x7f516c002e10"}
    assert any("no Init line" in n for n in meta["notes"])


def test_sample_07_tp_collectives():
    # 7 lines: AllGather x3 and ReduceScatter x2 of count 2097152 fp32 (8388608 B each) = 41943040 B, and
    # AllReduce x2 of count 1 fp32 (4 B each): total 41943048 B. pid 191369 logs 4 lines, pid 191370 3.
    df, report = read("sample_07.log")
    assert len(df) == 7 and report.skipped_total == 0
    assert df["bytes"].sum() == 41_943_048
    assert df["op"].value_counts().to_dict() == {"AllGather": 3, "ReduceScatter": 2, "AllReduce": 2}
    assert (df["root"] == -1).all()  # root is -1 for non-rooted ops (NCCL prints 0)
    # No Init line: the two pointers (one per pid) carry [nranks=2] and agree on the collectives both logged
    # (opCount e: ReduceScatter, f: AllGather, same count and dtype), so they are one communicator of 2.
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"comm-0x55e290bd32d0": [0, 1]} and meta["world_size"] == 2
    assert meta["comm_inference"]["comm-0x55e290bd32d0"]["confidence"] == "medium"
    # Comm ranks by pid; seq aligned on opCount: pid 191370's log starts one collective earlier (opCount d).
    per_pid = {r: list(g["seq"]) for r, g in df.groupby("rank")}
    assert per_pid == {0: [1, 2, 3, 4], 1: [0, 1, 2]}
    assert df.groupby("rank")["device"].first().to_dict() == {0: 0, 1: 1}  # the [dev] of each pid's lines
    assert report.disagreeing == 0
    assert set(df["host"]) == {"hopper01"}
    assert df["t_start_s"].isna().all()


def test_sample_09_hard_wrapped_broadcasts():
    # 6 `Broadcast:` lines, each wrapped before the stream pointer; count 16384 datatype 0 (int8):
    # 16384 B each, 98304 B in all; roots 3,3,3,4,4,4.
    df, report = read("sample_09.log")
    assert len(df) == 6 and report.skipped_total == 0
    assert df["bytes"].sum() == 98_304
    assert sorted(df["root"]) == [3, 3, 3, 4, 4, 4]
    assert (df["nranks"] == 8).all() and (df["dtype"] == "int8").all()
    # pids 3874078 and 3874080 each broadcast twice on pointer 0x155468002fb0: seq 0 then 1.
    twice = df.groupby("rank").filter(lambda g: len(g) == 2)
    assert twice.groupby("rank")["seq"].apply(list).tolist() == [[0, 1], [0, 1]]
    # No Init line, opCount 0 throughout: pids 3874076/78/80 on 0x155468002fb0 log Broadcast root 3 (and
    # 78/80 then root 4), a prefix of one another: 3 members of one 8-rank communicator (the world view).
    # pid 3874075 logs only Broadcast root 4 on another pointer: no evidence it belongs there, so it stays
    # alone (its other 7 members unknown) and is numbered after the world.
    meta = df.attrs["collsim"]
    ev = meta["comm_inference"]
    assert ev["comm-0x155468002fb0"]["members_seen"] == 3 and ev["comm-0x155468002fb0"]["confidence"] == "medium"
    assert ev["comm-0x15545c002fb0"] == {"members_seen": 1, "nranks": 8, "confidence": "none",
                                          "evidence": ev["comm-0x15545c002fb0"]["evidence"]}
    assert meta["comms"]["comm-0x155468002fb0"] == list(range(8)) and meta["comms"]["comm-0x15545c002fb0"][0] == 8
    assert meta["world_size"] == 9 and any("in no world-spanning communicator" in n for n in meta["notes"])


def test_sample_02_interleaved_init_lines():
    # Two `commId 0x245d75cdaf12704b - Init COMPLETE` lines (rank 1 pid 803564, rank 0 pid 803563); a third,
    # garbled init body for rank 0 sits mid-line after another process's prefix.
    df, _ = read("sample_02.log")
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"0x245d75cdaf12704b": [0, 1]}
    assert meta["world_size"] == 2


def test_sample_12_cut_rings_are_partial():
    # `comm ... rank 0 nRanks 24 nNodes 3 localRanks 8`; two ring lines of 20 ranks (the <=2.22 limit).
    df, _ = read("sample_12.log")
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 24 and meta["gpus_per_node"] == 8
    (comm,) = meta["rings"]
    assert meta["rings"][comm][0] == [0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9, 16, 23, 22, 21]
    assert meta["rings"][comm][1][:8] == [0, 7, 6, 5, 4, 3, 2, 9]
    assert meta["rings_partial"] == {comm: [0, 1]}


def test_sample_13_v2_4_init_lines():
    # Init COMPLETE for rank 15 and rank 19 of 64, one GPU per host (64 hosts).
    df, _ = read("sample_13.log")
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 64 and meta["gpus_per_node"] == 1
    assert list(meta["comms"].values()) == [list(range(64))]


def test_sample_18_v2_4_single_process_two_gpus():
    # One pid (11907), comm 0x7ef9d4137620 rank 0 cudaDev 1 and comm 0x7ef9d414a840 rank 1 cudaDev 0: one
    # communicator of 2; `Channel 00 :    0   1` printed by its rank 0; bare `NCCL version 2.4.2+cuda9.0`.
    df, _ = read("sample_18.log")
    meta = df.attrs["collsim"]
    assert meta["nccl_version"] == "2.4.2+cuda9.0"
    assert meta["gpus_per_node"] == 2
    assert list(meta["comms"].values()) == [[0, 1]]
    assert list(meta["rings"].values()) == [[[0, 1]]]


def test_all_samples_at_once():
    # 7 + 7 + 6 = 20 COLL rows over the nine samples; one file each, pointers keyed by (host, pid).
    paths = sorted(LOGS.glob("sample_*.log"))
    df, report = read_nccl_logs(paths)
    assert len(df) == 20 and report.skipped_total == 0
    assert df["bytes"].sum() == 67_780_608 + 41_943_048 + 98_304


def test_constructed_v2_29():
    # 10 COLL lines: AllReduce x2 (count 1024 bf16 = 2048 B), AlltoAll x2 (256 fp32 = 1024 B),
    # Gather x2 (100 fp8_e4m3 = 100 B), Scatter x2 (8 int64 = 64 B) -> 8 rows, 6472 B;
    # PutSignal x1 and WaitSignal x1 are counted as skipped.
    df, report = read("constructed_v2_29.log")
    assert len(df) == 8 and df["bytes"].sum() == 6472
    assert report.skipped_total == 2
    assert any("PutSignal" in r for r in report.skipped) and any("WaitSignal" in r for r in report.skipped)
    assert set(df["op"]) == {"AllReduce", "AllToAll", "Gather", "Scatter"}
    assert df.loc[df["op"] == "Gather", "root"].tolist() == [1, 1]
    assert df.loc[df["op"] == "AllToAll", "root"].tolist() == [-1, -1]
    ar = df[df["op"] == "AllReduce"].sort_values("rank")
    # Earliest stamp is `[2025-07-25 19:54:57]`; the AllReduces are at 58.25 and 58.26.
    assert ar["t_start_s"].tolist() == pytest.approx([1.25, 1.26])
    assert ar["algo"].tolist() == ["RING", "RING"] and ar["proto"].tolist() == ["LL", "LL"]
    assert df.loc[df["op"] == "Scatter", "t_start_s"].tolist() == pytest.approx([3.0, 3.0])
    assert ar["device"].tolist() == [0, 1]
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"0xabc123": [0, 1]}
    assert meta["rings"] == {"0xabc123": [[0, 1], [0, 1]]} and meta["rings_partial"] == {}
    assert meta["nccl_version"] == "2.29.1+cuda12.9"


def test_constructed_launchers_and_pitfalls():
    # 9 COLL bodies: AllReduce x4 (count 2097152 fp32 = 8388608 B) on commId 0xfeed, AllGather x4 (1000 fp16
    # = 2000 B) on the split comms 0xc1/0xc2 (one without any prefix, one after an interleaved prefix), and
    # one AllReduce cut after `recvbuff` (skipped): 8 rows, 33554432 + 8000 = 33562432 B.
    df, report = read("constructed_launchers.log")
    assert len(df) == 8 and df["bytes"].sum() == 33_562_432
    assert report.skipped_total == 1 and "malformed" in next(iter(report.skipped))
    assert report.examples[next(iter(report.skipped))].endswith("constructed_launchers.log:21")
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"0xfeed": [0, 1, 2, 3], "0xc1": [0, 1], "0xc2": [2, 3]}
    assert meta["rings"] == {"0xfeed": [[0, 1, 3, 2]]}
    assert meta["gpus_per_node"] == 2
    ar = df[df["op"] == "AllReduce"].sort_values("rank")
    assert ar["host"].tolist() == ["node-1", "node-1", "node-2", "node-2"]
    assert ar["device"].tolist() == [0, 1, 0, 1]
    # TUNING `8388608 Bytes -> Algo 1 proto 2` (2.20-2.22 ids) is RING/SIMPLE; every rank runs it.
    assert (ar["algo"] == "RING").all() and (ar["proto"] == "SIMPLE").all()
    # External stamps on ranks 0 and 1 only (19:54:57.101122 and .201122).
    assert ar["t_start_s"].tolist()[:2] == pytest.approx([0.0, 0.1])
    assert all(math.isnan(t) for t in ar["t_start_s"].tolist()[2:])
    ag = df[df["op"] == "AllGather"].sort_values("rank")
    assert ag["rank"].tolist() == [0, 1, 2, 3]
    assert ag["comm"].tolist() == ["0xc1", "0xc1", "0xc2", "0xc2"]
