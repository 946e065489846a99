"""Assembled NCCL-log rows kept compact (integer codes) until they are written, a block of rows at a time.

:class:`CompactRows` holds the trace rows of :func:`traces.formats.nccl.reader.read_nccl_logs` in their final
order, as numpy columns, with ``comm``, ``host``, ``device`` and ``dtype`` still as integer codes into small
tables. A streaming writer (:class:`traces.io.TraceWriter`) takes them a block of rows at a time as the
schema's columns (:meth:`CompactRows.blocks`: text as :class:`traces.arrays.Text` codes, no pandas), and the
Python API a frame (:meth:`CompactRows.frame`). The checks across rows (members of a collective agree; one
row per member) run on integer columns over all rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from traces.arrays import Text, combined_codes, factorize, unique
from traces.lazy import lazy_module
from traces.schema import ALL_COLUMNS, COLUMNS, EXTENSION_TYPES, P2P_OPS, ROOTED_OPS, empty_trace

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["BLOCK_ROWS", "CompactRows", "columns_frame", "combined_codes", "disagreeing_codes", "empty_columns",
           "schema_columns", "schema_frame"]

#: Rows per block (one Parquet row group): ~25 MB of frame at ~200 B a row, far below the memory budget.
BLOCK_ROWS = 131_072


@dataclass
class CompactRows:
    """Trace rows with text as codes.

    Attributes
    ----------
    rows : dict of str to numpy.ndarray
        One entry per trace row, in final order, as equal-length columns: ``rank``, ``comm`` (code into
        ``comm_name``), ``seq``, ``op`` (names), ``count``, ``dt`` (code into ``dt_name``), ``bytes``,
        ``root``, ``nranks``, ``t_start_s``, ``inst`` (code into ``host``/``device``), ``algo``, ``proto``,
        ``group``, ``split_bytes``; empty when there are no rows.
    comm_name, host, dt_name : numpy.ndarray of object
        The text of each code.
    device : numpy.ndarray of int64
        Device of each instance code.
    meta : dict
        The trace metadata (``df.attrs["collsim"]``).
    """

    rows: dict[str, np.ndarray]
    comm_name: np.ndarray
    host: np.ndarray
    device: np.ndarray
    dt_name: np.ndarray
    meta: dict[str, Any]

    def __len__(self) -> int:
        return len(self.rows["rank"]) if self.rows else 0

    def columns(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        """Rows ``[start, stop)`` as the schema's columns (:func:`schema_columns`; not validated).

        Examples
        --------
        >>> CompactRows({}, *([np.empty(0, object)] * 4), meta={}).columns()["rank"].dtype
        dtype('int32')
        """
        if not len(self):
            return empty_columns()
        return schema_columns(lambda name: self.rows[name][start:stop], len(self.rows["rank"][start:stop]),
                              self.comm_name, self.host, self.device, self.dt_name)

    def frame(self, start: int = 0, stop: int | None = None) -> pd.DataFrame:
        """Rows ``[start, stop)`` as a schema frame (not validated; no metadata).

        Examples
        --------
        >>> CompactRows({}, *([np.empty(0, object)] * 4), meta={}).frame().shape[0]
        0
        """
        if not len(self):
            return empty_trace()
        return columns_frame(self.columns(start, stop))

    def blocks(self, block_rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """The rows as :meth:`columns` of at most ``block_rows`` (default :data:`BLOCK_ROWS`) rows, in order
        (one block of no rows when there are none)."""
        block_rows = block_rows or BLOCK_ROWS
        for start in range(0, max(len(self), 1), block_rows):
            yield self.columns(start, start + block_rows)

    def agreement(self) -> tuple[int, str]:
        """Collectives whose members disagree, and the first (:func:`disagreeing_codes`)."""
        return disagreeing_codes(self.rows, self.comm_name, self.dt_name)

    def check_collectives(self, check: Any) -> None:
        """``check(light, split_lengths)``: the checks across rows (``TraceWriter.check_collectives``)."""
        if len(self):
            check(self.light(), self.split_lengths())

    def all_nan(self, name: str) -> bool:
        """Whether column ``name`` is NaN on every row (``duration_s`` always is: logs hold none)."""
        if name == "duration_s":
            return True
        return bool(np.isnan(self.rows[name]).all()) if len(self) else True

    def n_ranks(self) -> int:
        """Distinct ranks among the rows."""
        return len(unique(self.rows["rank"])) if len(self) else 0

    def split_lengths(self) -> np.ndarray:
        """Entries of ``split_bytes`` per row."""
        splits = self.rows["split_bytes"] if len(self) else []
        return np.fromiter(map(len, splits), dtype=np.int64, count=len(splits))

    def light(self) -> dict[str, np.ndarray]:
        """All rows, only the columns the checks across rows read (text columns share their strings)."""
        r = self.rows
        return {"comm": Text(r["comm"], self.comm_name), "rank": r["rank"], "seq": r["seq"], "op": r["op"],
                "count": r["count"], "dtype": Text(r["dt"], self.dt_name), "bytes": r["bytes"], "root": r["root"],
                "nranks": r["nranks"]}


def empty_columns() -> dict[str, np.ndarray]:
    """The schema's columns with no rows, typed as :func:`traces.schema.empty_trace` types them."""
    return {name: np.empty(0, dtype=object if kind in ("string", "object") else kind)
            for name, kind in {**COLUMNS, **EXTENSION_TYPES}.items()}


def schema_columns(column: Any, n: int, comm_name: np.ndarray, host: np.ndarray, device: np.ndarray,
                   dt_name: np.ndarray) -> dict[str, Any]:
    """The schema's columns (``ALL_COLUMNS`` order, not cast) of ``n`` compact rows, ``column(name)`` giving
    each compact column as an array; comm, host, dtype and context stay codes (:class:`traces.arrays.Text`)."""
    inst = column("inst")
    cols: dict[str, Any] = {}
    for name in ALL_COLUMNS:
        if name == "comm":
            values = Text(column("comm"), comm_name)
        elif name == "host":
            values = Text(inst, host)
        elif name == "device":
            values = device[inst]
        elif name == "dtype":
            values = Text(column("dt"), dt_name)
        elif name == "duration_s":
            values = np.full(n, np.nan)
        elif name == "context":
            values = Text(np.zeros(n, dtype=np.int64), np.array([""], dtype=object))
        else:
            values = column(name)
        cols[name] = values
    return cols


def columns_frame(cols: dict[str, Any]) -> pd.DataFrame:
    """A frame of :func:`schema_columns` (text columns ``object``, no copies of numeric columns)."""
    arrays = {name: np.asarray(v) for name, v in cols.items()}
    return pd.DataFrame({name: pd.Series(v, dtype=v.dtype if v.dtype != object else object, copy=False)
                         for name, v in arrays.items()})


def schema_frame(column: Any, n: int, comm_name: np.ndarray, host: np.ndarray, device: np.ndarray,
                 dt_name: np.ndarray) -> pd.DataFrame:
    """A schema frame of ``n`` compact rows, ``column(name)`` giving each compact column as an array."""
    return columns_frame(schema_columns(column, n, comm_name, host, device, dt_name))


def disagreeing_codes(rows: Any, comm_name: np.ndarray, dt_name: np.ndarray,
                      splits: Callable[[np.ndarray], np.ndarray] | None = None, where: bool = False) -> Any:
    """:func:`traces.formats.agreement.disagreeing_collectives` on compact rows: the same count and example.

    Collectives are keyed by integer codes (no text per row); the example is made by the text version from
    the rows of the first bad collective alone, in frame order, so it reads exactly the same. ``rows`` is a
    frame or a mapping of arrays; without ``split_bytes`` it may give ``nsplit`` (entries per row) and
    ``splits`` the ``split_bytes`` of the rows at some indices (for the example). ``where``: also return the
    index of a row of the example's collective (-1 when none).

    Examples
    --------
    >>> rows = pd.DataFrame({"comm": [0, 0, 0], "seq": [0, 0, 1], "rank": [0, 1, 0], "op": ["AllReduce"] * 3,
    ...                      "count": [4, 5, 4], "dt": [7] * 3, "root": [-1] * 3})
    >>> disagreeing_codes(rows, np.array(["c"], dtype=object), np.array([""] * 7 + ["fp32"], dtype=object))
    (1, 'comm c seq 0: rank 0 AllReduce 4 fp32, rank 1 AllReduce 5 fp32')
    """
    from traces.formats.agreement import disagreeing_collectives

    names = ("op", "root", "comm", "seq", "count", "dt", "rank", "split_bytes", "nsplit")
    rows = {k: np.asarray(rows[k]) for k in names if k in rows}
    none = (0, "", -1) if where else (0, "")
    if not rows or not len(rows["op"]):
        return none
    op = rows["op"]
    coll = np.flatnonzero(~np.isin(op, list(P2P_OPS)))
    if not len(coll):
        return none
    rooted = np.isin(op[coll], list(ROOTED_OPS))
    root = np.where(rooted, rows["root"][coll], -1)
    # comm codes renumbered in name order, so (comm, seq) order is the text version's sort order
    order = np.argsort(comm_name, kind="stable")
    name_rank = np.empty(len(comm_name), dtype=np.int64)
    name_rank[order] = np.arange(len(comm_name))
    comm = name_rank[rows["comm"][coll]]
    seq = rows["seq"][coll]
    key = combined_codes(comm, seq)
    count = rows["count"][coll]
    has_split = None
    if "split_bytes" in rows:
        of_coll = rows["split_bytes"][coll]
        has_split = np.fromiter(map(len, of_coll), dtype=np.int64, count=len(of_coll)) > 0
    elif "nsplit" in rows:
        has_split = rows["nsplit"][coll] > 0
    if has_split is not None:  # all-to-all-v: members' counts may differ (as the text version)
        uneven = np.bincount(key, weights=has_split, minlength=int(key.max()) + 1)[key] > 0
        count = np.where(uneven, -1, count)
    sig = combined_codes(factorize(op[coll])[0], count, rows["dt"][coll], root)
    width = int(sig.max()) + 1
    pairs = np.unique(key * width + sig)  # distinct (collective, signature) pairs
    n_sig = np.bincount(pairs // width, minlength=int(key.max()) + 1)
    bad_keys = np.flatnonzero(n_sig > 1)
    if not len(bad_keys):
        return none
    first_of_key = np.zeros(int(key.max()) + 1, dtype=np.int64)
    first_of_key[key[::-1]] = np.arange(len(key) - 1, -1, -1)
    cand = first_of_key[bad_keys]
    pick = cand[np.lexsort((seq[cand], comm[cand]))[0]]
    members = coll[key == key[pick]]
    sub = pd.DataFrame({
        "comm": pd.Series(comm_name[rows["comm"][members]], dtype=object),
        "seq": rows["seq"][members], "rank": rows["rank"][members],
        "op": pd.Series(op[members], dtype=object), "count": rows["count"][members],
        "dtype": pd.Series(dt_name[rows["dt"][members]], dtype=object),
        "root": rows["root"][members]})
    if "split_bytes" in rows:
        sub["split_bytes"] = pd.Series(rows["split_bytes"][members], dtype=object)
    elif splits is not None:
        sub["split_bytes"] = pd.Series(splits(members), dtype=object)
    example = disagreeing_collectives(sub)[1]
    return (len(bad_keys), example, int(coll[pick])) if where else (len(bad_keys), example)
