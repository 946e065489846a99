"""Read and write §3 Parquet traces with their ``collsim`` metadata; resolve built-in trace names.

A built-in trace is a Parquet file shipped in ``traces/data/``. ``read_trace("ds_v3.parquet")`` reads the
file of that name in the working folder when there is one, else the built-in one, so the main job works
from any folder. Blocks of rows given as arrays become Arrow tables in :mod:`traces.arrow_table`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from traces.arrow_table import arrow_columns
from traces.atomic import atomic_output, short_repr

# kept in a module without pandas so that ``simrun traces`` starts fast; re-exported here
from traces.builtin import BUILTIN_DESCRIPTIONS, builtin_dir, list_builtin  # noqa: E402,F401
from traces.lazy import lazy_module
from traces.schema import ARROW_SCHEMA, METADATA_KEY, SCHEMA_VERSION, TraceError, validate

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does


def resolve_trace_path(path_or_name: str | Path) -> Path:
    """Return the file a trace argument names: an existing path, else a built-in trace of that name.

    Raises
    ------
    TraceError
        When neither exists; the message lists the built-in names.
    """
    if not isinstance(path_or_name, str | os.PathLike):
        raise TraceError(f"a trace is named by a path or a built-in name, got {short_repr(path_or_name)}")
    if not str(path_or_name).strip():  # Path("") is the current folder
        raise TraceError("the trace name is empty (give a .parquet file or a built-in name)")
    path = Path(path_or_name).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise TraceError(f"{path}: is a folder, not a Parquet trace (a trace is one .parquet file)")
    if path.exists():  # a FIFO, socket or device: Parquet is read from its end, which a stream has not
        raise TraceError(f"{path}: not a regular file (a FIFO or device); a trace is one .parquet file")
    if path.name == str(path_or_name):  # a bare name: look among the built-in traces
        for candidate in (path.name, f"{path.name}.parquet"):
            if (builtin_dir() / candidate).is_file():
                return builtin_dir() / candidate
    known = ", ".join(name for name, _ in list_builtin()) or "none installed"
    raise TraceError(f"{path_or_name}: no such file, and no built-in trace of that name (built-in: {known})")


def read_trace(path_or_name: str | Path) -> pd.DataFrame:
    """Read a §3 Parquet trace, or a built-in trace by name.

    Parameters
    ----------
    path_or_name : str or Path
        A Parquet file, or the name of a built-in trace (``"ds_v3.parquet"``; see ``simrun traces``).

    Returns
    -------
    pandas.DataFrame
        The §3 columns (plus extension columns); the metadata dict is in ``df.attrs["collsim"]``.

    Raises
    ------
    TraceError
        When the file is missing, is not Parquet, or does not follow the schema.

    Examples
    --------
    >>> df = read_trace("ds_v3.parquet")  # doctest: +SKIP
    >>> df.attrs["collsim"]["world_size"]  # doctest: +SKIP
    32
    """
    path = resolve_trace_path(path_or_name)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet trace ({exc})") from None
    raw_meta = (table.schema.metadata or {}).get(METADATA_KEY.encode())
    if raw_meta is None:
        # world size, servers and communicators cannot be guessed honestly from the rows alone
        raise TraceError(f"{path}: Parquet file has no '{METADATA_KEY}' metadata (SPEC §3); write traces with "
                         "traces.write_trace or simrun ingest/synth")
    try:
        meta: dict[str, Any] = json.loads(raw_meta)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # bytes that are not UTF-8 are not JSON text
        raise TraceError(f"{path}: metadata key '{METADATA_KEY}' is not JSON ({exc})") from None
    except RecursionError:  # nesting deeper than the interpreter's stack: no consumer reads such metadata
        raise TraceError(f"{path}: metadata key '{METADATA_KEY}' is JSON nested too deeply to read") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: metadata key '{METADATA_KEY}' is not a JSON object")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TraceError(f"{path}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    splits = split_arrays(table.column("split_bytes")) if "split_bytes" in table.column_names else None
    if splits is not None:
        df = table.drop_columns(["split_bytes"]).to_pandas()
        df["split_bytes"] = pd.Series(splits, index=df.index, dtype=object)
    else:  # another list type, or missing entries inside a list: normalize() converts or refuses per row
        df = table.to_pandas()
    df.attrs[METADATA_KEY] = meta
    try:
        return validate(df)
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from None


def split_arrays(column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """The ``split_bytes`` column of an Arrow table as one read-only int64 array per row (an object array).

    The rows are views of the column's flat values (per Arrow chunk, one ``to_numpy`` and the list
    offsets), not Python lists: at 1,024 GPUs a decode step holds 121 M entries, which as Python ints took
    gigabytes. The chunks are not combined first (that copied the 0.97 GB of values: 3 s of a 1,024-GPU
    read). A missing list is an empty array. Returns None when the column is not a list of int64 without
    missing entries (the caller then converts it row by row, which names a bad row).

    Examples
    --------
    >>> rows = split_arrays(pa.array([[4, 20], [], None], type=pa.list_(pa.int64())))
    >>> [r.tolist() for r in rows], rows[0].dtype
    ([[4, 20], [], []], dtype('int64'))
    >>> [r.tolist() for r in split_arrays(pa.chunked_array([[[1]], [[2, 3]]], type=pa.list_(pa.int64())))]
    [[1], [2, 3]]
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) or (
            column.type.value_type != pa.int64()):
        return None
    if any(arr.values.null_count for arr in chunks):
        return None
    rows = np.empty(len(column), dtype=object)
    at = 0
    for arr in chunks:
        flat = arr.values.to_numpy(zero_copy_only=False)
        flat.flags.writeable = False  # the rows share this buffer
        offsets = arr.offsets.to_numpy().astype(np.int64)
        if arr.null_count:  # a missing list: no entries (its offsets may still span values)
            ends = offsets[1:].copy()
            missing = arr.is_null().to_numpy(zero_copy_only=False)
            ends[missing] = offsets[:-1][missing]
        else:
            ends = offsets[1:]
        # fromiter: one array per row (assigning a list of equal-length arrays would make a 2-D array)
        rows[at:at + len(arr)] = np.fromiter(
            (flat[a:b] for a, b in zip(offsets[:-1].tolist(), ends.tolist(), strict=True)), dtype=object,
            count=len(arr))
        at += len(arr)
    return rows


def write_trace(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a trace frame to Parquet with its metadata (``df.attrs["collsim"]``).

    The frame is validated first. Rows are written as they are; the file is byte-for-byte the same for the
    same frame (no timestamps are written). The file is replaced atomically: an interrupted or failed
    write leaves the earlier file (or none), never a truncated one.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    TraceError
        When the frame does not follow the schema.
    """
    frame = validate(df)
    meta = frame.attrs.get(METADATA_KEY)
    if not meta:
        raise TraceError("trace has no 'collsim' metadata (df.attrs['collsim']); see traces.schema.new_metadata")
    columns = [f.name for f in ARROW_SCHEMA]
    extra = [c for c in frame.columns if c not in columns]
    schema = ARROW_SCHEMA
    table = pa.Table.from_pandas(frame[columns], schema=schema, preserve_index=False)
    for name in extra:  # keep a caller's extra columns, typed by Arrow
        table = table.append_column(name, pa.array(frame[name].tolist()))
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True)})
    if not isinstance(path, str | os.PathLike):
        raise TraceError(f"write_trace needs a file path, got {short_repr(path)}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A complete file or none: written beside the target and renamed (a full disk leaves no footer-less
    # file, and a device such as /dev/full is written in place, never removed).
    try:
        with atomic_output(out) as tmp:
            pq.write_table(table, tmp, compression="zstd")
    except OSError as exc:
        raise TraceError(f"{out}: cannot write the trace ({exc.strerror or exc})") from None
    return out


class TraceWriter:
    """Write a trace to Parquet one block of rows at a time (one row group each), with its metadata.

    Each block is validated as :func:`write_trace` validates a frame (row errors name the row in the whole
    trace); :meth:`check_collectives` runs the checks across rows on light columns of all rows. The file
    is replaced atomically when the ``with`` block ends without an error, else nothing is left.

    Examples
    --------
    >>> with TraceWriter("trace.parquet", meta) as w:  # doctest: +SKIP
    ...     for block in blocks:
    ...         w.write(block)
    """

    def __init__(self, path: str | Path, meta: dict[str, Any]):
        if not isinstance(path, str | os.PathLike):
            raise TraceError(f"write_trace needs a file path, got {short_repr(path)}")
        if not meta:
            raise TraceError("trace has no 'collsim' metadata (df.attrs['collsim']); see traces.schema.new_metadata")
        from traces.checks import check_metadata

        check_metadata(meta)
        self.path = Path(path)
        self.meta = meta
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._output: Any = None

    def __enter__(self) -> TraceWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._output = atomic_output(self.path)
        try:
            tmp = self._output.__enter__()
            schema = ARROW_SCHEMA.with_metadata({METADATA_KEY: json.dumps(self.meta, sort_keys=True)})
            self._writer = pq.ParquetWriter(tmp, schema, compression="zstd")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot write the trace ({exc.strerror or exc})") from None
        return self

    def write(self, block: pd.DataFrame | dict[str, np.ndarray]) -> None:
        """Validate one block of rows (row checks) and write it as one row group.

        ``block`` is a frame, or the schema's columns as arrays (:func:`arrow_columns`: no pandas), which
        are checked by the same row checks and written to the same bytes.
        """
        table = None
        if isinstance(block, dict):  # (not isinstance(..., pd.DataFrame): that would import pandas)
            try:
                table = arrow_columns(block, self.meta["world_size"])
            except TraceError as exc:
                raise TraceError(_shift_row(str(exc), self.rows)) from None
        if table is None:  # a frame, or columns off the fast path: the frame's validation says what is wrong
            frame = pd.DataFrame(block) if isinstance(block, dict) else block
            frame.attrs = {METADATA_KEY: {"world_size": self.meta["world_size"]}}  # the row checks' only need
            try:
                frame = validate(frame, collectives=False)
            except TraceError as exc:
                raise TraceError(_shift_row(str(exc), self.rows)) from None
            table = pa.Table.from_pandas(frame[[f.name for f in ARROW_SCHEMA]], schema=ARROW_SCHEMA,
                                         preserve_index=False)
        self.rows += table.num_rows
        try:
            self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot write the trace ({exc.strerror or exc})") from None

    def check_collectives(self, light: pd.DataFrame, split_len: Any) -> None:
        """The checks across rows of :func:`traces.schema.validate` on all rows (``comm``, ``rank``, ``seq``,
        ``op``, ``count``, ``dtype``, ``bytes``, ``root``, ``nranks``, in file order)."""
        from traces.checks import check_collectives

        if len(light):
            check_collectives(light, self.meta, split_len)

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        try:
            if self._writer is not None:
                self._writer.close()  # writes the footer
        except OSError as err:
            if kind is None:  # the file is not complete: let the atomic output drop it, then say why
                self._output.__exit__(OSError, err, None)
                raise TraceError(f"{self.path}: cannot write the trace ({err.strerror or err})") from None
        try:
            self._output.__exit__(kind, exc, tb)  # renames the complete file over the target, or drops it
        except OSError as err:
            raise TraceError(f"{self.path}: cannot write the trace ({err.strerror or err})") from None
        return False


def _shift_row(message: str, offset: int) -> str:
    """A block's ``row N: ...`` message as the row of the whole trace."""
    head, sep, rest = message.partition(": ")
    if sep and head.startswith("row ") and head[4:].isdigit():
        return f"row {int(head[4:]) + offset}: {rest}"
    return message


__all__ = ["BUILTIN_DESCRIPTIONS", "TraceWriter", "arrow_columns", "builtin_dir", "list_builtin", "read_trace", "resolve_trace_path", "split_arrays", "write_trace"]
