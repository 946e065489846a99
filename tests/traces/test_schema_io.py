"""The trace schema (SPEC §3) and Parquet I/O with metadata."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traces.io import read_trace, resolve_trace_path, write_trace
from traces.schema import (
    ALL_COLUMNS,
    DTYPE_BYTES,
    OPS,
    TraceError,
    dtype_name,
    empty_trace,
    new_metadata,
    validate,
)


def _row(**kw):
    row = dict(rank=0, comm="c0", seq=0, op="AllReduce", count=4, dtype="fp32", bytes=16, root=-1, nranks=2,
               t_start_s=0.0, duration_s=math.nan, host="", device=-1, context="", algo="", proto="")
    row.update(kw)
    return row


def _frame(rows, world=2):
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"c0": list(range(world))}, "test")
    return df


def test_empty_trace_has_every_column():
    assert tuple(empty_trace().columns) == ALL_COLUMNS
    assert validate(empty_trace()).empty


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"op": "AllToAlll"}, "unknown op"),
        ({"dtype": "fp33"}, "unknown dtype"),
        ({"bytes": 17}, "'bytes'"),
        ({"count": -1, "bytes": -4}, "'count'"),
        ({"rank": 5}, "world_size"),
        ({"op": "Broadcast", "root": 2}, "'root'"),
        ({"op": "AllReduce", "split_bytes": [1, 2]}, "split_bytes"),
    ],
)
def test_validate_names_the_bad_field(change, field):
    with pytest.raises(TraceError, match=field) as info:
        validate(_frame([_row(), _row(**{"rank": 1, **change})]))
    assert "row 1" in str(info.value)


def test_missing_column_is_named():
    with pytest.raises(TraceError, match="dtype"):
        validate(pd.DataFrame([_row()]).drop(columns=["dtype"]))


def test_dtype_name_maps_codes_and_aliases():
    assert dtype_name(9) == "bf16" and dtype_name("torch.bfloat16") == "bf16" and dtype_name("float") == "fp32"
    with pytest.raises(TraceError):
        dtype_name(12)


def _op_rows(seq, op, count, dtype, t, ranks):
    """The rows of one operation on a 4-rank comm: every member of a collective, or a Send/Recv pair."""
    common = dict(seq=seq, count=count, dtype=dtype, bytes=count * DTYPE_BYTES[dtype], t_start_s=t, nranks=4)
    if op in ("Send", "Recv"):
        a, b = ranks
        return [_row(rank=a, op="Send", root=b, **common), _row(rank=b, op="Recv", root=a, **common)]
    root = 0 if op in ("Broadcast", "Reduce", "Gather", "Scatter") else -1
    return [_row(rank=r, op=op, root=root, **common) for r in range(4)]


ops = st.tuples(st.sampled_from(OPS), st.integers(0, 2**40), st.sampled_from(sorted(DTYPE_BYTES)),
                st.floats(0, 1e4) | st.just(math.nan),
                st.lists(st.integers(0, 3), min_size=2, max_size=2, unique=True))


@given(st.lists(ops, max_size=6))
def test_write_read_round_trip(tmp_path_factory, ops):
    rows = [row for seq, spec in enumerate(ops) for row in _op_rows(seq, *spec)]
    df = _frame(rows or [_row(nranks=4, rank=r) for r in range(4)], world=4)
    path = write_trace(df, tmp_path_factory.mktemp("t") / "x.parquet")
    back = read_trace(path)
    assert back.attrs["collsim"] == df.attrs["collsim"]
    expected = validate(df)
    pd.testing.assert_frame_equal(back, expected, check_dtype=True)


def test_split_bytes_and_group_round_trip(tmp_path):
    df = _frame([_row(op="AllToAll", count=3, bytes=12, split_bytes=[4, 20], group=7),
                 _row(op="AllToAll", rank=1)])
    back = read_trace(write_trace(df, tmp_path / "a.parquet"))
    assert [v.tolist() for v in back["split_bytes"]] == [[4, 20], []]
    # read as int64 arrays (views of the file's flat values, read-only), not Python ints per entry
    assert all(isinstance(v, np.ndarray) and v.dtype == np.int64 and not v.flags.writeable
               for v in back["split_bytes"])
    assert back["group"].tolist() == [7, -1]
    again = read_trace(write_trace(back, tmp_path / "b.parquet"))  # arrays write back as they read
    assert [v.tolist() for v in again["split_bytes"]] == [[4, 20], []]


@pytest.mark.parametrize("as_array", [False, True])
def test_split_entries_are_checked_exactly_as_tuples_and_as_arrays(as_array):
    def frame(values):
        split = np.array(values, dtype=np.int64) if as_array else tuple(values)
        other = np.array([12, 12], dtype=np.int64) if as_array else (12, 12)
        count = max(sum(values), 0) // 4 // 2  # the total sent // fp32 size // nranks (checked too)
        return _frame([_row(op="AllToAll", count=count, bytes=4 * count, split_bytes=split),
                       _row(op="AllToAll", rank=1, count=3, bytes=12, split_bytes=other)])

    assert validate(frame([4, 2**53]))["split_bytes"].map(len).tolist() == [2, 2]
    for bad in ([4, -1], [4, 2**53 + 1]):  # 2**53 + 1 is refused although float64 rounds it to 2**53
        with pytest.raises(TraceError, match=r"row 0: field 'split_bytes' has an entry outside 0\.\.9007199254740992 "
                                             r"\(found in 1 row\(s\)\)"):
            validate(frame(bad))
    kept = validate(frame([4, 20]))["split_bytes"]
    assert all(isinstance(v, np.ndarray if as_array else tuple) for v in kept)


def test_split_check_over_many_chunks(monkeypatch):
    from traces import checks, split_entries

    monkeypatch.setattr(split_entries, "SPLIT_CHUNK_ENTRIES", 3)
    splits = np.fromiter([np.array([1, 2], np.int64)] * 5 + [np.array([1, -2], np.int64), np.zeros(0, np.int64)],
                         dtype=object, count=7)
    lens = np.array([2] * 6 + [0])
    assert split_entries.split_out_of_range(splits, lens, checks.MAX_OP_BYTES).tolist() == [False] * 5 + [True, False]
    tuples = np.fromiter([(1, 2)] * 5 + [(1, 2**70), ()], dtype=object, count=7)
    assert split_entries.split_out_of_range(tuples, lens, checks.MAX_OP_BYTES).tolist() == [False] * 5 + [True, False]


def test_write_is_deterministic(tmp_path):
    df = _frame([_row(), _row(rank=1)])
    a = write_trace(df, tmp_path / "a.parquet").read_bytes()
    b = write_trace(df, tmp_path / "b.parquet").read_bytes()
    assert a == b


def test_unknown_file_names_builtins(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        resolve_trace_path(tmp_path / "nope.parquet")


def test_not_parquet_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(TraceError, match="bad.parquet"):
        read_trace(bad)


def test_validate_keeps_values():
    df = _frame([_row(count=2**40, bytes=2**42)])
    assert validate(df)["bytes"].iloc[0] == 2**42
    assert validate(df)["count"].dtype == np.int64


def test_empty_trace_round_trips(tmp_path):
    df = empty_trace()
    df.attrs["collsim"] = new_metadata(0, {}, "test")
    back = read_trace(write_trace(df, tmp_path / "e.parquet"))
    assert back.empty and tuple(back.columns) == ALL_COLUMNS


def test_parquet_without_metadata_is_a_clear_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bare = tmp_path / "bare.parquet"
    pq.write_table(pa.Table.from_pandas(validate(_frame([_row()])).drop(columns=["split_bytes"])), bare)
    with pytest.raises(TraceError, match="bare.parquet.*no 'collsim' metadata"):
        read_trace(bare)


@pytest.mark.parametrize("raw, words", [
    (b'{"schema_version": 1, "source": "r\xe9seau"}', "is not JSON"),  # latin-1 bytes: a UnicodeDecodeError before
    (b"[" * 100_000 + b"]" * 100_000, "is JSON nested too deeply"),  # a RecursionError before
], ids=["latin-1", "deep"])
def test_metadata_that_cannot_be_decoded_is_one_clear_error(tmp_path, raw, words):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "m.parquet"
    table = pa.Table.from_pandas(validate(_frame([_row()])).drop(columns=["split_bytes"]))
    pq.write_table(table.replace_schema_metadata({"collsim": raw}), path)
    with pytest.raises(TraceError, match=f"m.parquet: metadata key 'collsim' {words}"):
        read_trace(path)


@pytest.mark.parametrize("key, value", [("parallelism", "tp=8"), ("notes", "x"), ("notes", [1]), ("model", 5),
                                        ("rings", "x"), ("rings", {"c0": [0, 1]}), ("time_origin_s", "x"),
                                        ("time_origin_s", math.inf)])
def test_optional_metadata_of_the_wrong_type_names_the_key(key, value):
    df = _frame([_row(), _row(rank=1)])
    df.attrs["collsim"] = {**df.attrs["collsim"], key: value}
    with pytest.raises(TraceError, match=f"metadata '{key}'"):
        validate(df)


def test_null_comm_is_refused_not_read_as_a_comm_of_its_own():
    df = _frame([_row(), _row(rank=1, comm=None)])
    with pytest.raises(TraceError, match=r"row 1: field 'comm' is missing \(null\)"):
        validate(df)


def test_uneven_alltoall_count_must_follow_its_splits():
    ok = [_row(op="AllToAll", count=3, bytes=12, split_bytes=(4, 20)), _row(op="AllToAll", rank=1, count=3,
                                                                            bytes=12, split_bytes=(12, 12))]
    assert len(validate(_frame(ok))) == 2  # (4 + 20) // 4 // 2 == 3
    # a writer that rounds the mean up is accepted: (4 + 22) / 4 / 2 = 3.25 -> 3 or 4
    assert len(validate(_frame([{**ok[0], "count": 4, "bytes": 16, "split_bytes": (4, 22)}, ok[1]]))) == 2
    bad = [{**ok[0], "split_bytes": (1, 2)}, ok[1]]
    with pytest.raises(TraceError, match=r"row 0: field 'count' is not the mean elements per peer of split_bytes"):
        validate(_frame(bad))


def test_split_sums_exact_and_over_chunks(monkeypatch):
    from traces import split_entries

    monkeypatch.setattr(split_entries, "SPLIT_CHUNK_ENTRIES", 3)
    splits = np.fromiter([np.array([2**53, 2**53 - 1], np.int64)] * 4 + [np.zeros(0, np.int64)], dtype=object, count=5)
    assert split_entries.split_sums(splits, np.array([2] * 4 + [0])).tolist() == [2**54 - 1] * 4 + [0]


@pytest.mark.parametrize("kind", ["folder", "fifo", "empty"])
def test_a_trace_that_is_not_a_file_says_what_it_is(tmp_path, kind):
    import os

    path = {"folder": tmp_path, "fifo": tmp_path / "f.parquet", "empty": ""}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    words = {"folder": "is a folder", "fifo": "not a regular file", "empty": "the trace name is empty"}[kind]
    with pytest.raises(TraceError, match=words):
        read_trace(path)
