"""Trace columns as numpy arrays -> an Arrow table of the §3 schema, checked without pandas
(:func:`arrow_columns`, the fast path of :class:`traces.io.TraceWriter`). Arrays are made from their buffers:
``pa.array`` asks for pandas on every call, and importing it is what this path avoids.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa

from traces.arrays import Text, factorize
from traces.schema import ARROW_SCHEMA


def arrow_columns(cols: dict[str, np.ndarray], world_size: int | None) -> pa.Table | None:
    """The schema's columns as arrays -> an Arrow table of :data:`ARROW_SCHEMA`, checked without pandas.

    The fast path of :meth:`traces.io.TraceWriter.write`: every column already in the form that
    :func:`traces.schema.normalize` keeps as it is (integers of any width that fit their schema type,
    float64, ``str`` objects, ``split_bytes`` as tuples of ``int``) is cast, then the row checks of
    :func:`traces.schema.validate` run on the arrays (:func:`traces.checks.check_rows`, the same function
    and messages). Returns None for any other input, which then goes through the frame's validation (its
    messages name what is wrong). The table holds the values ``pa.Table.from_pandas`` makes of the
    normalised frame (NaN times are nulls), so the Parquet bytes are the same.

    Raises
    ------
    TraceError
        From the row checks.
    """
    from traces import checks

    n = len(cols["rank"])
    data: dict[str, np.ndarray] = {}
    for field in ARROW_SCHEMA:
        values = cols[field.name]
        if isinstance(values, Text):  # codes into a table of names: the names are checked
            if len(values) != n or (len(values.names) and set(map(type, values.names.tolist())) != {str}):
                return None
            data[field.name] = values
            continue
        values = np.asarray(values)
        if len(values) != n:
            return None
        if field.name == "split_bytes":
            items = values.tolist()
            if values.dtype != object or not _int_tuples(items):
                return None
        elif pa.types.is_string(field.type):
            if values.dtype != object or (n and set(map(type, values.tolist())) != {str}):
                return None
        elif pa.types.is_floating(field.type):
            if values.dtype != np.float64:
                return None
        else:
            kind = field.type.to_pandas_dtype()
            if values.dtype.kind not in "iu":
                return None
            info = np.iinfo(kind)
            if n and (int(values.min()) < info.min or int(values.max()) > info.max):
                return None  # exact_int's message names the row
            values = values.astype(kind, copy=False)
        data[field.name] = values
    checks.rebase_times(data)
    split_len = np.fromiter(map(len, data["split_bytes"]), dtype=np.int64, count=n)
    checks.check_rows(data, {"world_size": world_size}, split_len)
    arrays = []
    for field in ARROW_SCHEMA:
        values = data[field.name]
        if field.name == "split_bytes":
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(split_len, out=offsets[1:])
            flat = np.fromiter(itertools.chain.from_iterable(values.tolist()), dtype=np.int64, count=int(offsets[-1]))
            arrays.append(pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(offsets)],
                                                children=[_numeric_array(pa.int64(), flat)]))
        elif pa.types.is_string(field.type):
            array = _string_array(values)
            if array is None:
                return None
            arrays.append(array)
        else:
            arrays.append(_numeric_array(field.type, values))
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


# Arrays are made from their buffers: ``pa.array`` asks for pandas on every call (to tell a pandas object),
# and importing it is what this path avoids.
def _numeric_array(kind: pa.DataType, values: np.ndarray) -> pa.Array:
    """A numeric Arrow array of ``values`` (already of that type); NaN floats are nulls (as in
    ``pa.Table.from_pandas``)."""
    values = np.ascontiguousarray(values)
    validity, nulls = None, 0
    if values.dtype.kind == "f":
        missing = np.isnan(values)
        nulls = int(missing.sum())
        if nulls:
            validity = pa.py_buffer(np.packbits(~missing, bitorder="little"))
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(values)], null_count=nulls)


def _string_array(values: np.ndarray | Text) -> pa.Array | None:
    """An Arrow string array of an object array of ``str`` (each distinct value encoded once), or None when
    one is not valid UTF-8."""
    codes, distinct = factorize(values)
    try:
        encoded = np.empty(len(distinct), dtype=object)
        encoded[:] = [v.encode() for v in distinct.tolist()]
    except UnicodeEncodeError:
        return None
    sizes = np.fromiter(map(len, encoded.tolist()), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(sizes[codes], out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return None
    body = b"".join(encoded[codes].tolist())
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(body)])


def _int_tuples(values: list[Any]) -> bool:
    """True when every value is a tuple holding only ``int`` (as :func:`traces.schema.normalize` keeps them)."""
    if set(map(type, values)) - {tuple}:
        return False
    return set(map(type, itertools.chain.from_iterable(values))) <= {int}


__all__ = ["arrow_columns"]
