"""write_nccl_log -> read_nccl_logs gives back the same rows (hypothesis), and the writer's own rules."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.formats.nccl.reader import read_nccl_logs, write_nccl_log
from traces.schema import DTYPE_BYTES, new_metadata, validate

DTYPES = sorted(DTYPE_BYTES)
COLLECTIVES = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Gather", "Scatter", "AllToAll"]


@st.composite
def traces(draw):
    """A valid trace as a real job would log it: hosts hold consecutive ranks; a world communicator, when
    there is one, lists ranks 0..W-1 in order; every call is issued by all members of its communicator."""
    gpn = draw(st.integers(1, 3))
    world = gpn * draw(st.integers(1, 3))
    names = draw(st.lists(st.text("abcdefx0123456789", min_size=1, max_size=6), min_size=1, max_size=4,
                          unique=True))
    comms = {}
    if draw(st.booleans()):
        comms[names[0]] = list(range(world))
    for name in names[len(comms):]:
        order = draw(st.permutations(range(world)))
        comms[name] = list(order[: draw(st.integers(1, world))])
    if not comms:
        comms[names[0]] = list(range(world))
    missing = sorted(set(range(world)) - {r for m in comms.values() for r in m})
    first = next(iter(comms))
    comms[first] += missing  # every GPU belongs to some communicator, or the log never shows it
    for name, members in comms.items():
        if len(members) == world:  # a communicator of every GPU is the world view: ranks in order
            comms[name] = list(range(world))
    device = {r: draw(st.integers(0, 7)) for r in range(world)}
    timed = draw(st.sampled_from(["none", "all", "some"]))
    rows: list[dict] = []
    seq: dict[tuple, int] = {}
    group_no = dict.fromkeys(range(world), 0)
    clock = 0

    def add(rank, comm, op, count, dtype, root, t, algo="", proto="", group=-1, split=()):
        n = len(comms[comm])
        kind = (comm, op, root) if op in ("Send", "Recv") else (comm, "coll", -1)
        k = seq.get((rank, *kind), 0)
        seq[(rank, *kind)] = k + 1
        rows.append(dict(rank=rank, comm=comm, seq=k, op=op, count=count, dtype=dtype,
                         bytes=count * DTYPE_BYTES[dtype], root=root, nranks=n, t_start_s=t,
                         duration_s=math.nan, host=f"node{rank // gpn}", device=device[rank], context="",
                         algo=algo, proto=proto, group=group, split_bytes=tuple(split)))

    for _ in range(draw(st.integers(0, 12))):
        comm = draw(st.sampled_from(list(comms)))
        members = comms[comm]
        n = len(members)
        dtype = draw(st.sampled_from(DTYPES))
        size = DTYPE_BYTES[dtype]
        clock += draw(st.integers(0, 3_000_000))

        def stamp(now=clock):
            return now / 1e6 if timed == "all" or (timed == "some" and draw(st.booleans())) else math.nan

        kind = draw(st.sampled_from(["coll", "coll", "uneven", "p2p", "group"]))
        if kind == "coll":
            op = draw(st.sampled_from(COLLECTIVES))
            count = draw(st.integers(0, 10**6))
            root = draw(st.integers(0, n - 1)) if op in ("Broadcast", "Reduce", "Gather", "Scatter") else -1
            algo, proto = ("", "") if op == "AllToAll" or draw(st.booleans()) else (
                draw(st.sampled_from(["RING", "TREE", "NVLS"])), draw(st.sampled_from(["LL", "LL128", "SIMPLE"])))
            for r in members:
                add(r, comm, op, count, dtype, root, stamp(), algo, proto)
        elif kind == "uneven":
            splits = {r: draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n)) for r in members}
            for r in members:
                add(r, comm, "AllToAll", sum(splits[r]) // n, dtype, -1, stamp(), split=[c * size for c in splits[r]])
        elif n >= 2:
            pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1]),
                                  min_size=1, max_size=1 if kind == "p2p" else 4))
            per_rank: dict[int, list] = {}
            for a, b in pairs:
                count = draw(st.integers(0, 5000))
                per_rank.setdefault(members[a], []).append(("Send", b, count))
                per_rank.setdefault(members[b], []).append(("Recv", a, count))
            for r, ops in per_rank.items():
                # One rank's part of a group: >= 2 lines share an opCount (a lone line is no group).
                gid = group_no[r] if len(ops) >= 2 else -1
                group_no[r] += len(ops) >= 2
                t = stamp()
                for op, peer, count in ops:
                    add(r, comm, op, count, dtype, peer, t, group=gid)
    df = pd.DataFrame(rows) if rows else None
    return df, comms, world, gpn


def _issue_order(df):
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


@settings(max_examples=25)
@given(traces(), st.booleans())
def test_round_trip(tmp_path_factory, case, per_host):
    df, comms, world, gpn = case
    if df is None:
        return
    df.attrs["collsim"] = new_metadata(world, comms, "test", gpus_per_node=gpn)
    df = validate(df)
    out = tmp_path_factory.mktemp("rt")
    paths = write_nccl_log(df, out / ("all.log" if not per_host else "hosts"), per_host=per_host)
    back, report = read_nccl_logs(paths)
    assert report.skipped_total == 0
    want, got = _issue_order(df), back.reset_index(drop=True)
    assert len(got) == len(want)
    # Comm names come back as commIds: the mapping must be one-to-one.
    pairs = set(zip(want["comm"], got["comm"], strict=True))
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
    rename = dict(pairs)
    got["comm"] = got["comm"].map({b: a for a, b in rename.items()})
    for col in ["rank", "comm", "seq", "op", "count", "dtype", "bytes", "root", "nranks", "host", "device",
                "algo", "proto", "group", "split_bytes", "context"]:
        assert got[col].tolist() == want[col].tolist(), col
    np.testing.assert_array_equal(got["t_start_s"].to_numpy(), want["t_start_s"].to_numpy())
    assert got["duration_s"].isna().all()
    meta = back.attrs["collsim"]
    for name, members in comms.items():
        if name in rename:  # comms with rows: matched by name
            assert meta["comms"][rename[name]] == members
    assert sorted(meta["comms"].values()) == sorted(comms.values())  # and comms without rows too
    assert meta["world_size"] == world


def _trace(rows, comms, world=2):
    base = dict(op="AllReduce", seq=0, count=4, dtype="fp32", bytes=16, root=-1, nranks=2, t_start_s=math.nan,
                duration_s=math.nan, host="", device=-1, context="", algo="", proto="", group=-1, split_bytes=())
    df = pd.DataFrame([{**base, **r} for r in rows])
    df.attrs["collsim"] = new_metadata(world, comms, "test", gpus_per_node=1)
    return df


def test_writer_lines_follow_the_nccl_formats(tmp_path):
    df = _trace([dict(rank=0, comm="c", op="AllToAll", split_bytes=(4, 12), count=2, bytes=8, t_start_s=1.5),
                 dict(rank=1, comm="c", op="AllToAll", split_bytes=(0, 8), count=1, bytes=4),
                 dict(rank=0, comm="c", op="AllToAll", seq=1), dict(rank=1, comm="c", op="AllToAll", seq=1)],
                {"c": [0, 1]})
    (path,) = write_nccl_log(df, tmp_path / "x.log")
    text = path.read_text().splitlines()
    rank0 = [line for line in text if ":1000:1000 " in line]
    assert rank0[0].endswith("NCCL INFO NCCL version 2.28.3+cuda12.9")
    assert "ncclCommInitRank comm 0x" in rank0[1] and rank0[1].endswith(" - Init COMPLETE")
    sends = [line for line in rank0 if "INFO Send: " in line]
    recvs = [line for line in rank0 if "INFO Recv: " in line]
    # Sends carry rank 0's split (4 B, 12 B of fp32 = 1, 3 elements); Recvs what each peer sends to rank 0.
    assert [s.split(" count ")[1].split()[0] for s in sends] == ["1", "3"]
    assert [s.split(" count ")[1].split()[0] for s in recvs] == ["1", "0"]
    assert all(line.startswith("[2025-01-01 00:00:01.500000] node0:1000:1000 [0] NCCL INFO ") for line in sends)
    assert len({s.split("opCount ")[1].split()[0] for s in sends + recvs}) == 1
    assert any("INFO AlltoAll: opCount 1 " in line for line in rank0)


def test_writer_per_host_files(tmp_path):
    df = _trace([dict(rank=r, comm="w", host=f"h{r // 2}") for r in range(4)], {"w": [0, 1, 2, 3]}, world=4)
    df["nranks"] = 4
    paths = write_nccl_log(df, tmp_path / "out", per_host=True)
    assert sorted(p.name for p in paths) == ["h0.log", "h1.log"]
    back, _ = read_nccl_logs(paths)
    assert back["host"].tolist() == ["h0", "h0", "h1", "h1"]


def test_ingested_comm_ids_survive_a_round_trip(tmp_path):
    from tests.conftest import DATA

    df, _ = read_nccl_logs([DATA / "nccl_logs" / "constructed_v2_29.log"])
    paths = write_nccl_log(df, tmp_path / "again.log")
    back, _ = read_nccl_logs(paths)
    assert list(back.attrs["collsim"]["comms"]) == ["0xabc123"]
    assert back.attrs["collsim"]["rings"] == df.attrs["collsim"]["rings"]
    cols = ["rank", "comm", "seq", "op", "count", "bytes", "root", "algo", "proto", "t_start_s"]
    pd.testing.assert_frame_equal(back[cols], df[cols])


def test_writer_rejects_rank_outside_its_comm(tmp_path):
    from traces.schema import TraceError

    df = _trace([dict(rank=1, comm="c")], {"c": [0, -1]})
    with pytest.raises(TraceError, match="rank 1 is not a member of comm 'c'"):
        write_nccl_log(df, tmp_path / "x.log")
