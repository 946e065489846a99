"""Assembled NCCL-log rows kept compact (integer codes) until they are written, a block of rows at a time.

:class:`CompactRows` holds the trace rows of :func:`traces.formats.nccl.reader.read_nccl_logs` in their final
order, with ``comm``, ``host``, ``device`` and ``dtype`` still as integer codes into small tables: the text
columns, the schema frame and its validation are made per block of rows by :meth:`CompactRows.frame`, so a
streaming writer (:class:`traces.io.TraceWriter`) never holds more than one block as a frame. The checks
across rows (members of a collective agree; one row per member) run on integer columns over all rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traces.schema import P2P_OPS, ROOTED_OPS, empty_trace

__all__ = ["BLOCK_ROWS", "CompactRows", "combined_codes", "disagreeing_codes", "schema_frame"]

#: Rows per block (one Parquet row group): ~25 MB of frame at ~200 B a row, far below the memory budget.
BLOCK_ROWS = 131_072


@dataclass
class CompactRows:
    """Trace rows with text as codes.

    Attributes
    ----------
    rows : pandas.DataFrame
        One row per trace row, in final order: ``rank``, ``comm`` (code into ``comm_name``), ``seq``, ``op``
        (names), ``count``, ``dt`` (code into ``dt_name``), ``bytes``, ``root``, ``nranks``, ``t_start_s``,
        ``inst`` (code into ``host``/``device``), ``algo``, ``proto``, ``group``, ``split_bytes``.
    comm_name, host, dt_name : numpy.ndarray of object
        The text of each code.
    device : numpy.ndarray of int64
        Device of each instance code.
    meta : dict
        The trace metadata (``df.attrs["collsim"]``).
    """

    rows: pd.DataFrame
    comm_name: np.ndarray
    host: np.ndarray
    device: np.ndarray
    dt_name: np.ndarray
    meta: dict[str, Any]

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self, start: int = 0, stop: int | None = None) -> pd.DataFrame:
        """Rows ``[start, stop)`` as a schema frame (not validated; no metadata).

        Examples
        --------
        >>> CompactRows(pd.DataFrame(), *([np.empty(0, object)] * 4), meta={}).frame().shape[0]
        0
        """
        if not len(self.rows):
            return empty_trace()
        part = self.rows.iloc[start:stop]
        return schema_frame(lambda name: part[name].to_numpy(), len(part), self.comm_name, self.host, self.device,
                            self.dt_name)

    def blocks(self, block_rows: int | None = None) -> Iterator[pd.DataFrame]:
        """The rows as frames of at most ``block_rows`` (default :data:`BLOCK_ROWS`) rows, in order."""
        block_rows = block_rows or BLOCK_ROWS
        for start in range(0, max(len(self.rows), 1), block_rows):
            yield self.frame(start, start + block_rows)

    def agreement(self) -> tuple[int, str]:
        """Collectives whose members disagree, and the first (:func:`disagreeing_codes`)."""
        return disagreeing_codes(self.rows, self.comm_name, self.dt_name)

    def check_collectives(self, check: Any) -> None:
        """``check(light, split_lengths)``: the checks across rows (``TraceWriter.check_collectives``)."""
        if len(self.rows):
            check(self.light(), self.split_lengths())

    def all_nan(self, name: str) -> bool:
        """Whether column ``name`` is NaN on every row (``duration_s`` always is: logs hold none)."""
        if name == "duration_s":
            return True
        return bool(self.rows[name].isna().all()) if len(self.rows) else True

    def n_ranks(self) -> int:
        """Distinct ranks among the rows."""
        return int(self.rows["rank"].nunique()) if len(self.rows) else 0

    def split_lengths(self) -> np.ndarray:
        """Entries of ``split_bytes`` per row."""
        splits = self.rows["split_bytes"].to_numpy() if len(self.rows) else []
        return np.fromiter(map(len, splits), dtype=np.int64, count=len(splits))

    def light(self) -> pd.DataFrame:
        """All rows, only the columns the checks across rows read (text columns share their strings)."""
        r = self.rows
        return pd.DataFrame({
            "comm": pd.Series(self.comm_name[r["comm"].to_numpy()], dtype=object),
            "rank": r["rank"].to_numpy(), "seq": r["seq"].to_numpy(), "op": pd.Series(r["op"].to_numpy(), dtype=object),
            "count": r["count"].to_numpy(), "dtype": pd.Series(self.dt_name[r["dt"].to_numpy()], dtype=object),
            "bytes": r["bytes"].to_numpy(), "root": r["root"].to_numpy(), "nranks": r["nranks"].to_numpy(),
        })


def schema_frame(column: Any, n: int, comm_name: np.ndarray, host: np.ndarray, device: np.ndarray,
                 dt_name: np.ndarray) -> pd.DataFrame:
    """A schema frame of ``n`` compact rows, ``column(name)`` giving each compact column as an array."""
    inst = column("inst")
    cols: dict[str, Any] = {}
    for name in empty_trace().columns:
        if name == "comm":
            values = comm_name[column("comm")]
        elif name == "host":
            values = host[inst]
        elif name == "device":
            values = device[inst]
        elif name == "dtype":
            values = dt_name[column("dt")]
        elif name == "duration_s":
            values = np.full(n, np.nan)
        elif name == "context":
            values = np.full(n, "", dtype=object)
        else:
            values = column(name)
        cols[name] = pd.Series(values, dtype=values.dtype if values.dtype != object else object, copy=False)
    return pd.DataFrame(cols)


def combined_codes(*columns: np.ndarray) -> np.ndarray:
    """One int64 code per distinct tuple of the (equal-length, integer) columns, by hash factorisation one
    column at a time (no tuple or MultiIndex per row).

    Examples
    --------
    >>> combined_codes(np.array([1, 1, 2, 1]), np.array([5, 6, 5, 5])).tolist()
    [0, 1, 2, 0]
    """
    codes = pd.factorize(columns[0])[0].astype(np.int64)
    for col in columns[1:]:
        more = pd.factorize(col)[0].astype(np.int64)
        codes = pd.factorize(codes * (int(more.max(initial=0)) + 1) + more)[0].astype(np.int64)
    return codes


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
    sig = combined_codes(pd.factorize(op[coll])[0], count, rows["dt"][coll], root)
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
