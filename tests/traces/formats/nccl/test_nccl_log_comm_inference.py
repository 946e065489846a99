"""Communicators from COLL lines alone (no Init line), one process driving several GPUs, lines without a
prefix, and the members-agree check (issue 12, items 1 and 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from traces.formats.nccl.reader import read_nccl_logs
from traces.readers import ingest

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


def coll(op="AllReduce", opc="0", count=1024, dt=7, root=0, comm="0xc0", nranks=2):
    return (f"{op}: opCount {opc} sendbuff 0x10 recvbuff 0x20 count {count} datatype {dt} op 0 root {root} "
            f"comm {comm} [nranks={nranks}] stream 0x30")


def pre(host="h", pid=10, dev=0):
    return f"{host}:{pid}:{pid} [{dev}] NCCL INFO "


def write(tmp_path, lines, name="x.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def training_step(host, pid, comm, nranks, dev=0, start=0, n=6):
    """n collectives of one member, opCount moving from ``start``: counts 100, 200, ... (an identical
    sequence on every member of one communicator)."""
    return [pre(host, pid, dev) + coll(opc=f"{k:x}", count=100 * (k + 1), comm=comm, nranks=nranks)
            for k in range(start, n)]


def test_a_big_allreduce_logged_by_three_processes_is_one_communicator_with_gaps(tmp_path):
    # 3 of 128 ranks logged (different hosts, unrelated pointer values): one communicator, 125 declared gaps.
    files = [write(tmp_path, training_step(f"node{k}", 100 + k, f"0x{0xa0 + k:x}", 128), f"r{k}.log")
             for k in range(3)]
    df, report = read_nccl_logs(files)
    meta = df.attrs["collsim"]
    assert len(df) == 18 and report.skipped_total == 0
    assert df["comm"].nunique() == 1 and sorted(df["rank"].unique()) == [0, 1, 2]
    (name,) = meta["comms"]
    assert meta["comms"][name] == list(range(128)) and meta["world_size"] == 128  # the world view
    ev = meta["comm_inference"][name]
    assert ev == {"members_seen": 3, "nranks": 128, "confidence": "high", "evidence": ev["evidence"]}
    assert "same sequence of 6" in ev["evidence"]
    assert df.groupby("rank")["seq"].apply(list).tolist() == [list(range(6))] * 3
    assert report.disagreeing == 0


def test_two_tensor_parallel_pairs_pair_up(tmp_path):
    # Two TP pairs (nranks=2) on two hosts, one pointer per process; pair B runs other counts.
    a = training_step("n1", 1, "0x11", 2) + training_step("n1", 2, "0x22", 2)
    b = [pre("n2", 3) + coll(count=7, comm="0x33"), pre("n2", 4) + coll(count=7, comm="0x44")]
    df, _ = read_nccl_logs([write(tmp_path, a + b)])
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"comm-0x11": [0, 1], "comm-0x33": [2, 3]}
    assert meta["comm_inference"]["comm-0x11"]["confidence"] == "high"
    assert meta["comm_inference"]["comm-0x33"]["confidence"] == "medium"  # one collective of evidence
    assert df.groupby("comm")["rank"].apply(lambda r: sorted(set(r))).to_dict() == {
        "comm-0x11": [0, 1], "comm-0x33": [2, 3]}


def test_equal_pointer_values_in_two_processes_are_not_merged(tmp_path):
    # Same pointer 0xc0 in two processes but different collectives: two communicators, each with a gap.
    lines = [pre(pid=1) + coll(count=4), pre(pid=2) + coll(count=8)]
    df, _ = read_nccl_logs([write(tmp_path, lines)])
    assert df.attrs["collsim"]["comms"] == {"comm-0xc0": [0, -1], "comm-0xc0#2": [1, -1]}
    assert {v["confidence"] for v in df.attrs["collsim"]["comm_inference"].values()} == {"none"}


def test_identical_replicas_are_split_by_host_or_left_alone(tmp_path):
    # Data-parallel replicas of one TP layout run identical sequences: 4 members for [nranks=2].
    two_hosts = (training_step("n1", 1, "0x1", 2) + training_step("n1", 2, "0x2", 2)
                 + training_step("n2", 3, "0x3", 2) + training_step("n2", 4, "0x4", 2))
    df, _ = read_nccl_logs([write(tmp_path, two_hosts)])
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"comm-0x1": [0, 1], "comm-0x3": [2, 3]}
    assert {v["confidence"] for v in meta["comm_inference"].values()} == {"low"}
    one_host = [line.replace("n2:", "n1:") for line in two_hosts]
    df, _ = read_nccl_logs([write(tmp_path, one_host, "one.log")])
    meta = df.attrs["collsim"]
    assert len(meta["comms"]) == 4 and all(m.count(-1) == 1 for m in meta["comms"].values())
    assert {v["confidence"] for v in meta["comm_inference"].values()} == {"none"}


def test_cut_logs_overlap_on_opcount_and_seq_is_aligned(tmp_path):
    # Rank A's log starts at opCount 2, rank B's stops at opCount 4: they agree on 2..4.
    lines = training_step("h", 1, "0x1", 2, start=2, n=6) + training_step("h", 2, "0x2", 2, start=0, n=5)
    df, report = read_nccl_logs([write(tmp_path, lines)])
    assert df["comm"].nunique() == 1
    seqs = {r: list(g["seq"]) for r, g in df.groupby("rank")}
    assert seqs == {0: [2, 3, 4, 5], 1: [0, 1, 2, 3, 4]}
    assert report.disagreeing == 0
    assert any("aligned on opCount" in n for n in df.attrs["collsim"]["notes"])


def test_one_process_driving_two_gpus_gives_two_ranks(tmp_path):
    # One pid, [0] and [1] in the prefix, one pointer per GPU, same collectives: two ranks of one comm.
    lines = []
    for k in range(4):
        lines += [pre(pid=7, dev=0) + coll(opc=f"{k:x}", count=k + 1, comm="0xa"),
                  pre(pid=7, dev=1) + coll(opc=f"{k:x}", count=k + 1, comm="0xb")]
    df, _ = read_nccl_logs([write(tmp_path, lines)])
    assert sorted(df["rank"].unique()) == [0, 1] and df["comm"].nunique() == 1
    assert df.groupby("rank")["device"].first().to_dict() == {0: 0, 1: 1}
    # nccl-tests style: the thread's device is [0] for both comms: still two GPUs (device unknown).
    same = [line.replace("[1]", "[0]") for line in lines]
    df, _ = read_nccl_logs([write(tmp_path, same, "same.log")])
    assert sorted(df["rank"].unique()) == [0, 1]
    assert df.groupby("rank")["device"].first().to_dict() == {0: 0, 1: -1}
    assert any("told apart" in n for n in df.attrs["collsim"]["notes"])


def test_unprefixed_lines_go_where_their_pointer_is_unambiguous(tmp_path):
    # 0xd is seen only in lines without a prefix: one unnamed process, kept (not skipped as ambiguous).
    first = write(tmp_path, [pre(pid=1) + coll(comm="0xe"), coll(comm="0xd", count=5), coll(comm="0xd", count=6)],
                  "a.log")
    # 0xe without prefix in another file: its owner is the only process showing 0xe in any file.
    second = write(tmp_path, [coll(comm="0xe", count=9)], "b.log")
    df, report = read_nccl_logs([first, second])
    assert report.skipped_total == 0 and len(df) == 4
    by_count = df.set_index("count")
    assert by_count.loc[9, "rank"] == by_count.loc[1024, "rank"]  # the 0xe owner in a.log
    assert by_count.loc[5, "host"] == "" and by_count.loc[5, "rank"] == by_count.loc[6, "rank"]
    assert by_count.loc[5, "rank"] != by_count.loc[1024, "rank"]


def test_members_that_disagree_are_reported(tmp_path):
    # Two members of one comm (same sequence up to the last op) whose third collective differs in count:
    # positional alignment (opCount 0 forever) makes them one comm; the third collective is flagged.
    lines = [pre(pid=1) + coll(count=4), pre(pid=1) + coll(count=4), pre(pid=1) + coll(count=16),
             pre(pid=2) + coll(count=4), pre(pid=2) + coll(count=4)]
    path = write(tmp_path, lines)
    df = ingest([path])
    rep = df.attrs["collsim"]["ingest"]
    assert rep["disagreeing_collectives"] == 0  # pid 2's log is a prefix of pid 1's: nothing differs
    lines[-1] = pre(pid=2) + coll(count=4)
    lines.append(pre(pid=2) + coll(count=8))
    df = ingest([write(tmp_path, lines, "y.log")])
    # no longer a prefix: the two pids are not one communicator, so nothing to compare ...
    assert df["comm"].nunique() == 2
    # ... but with Init lines saying they are one, the disagreement is reported.
    init = "comm 0xc0 rank {r} nranks 2 cudaDev {r} busId 1 commId 0x77 - Init COMPLETE"
    lines = [pre(pid=1) + init.format(r=0), pre(pid=2) + init.format(r=1)] + lines
    df = ingest([write(tmp_path, lines, "z.log")])
    rep = df.attrs["collsim"]["ingest"]
    assert rep["disagreeing_collectives"] == 1
    assert rep["disagreeing_example"] == ("comm 0x77 seq 2: rank 0 AllReduce 16 fp32, rank 1 AllReduce 8 fp32")
    assert any("disagree" in n for n in df.attrs["collsim"]["notes"])


# --- real logs (tests/data/nccl_logs, source line inside) ------------------------------------------------

REAL = Path(__file__).parents[3] / "data" / "nccl_logs"


def test_real_ray_log_of_a_128_rank_allreduce_is_one_communicator():
    # NVIDIA/nccl#1193: 3 Ray workers on 3 hosts, no Init line, [nranks=128], opCount 139d/139e. Before
    # this change: 3 one-member communicators. Worker 22754 logs both opCounts, 615 only 139d, 619 only
    # 139e: they agree wherever they overlap.
    df = ingest(REAL / "issue1193_ray_allreduce_nranks128.log")
    meta = df.attrs["collsim"]
    assert len(df) == 4 and df["comm"].nunique() == 1
    (name,) = meta["comms"]
    assert meta["world_size"] == 128 and meta["comms"][name] == list(range(128))
    assert meta["comm_inference"][name]["members_seen"] == 3
    assert meta["comm_inference"][name]["confidence"] == "medium"
    assert df.groupby("rank")["seq"].apply(list).to_dict() == {0: [0], 1: [0, 1], 2: [1]}  # aligned on opCount
    assert df.groupby("rank")["device"].first().to_dict() == {0: 2, 1: 5, 2: 3}
    assert meta["ingest"]["disagreeing_collectives"] == 0


def test_real_single_process_two_gpu_log_gives_two_ranks():
    # NVIDIA/nccl#203 (TensorFlow): pid 13135 drives [0] and [1], one comm pointer each, nranks=2. Before
    # this change: 1 rank with 2 communicators.
    df = ingest(REAL / "issue203_one_process_two_gpus.log")
    meta = df.attrs["collsim"]
    assert len(df) == 7 and meta["world_size"] == 2 and list(meta["comms"].values()) == [[0, 1]]
    assert df.groupby("rank")["device"].first().to_dict() == {0: 0, 1: 1}
    assert df.groupby("rank")["count"].apply(list).to_dict() == {0: [64, 237184, 386560],
                                                                  1: [64, 237184, 386560, 8192]}
    assert meta["ingest"]["disagreeing_collectives"] == 0
