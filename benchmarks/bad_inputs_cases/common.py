"""What every case of the bad-input battery shares: :class:`Case`, :class:`Outcome`, and the inputs they make."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["TIMEOUT_S", "Case", "Outcome", "base_meta", "base_rows", "check_call", "check_short", "read_call",
           "run_args", "small_trace", "trace", "with_value", "write_raw"]

TIMEOUT_S = 150


@dataclass(frozen=True)
class Outcome:
    """What one CLI invocation gave."""

    code: int | None
    stdout: str
    stderr: str
    folder: Path


@dataclass(frozen=True)
class Case:
    """One bad input.

    ``argv`` (CLI) or ``call`` (API) is made from a fresh temporary folder. ``code``: the expected exit code
    (None: 0 or 2 both acceptable, but no traceback). ``expect``: words the error line must contain.
    ``error``: the API exception's class name. ``check``: an extra test returning a failure text or None.
    """

    id: str
    what: str
    argv: Callable[[Path], list[str]] | None = None
    call: Callable[[Path], Callable[[], Any]] | None = None
    code: int | None = 2
    expect: str = ""
    error: str = ""
    check: Callable[[Path, Outcome | Any], str | None] | None = None
    owner: str = "hardening"
    slow: bool = False
    signal_after_s: float | None = None
    tags: tuple[str, ...] = field(default=())


# --- inputs ---------------------------------------------------------------------------------------------

def base_rows(world: int = 4, ops: int = 3) -> pd.DataFrame:
    """A small valid trace: ``ops`` AllReduce of 1 MiB on one comm of ``world`` ranks."""
    rows = [dict(rank=r, comm="c0", seq=s, op="AllReduce", count=1 << 18, dtype="fp32", bytes=1 << 20, root=-1,
                 nranks=world, t_start_s=s * 1e-3, duration_s=float("nan"), host=f"node{r // 8}", device=r % 8,
                 context="", algo="", proto="")
            for s in range(ops) for r in range(world)]
    return pd.DataFrame(rows)


def base_meta(world: int = 4) -> dict[str, Any]:
    return {"schema_version": 1, "world_size": world, "gpus_per_node": 8, "comms": {"c0": list(range(world))},
            "source": "bad_inputs"}


def write_raw(path: Path, df: pd.DataFrame, meta: Any) -> Path:
    """Write a Parquet trace as given, bypassing every check (how a broken file from elsewhere looks)."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({"collsim": json.dumps(meta)})
    pq.write_table(table, path)
    return path


def trace(folder: Path, change: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
          meta: Callable[[dict], Any] | None = None, name: str = "bad.parquet") -> Path:
    df = base_rows()
    df = change(df) if change else df
    return write_raw(folder / name, df, meta(base_meta()) if meta else base_meta())


def with_value(column: str, value: Any, row: int = 1, dtype: Any = None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(df: pd.DataFrame) -> pd.DataFrame:
        values = df[column].astype(dtype if dtype is not None else object).tolist()
        values[row] = value
        df[column] = pd.Series(values, dtype=dtype if dtype is not None else None)
        return df
    return change


def small_trace(folder: Path) -> Path:
    return trace(folder, name="small.parquet")



def run_args(path_of: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["run", "--trace", str(path_of(d)), "--topo", "fat_tree", "--out", str(d / "out"),
                      "--no-report", *extra]


def read_call(path_of: Callable[[Path], Path]) -> Callable[[Path], Callable[[], Any]]:
    def call(d: Path) -> Callable[[], Any]:
        from traces import read_trace

        p = path_of(d)
        return lambda: read_trace(p)
    return call


def check_call(fn: Callable[[Path, Any], str | None]) -> Callable[[Path], Callable[[], Any]]:
    return lambda d: (lambda: fn(d, None))



def check_short(limit: int) -> Callable[[Path, Outcome], str | None]:
    def check(folder: Path, out: Outcome) -> str | None:
        return None if len(out.stderr) < limit else f"error message is {len(out.stderr)} chars long"
    return check

