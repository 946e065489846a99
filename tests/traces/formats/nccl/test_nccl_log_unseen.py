"""Real NCCL logs first read in session 22 (tests/data/nccl_logs, each with its `# source:` line).

Every expected number was counted from the file text (grep -c ': opCount ', the lines themselves, hand
arithmetic in the comments), not taken from the reader's output.
"""

from __future__ import annotations

import math

import pytest

from tests.conftest import DATA
from traces.formats.nccl.reader import read_nccl_logs
from traces.schema import TraceError

pytestmark = pytest.mark.usefixtures("nccl_engine")  # both chunk readers (conftest)

LOGS = DATA / "nccl_logs"
S22 = ["slinky_srun_4node_2_23.log", "issue1352_rank_tag_after_info.log", "issue147_torn_broadcast.log",
       "rccl429_ranks_disagree.log", "issue1238_nranks1_trailing_space.log", "deepep330_external_timestamps.log",
       "vllm8978_init_start.log", "issue1814_init_complete_64ranks.log", "issue1936_init_rank_config.log",
       "accelerate3240_nranks_line_only.log", "issue1453_tuning_only_mpirun.log",
       "rtg_tracer_rccl_usec_timestamp_wrapped.log"]


def read(name):
    return read_nccl_logs([LOGS / name])


@pytest.mark.parametrize("name", S22)
def test_every_row_is_a_coll_line_of_the_file_and_nothing_is_skipped(name):
    text = (LOGS / name).read_text()
    assert text.startswith("# source: https://github.com/"), name
    df, report = read(name)
    assert len(df) == text.count(": opCount ")  # one COLL body per row; no body in the header line
    assert report.skipped_total == 0


def test_srun_prefixed_fsdp_log_of_nccl_2_23():
    # 9 COLL lines behind `srun -l` task tags: node-3 4 (AllGather 1606, 1607, Broadcast 1608, 1609), node-1 2,
    # node-2 3. Bytes: 6 AllGather x 2359808 fp32 = 56,635,392; Broadcast 1 int64 (datatype 4) x 2 = 16;
    # Broadcast 3145 uint8 (datatype 1) = 3145: 56,638,553 in all.
    df, _ = read("slinky_srun_4node_2_23.log")
    assert df.groupby("host").size().to_dict() == {"node-1": 2, "node-2": 3, "node-3": 4}
    assert int(df["bytes"].sum()) == 56_638_553
    assert sorted(df[df["op"] == "Broadcast"]["dtype"]) == ["int64", "int64", "uint8"]
    meta = df.attrs["collsim"]
    # No Init line: the three pointers of [nranks=4] agree on opCounts 1606-1608, so one communicator of 4
    # whose fourth member (node-0, which logged only a TUNING line) no COLL line shows.
    assert len(meta["comms"]) == 1 and meta["world_size"] == 4
    # NCCL prints TUNING on the rank that chose, here node-0 with no COLL line: nothing to attach it to.
    assert any("1 TUNING line(s) matched no COLL line" in n for n in meta["notes"])
    assert (df["algo"] == "").all()


def test_rank_tag_between_nccl_info_and_the_op_keeps_the_prefix():
    # NVIDIA/nccl#1352 prints `NCCL INFO [2] AllReduce: ...`: the host:pid:tid [dev] prefix is still the line's.
    df, _ = read("issue1352_rank_tag_after_info.log")
    assert df["op"].tolist() == ["AllReduce", "AllReduce", "AllGather"]
    assert set(df["host"]) == {"srv01"} and set(df["device"]) == {0}
    assert df["count"].tolist() == [1, 1, 8] and df["dtype"].tolist() == ["uint8", "uint8", "int8"]


def test_torn_2018_ddp_log():
    # Line 1 holds process 32619's empty head, then 32629's whole Broadcast; line 6 is a Broadcast body with no
    # prefix whose pointer (0x7f584405a260) no prefixed line shows: one unnamed process (host "").
    df, _ = read("issue147_torn_broadcast.log")
    assert len(df) == 6
    assert sorted(df["device"].tolist()) == [-1, 0, 1, 1, 5, 7]  # [dev] of pids 32615, 32617 x2, 32625, 32629
    assert (df["host"] == "").sum() == 1
    assert df["bytes"].sum() == 3 * 53 * 8 + 3 * 25503912 * 2  # int64 x 53 three times, fp16 (6) x 25503912


def test_rccl_ranks_calling_different_ops_are_not_joined():
    # Two pointers of [nranks=4] disagree at opCount 28c (AllReduce vs AllGather): without an Init line they
    # cannot be shown to be one communicator, so each stays alone (3 members unseen) and nothing is invented.
    df, _ = read("rccl429_ranks_disagree.log")
    meta = df.attrs["collsim"]
    assert len(meta["comms"]) == 2
    assert sorted(m.count(-1) for m in meta["comms"].values()) == [3, 3]
    assert df.groupby("comm")["op"].agg(set).map(sorted).tolist() in (
        [["AllReduce"], ["AllGather"]], [["AllGather"], ["AllReduce"]])


def test_single_rank_log_with_trailing_spaces():
    # 4 lines, opCount 0 each (a one-rank comm never moves it), 33554432 fp32 each: 4 x 134,217,728 B.
    df, _ = read("issue1238_nranks1_trailing_space.log")
    assert df["seq"].tolist() == [0, 1, 2, 3] and (df["nranks"] == 1).all()
    assert int(df["bytes"].sum()) == 4 * 134_217_728
    assert df.attrs["collsim"]["comms"] == {"comm-0x5631f0816b40": [0]}


def test_outer_logger_timestamps_give_issue_times():
    # 19:54:57.101122, .104187, .106029, .108492, .111227, 19:54:59.159245 -> seconds from the first.
    df, _ = read("deepep330_external_timestamps.log")
    want = [0.0, 0.003065, 0.004907, 0.007370, 0.010105, 2.058123]
    assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(df["t_start_s"], want, strict=True))
    assert df["count"].tolist() == [5, 8, 108, 8, 172, 8192] and (df["nranks"] == 32).all()


@pytest.mark.parametrize("name, comm, nranks", [
    ("vllm8978_init_start.log", "0x795520212f433144", 4),  # 4 `Init START` lines, ranks 0-3
    ("issue1814_init_complete_64ranks.log", "0x5ae77eb5ea4ec1ee", 64),  # ranks 32, 34, 35, 36 of 64
    ("issue1936_init_rank_config.log", "0x99de3aa2a03ab5f7", 2),  # `ncclCommInitRankConfig comm ...`
])
def test_init_only_logs_give_their_communicator(name, comm, nranks):
    df, report = read(name)
    meta = df.attrs["collsim"]
    assert len(df) == 0 and report.skipped_total == 0
    assert list(meta["comms"]) == [comm] and len(meta["comms"][comm]) == nranks
    assert any("NCCL_DEBUG_SUBSYS=COLL" in n for n in meta["notes"])


def test_init_start_lines_give_devices_per_host():
    # cudaDev 0..3 of four processes on cuda0003.
    df, _ = read("vllm8978_init_start.log")
    assert df.attrs["collsim"]["gpus_per_node"] == 4


def test_nranks_line_only_is_not_called_an_old_nccl():
    # A 2.20+ `comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d` line without its
    # Init COMPLETE line: no commId, but no sign of NCCL < 2.16 either. Two ring lines `Channel 0x/02 : 0 1`.
    df, _ = read("accelerate3240_nranks_line_only.log")
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"comm-0x11951a20": [0, 1]} and meta["gpus_per_node"] == 2
    assert meta["rings"] == {"comm-0x11951a20": [[0, 1], [0, 1]]}
    note = next(n for n in meta["notes"] if "without commId" in n)
    assert "2.20+" in note and "< 2.16" not in note


def test_tuning_lines_without_coll_lines_are_counted_in_a_note():
    # 14 `[0] host:pid:tid [0] NCCL INFO 262144 Bytes -> Algo 0 proto 1 time ...` lines (mpirun -l).
    df, _ = read("issue1453_tuning_only_mpirun.log")
    assert len(df) == 0
    assert any("14 TUNING line(s) matched no COLL line" in n for n in df.attrs["collsim"]["notes"])


def test_rccl_microsecond_prefix_and_an_unindented_wrap():
    # RCCL of 2019: `host:pid:tid [1] 1558545003174220 NCCL INFO AllReduce: ... comm` + newline + `0x7f80467b9770
    # [nranks=2] stream 0x...` (the continuation not indented). One row, the prefix's host and [dev] kept.
    df, report = read("rtg_tracer_rccl_usec_timestamp_wrapped.log")
    assert report.skipped_total == 0
    assert df[["host", "device", "op", "count", "dtype", "nranks"]].values.tolist() == [
        ["rocm-framework-3", 1, "AllReduce", 1001, "fp32", 2]]
    assert df["comm"].tolist() == ["comm-0x7f80467b9770"] and df["t_start_s"].tolist() == [0.0]


def test_rccl_microseconds_are_the_line_times(tmp_path):
    # Two such lines 2,500 us apart (the sample's line and one more, both unwrapped).
    line = ("rocm-framework-3:24888:25056 [1] {} NCCL INFO AllReduce: opCount {} sendbuff 0x1 recvbuff 0x2 count 1001 "
            "datatype 7 op 0 root 0 comm 0x7f80467b9770 [nranks=2] stream 0x3\n")
    path = tmp_path / "rccl.log"
    path.write_text(line.format(1558545003174220, 1) + line.format(1558545003176720, 2))
    df, _ = read_nccl_logs([path])
    assert df["t_start_s"].tolist() == [0.0, 0.0025]


def test_logs_years_apart_are_refused_naming_the_files():
    # 2019-05-22 (RCCL microseconds) and 2025-07-25 (outer timestamps): more than 1e6 s apart.
    paths = [LOGS / "rtg_tracer_rccl_usec_timestamp_wrapped.log", LOGS / "deepep330_external_timestamps.log"]
    with pytest.raises(TraceError, match=r"rtg_tracer_rccl.*, .*deepep330.*: row \d+: field 't_start_s' is more than"):
        read_nccl_logs(paths)
