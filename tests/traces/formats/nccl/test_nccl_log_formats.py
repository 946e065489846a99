"""Each NCCL log format variant of docs/nccl_formats.md, built from its format string, and the mapping rules."""

from __future__ import annotations

import numpy as np
import pytest
from nccl_text import coll, pre, read_lines

from traces.formats.nccl import kernel_numpy as nccl_log_fast
from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import looks_like_nccl_log, read_nccl_logs
from traces.schema import TraceError

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


# --- Init lines of every version (section 3) --------------------------------------------------------

INIT_FORMATS = {
    "2.4": "comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} - Init COMPLETE",
    "2.5": "comm {p} rank {r} nranks 2 cudaDev {d} busId {d}000 - Init COMPLETE",
    "2.16": "comm {p} rank {r} nranks 2 cudaDev {d} busId {d}000 commId 0x77 - Init COMPLETE",
    "2.18.3": "comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} busId {d}000 commId 0x77 - Init START",
    "2.21": "ncclCommInitRank comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} busId {d}000 commId 0x77 "
            "- Init COMPLETE",
    "2.23": "ncclCommInitRankConfig comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} busId {d}000 "
            "commId 0x77 - Init COMPLETE",
    "2.30": "[Rank {r}] ncclCommInitRankScalable comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} "
            "busId {d}000 commId 0x77 - Init START",
    "2.20 nRanks": "comm {p} rank {r} nRanks 2 nNodes 1 localRanks 2 localRank {r} MNNVL 0",
}


@pytest.mark.parametrize("version", list(INIT_FORMATS))
def test_init_lines_map_pointers_to_ranks_and_devices(tmp_path, version):
    fmt = INIT_FORMATS[version]
    # pid 30 is rank 0 on cudaDev 5, pid 20 rank 1 on cudaDev 3; the prefix `[dev]` says 0 for both.
    lines = [pre(pid=20) + fmt.format(p="0xaa", r=1, d=3), pre(pid=30) + fmt.format(p="0xbb", r=0, d=5),
             pre(pid=20) + coll(comm="0xaa", root=0), pre(pid=30) + coll(comm="0xbb", root=0)]
    df, report = read_lines(tmp_path, lines)
    assert report.skipped_total == 0
    by_pid = df.sort_values("rank")
    assert by_pid["rank"].tolist() == [0, 1]
    assert len(set(df["comm"])) == 1
    expected_dev = [-1, -1] if "nRanks" in version else [5, 3]  # the nRanks line has no cudaDev
    assert by_pid["device"].tolist() == expected_dev
    meta = df.attrs["collsim"]
    assert meta["world_size"] == 2 and list(meta["comms"].values()) == [[0, 1]]
    if "commId" in fmt:
        assert list(meta["comms"]) == ["0x77"]


def test_destroy_and_reused_pointer_start_a_new_communicator(tmp_path):
    lines = [pre() + "ncclCommInitRank comm 0xaa rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 commId 0x1 - "
             "Init COMPLETE",
             pre() + coll(comm="0xaa", nranks=1),
             pre() + "comm 0xaa rank 0 nranks 1 cudaDev 0 busId 1 - Destroy COMPLETE",
             pre() + "ncclCommInitRank comm 0xaa rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 commId 0x2 - "
             "Init COMPLETE",
             pre() + coll(comm="0xaa", nranks=1), pre() + coll(comm="0xaa", nranks=1)]
    df, _ = read_lines(tmp_path, lines)
    assert df.groupby("comm")["seq"].apply(list).to_dict() == {"0x1": [0], "0x2": [0, 1]}


def test_communicators_without_commid_grouped_by_size_and_free_rank(tmp_path):
    # 2.5-2.15: two processes each create a world comm and a duplicate of it (same size, no commId).
    fmt = "comm {p} rank {r} nranks 2 cudaDev {r} busId 1 - Init COMPLETE"
    lines = [pre(pid=1) + fmt.format(p="0xa", r=0), pre(pid=1) + fmt.format(p="0xb", r=0),
             pre(pid=2) + fmt.format(p="0xc", r=1), pre(pid=2) + fmt.format(p="0xd", r=1),
             pre(pid=1) + coll(comm="0xa"), pre(pid=2) + coll(comm="0xc"),
             pre(pid=1) + coll(comm="0xb", op="Broadcast", root=1), pre(pid=2) + coll(comm="0xd", op="Broadcast", root=1)]
    df, _ = read_lines(tmp_path, lines)
    comms = df.groupby("op")["comm"].apply(set).to_dict()
    assert len(comms["AllReduce"]) == 1 and len(comms["Broadcast"]) == 1
    assert comms["AllReduce"] != comms["Broadcast"]
    assert any("without commId" in n for n in df.attrs["collsim"]["notes"])


def test_global_ranks_come_from_the_largest_communicator(tmp_path):
    # 4 GPUs; world commId 0xw (nranks 4) gives the global ranks; a 2-rank split comm maps through it.
    world = "ncclCommInitRank comm {p} rank {r} nranks 4 cudaDev {d} nvmlDev {d} busId 1 commId 0xee - Init COMPLETE"
    split = "ncclCommSplit comm {p} rank {r} nranks 2 cudaDev {d} nvmlDev {d} busId 1 parent 0x1 color 0 key 0 commId 0xff - Init COMPLETE"
    lines = []
    for pid, r, d in ((7, 3, 1), (5, 2, 0), (9, 0, 0), (8, 1, 1)):
        host = "b" if r >= 2 else "a"
        lines.append(pre(host, pid, 0) + world.format(p="0x1", r=r, d=d))
    lines += [pre("b", 7, 0) + split.format(p="0x2", r=1, d=1), pre("b", 5, 0) + split.format(p="0x2", r=0, d=0),
              pre("b", 7, 0) + coll(comm="0x2", count=8), pre("b", 5, 0) + coll(comm="0x2", count=8)]
    df, _ = read_lines(tmp_path, lines)
    assert sorted(df["rank"]) == [2, 3]
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"0xee": [0, 1, 2, 3], "0xff": [2, 3]}
    assert meta["gpus_per_node"] == 2


# --- COLL line variants (section 2) -----------------------------------------------------------------

@pytest.mark.parametrize(
    ("line", "count", "nbytes"),
    [
        (coll(count=5, dt=9), 5, 10),  # %zi / %zu print the same digits; bf16
        (coll(op="Send", sb="0x7f", rb="(nil)", root=1, count=3, dt=4), 3, 24),  # <= 2.11 Send
        (coll(op="Send", sb="(nil)", rb="0x7f", root=1, count=3, dt=4), 3, 24),  # 2.12+ Send
        (coll(extra=" acc 0x99", count=7, dt=2), 7, 28),  # third-party ` acc %p`
        (coll(tail=" task 3 globalrank 1", count=2, dt=8), 2, 16),  # RCCL suffix
        (coll(count=6, dt=11, op="Reduce", root=1), 6, 6),  # fp8_e5m2
        (coll(count=2, dt=3).replace(" stream 0x30", " stream"), 2, 8),  # stream pointer wrapped away
        (coll(count=1, dt=5) + "\r", 1, 8),  # CRLF
    ],
)
def test_coll_variants(tmp_path, line, count, nbytes):
    df, report = read_lines(tmp_path, [pre() + line])
    assert report.skipped_total == 0
    assert df["count"].tolist() == [count] and df["bytes"].tolist() == [nbytes]


def test_rccl_globalrank_gives_global_rank_without_init(tmp_path):
    lines = [pre(pid=1) + coll(tail=" task 0 globalrank 5"), pre(pid=2) + coll(tail=" task 0 globalrank 2")]
    df, _ = read_lines(tmp_path, lines)
    assert sorted(df["rank"]) == [2, 5]


@pytest.mark.parametrize("fast", [True, False])
def test_fast_and_slow_paths_agree(tmp_path, monkeypatch, fast):
    lines = [f"[2025-01-02 03:04:05.25] {pre(pid=1)}" + coll(count=9, opc="1f"),
             pre(pid=2) + coll(op="Send", root=1, extra=" acc 0x1"), "3: " + pre(pid=3) + coll(op="AllGather"),
             pre(pid=1) + coll(count=4, tail=" task 1 globalrank 0")]
    if not fast:  # force every COLL line through the per-line parser
        monkeypatch.setattr(nccl_log_scan, "ENGINE", "numpy")
        real = nccl_log_fast.coll_fields
        monkeypatch.setattr(nccl_log_fast, "coll_fields", lambda ch, m: (real(ch, m)[0], np.zeros(len(m), bool)))
    df, _ = read_lines(tmp_path, lines)
    assert df["count"].tolist() == [9, 4, 1024, 1024]
    assert df["rank"].tolist() == [0, 0, 1, 2] and df["op"].tolist() == ["AllReduce", "AllReduce", "Send", "AllGather"]
    # No Init lines, and the three processes' collectives on 0xc0 disagree: equal pointer values in
    # different processes are not one communicator (each keeps its other member as a gap).
    assert df["comm"].tolist() == ["comm-0xc0", "comm-0xc0", "comm-0xc0#2", "comm-0xc0#3"]
    assert df.attrs["collsim"]["comms"] == {"comm-0xc0": [0, -1], "comm-0xc0#2": [1, -1], "comm-0xc0#3": [2, -1]}
    assert {v["confidence"] for v in df.attrs["collsim"]["comm_inference"].values()} == {"none"}
    assert df["t_start_s"].notna().sum() == 1 and df["t_start_s"].min() == 0.0


def test_alltoall_name_is_normalised(tmp_path):
    df, _ = read_lines(tmp_path, [pre() + coll(op="AlltoAll", count=4)])
    assert df["op"].tolist() == ["AllToAll"] and df["split_bytes"].tolist() == [()]


def test_interleaved_coll_body_mid_line(tmp_path):
    line = pre("n1", 1) + "Setting affinity for GPU 0 to ff" + pre("n1", 2, 1) + coll(count=3)
    df, report = read_lines(tmp_path, [line, pre("n1", 2) + coll(count=3)])
    assert report.skipped_total == 0 and len(df) == 2
    assert set(df["host"]) == {"n1"} and df["rank"].nunique() == 1  # garbage glued to the host is removed


def test_unprefixed_body_with_ambiguous_pointer_is_skipped(tmp_path):
    lines = [pre(pid=1) + coll(), pre(pid=2) + coll(), coll()]
    df, report = read_lines(tmp_path, lines)
    assert len(df) == 2
    assert report.skipped_total == 1 and "ambiguous" in next(iter(report.skipped))
    with pytest.raises(TraceError, match=r"x.log:3: COLL line without a host:pid prefix"):
        read_lines(tmp_path, lines, strict=True)


def test_unknown_datatype_is_reported(tmp_path):
    df, report = read_lines(tmp_path, [pre() + coll(dt=12), pre() + coll()])
    assert len(df) == 1 and report.skipped == {"unknown datatype code 12": 1}


# --- TUNING (section 6; the rings of section 4: test_init_meta.py) ----------------------------------

@pytest.mark.parametrize(
    "tuning",
    ["4096 Bytes -> Algo 0 proto 1 time 12.500000",  # 2.20-2.22
     "AllReduce: 4096 Bytes -> Algo 0 proto 1 time 12.500000",  # 2.23
     "AllReduce: 4096 Bytes -> Algo TREE proto LL128 channel{Lo..Hi}={0..3}"],  # 2.24+
)
def test_tuning_lines(tmp_path, tuning):
    lines = [pre() + coll(count=1024), pre() + tuning, pre() + coll(count=8, opc="1")]
    df, _ = read_lines(tmp_path, lines)
    assert df["algo"].tolist() == ["TREE", ""] and df["proto"].tolist() == ["LL128", ""]


@pytest.mark.parametrize("fast", [True, False])
def test_tuning_fast_and_per_line_paths_agree(tmp_path, monkeypatch, fast):
    # Every TUNING version, a TUNING line with garbage glued to its op name, CRLF, a 2.26 timestamp: the
    # positional path and the per-line TUNING_RE parser give the same algo/proto on the same rows.
    lines = [pre(pid=1) + coll(count=1024), pre(pid=1) + "4096 Bytes -> Algo 0 proto 1 time 12.5",
             pre(pid=2) + coll(count=16, opc="1"), pre(pid=2) + "AllReduce: 64 Bytes -> Algo 1 proto 2 time 1.0",
             pre(pid=1) + coll(op="AllGather", count=8, opc="2"),
             "[2025-01-02 03:04:05] " + pre(pid=1) + "AllGather: 32 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..1}\r",
             pre(pid=2) + coll(op="ReduceScatter", count=4, opc="3", nranks=2),
             pre(pid=2) + "xyReduceScatter: 32 Bytes -> Algo PAT proto LL channel{Lo..Hi}={0..0}"]
    if not fast:  # force every TUNING line through the per-line parser
        monkeypatch.setattr(nccl_log_scan, "ENGINE", "numpy")
        real = nccl_log_fast.tuning_fields
        monkeypatch.setattr(nccl_log_fast, "tuning_fields",
                            lambda ch, m: (real(ch, m)[0], np.zeros(len(m), bool)))
    df, report = read_lines(tmp_path, lines)
    got = df.sort_values(["count"])[["op", "algo", "proto"]].values.tolist()
    assert got == [["ReduceScatter", "PAT", "LL"], ["AllGather", "NVLS", "SIMPLE"],
                   ["AllReduce", "RING", "SIMPLE"], ["AllReduce", "TREE", "LL128"]]
    assert not any("TUNING" in n for n in report.notes)


@pytest.mark.parametrize("fast", [True, False])
def test_opcount_above_63_bits_groups_send_recv(tmp_path, monkeypatch, fast):
    # opCount is %lx: a value with the top bit set must still tell groups apart (it is kept as 64 bits).
    if not fast:
        monkeypatch.setattr(nccl_log_scan, "ENGINE", "numpy")
        real = nccl_log_fast.coll_fields
        monkeypatch.setattr(nccl_log_fast, "coll_fields", lambda ch, m: (real(ch, m)[0], np.zeros(len(m), bool)))
    lines = [pre() + coll(op="Send", opc=o, root=1, count=4) for o in ("ffffffffffffffff", "ffffffffffffffff",
                                                                      "8000000000000000")]
    df, _ = read_lines(tmp_path, lines)
    assert df["group"].tolist() == [0, 0, -1] and df["seq"].tolist() == [0, 1, 2]


def test_tuning_uses_allgather_total_bytes(tmp_path):
    lines = [pre() + coll(op="AllGather", count=100, nranks=4), pre() + "AllGather: 1600 Bytes -> Algo RING "
             "proto SIMPLE channel{Lo..Hi}={0..1}"]
    df, _ = read_lines(tmp_path, lines)
    assert df["algo"].tolist() == ["RING"]


# --- Send/Recv groups and AllToAll folding -----------------------------------------------------------

def test_uneven_all_to_all_is_folded(tmp_path):
    # PyTorch all_to_all_single with splits on a 3-rank comm, rank 1: sends 2, 0, 5 elements, receives 1,1,1.
    init = "ncclCommInitRank comm 0xa rank {r} nranks 3 cudaDev {r} nvmlDev 0 busId 1 commId 0x9 - Init COMPLETE"
    lines = [pre(pid=p) + init.format(r=p) for p in range(3)]
    lines += [pre(pid=1) + coll(op="Send", opc="4", root=peer, count=c, comm="0xa", nranks=3)
              for peer, c in enumerate((2, 0, 5))]
    lines += [pre(pid=1) + coll(op="Recv", opc="4", root=peer, count=1, comm="0xa", nranks=3) for peer in range(3)]
    df, _ = read_lines(tmp_path, lines)
    assert len(df) == 1
    row = df.iloc[0]
    assert row["op"] == "AllToAll" and row["split_bytes"] == (8, 0, 20)
    assert row["count"] == 7 // 3 and row["bytes"] == 8 and row["group"] == -1


def test_partial_groups_keep_send_recv_rows(tmp_path):
    # A group with one Send and one Recv to peer 1 (a pipeline exchange), then two lone Sends.
    lines = [pre() + coll(op="Send", opc="2", root=1), pre() + coll(op="Recv", opc="2", root=1),
             pre() + coll(op="Send", opc="3", root=1), pre() + coll(op="Send", opc="4", root=1)]
    df, _ = read_lines(tmp_path, lines)
    assert df["op"].tolist() == ["Send", "Recv", "Send", "Send"]
    assert df["group"].tolist() == [0, 0, -1, -1]
    assert df["seq"].tolist() == [0, 0, 1, 2]


# --- detection and bad input -------------------------------------------------------------------------

def test_looks_like_nccl_log():
    assert looks_like_nccl_log(pre() + "Bootstrap : Using eth0")
    assert looks_like_nccl_log("NCCL version 2.4.2+cuda9.0\n")
    assert looks_like_nccl_log("garbage " + coll())
    assert not looks_like_nccl_log('{"traceEvents": []}')
    assert not looks_like_nccl_log("rank,comm,seq\n0,c,0\n")


def test_bad_input(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(TraceError, match="empty.log: empty file"):
        read_nccl_logs([empty])
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(TraceError, match="core.bin: not a text NCCL log"):
        read_nccl_logs([binary])
    with pytest.raises(TraceError, match="missing.log: cannot read"):
        read_nccl_logs([tmp_path / "missing.log"])
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(TraceError, match="notes.txt: no NCCL log lines"):
        read_nccl_logs([other])
    good = tmp_path / "good.log"
    good.write_text(pre() + coll() + "\n")
    df, report = read_nccl_logs([empty, good])
    assert len(df) == 1 and any("empty.log: empty file" in n for n in report.notes)


def test_progress_reports_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(nccl_log_scan, "CHUNK_BYTES", 256)
    lines = [pre() + coll(opc=f"{i:x}") for i in range(50)]
    path = tmp_path / "p.log"
    path.write_text("\n".join(lines) + "\n")
    seen = []
    df, _ = read_nccl_logs([path], progress=seen.append)
    assert sum(seen) == path.stat().st_size and len(seen) > 10
    assert df["seq"].tolist() == list(range(50))


@pytest.mark.parametrize(("word", "damaged"), [("sendbuff", "s:ndbuff"), ("datatype", "datatyqe"),
                                               ("nranks", "nrXnks")])
def test_damaged_keyword_is_malformed_not_read(tmp_path, word, damaged):
    # Found by the compiled-vs-numpy fuzz test: the numpy path once checked keywords by length and first/last
    # byte only, and read such a line as valid. Both readers now leave it to the per-line parser, which
    # rejects it.
    df, report = read_lines(tmp_path, [pre() + coll(), pre() + coll().replace(word, damaged, 1)])
    assert len(df) == 1 and report.skipped == {"malformed COLL line (fields missing or garbled)": 1}
