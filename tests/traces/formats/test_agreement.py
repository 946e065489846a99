"""Members' agreement: an all-to-all-v (``split_bytes``) may differ in count, an even AllToAll may not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from traces.formats.agreement import disagreeing_collectives
from traces.formats.nccl.output import disagreeing_codes
from traces.formats.nccl.reader import read_nccl_logs, write_nccl_log
from traces.schema import NCCL_DTYPE_CODES, new_metadata


def _rows(counts, splits, dtypes=None, op="AllToAll"):
    n = len(counts)
    return pd.DataFrame({"comm": ["c"] * n, "seq": [0] * n, "rank": list(range(n)), "op": [op] * n,
                         "count": counts, "dtype": dtypes or ["fp32"] * n, "root": [-1] * n,
                         "split_bytes": pd.Series(splits, dtype=object)})


def _codes(df):
    """The same rows as compact codes (comm and dtype as codes), for :func:`disagreeing_codes`."""
    dt_code = {name: code for code, name in NCCL_DTYPE_CODES.items()}
    dt_name = np.array([NCCL_DTYPE_CODES.get(k, "") for k in range(max(NCCL_DTYPE_CODES) + 1)], dtype=object)
    comm_code, comm_name = pd.factorize(df["comm"])
    rows = df.assign(comm=comm_code, dt=df["dtype"].map(dt_code)).drop(columns="dtype")
    return disagreeing_codes(rows, np.asarray(comm_name, dtype=object), dt_name)


def test_uneven_alltoall_members_may_log_different_counts():
    df = _rows([3, 5], [(8, 16), (24, 16)])
    assert disagreeing_collectives(df) == (0, "")
    assert _codes(df) == (0, "")


def test_even_alltoall_members_must_agree_on_count():
    # ncclAlltoAll takes one count that every rank passes: a member with another count is a damaged row.
    df = _rows([4, 5], [(), ()])
    n, example = disagreeing_collectives(df)
    assert n == 1 and example == "comm c seq 0: rank 0 AllToAll 4 fp32, rank 1 AllToAll 5 fp32"
    assert _codes(df) == (n, example)


def test_uneven_alltoall_members_must_still_agree_on_dtype():
    df = _rows([3, 5], [(8, 16), (48, 32)], dtypes=["fp32", "fp64"])
    n, example = disagreeing_collectives(df)
    assert n == 1 and example == "comm c seq 0: rank 0 AllToAll 3 fp32, rank 1 AllToAll 5 fp64"
    assert _codes(df) == (n, example)


def test_a_logged_uneven_alltoall_reads_back_with_nobody_disagreeing(tmp_path):
    # Rank 0 sends 1+3 fp32 elements, rank 1 sends 0+6: per-peer counts 2 and 3.
    base = dict(seq=0, dtype="fp32", root=-1, nranks=2, t_start_s=math.nan, duration_s=math.nan, host="",
                device=-1, context="", algo="", proto="", group=-1, comm="c", op="AllToAll")
    df = pd.DataFrame([dict(base, rank=0, count=2, bytes=8, split_bytes=(4, 12)),
                       dict(base, rank=1, count=3, bytes=12, split_bytes=(0, 24))])
    df.attrs["collsim"] = new_metadata(2, {"c": [0, 1]}, "test", gpus_per_node=1)
    paths = write_nccl_log(df, tmp_path / "x.log")
    back, report = read_nccl_logs(paths)
    assert back["split_bytes"].tolist() == [(4, 12), (0, 24)]
    assert back["count"].tolist() == [2, 3]
    assert report.disagreeing == 0
    assert disagreeing_collectives(back) == (0, "")
