"""Cases at the trace-schema boundary: values changed without a word, bad metadata, clock times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bad_inputs_cases.common import (
    Case,
    base_meta,
    base_rows,
    check_call,
    read_call,
    run_args,
    trace,
    with_value,
    write_raw,
)

__all__ = ["CASES"]


def epoch_pair(folder: Path) -> tuple[Path, Path]:
    """The same trace with times from its start and as Unix-epoch clock readings (exact in float64)."""
    rel = base_rows()
    rel["t_start_s"] = np.arange(len(rel)) // 4 * (1 << 10) * 2.0**-20  # multiples of 2**-20 s: exact at 1.7e9
    epoch = rel.copy()
    epoch["t_start_s"] = rel["t_start_s"] + 1_700_000_000.0
    return write_raw(folder / "rel.parquet", rel, base_meta()), write_raw(folder / "epoch.parquet", epoch, base_meta())



def check_epoch(folder: Path, _: Any) -> str | None:
    import sim
    from traces import read_trace

    rel, epoch = (read_trace(p) for p in epoch_pair(folder))
    if not np.array_equal(rel["t_start_s"].to_numpy(), epoch["t_start_s"].to_numpy()):
        return "epoch times were not rebased to the same relative times"
    if epoch.attrs["collsim"].get("time_origin_s") != 1_700_000_000.0:
        return "time_origin_s not recorded"
    a, b = (sim.simulate(df, "fat_tree").collectives for df in (rel, epoch))
    return None if a.equals(b) else "durations differ between epoch and relative times"



def trace_case(cid: str, what: str, expect: str, change=None, meta=None) -> list[Case]:
    def make(d: Path) -> Path:
        return trace(d, change, meta)

    return [Case(cid, what, argv=run_args(make), expect=expect),
            Case(cid + "-api", what + " (read_trace)", call=read_call(make), error="TraceError")]



CASES: list[Case] = [
    # 1. the trace schema boundary
    *trace_case("rank-fraction", "fractional rank 0.5", "field 'rank' is not a whole number",
                 with_value("rank", 0.5, dtype=float)),
    *trace_case("rank-wrap", "rank 2**32+3", "field 'rank' does not fit int32", with_value("rank", 2**32 + 3, dtype="int64")),
    *trace_case("count-overflow", "count 2**61 of fp64 (bytes wraps to 0)", "field 'count' × dtype size exceeds",
                 lambda df: df.assign(count=np.where(df.index == 1, 2**61, df["count"]),
                                      dtype=np.where(df.index == 1, "fp64", df["dtype"]),
                                      bytes=np.where(df.index == 1, 0, df["bytes"]))),
    *trace_case("bytes-disagree", "1 MiB vs 1 GiB in one collective", "collective comm='c0' seq=0: field 'count'",
                 lambda df: df.assign(count=np.where(df.index == 1, 1 << 28, df["count"]),
                                      bytes=np.where(df.index == 1, 1 << 30, df["bytes"]))),
    *trace_case("dtype-disagree", "fp32 vs fp16 in one collective", "collective comm='c0' seq=0: field 'dtype'",
                 lambda df: df.assign(dtype=np.where(df.index == 1, "fp16", df["dtype"]),
                                      count=np.where(df.index == 1, 1 << 19, df["count"]))),
    *trace_case("op-disagree", "AllReduce vs AllGather in one collective", "collective comm='c0' seq=0: field 'op'",
                 lambda df: df.assign(op=np.where(df.index == 1, "AllGather", df["op"]))),
    *trace_case("nranks-disagree", "nranks 2 on one row of a 4-rank comm", "field 'nranks' differs from the size",
                 with_value("nranks", 2, dtype="int32")),
    *trace_case("nranks-comm", "nranks 8 on a comm of 4 members", "field 'nranks' differs from the size",
                 lambda df: df.assign(nranks=8)),
    *trace_case("rank-not-member", "a rank outside its comm", "is not a member of comm",
                 None, lambda m: {**m, "world_size": 5, "comms": {"c0": [0, 1, 2, 4]}}),
    *trace_case("duplicate-row", "a duplicated (comm, seq, rank) row", "duplicates an earlier row",
                 lambda df: pd.concat([df, df.iloc[[1]]], ignore_index=True)),
    *trace_case("t-inf", "t_start_s = inf", "field 't_start_s' is infinite", with_value("t_start_s", float("inf"), dtype=float)),
    *trace_case("t-huge", "t_start_s = 1e300", "field 't_start_s' is more than", with_value("t_start_s", 1e300, dtype=float)),
    *trace_case("duration-negative", "duration_s = -1", "field 'duration_s' is negative",
                 with_value("duration_s", -1.0, dtype=float)),
    *trace_case("ws-text", "metadata world_size 'four'", "metadata 'world_size' must be an integer",
                 None, lambda m: {**m, "world_size": "four"}),
    *trace_case("ws-huge", "metadata world_size 10**7 on a 4-row trace", "metadata 'world_size' must be an integer",
                 None, lambda m: {**m, "world_size": 10**7}),
    *trace_case("gpn-text", "metadata gpus_per_node 'eight'", "metadata 'gpus_per_node' must be an integer",
                 None, lambda m: {**m, "gpus_per_node": "eight"}),
    *trace_case("comms-list", "metadata comms as a list", "metadata 'comms' must map",
                 None, lambda m: {**m, "comms": [[0, 1, 2, 3]]}),
    *trace_case("group-text", "extension column group of strings", "field 'group' is not a number",
                 lambda df: df.assign(group=["g"] * len(df))),
    *trace_case("split-text", "extension column split_bytes of strings", "field 'split_bytes' must be a list of integers",
                 lambda df: df.assign(op="AllToAll", split_bytes=[["1", "2", "3", "4"]] * len(df))),
    Case("epoch-rebase", "Unix-epoch times give the durations of relative times", call=check_call(check_epoch)),
    Case("read-none", "read_trace(None)", call=lambda d: (lambda: __import__("traces").read_trace(None)),
         error="TraceError"),
]
