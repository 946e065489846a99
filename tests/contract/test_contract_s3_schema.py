"""Conformance to SPEC.md §3 Trace schema: one focused test per clause (split from tests/test_contract.py;
the hand-made trace and the fixtures are in contract_support.py and conftest.py beside this file)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from contract_support import (
    DTYPE_SIZE,
    OPS,
    TRACE_COLUMNS,
)

import traces


@pytest.mark.parametrize("name", ["TINY", "ds_v3_tp16.parquet", "llama3_70b_train.parquet"])
def test_s3_columns_and_dtypes(tiny, name):
    df = traces.read_trace(tiny if name == "TINY" else name)
    for col, dtype in TRACE_COLUMNS.items():
        assert col in df.columns, col
        if dtype == "string":
            assert df[col].dtype == object or isinstance(df[col].dtype, pd.StringDtype), col
            assert df[col].map(type).eq(str).all(), col
        else:
            assert df[col].dtype == np.dtype(dtype), col
    assert set(df["op"]) <= OPS
    assert set(df["dtype"]) <= set(DTYPE_SIZE)
    assert (df["bytes"] == df["count"] * df["dtype"].map(DTYPE_SIZE)).all()
    rooted = df["op"].isin(["Broadcast", "Reduce", "Gather", "Scatter", "Send", "Recv"])
    assert (df.loc[~rooted, "root"] == -1).all()
    assert ((df.loc[rooted, "root"] >= 0) & (df.loc[rooted, "root"] < df.loc[rooted, "nranks"])).all()


@pytest.mark.parametrize("name", ["TINY", "ds_v3_tp16.parquet", "llama3_70b_train.parquet"])
def test_s3_metadata(tiny, name):
    df = traces.read_trace(tiny if name == "TINY" else name)
    meta = df.attrs["collsim"]
    assert meta["schema_version"] == 1
    assert {"world_size", "gpus_per_node", "comms", "source"} <= set(meta)
    assert isinstance(meta["source"], str) and meta["source"]
    world = meta["world_size"]
    assert set(df["rank"]) <= set(range(world))
    for comm, ranks in meta["comms"].items():
        assert all(0 <= r < world for r in ranks)
        assert (df.loc[df["comm"] == comm, "nranks"] == len(ranks)).all()
    assert set(df["comm"]) <= set(meta["comms"])


def test_s3_write_trace_round_trip(tiny, tmp_path):
    df = traces.read_trace(tiny)
    path = tmp_path / "again.parquet"
    traces.write_trace(df, path)
    back = traces.read_trace(path)
    assert back.attrs["collsim"] == df.attrs["collsim"]
    pd.testing.assert_frame_equal(back[list(TRACE_COLUMNS)], df[list(TRACE_COLUMNS)])


@pytest.mark.parametrize("name", ["ds_v3_tp16.parquet", "llama3_70b_train.parquet"])
def test_s3_collective_seq_semantics(name):
    df = traces.read_trace(name)
    comms = df.attrs["collsim"]["comms"]
    coll = df[~df["op"].isin(["Send", "Recv"])]
    # per rank and comm, seq counts the collective ops 0, 1, 2, ... (distinct, from 0, no gaps)
    per_rank = coll.groupby(["rank", "comm"])["seq"].agg(["min", "max", "nunique", "size"])
    assert (per_rank["min"] == 0).all() and (per_rank["nunique"] == per_rank["size"]).all()
    assert (per_rank["max"] == per_rank["size"] - 1).all()
    # every (comm, seq) group holds one row per member, all with the same op and count
    members = {(c, r) for c, ranks in comms.items() for r in ranks}
    assert all((c, r) in members for c, r in zip(coll["comm"], coll["rank"], strict=True))
    groups = coll.groupby(["comm", "seq"]).agg(ranks=("rank", "nunique"), rows=("rank", "size"),
                                               ops=("op", "nunique"), counts=("count", "nunique"))
    size = groups.index.get_level_values("comm").map(lambda c: len(comms[c]))
    assert (groups["ranks"] == size).all() and (groups["rows"] == size).all()
    assert (groups["ops"] == 1).all() and (groups["counts"] == 1).all()


def test_s3_send_recv_seq_semantics():
    df = traces.read_trace("llama3_70b_train.parquet")
    comms = df.attrs["collsim"]["comms"]
    p2p = df[df["op"].isin(["Send", "Recv"])]
    assert len(p2p) > 0
    sends, recvs = {}, {}
    for (rank, comm, op, root), g in p2p.groupby(["rank", "comm", "op", "root"]):
        assert sorted(g["seq"]) == list(range(len(g)))
        peer = comms[comm][root]
        key = (comm, rank, peer) if op == "Send" else (comm, peer, rank)
        (sends if op == "Send" else recvs)[key] = g.sort_values("seq")["bytes"].tolist()
    # the k-th Send a->b matches the k-th Recv b<-a (same size)
    assert sends == recvs
