"""Characterisation tables (SPEC §7) on hand-made traces whose answers are known by construction."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces import stats
from traces.schema import DTYPE_BYTES, TraceError, empty_trace, new_metadata, validate

NAN = math.nan


def _row(rank, comm, seq, op, count, nranks, root=-1, dtype="fp32", t=NAN):
    return dict(rank=rank, comm=comm, seq=seq, op=op, count=count, dtype=dtype, bytes=count * DTYPE_BYTES[dtype],
                root=root, nranks=nranks, t_start_s=t, duration_s=NAN, host="", device=-1, context="", algo="",
                proto="")


def _trace(rows, comms, world):
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, comms, "test")
    return validate(df)


def _collective(comm, members, seq, op, count, t=NAN, root=-1):
    return [_row(r, comm, seq, op, count, len(members), root=root, t=t) for r in members]


def _p2p(comm, members, src, dst, seq, count, t=NAN):
    """A Send src->dst and its Recv (global ranks), as SPEC §3 writes them (root = peer's comm rank)."""
    n = len(members)
    return [_row(src, comm, seq, "Send", count, n, root=members.index(dst), t=t),
            _row(dst, comm, seq, "Recv", count, n, root=members.index(src), t=t)]


def _by_op(table):
    return table.set_index("op")


def test_three_collectives_over_four_ranks():
    members = [0, 1, 2, 3]
    rows = (_collective("w", members, 0, "AllReduce", 100) + _collective("w", members, 1, "AllReduce", 200)
            + _collective("w", members, 2, "AllGather", 50))
    counts = _by_op(stats.op_counts(_trace(rows, {"w": members}, 4)))
    assert counts.loc["AllReduce", ["calls", "rank_calls", "bytes_total"]].tolist() == [2, 8, 4 * 4 * 300]
    assert counts.loc["AllGather", ["calls", "rank_calls", "bytes_total"]].tolist() == [1, 4, 4 * 4 * 50]
    assert counts["calls"].sum() == 3 and counts["rank_calls"].sum() == 12
    assert counts["partial_calls"].sum() == 0


def test_same_seq_on_two_comms_are_two_calls_and_missing_rank_is_partial():
    rows = _collective("a", [0, 1], 0, "AllReduce", 8) + _collective("b", [2, 3], 0, "AllReduce", 8)
    rows.append(_row(0, "a", 1, "AllReduce", 8, 2))  # rank 1 never logged seq 1 of comm a
    counts = _by_op(stats.op_counts(_trace(rows, {"a": [0, 1], "b": [2, 3]}, 4)))
    assert counts.loc["AllReduce", ["calls", "rank_calls", "partial_calls"]].tolist() == [3, 5, 1]


def test_send_recv_pairs_are_matched_by_peer_and_seq():
    members = [4, 5, 6, 7]  # comm ranks differ from global ranks, so roots must be mapped
    rows = []
    rows += _p2p("pp", members, 4, 5, 0, 10)
    rows += _p2p("pp", members, 4, 5, 1, 10)
    rows += _p2p("pp", members, 5, 6, 0, 10)
    rows += _p2p("pp", members, 7, 4, 0, 10)
    rows.append(_row(6, "pp", 0, "Send", 10, 4, root=members.index(7)))  # its Recv is missing
    df = _trace(rows, {"pp": members}, 8)
    pairs = stats.p2p_pairs(df)
    assert pairs.to_dict("records") == [{"comm": "pp", "pairs": 4, "unmatched_send": 1, "unmatched_recv": 0}]
    counts = _by_op(stats.op_counts(df))
    assert counts.loc["Send", ["calls", "rank_calls", "partial_calls"]].tolist() == [5, 5, 1]
    assert counts.loc["Recv", ["calls", "rank_calls", "partial_calls"]].tolist() == [4, 4, 0]


def test_recv_with_wrong_seq_does_not_match():
    members = [0, 1]
    rows = [_row(0, "p", 0, "Send", 1, 2, root=1), _row(1, "p", 1, "Recv", 1, 2, root=0)]
    pairs = stats.p2p_pairs(_trace(rows, {"p": members}, 2))
    assert pairs[["pairs", "unmatched_send", "unmatched_recv"]].iloc[0].tolist() == [0, 1, 1]


def test_p2p_on_a_comm_missing_from_metadata_is_counted_unmatched():
    rows = [_row(0, "ghost", 0, "Send", 1, 2, root=1), _row(1, "ghost", 0, "Recv", 1, 2, root=0)]
    pairs = stats.p2p_pairs(_trace(rows, {"other": [0, 1]}, 2))
    assert pairs[["pairs", "unmatched_send", "unmatched_recv"]].iloc[0].tolist() == [0, 1, 1]


def test_by_comm_rows_add_up_to_the_whole():
    rows = (_collective("tp0", [0, 1], 0, "AllReduce", 7) + _collective("tp1", [2, 3], 0, "AllReduce", 9)
            + _collective("ep", [0, 1, 2, 3], 0, "AllToAll", 3) + _p2p("pp", [0, 2], 0, 2, 0, 5))
    df = _trace(rows, {"tp0": [0, 1], "tp1": [2, 3], "ep": [0, 1, 2, 3], "pp": [0, 2]}, 4)
    whole = stats.op_counts(df).set_index("op")
    split = stats.op_counts(df, by_comm=True).groupby("op")[["calls", "rank_calls", "bytes_total"]].sum()
    pd.testing.assert_frame_equal(whole[["calls", "rank_calls", "bytes_total"]].sort_index(), split.sort_index(),
                                  check_names=False)
    comms = stats.comm_summary(df).set_index("comm")
    assert comms.loc["tp1", "bytes_total"] == 2 * 9 * 4 and comms.loc["pp", "calls"] == 1  # one pair, once
    assert comms["bytes_share"].sum() == pytest.approx(1.0)


_OP = st.sampled_from(["AllReduce", "AllGather", "Broadcast", "AllToAll"])


@st.composite
def _random_trace(draw):
    """Random collectives on random comms with random sizes and times (some untimed)."""
    world = draw(st.integers(2, 6))
    comms = {f"c{i}": sorted(draw(st.sets(st.integers(0, world - 1), min_size=1, max_size=world)))
             for i in range(draw(st.integers(1, 3)))}
    rows = []
    for comm, members in comms.items():
        for seq in range(draw(st.integers(0, 5))):
            op = draw(_OP)
            count = draw(st.integers(0, 2**20))
            t = draw(st.one_of(st.just(NAN), st.floats(0, 10, allow_nan=False)))
            rows += _collective(comm, members, seq, op, count, t=t, root=0 if op == "Broadcast" else -1)
    if not rows:
        rows = _collective("c0", comms["c0"], 0, "AllReduce", 1, t=0.0)
    return _trace(rows, comms, world), comms


@settings(max_examples=15)  # each example runs every table (pandas overhead ~0.1 s per table)
@given(_random_trace())
def test_tables_conserve_rows_and_bytes(case):
    df, comms = case
    total = int(df["bytes"].sum())
    counts = stats.op_counts(df)
    assert counts["bytes_total"].sum() == total and counts["rank_calls"].sum() == len(df)
    # one call per (comm, seq) group, by construction
    assert counts["calls"].sum() == df[["comm", "seq"]].drop_duplicates().shape[0]
    hist = stats.size_histogram(df)
    assert hist["bytes"].sum() == total and hist["rows"].sum() == len(df)
    assert ((hist["bin_lo_bytes"] <= hist["bytes"] / hist["rows"]) & (hist["bytes"] / hist["rows"] < hist["bin_hi_bytes"])).all()
    bw = stats.bandwidth_over_time(df, window_s=0.5)
    assert bw.table["bytes"].sum() + bw.untimed_bytes == total
    assert bw.timed_rows + bw.untimed_rows == len(df) and bw.table["rows"].sum() == bw.timed_rows
    assert stats.comm_summary(df)["bytes_total"].sum() == total


def test_size_quantiles_match_numpy_on_raw_sizes():
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 10**6, size=301)  # drawn here, independent of the code under test
    rows = [_row(0, "c", i, "AllReduce", int(c), 1) for i, c in enumerate(counts)]
    rows += [_row(0, "c", 1000 + i, "Broadcast", 3, 1, root=0) for i in range(4)]
    sizes = _by_op(stats.size_stats(_trace(rows, {"c": [0]}, 1)))
    raw = counts * 4
    got = sizes.loc["AllReduce"]
    assert got["min"] == raw.min() and got["max"] == raw.max() and got["rows"] == raw.size
    assert got["p50"] == pytest.approx(np.quantile(raw, 0.5))
    assert got["p90"] == pytest.approx(np.quantile(raw, 0.9))
    assert sizes.loc["Broadcast", ["min", "p50", "p90", "max"]].tolist() == [12, 12, 12, 12]


def test_size_bins_are_powers_of_two():
    sizes = np.array([0, 1, 2, 3, 4, 7, 8, 2**40 - 1, 2**40, 2**62])
    assert stats.size_bins(sizes).tolist() == [-1, 0, 1, 1, 2, 2, 3, 39, 40, 62]


def test_bandwidth_windows_peak_mean_and_cv():
    # 4 windows of 1 s: 100 B, 0 B, 300 B, 0 B (+ one untimed row of 4 B)
    rows = [_row(0, "c", 0, "AllReduce", 25, 1, t=0.5), _row(0, "c", 1, "AllReduce", 50, 1, t=2.25),
            _row(0, "c", 2, "AllReduce", 25, 1, t=2.75), _row(0, "c", 3, "AllReduce", 1, 1, t=NAN),
            _row(0, "c", 4, "AllReduce", 0, 1, t=3.5)]
    bw = stats.bandwidth_over_time(_trace(rows, {"c": [0]}, 1), window_s=1.0)
    assert bw.table["t_s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert bw.table["bytes_per_s"].tolist() == [100.0, 0.0, 300.0, 0.0]
    assert bw.peak_bytes_per_s == 300.0 and bw.mean_bytes_per_s == 100.0 and bw.peak_to_mean == 3.0
    assert bw.cv == pytest.approx(np.std([100, 0, 300, 0]) / 100)
    assert (bw.untimed_rows, bw.untimed_bytes, bw.timed_rows) == (1, 4, 4)


def test_bandwidth_window_scales_rate():
    rows = [_row(0, "c", i, "AllReduce", 250, 1, t=0.001 * i) for i in range(10)]  # 1000 B per ms
    bw = stats.bandwidth_over_time(_trace(rows, {"c": [0]}, 1), window_s=0.005)
    assert bw.table["bytes_per_s"].tolist() == pytest.approx([5000 / 0.005, 5000 / 0.005])


def test_bandwidth_bad_window_and_all_untimed():
    df = _trace([_row(0, "c", 0, "AllReduce", 1, 1, t=1.0)], {"c": [0]}, 1)
    with pytest.raises(TraceError, match="window"):
        stats.bandwidth_over_time(df, window_s=0.0)
    with pytest.raises(TraceError, match="windows"):
        stats.bandwidth_over_time(df, window_s=1e-12)
    untimed = _trace([_row(0, "c", 0, "AllReduce", 1, 1)], {"c": [0]}, 1)
    bw = stats.bandwidth_over_time(untimed)
    assert bw.table.empty and bw.untimed_rows == 1 and math.isnan(bw.peak_to_mean)


def test_nice_window_gives_round_values_near_target():
    for span in (0.003, 1.0, 7.3, 86400.0):
        w = stats.nice_window_s(span)
        mantissa = w / 10 ** math.floor(math.log10(w))
        assert round(mantissa, 9) in (1.0, 2.0, 5.0)
        assert stats.TARGET_WINDOWS <= span / w < 2.5 * stats.TARGET_WINDOWS


def test_empty_trace_gives_empty_tables():
    df = empty_trace()
    df.attrs["collsim"] = new_metadata(1, {}, "test")
    assert stats.op_counts(df).empty and stats.size_stats(df).empty and stats.size_histogram(df).empty
    assert stats.comm_summary(df).empty and stats.bandwidth_over_time(df).table.empty


def test_bandwidth_table_has_the_spec_columns():
    rows = _collective("c", [0, 1], 0, "AllReduce", 250, t=0.0) + _collective("c", [0, 1], 1, "AllReduce", 250, t=1.2)
    table = stats.bandwidth_over_time(_trace(rows, {"c": [0, 1]}, 2), window_s=1.0).table
    assert {"t_s", "bytes_per_s", "window"} <= set(table.columns)  # SPEC §7 bandwidth.csv
    assert table["window"].tolist() == [1.0, 1.0] and table["bytes"].sum() == 4 * 1000
