"""Trace columns as numpy arrays -> an Arrow table (traces.arrow_table, the fast path of
``TraceWriter.write`` that ``simrun ingest`` takes without pandas): a column block writes the same Parquet
bytes and raises the same errors as the frame it stands for."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traces.arrays import Text
from traces.io import TraceWriter
from traces.schema import TraceError, new_metadata


def _block(n: int, **changes: object) -> dict[str, np.ndarray]:
    """A column block of ``n`` valid rows (NaN and known times, splits on AllToAll, text as codes and objects)."""
    k = np.arange(n)
    a2a = k % 3 == 0
    cols = {
        "rank": k % 2, "comm": Text(np.zeros(n, dtype=np.int64), np.array(["c0"], dtype=object)), "seq": k // 2,
        "op": np.where(a2a, "AllToAll", "AllReduce").astype(object), "count": np.full(n, 4),
        "dtype": Text(np.full(n, 1), np.array(["", "fp32"], dtype=object)), "bytes": np.full(n, 16),
        "root": np.full(n, -1), "nranks": np.full(n, 2), "t_start_s": np.where(k % 4 == 1, np.nan, k * 0.5),
        "duration_s": np.full(n, np.nan), "host": Text(k % 2, np.array(["h0", "h1"], dtype=object)),
        "device": k % 2, "context": Text(np.zeros(n, dtype=np.int64), np.array([""], dtype=object)),
        "algo": np.where(k % 2, "RING", "").astype(object), "proto": np.full(n, "", dtype=object),
        "group": np.full(n, -1),
    }
    splits = np.empty(n, dtype=object)
    splits[:] = [(16, 16) if a else () for a in a2a.tolist()]  # count 4 fp32 = 32 bytes over 2 peers
    cols["split_bytes"] = splits
    cols.update(changes)
    return cols


def _write(path: Path, block: dict[str, np.ndarray] | pd.DataFrame) -> bytes:
    meta = new_metadata(2, {"c0": [0, 1]}, "test", gpus_per_node=2)
    with TraceWriter(path, meta) as writer:
        writer.write(block)
    return path.read_bytes()


def _as_frame(block: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({k: pd.Series(np.asarray(v), dtype=np.asarray(v).dtype) for k, v in block.items()})


def test_column_block_writes_the_frames_bytes(tmp_path: Path) -> None:
    block = _block(12)
    assert _write(tmp_path / "cols.parquet", block) == _write(tmp_path / "frame.parquet", _as_frame(block))


@pytest.mark.parametrize("changes", [
    {"rank": np.full(12, 5)},  # outside world_size
    {"bytes": np.full(12, 15)},  # not count x size
    {"t_start_s": np.full(12, math.inf)},
    {"rank": np.full(12, 2**40)},  # does not fit int32: the frame's exact cast names it
    {"count": np.full(12, 4.5)},  # not integers: off the fast path, the frame's message
])
def test_column_block_raises_the_frames_error(tmp_path: Path, changes: dict[str, np.ndarray]) -> None:
    block = _block(12, **changes)
    with pytest.raises(TraceError) as from_cols:
        _write(tmp_path / "cols.parquet", block)
    with pytest.raises(TraceError) as from_frame:
        _write(tmp_path / "frame.parquet", _as_frame(block))
    assert str(from_cols.value) == str(from_frame.value)
    assert not (tmp_path / "cols.parquet").exists()
