"""The one trace schema (SPEC §3): column names, dtypes, op names, dtype sizes, and `validate`.

Every reader returns a DataFrame in this schema and every consumer (analysis, simulation) reads only this
schema. One row is one operation issued by one rank.

Extension columns (allowed by SPEC §3, "add columns freely"):

``group`` (int64)
    Ops of one rank with the same non-negative ``group`` were issued inside one ``ncclGroupStart/End``
    and progress together (NCCL fuses them into one kernel). ``-1``: not grouped.
``split_bytes`` (list<int64>)
    For an uneven AllToAll (``all_to_all_single`` with splits, MoE dispatch/combine): bytes this rank sends
    to each comm rank, in comm-rank order (its own entry stays local). Empty for every other row; an empty
    list on an AllToAll means every peer gets ``bytes``. In a frame, each entry is a tuple of ints or a 1-D
    int64 numpy array (:func:`traces.read_trace` gives read-only arrays, views of the file's flat values);
    consumers only take ``len`` of it, iterate or index it. For an uneven AllToAll, ``count`` is the total
    element count sent divided by ``nranks`` (rounded down), so ``bytes`` keeps meaning ``count`` × size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from traces.errors import TraceError  # re-exported: the trace family of collsim's CollsimError
from traces.lazy import lazy_module

# re-exported: the vocabulary of the schema lives in a leaf module that traces.checks shares
from traces.vocabulary import (
    COLLECTIVE_OPS,
    DTYPE_BYTES,
    METADATA_KEY,
    NCCL_DTYPE_CODES,
    NCCL_DTYPE_VALUES,
    OPS,
    P2P_OPS,
    ROOTED_OPS,
    SCHEMA_VERSION,
)

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: Column -> pandas dtype, in SPEC order. ``string`` columns hold Python str (never NaN).
COLUMNS: dict[str, str] = {
    "rank": "int32",
    "comm": "string",
    "seq": "int64",
    "op": "string",
    "count": "int64",
    "dtype": "string",
    "bytes": "int64",
    "root": "int32",
    "nranks": "int32",
    "t_start_s": "float64",
    "duration_s": "float64",
    "host": "string",
    "device": "int32",
    "context": "string",
    "algo": "string",
    "proto": "string",
}
#: Extension columns and the value a missing one takes.
EXTENSION_DEFAULTS: dict[str, Any] = {"group": -1, "split_bytes": ()}
EXTENSION_TYPES: dict[str, str] = {"group": "int64", "split_bytes": "object"}
ALL_COLUMNS: tuple[str, ...] = tuple(COLUMNS) + tuple(EXTENSION_DEFAULTS)

#: Arrow schema used on write: explicit, so an empty frame round-trips with the right types.
ARROW_SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("comm", pa.string()),
        ("seq", pa.int64()),
        ("op", pa.string()),
        ("count", pa.int64()),
        ("dtype", pa.string()),
        ("bytes", pa.int64()),
        ("root", pa.int32()),
        ("nranks", pa.int32()),
        ("t_start_s", pa.float64()),
        ("duration_s", pa.float64()),
        ("host", pa.string()),
        ("device", pa.int32()),
        ("context", pa.string()),
        ("algo", pa.string()),
        ("proto", pa.string()),
        ("group", pa.int64()),
        ("split_bytes", pa.list_(pa.int64())),
    ]
)


def empty_trace() -> pd.DataFrame:
    """Return an empty DataFrame with every schema column and its dtype.

    Examples
    --------
    >>> list(empty_trace().columns)[:3]
    ['rank', 'comm', 'seq']
    """
    frame = pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in COLUMNS.items()})
    frame["group"] = pd.Series(dtype="int64")
    frame["split_bytes"] = pd.Series(dtype="object")
    return frame


def new_metadata(
    world_size: int,
    comms: Mapping[str, list[int]],
    source: str,
    gpus_per_node: int = 8,
    **extra: Any,
) -> dict[str, Any]:
    """Build the ``collsim`` metadata dict (SPEC §3).

    Parameters
    ----------
    world_size : int
        Number of global ranks.
    comms : mapping of str to list of int
        Communicator id -> global ranks in comm-rank order.
    source : str
        What produced the trace (``"nccl-log"``, ``"synth:deepseek-v3"``, ...).
    gpus_per_node : int
        GPUs per server.
    **extra
        Optional keys: ``model``, ``parallelism``, ``notes`` (list of str), ``rings``, ...

    Returns
    -------
    dict
    """
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "world_size": int(world_size),
        "gpus_per_node": int(gpus_per_node),
        "comms": {str(k): [int(r) for r in v] for k, v in comms.items()},
        "source": source,
    }
    meta.update(extra)
    return meta


def normalize(df: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Return a copy of ``df`` with schema dtypes, column order and extension defaults.

    Missing extension columns get their defaults; missing SPEC columns raise. ``metadata`` (or the frame's
    own ``attrs["collsim"]``) is carried in ``attrs["collsim"]``.

    Raises
    ------
    TraceError
        When a SPEC column is missing or cannot take its dtype.
    """
    if not isinstance(df, pd.DataFrame):
        raise TraceError(f"a trace is a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"trace lacks column(s): {', '.join(missing)}")
    from traces import checks  # imported here: traces.checks builds on this module

    meta = metadata if metadata is not None else df.attrs.get(METADATA_KEY)
    if df.attrs:
        # pandas deep-copies attrs on every column access (slow for a large ``comms``, and it fails on
        # values that cannot be copied): read the columns of a shallow copy made while attrs are set aside
        original, attrs = df, df.attrs
        original.attrs = {}
        try:
            df = original.copy(deep=False)
        finally:
            original.attrs = attrs
    # Columns are gathered as arrays and framed once (a setitem per column cost more than the data).
    data: dict[str, np.ndarray] = {}
    for name, dtype in COLUMNS.items():
        col = df[name]
        if dtype == "string":
            # Already plain ``str`` objects (the usual case): keep them; converting costs ~0.1 s per column
            # on 150k rows.
            if col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) == "string":
                data[name] = col.to_numpy()
            else:
                missing = col.isna().to_numpy()
                if name == "comm" and missing.any():  # "" would be a communicator of its own
                    raise TraceError(f"row {int(missing.argmax())}: field 'comm' is missing (null) "
                                     f"(found in {int(missing.sum())} row(s))")
                data[name] = col.fillna("").astype(str).to_numpy(dtype=object)
        elif dtype == "float64":
            data[name] = checks.exact_float(col, name)
        else:  # integers: used exactly or refused (never truncated nor wrapped)
            data[name] = checks.exact_int(col, name, dtype)
    data["group"] = (np.full(len(df), -1, dtype=np.int64) if "group" not in df.columns
                     else checks.exact_int(df["group"], "group", "int64", nan_as=-1))
    if "split_bytes" in df.columns:
        splits = df["split_bytes"].tolist()
        # Fast paths: every entry already a tuple of Python ints (readers build them so) or a 1-D int64
        # array (read_trace builds them so, views of the file's flat values); a check is far cheaper than
        # rebuilding a tuple per row, and an array holds its entries in 8 bytes each, not a Python int.
        if not (_int_tuples(splits) or _int64_arrays(splits)):
            splits = [_split_tuple(v, row) for row, v in enumerate(splits)]
    else:
        splits = [()] * len(df)
    # fromiter: one tuple per row (np.array would unpack them); object even when empty (Arrow needs a list)
    data["split_bytes"] = np.fromiter(splits, dtype=object, count=len(df))
    for name in df.columns:
        if name not in data:  # keep unknown extra columns as they are
            data[name] = df[name].to_numpy()
    # dtype given per column: pandas 3 would otherwise turn object text columns into Arrow strings
    out = pd.DataFrame({k: pd.Series(v, dtype=v.dtype) for k, v in data.items()})
    if meta is not None:
        out.attrs[METADATA_KEY] = dict(meta)
    return out


def _int_tuples(values: list[Any]) -> bool:
    """True when every value is a tuple holding only ``int`` (not bool, not numpy integers)."""
    # map/set run in C: a generator per element cost ~0.2 s on 150k rows of 8-peer splits
    if not values:
        return True
    if set(map(type, values)) != {tuple}:
        return False
    return set(map(type, itertools.chain.from_iterable(values))) <= {int}


def _int64_arrays(values: list[Any]) -> bool:
    """True when every value is a one-dimensional int64 numpy array."""
    if not values or set(map(type, values)) != {np.ndarray}:
        return False
    return set(map(_dtype_ndim, values)) == {(np.dtype(np.int64), 1)}


def _dtype_ndim(value: np.ndarray) -> tuple[np.dtype, int]:
    return value.dtype, value.ndim


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _split_tuple(value: Any, row: int) -> tuple[int, ...]:
    """One ``split_bytes`` entry as a tuple of ints: exactly, or a TraceError naming the row."""
    if value is None or _is_nan(value):
        return ()
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return tuple(value.tolist())
    if isinstance(value, list | tuple | np.ndarray):
        items = value.tolist() if isinstance(value, np.ndarray) else list(value)
        if all(isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_) for x in items):
            return tuple(int(x) for x in items)
    from traces.atomic import short_repr

    raise TraceError(f"row {row}: field 'split_bytes' must be a list of integers (bytes per comm rank), "
                     f"got {short_repr(value)}")


def validate(df: pd.DataFrame, collectives: bool = True) -> pd.DataFrame:
    """Check a trace frame against SPEC §3 and return it normalised.

    Checks (vectorised, in :mod:`traces.checks`): dtypes exact (no truncated fraction, no wrapped
    integer), op and dtype names, ``bytes == count × size`` without overflow, ranges (ranks inside
    ``world_size``, roots inside the communicator, times finite and within the trace's span), metadata
    types (``world_size``, ``gpus_per_node``, ``comms``), ``split_bytes`` only on AllToAll rows with one
    entry per comm rank, one row per member of each collective, ``nranks`` equal to the communicator's
    size, and the rows of one collective agreeing on op, dtype, size, ``nranks`` and root.

    ``collectives=False`` skips the checks across rows (one row per member, agreement, ``nranks`` against
    the communicator): readers use it for a trace as read, whose problems they count and report;
    :func:`traces.write_trace`, :func:`traces.read_trace` and the simulator check everything.

    A trace whose times are clock readings (earliest ``t_start_s`` >= 1e8 s, e.g. Unix epoch) is rebased
    to start at 0; the shift is kept in metadata ``time_origin_s``.

    Raises
    ------
    TraceError
        With one line naming the first bad field and the row (0-based) where it was found.

    Examples
    --------
    >>> import pandas as pd
    >>> row = dict(rank=0, comm="c0", seq=0, op="AllReduce", count=4, dtype="fp32", bytes=16, root=-1,
    ...            nranks=2, t_start_s=0.0, duration_s=float("nan"), host="", device=-1, context="",
    ...            algo="", proto="")
    >>> len(validate(pd.DataFrame([row])))
    1
    >>> validate(pd.DataFrame([{**row, "rank": 0.5}]))
    Traceback (most recent call last):
    ...
    traces.errors.TraceError: row 0: field 'rank' is not a whole number: 0.5 (found in 1 row(s))
    """
    from traces import checks

    if not isinstance(df, pd.DataFrame):
        raise TraceError(f"a trace is a pandas DataFrame, got {type(df).__name__}")
    out = normalize(df)
    meta = out.attrs.get(METADATA_KEY)
    if meta is not None:
        checks.check_metadata(meta)
    if out.empty:
        return out
    out.attrs = {}  # pandas deep-copies attrs on every column access: check a bare frame
    origin = checks.rebase_times(out)
    if origin:
        meta = {**(meta or {}), "time_origin_s": float((meta or {}).get("time_origin_s", 0.0)) + origin}
    split_len = checks.split_lengths(out)
    checks.check_rows(out, meta or {}, split_len)
    if collectives:
        checks.check_collectives(out, meta or {}, split_len)
    if meta is not None:
        out.attrs[METADATA_KEY] = meta
    return out


def dtype_name(code_or_name: int | str) -> str:
    """Map an NCCL datatype code (int) or a known alias to a schema dtype name.

    Raises
    ------
    TraceError
        For an unknown code or name.
    """
    if isinstance(code_or_name, int | np.integer):
        try:
            return NCCL_DTYPE_CODES[int(code_or_name)]
        except KeyError:
            raise TraceError(f"unknown NCCL datatype code {code_or_name}") from None
    key = str(code_or_name).strip()
    if key in DTYPE_BYTES:
        return key
    alias = _DTYPE_ALIASES.get(key.lower().removeprefix("torch.").removeprefix("nccl"))
    if alias is None:
        raise TraceError(f"unknown dtype {code_or_name!r}")
    return alias


_DTYPE_ALIASES: dict[str, str] = {
    "char": "int8", "int8": "int8", "uint8": "uint8", "byte": "uint8", "bool": "uint8",
    "int": "int32", "int32": "int32", "uint32": "uint32",
    "int64": "int64", "long": "int64", "uint64": "uint64",
    "half": "fp16", "float16": "fp16", "fp16": "fp16",
    "float": "fp32", "float32": "fp32", "fp32": "fp32",
    "double": "fp64", "float64": "fp64", "fp64": "fp64",
    "bfloat16": "bf16", "bf16": "bf16",
    "float8e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
    "float8e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "fp8_e5m2": "fp8_e5m2",
}


__all__ = [
    "ALL_COLUMNS",
    "ARROW_SCHEMA",
    "COLLECTIVE_OPS",
    "COLUMNS",
    "DTYPE_BYTES",
    "EXTENSION_DEFAULTS",
    "EXTENSION_TYPES",
    "METADATA_KEY",
    "NCCL_DTYPE_CODES",
    "NCCL_DTYPE_VALUES",
    "OPS",
    "P2P_OPS",
    "ROOTED_OPS",
    "SCHEMA_VERSION",
    "TraceError",
    "dtype_name",
    "empty_trace",
    "new_metadata",
    "normalize",
    "validate",
]
