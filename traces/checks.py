"""The checks behind :func:`traces.schema.validate`: exact dtypes, metadata types, collectives that agree.

Each check is vectorised (numpy / pandas over whole columns) and raises :class:`traces.schema.TraceError`
naming the field, the 0-based row and the value (cut short, see :func:`traces.atomic.short_repr`). A value
is either used exactly or refused: a fractional rank is not truncated, a rank of ``2**32 + 3`` is not
wrapped to 3, an ``int64`` product that overflows is not compared modulo ``2**64``.

Limits (also in ``docs/limits.md``):

- :data:`MAX_WORLD_SIZE` ranks, :data:`MAX_GPUS_PER_NODE` GPUs per node;
- :data:`MAX_OP_BYTES` bytes per row (float64 represents every such integer exactly, and the simulator's
  flow sizes are float64);
- times at most :data:`MAX_SPAN_S` seconds from the trace's start; a trace whose earliest ``t_start_s`` is
  at least :data:`CLOCK_THRESHOLD_S` is taken to carry clock times (Unix epoch) and is rebased by
  :func:`rebase_times` so that float resolution does not change durations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from traces.arrays import Text, combined_codes, duplicated, factorize
from traces.atomic import short_repr
from traces.errors import TraceError
from traces.lazy import lazy_module
from traces.metadata_keys import check_optional_keys, is_int
from traces.split_entries import split_out_of_range, split_sums
from traces.vocabulary import DTYPE_BYTES, METADATA_KEY, OPS, P2P_OPS, ROOTED_OPS

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: A normalised trace frame, or a mapping of its column names to arrays (what the row checks read).
Columns = Any

__all__ = [
    "CLOCK_THRESHOLD_S",
    "MAX_GPUS_PER_NODE",
    "MAX_OP_BYTES",
    "MAX_SPAN_S",
    "MAX_WORLD_SIZE",
    "check_collectives",
    "check_metadata",
    "check_rows",
    "exact_float",
    "exact_int",
    "rebase_times",
    "split_lengths",
]

MAX_WORLD_SIZE = 1 << 20
MAX_GPUS_PER_NODE = 1024
MAX_OP_BYTES = 1 << 53
MAX_SPAN_S = 1e6  # 11.6 days: float64 still resolves 0.2 ns at that distance from the start
CLOCK_THRESHOLD_S = 1e8  # 3.2 years: no trace lasts that long, so such a start is a clock reading


def _fail(mask: np.ndarray, what: str, values: Any = None) -> None:
    """Raise a TraceError for the first row where ``mask`` holds (no-op when none does)."""
    bad = np.flatnonzero(mask)
    if bad.size:
        row = int(bad[0])
        shown = "" if values is None else f": {short_repr(_item(values[row]))}"
        raise TraceError(f"row {row}: {what}{shown} (found in {bad.size} row(s))")


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def exact_int(col: pd.Series, name: str, dtype: str, nan_as: int | None = None) -> np.ndarray:
    """Column ``name`` as a numpy array of ``dtype``, refusing any value that would change on the way.

    Parameters
    ----------
    col : pandas.Series
        Integers of any width, floats holding whole numbers, or objects holding Python ints.
    name : str
        Column name for the message.
    dtype : str
        ``"int32"`` or ``"int64"``.
    nan_as : int, optional
        Value of a missing entry; by default a missing entry is refused.

    Raises
    ------
    TraceError
        Text, booleans, fractions, non-finite or missing values, or values outside ``dtype``'s range.

    Examples
    --------
    >>> exact_int(pd.Series([1.0, 2.0]), "rank", "int32")
    array([1, 2], dtype=int32)
    >>> exact_int(pd.Series([0.5]), "rank", "int32")
    Traceback (most recent call last):
    ...
    traces.errors.TraceError: row 0: field 'rank' is not a whole number: 0.5 (found in 1 row(s))
    """
    if col.dtype == dtype:
        return col.to_numpy()
    info = np.iinfo(dtype)
    if col.dtype.kind == "b":
        raise TraceError(f"field '{name}' holds true/false values, expected integers ({dtype})")
    if col.dtype.kind not in "iuf" or isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
        col = _numeric(col, name)  # Python ints, text, nullable pandas types
    if col.dtype.kind == "f":
        values = col.to_numpy(dtype=float)
        missing = np.isnan(values)
        if nan_as is None:
            _fail(missing, f"field '{name}' is missing (NaN)")
        filled = np.where(missing, float(nan_as or 0), values)
        _fail(~np.isfinite(filled), f"field '{name}' is not finite", values)
        _fail(filled != np.floor(filled), f"field '{name}' is not a whole number", values)
        # float(int64 max) rounds up to 2**63, which fits no int64: compare against the float bound strictly
        # where it is not the exact maximum (else 2**63 passes and wraps to the minimum in the cast)
        hi_f = float(info.max)
        too_big = filled >= hi_f if int(hi_f) > info.max else filled > hi_f
        _fail((filled < info.min) | too_big, f"field '{name}' does not fit {dtype}", values)
        return filled.astype(dtype)
    values = col.to_numpy()
    if values.size and (values.min() < info.min or values.max() > info.max):
        _fail((values < info.min) | (values > info.max), f"field '{name}' does not fit {dtype}", values)
    return values.astype(dtype)


def _numeric(col: pd.Series, name: str) -> pd.Series:
    """An object or extension column as numbers (int64 or float64); TraceError on text, booleans, huge ints."""
    values = col.to_numpy(dtype=object)
    # booleans and text are refused even when they read as numbers ("3", True): a value is used as given
    is_bool = np.fromiter((isinstance(v, bool | np.bool_ | str | bytes) for v in values), bool, len(values))
    try:
        numeric = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    except (OverflowError, ValueError, TypeError):
        numeric = pd.Series(values, dtype=object)
    if numeric.dtype.kind not in "iuf":  # ints beyond 64 bits stay objects
        huge = np.fromiter((isinstance(v, int) and not -(1 << 63) <= v < (1 << 63) for v in values), bool, len(values))
        _fail(huge, f"field '{name}' does not fit 64 bits", values)
        numeric = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    present = np.fromiter((v is not None and v is not pd.NA and not (isinstance(v, float) and v != v)
                           for v in values), bool, len(values))
    _fail((numeric.isna().to_numpy() & present) | is_bool, f"field '{name}' is not a number", values)
    return numeric


def exact_float(col: pd.Series, name: str) -> np.ndarray:
    """Column ``name`` as float64; NaN stays NaN (unknown); text and booleans are refused.

    Examples
    --------
    >>> exact_float(pd.Series([1, 2]), "t_start_s")
    array([1., 2.])
    """
    if col.dtype == "float64":
        return col.to_numpy()
    if col.dtype.kind == "b":
        raise TraceError(f"field '{name}' holds true/false values, expected numbers (float64)")
    if col.dtype.kind not in "iuf" or isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
        col = _numeric(col, name)
    return col.to_numpy(dtype=float, na_value=np.nan)


def check_metadata(meta: Mapping[str, Any]) -> None:
    """Check the types and ranges of the ``collsim`` metadata keys that consumers rely on.

    Raises
    ------
    TraceError
        Naming the key: ``world_size`` and ``gpus_per_node`` positive ints within the limits, ``comms`` a
        mapping of comm id to a list of distinct global ranks below ``world_size`` (-1: a member no log
        line shows), ``source`` a string.

    Examples
    --------
    >>> check_metadata({"world_size": "four"})
    Traceback (most recent call last):
    ...
    traces.errors.TraceError: metadata 'world_size' must be an integer in 0..1048576, got 'four'
    """
    if not isinstance(meta, Mapping):
        raise TraceError(f"metadata '{METADATA_KEY}' must be a mapping, got {type(meta).__name__}")
    try:  # it is stored as JSON (SPEC §3)
        json.dumps(meta)
    except (TypeError, ValueError) as exc:
        raise TraceError(f"metadata '{METADATA_KEY}' is not JSON: {short_repr(str(exc))}") from None
    world = meta.get("world_size")
    for key, low, top in (("world_size", 0, MAX_WORLD_SIZE), ("gpus_per_node", 1, MAX_GPUS_PER_NODE)):
        value = meta.get(key)
        if value is not None and (not is_int(value) or not low <= value <= top):
            raise TraceError(f"metadata '{key}' must be an integer in {low}..{top}, got {short_repr(value)}")
    source = meta.get("source")
    if source is not None and not isinstance(source, str):
        raise TraceError(f"metadata 'source' must be a string, got {short_repr(source)}")
    check_optional_keys(meta)
    comms = meta.get("comms")
    if comms is None:
        return
    if not isinstance(comms, Mapping):
        raise TraceError(f"metadata 'comms' must map each comm id to its global ranks, got {short_repr(comms)}")
    limit = world if world is not None else MAX_WORLD_SIZE
    for comm, ranks in comms.items():
        if not isinstance(ranks, list | tuple) or not ranks or not all(map(is_int, ranks)):
            raise TraceError(f"metadata 'comms'[{short_repr(comm)}] must be a non-empty list of global ranks, "
                             f"got {short_repr(ranks)}")
        arr = np.asarray(ranks, dtype=np.int64)
        if arr.min() < -1 or arr.max() >= limit:  # -1: a member that no log line shows (readers)
            raise TraceError(f"metadata 'comms'[{short_repr(comm)}] names rank {int(arr[(arr < -1) | (arr >= limit)][0])}"
                             f", outside world_size {limit}")
        arr = arr[arr >= 0]
        if np.unique(arr).size != arr.size:
            raise TraceError(f"metadata 'comms'[{short_repr(comm)}] lists a rank twice")


def _column(out: Columns, name: str) -> np.ndarray | Text:
    """Column ``name`` of a frame or of a mapping of arrays, as an array (a text column held as codes stays
    so: :func:`traces.arrays.factorize` reads its codes)."""
    values = out[name]
    return values if isinstance(values, Text) else np.asarray(values)


def check_rows(out: Columns, meta: Mapping[str, Any], split_len: np.ndarray) -> None:
    """Per-row checks: names, ranges, ``bytes == count × size`` without overflow, roots, splits, times.

    ``out`` is a normalised frame or a mapping of its columns as arrays (no pandas needed);
    ``split_len`` is :func:`split_lengths` of ``out``.
    """
    op, dtype = _column(out, "op"), _column(out, "dtype")
    op_codes, op_names = factorize(op)  # a handful of names: look each up once
    _fail(~np.isin(op_codes, [k for k, n in enumerate(op_names) if n in OPS]), "unknown op", op)
    codes, names = factorize(dtype)
    _fail(~np.isin(codes, [k for k, n in enumerate(names) if n in DTYPE_BYTES]), "unknown dtype", dtype)
    count, nbytes = _column(out, "count"), _column(out, "bytes")
    _fail(count < 0, "field 'count' is negative", count)
    sizes = np.array([DTYPE_BYTES[n] for n in names], dtype=np.int64)[codes]
    # count × size is compared only where it cannot overflow int64 (a wrapped product could match)
    _fail(count > MAX_OP_BYTES // sizes, f"field 'count' × dtype size exceeds {MAX_OP_BYTES} bytes", count)
    _fail(nbytes != count * sizes, "field 'bytes' is not count × dtype size", nbytes)
    nranks, rank = _column(out, "nranks"), _column(out, "rank")
    _fail((nranks < 1) | (nranks > MAX_WORLD_SIZE), f"field 'nranks' is not in 1..{MAX_WORLD_SIZE}", nranks)
    _fail(rank < 0, "field 'rank' is negative", rank)
    _fail(_column(out, "seq") < 0, "field 'seq' is negative", _column(out, "seq"))
    _fail(_column(out, "device") < -1, "field 'device' is below -1", _column(out, "device"))
    _fail(_column(out, "group") < -1, "field 'group' is below -1", _column(out, "group"))
    world = meta.get("world_size")
    if world is not None:
        _fail(rank >= world, f"field 'rank' is not below world_size {world}", rank)
    rooted = np.isin(op_codes, [k for k, n in enumerate(op_names) if n in ROOTED_OPS | P2P_OPS])
    root = _column(out, "root")
    _fail(rooted & ((root < 0) | (root >= nranks)), "field 'root' is outside the communicator", root)
    is_a2a = op_codes == (list(op_names).index("AllToAll") if "AllToAll" in op_names else -2)
    _fail((split_len > 0) & ~is_a2a, "field 'split_bytes' is set on a row that is not AllToAll")
    _fail((split_len > 0) & (split_len != nranks), "field 'split_bytes' needs one entry per comm rank", split_len)
    if split_len.any():
        _fail(split_out_of_range(_column(out, "split_bytes"), split_len, MAX_OP_BYTES),
              f"field 'split_bytes' has an entry outside 0..{MAX_OP_BYTES}")
        # SPEC §3: an AllToAll's count is the elements sent to each peer; with split_bytes that is their mean,
        # total / dtype size / nranks (the readers floor it; a writer that rounds up is accepted too). A count
        # off by more would leave two sizes for one op, one of them silently unused
        with_split = split_len > 0
        per_rank_bytes = np.maximum(sizes, 1) * np.maximum(nranks, 1)
        total = split_sums(_column(out, "split_bytes"), split_len)
        low, high = total // per_rank_bytes, -(-total // per_rank_bytes)
        _fail(with_split & ((count < low) | (count > high)),
              "field 'count' is not the mean elements per peer of split_bytes (sum // dtype size // nranks)", count)
    for name in ("t_start_s", "duration_s"):
        t = _column(out, name)
        _fail(np.isinf(t), f"field '{name}' is infinite (NaN means unknown)", t)
        _fail(t < 0, f"field '{name}' is negative", t)
        _fail(t > MAX_SPAN_S, f"field '{name}' is more than {MAX_SPAN_S:g} s from the trace's start", t)


def split_lengths(out: Columns) -> np.ndarray:
    """Entries of ``split_bytes`` per row (0: an even op)."""
    splits = _column(out, "split_bytes")
    return np.fromiter(map(len, splits), dtype=np.int64, count=len(splits))


def rebase_times(out: Columns) -> float:
    """Shift ``t_start_s`` so that the trace starts at 0 when it carries clock times; return the shift.

    A trace whose earliest known ``t_start_s`` is at least :data:`CLOCK_THRESHOLD_S` holds clock readings
    (e.g. Unix epoch, 1.7e9 s), where float64 resolves only ~0.2 us; durations computed from them lose up
    to that much. Subtracting the earliest start is exact (both values are close), so the relative times
    are the ones in the file and later arithmetic keeps full resolution. Otherwise nothing changes (0.0).
    """
    t = _column(out, "t_start_s")
    finite = t[np.isfinite(t)]
    if not finite.size or finite.min() < CLOCK_THRESHOLD_S:
        return 0.0
    origin = float(finite.min())
    out["t_start_s"] = t - origin
    return origin


def check_collectives(out: Columns, meta: Mapping[str, Any], split_len: np.ndarray) -> None:
    """The rows of one collective (same ``comm`` and ``seq``) must be one per member and agree.

    Checks: no duplicated (``comm``, ``seq``, ``rank``) collective row nor (``comm``, ``rank``, ``op``,
    ``root``, ``seq``) Send/Recv row; ``nranks`` equal to the size of the communicator in the metadata and
    every row's rank one of its members (or, without metadata, no more rows than ``nranks``); and the rows
    of one collective agree on ``op``, ``dtype``, ``nranks``, ``root`` and (unless AllToAll splits make
    them differ) ``count`` and ``bytes``. ``out`` is a frame or a mapping of its columns as arrays.
    """
    comm_col = _column(out, "comm")
    comm_codes, comm_names = factorize(comm_col)
    rank = _column(out, "rank").astype(np.int64)
    nranks = _column(out, "nranks")
    n_rows = len(rank)
    comms = meta.get("comms") or {}
    size_of = np.array([len(comms[c]) if c in comms else -1 for c in comm_names], dtype=np.int64)[comm_codes]
    known = size_of >= 0
    _fail(known & (nranks != size_of), "field 'nranks' differs from the size of its comm in the metadata", nranks)
    if known.any():
        width = int(max(rank.max(), max((max(v) for v in comms.values()), default=0))) + 1
        members = {c: np.asarray(comms[c], dtype=np.int64) for c in comm_names if c in comms}
        member_keys = np.concatenate([k * width + members[c][members[c] >= 0]  # -1: an unseen member
                                      for k, c in enumerate(comm_names) if c in comms])
        row_keys = comm_codes.astype(np.int64) * width + rank
        outside = known & ~np.isin(row_keys, member_keys)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise TraceError(f"row {row}: rank {int(rank[row])} is not a member of comm "
                             f"{short_repr(comm_col[row])} in the metadata (found in {int(outside.sum())} row(s))")
    op_codes, op_names = factorize(_column(out, "op"))
    is_p2p = np.isin(op_codes, [k for k, n in enumerate(op_names) if n in P2P_OPS])
    seq_all = _column(out, "seq")
    if is_p2p.any():
        at = np.flatnonzero(is_p2p)
        dup = np.zeros(n_rows, bool)
        dup[at[duplicated(comm_codes[at], rank[at], op_codes[at], _column(out, "root")[at], seq_all[at])]] = True
        _fail(dup, "Send/Recv row duplicates an earlier one (same comm, rank, op, peer and seq)")
    coll = np.flatnonzero(~is_p2p)
    if not coll.size:
        return
    seq = seq_all[coll]
    gid = factorize(comm_codes[coll] * (int(seq.max()) + 1) + seq)[0] if len(comm_names) * (int(seq.max()) + 1) < (
        1 << 62) else combined_codes(comm_codes[coll], seq)  # one int64 key per (comm, seq) when it fits
    dup = np.zeros(n_rows, bool)
    dup[coll[duplicated(gid, rank[coll])]] = True
    _fail(dup, "row duplicates an earlier row of the same collective (same comm, seq and rank)")
    first = coll[np.unique(gid, return_index=True)[1]]  # the earliest row of each collective
    lead = first[gid]
    has_split = split_len[coll] > 0
    split_group = np.bincount(gid, weights=has_split, minlength=first.size)[gid] > 0
    codes = {"op": op_codes, "dtype": factorize(_column(out, "dtype"))[0]}  # ints compare fast
    for name in ("op", "dtype", "nranks", "root", "count", "bytes"):
        values = codes.get(name, _column(out, name))
        differs = values[coll] != values[lead]
        if name in ("count", "bytes"):
            differs &= ~split_group
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            row, ref = int(coll[i]), int(lead[i])
            comm = comm_col[row]
            shown = _column(out, name)
            raise TraceError(f"row {row}: collective comm={short_repr(comm)} seq={int(seq[i])}: field '{name}' is "
                             f"{short_repr(_item(shown[row]))} on rank {int(rank[row])} but "
                             f"{short_repr(_item(shown[ref]))} on rank {int(rank[ref])} (row {ref})")
    if not known.all():
        rows_of = np.bincount(gid, minlength=first.size)[gid]
        _fail(np.isin(np.arange(n_rows), coll[(rows_of > nranks[coll]) & ~known[coll]]),
              "collective has more rows than its field 'nranks'", nranks)
