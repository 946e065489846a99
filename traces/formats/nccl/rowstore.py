"""Trace rows of a spilled NCCL-log ingest, on disk one process at a time, read back a block at a time.

A spilled ingest (:mod:`traces.formats.nccl.spill`) builds the rows of one process, matches its TUNING lines
and hands them to a :class:`RowStore`, which writes them as one int64 matrix per process (text as codes;
``split_bytes`` as a flat array beside it). Rows of one process are in (rank, line) order and a rank belongs
to one process, so the trace's order (rank, then line) is the processes' rank segments sorted by rank:
:class:`SpilledRows` reads any range of rows of that order from the segments, and gathers the few columns the
steps across processes need (seq of inferred communicators, the TUNING copy, the members' agreement, the
checks across rows) without ever holding every row's full width.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from traces.arrays import Text, factorize
from traces.formats.nccl.output import CompactRows, columns_frame, disagreeing_codes, schema_columns
from traces.formats.nccl.records import NO_TS
from traces.formats.nccl.rows import OP_CODE, OP_NAMES
from traces.formats.nccl.spill import Codes
from traces.lazy import lazy_module

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["BUCKET_ROWS", "ROW_FIELDS", "RowStore", "SpilledRows"]

#: Stored columns of a row (all int64; ``op``, ``algo``, ``proto`` as codes; ``nsplit``: split_bytes entries).
ROW_FIELDS = ("pos", "rank", "comm", "seq", "op", "kind", "count", "dt", "bytes", "root", "nranks", "ts_us", "inst",
              "group", "algo", "proto", "nsplit", "opc")
_COL = {name: k for k, name in enumerate(ROW_FIELDS)}
#: Rows of one bucket of collectives for the checks across rows (a few tens of MiB of columns).
BUCKET_ROWS = 1 << 18


@dataclass
class _Part:
    path: Path
    flat: Path
    rows: int
    seg_rank: np.ndarray  # distinct ranks of the part, ascending
    seg_start: np.ndarray  # first row of each rank in the part
    seg_flat: np.ndarray  # first split_bytes entry of each rank


class RowStore:
    """Rows of each process in files of ``folder`` (one :meth:`add` per process)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.parts: list[_Part] = []
        self.text = {"algo": Codes(), "proto": Codes()}
        for codes in self.text.values():
            codes.encode(np.array([""], dtype=object))  # code 0: not known

    def add(self, cols: dict[str, Any]) -> None:
        """One process's rows (build_rows columns, ``op`` as names, ``algo``/``proto`` as text)."""
        n = len(cols["pos"])
        k = len(self.parts)
        nsplit = np.fromiter(map(len, cols["split_bytes"]), dtype=np.int64, count=n)
        matrix = np.empty((n, len(ROW_FIELDS)), dtype=np.int64)
        for name, j in _COL.items():
            if name == "op":
                codes, names = factorize(cols["op"])
                matrix[:, j] = np.array([OP_CODE[x] for x in names], dtype=np.int64)[codes]
            elif name in self.text:
                matrix[:, j] = self.text[name].encode(cols[name])
            elif name == "nsplit":
                matrix[:, j] = nsplit
            elif name == "opc":
                matrix[:, j] = cols["opc"] if "opc" in cols else 0
            else:
                matrix[:, j] = cols[name]
        path, flat = self.folder / f"rows{k}.bin", self.folder / f"splits{k}.bin"
        matrix.tofile(path)
        values = [v for s in cols["split_bytes"] for v in s]
        np.asarray(values, dtype=np.int64).tofile(flat)
        rank = matrix[:, _COL["rank"]]
        seg_rank, seg_start = np.unique(rank, return_index=True)  # rows are in rank order
        offsets = np.concatenate([[0], np.cumsum(nsplit)])
        self.parts.append(_Part(path, flat, n, seg_rank, seg_start, offsets[seg_start]))

    def load(self, k: int) -> np.ndarray:
        return np.fromfile(self.parts[k].path, dtype=np.int64).reshape(-1, len(ROW_FIELDS))

    def save(self, k: int, matrix: np.ndarray) -> None:
        matrix.tofile(self.parts[k].path)


class SpilledRows(CompactRows):
    """:class:`traces.formats.nccl.output.CompactRows` whose rows are in a :class:`RowStore`.

    ``rows`` is an empty frame; rows are read from the store by range (:meth:`frame`) or by column
    (:meth:`gather`), in the trace's order.
    """

    def __init__(self, store: RowStore, comm_name: np.ndarray, host: np.ndarray, device: np.ndarray,
                 dt_name: np.ndarray, meta: dict[str, Any], ts_base_us: int = 0):
        super().__init__({}, comm_name, host, device, dt_name, meta)
        self.store = store
        self.ts_base_us = ts_base_us
        segs = [(int(r), k, int(a), int(f)) for k, p in enumerate(store.parts)
                for r, a, f in zip(p.seg_rank, p.seg_start, p.seg_flat, strict=True)]
        segs.sort()
        ranks = [s[0] for s in segs]
        if len(set(ranks)) != len(ranks):
            raise ValueError("a rank's rows in two processes")  # not reached: a rank is one (host, pid, device)
        ends = {}
        for k, p in enumerate(store.parts):
            bounds = [*p.seg_start.tolist(), p.rows]
            for j in range(len(p.seg_start)):
                ends[(k, bounds[j])] = bounds[j + 1]
        # one segment: (part, first row, rows, first split entry)
        self.segments = [(k, a, ends[(k, a)] - a, f) for _, k, a, f in segs]
        self.seg_first = np.cumsum([0] + [s[2] for s in self.segments])

    def __len__(self) -> int:
        return int(self.seg_first[-1])

    def _read(self, start: int, stop: int, splits: bool = True) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """Rows [start, stop) of the trace order as a matrix, and their split_bytes tuples."""
        width = len(ROW_FIELDS)
        mats, tuples = [], []
        first = max(int(np.searchsorted(self.seg_first, start, side="right")) - 1, 0)
        for j in range(first, len(self.segments)):
            lo = int(self.seg_first[j])
            if lo >= stop:
                break
            k, a, n, f = self.segments[j]
            s0, s1 = max(start - lo, 0), min(stop - lo, n)
            part = self.store.parts[k]
            m = np.fromfile(part.path, dtype=np.int64, count=(s1 - s0) * width,
                            offset=(a + s0) * width * 8).reshape(-1, width)
            mats.append(m)
            if splits:
                nsplit = m[:, _COL["nsplit"]]
                if nsplit.any():
                    skip = 0 if s0 == 0 else self._nsplit_before(k, a, s0)
                    flat = np.fromfile(part.flat, dtype=np.int64, count=int(nsplit.sum()), offset=(f + skip) * 8)
                    bounds = np.concatenate([[0], np.cumsum(nsplit)]).tolist()
                    values = flat.tolist()
                    tuples += [tuple(values[x:y]) for x, y in zip(bounds[:-1], bounds[1:], strict=True)]
                else:
                    tuples += [()] * len(m)
        matrix = np.concatenate(mats) if mats else np.empty((0, width), dtype=np.int64)
        return matrix, tuples

    def _nsplit_before(self, k: int, a: int, s0: int) -> int:
        m = np.fromfile(self.store.parts[k].path, dtype=np.int64, count=s0 * len(ROW_FIELDS),
                        offset=a * len(ROW_FIELDS) * 8).reshape(-1, len(ROW_FIELDS))
        return int(m[:, _COL["nsplit"]].sum())

    def gather(self, names: tuple[str, ...], bucket: tuple[int, int] | None = None,
               comm: int | None = None) -> dict[str, np.ndarray]:
        """Columns of all rows in the trace's order, one segment at a time (only these columns are held).

        ``bucket`` (b, k): only the rows whose collective (comm, seq) falls in bucket b of k (every row of a
        collective, or of a Send/Recv key, is in one bucket); ``comm``: only the rows of that comm code. With
        either, the rows' trace row numbers are under ``"row"``.
        """
        width = len(ROW_FIELDS)
        out: dict[str, list[np.ndarray]] = {name: [] for name in (*names, "row")}
        for j, (k, a, n, _) in enumerate(self.segments):
            m = np.fromfile(self.store.parts[k].path, dtype=np.int64, count=n * width,
                            offset=a * width * 8).reshape(-1, width)
            if bucket is not None or comm is not None:
                keep = (np.ones(len(m), dtype=bool) if bucket is None else
                        _bucket_of(m[:, _COL["comm"]], m[:, _COL["seq"]], bucket[1]) == bucket[0])
                if comm is not None:
                    keep &= m[:, _COL["comm"]] == comm
                m = m[keep]
                out["row"].append(int(self.seg_first[j]) + np.flatnonzero(keep))
            for name in names:
                out[name].append(m[:, _COL[name]].copy())
            del m
        if bucket is None and comm is None:
            del out["row"]
        return {name: np.concatenate(v) if v else np.empty(0, dtype=np.int64) for name, v in out.items()}

    def buckets(self) -> int:
        """How many buckets of collectives keep a gathered working set near :data:`BUCKET_ROWS` rows."""
        return max(1, -(-len(self) // BUCKET_ROWS))

    def splits_at(self, rows: np.ndarray) -> np.ndarray:
        """split_bytes tuples of some rows (few: the disagreement example)."""
        out = np.empty(len(rows), dtype=object)
        out[:] = [self._read(int(r), int(r) + 1)[1][0] for r in rows]
        return out

    def frame(self, start: int = 0, stop: int | None = None) -> pd.DataFrame:
        if not len(self):
            return super().frame()  # the empty trace
        return columns_frame(self.columns(start, stop))

    def columns(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        if not len(self):
            return super().columns()  # no rows
        stop = len(self) if stop is None else min(stop, len(self))
        matrix, tuples = self._read(start, stop)
        n = len(matrix)
        algo, proto = self.store.text["algo"], self.store.text["proto"]
        ts = matrix[:, _COL["ts_us"]]
        split = np.empty(n, dtype=object)
        split[:] = tuples
        derived = {"op": OP_NAMES[matrix[:, _COL["op"]]], "algo": algo.decode(matrix[:, _COL["algo"]]),
                   "proto": proto.decode(matrix[:, _COL["proto"]]), "split_bytes": split,
                   "t_start_s": np.where(ts == NO_TS, np.nan, (ts - self.ts_base_us) / 1e6)}

        def column(name: str) -> np.ndarray:
            return derived[name] if name in derived else np.ascontiguousarray(matrix[:, _COL[name]])

        return schema_columns(column, n, self.comm_name, self.host, self.device, self.dt_name)

    def blocks(self, block_rows: int | None = None):
        import traces.formats.nccl.output as output

        block_rows = block_rows or output.BLOCK_ROWS
        for start in range(0, max(len(self), 1), block_rows):
            yield self.columns(start, start + block_rows)

    def agreement(self) -> tuple[int, str]:
        """Collectives whose members disagree, and the first (:func:`disagreeing_codes`), one bucket of
        collectives at a time: counts add up, and the example is the first over all buckets."""
        if not len(self):
            return 0, ""
        total, best = 0, None
        order = np.argsort(self.comm_name, kind="stable")  # comm codes in name order, as the example's
        name_rank = np.empty(len(self.comm_name), dtype=np.int64)
        name_rank[order] = np.arange(len(self.comm_name))
        for b in range(self.buckets()):
            c = self.gather(("op", "root", "comm", "seq", "count", "dt", "rank", "nsplit"), (b, self.buckets()))
            rows = c.pop("row")
            c["op"] = OP_NAMES[c["op"]]
            n, example, first = disagreeing_codes(c, self.comm_name, self.dt_name,
                                                  lambda at, rows=rows: self.splits_at(rows[at]), where=True)
            total += n
            if n and (best is None or (name_rank[c["comm"][first]], c["seq"][first]) < best[0]):
                best = ((name_rank[c["comm"][first]], c["seq"][first]), example)
            del c
        return total, best[1] if best else ""

    def check_collectives(self, check: Any) -> None:
        """``check(light, split_lengths)`` (the checks across rows) one bucket of collectives at a time: every
        check is within one collective (or Send/Recv key) or one row, so a trace passes when every bucket
        does; when one fails, the check runs once over all rows, for the message the whole trace gives."""
        if not len(self):
            return
        from traces.schema import TraceError

        k = self.buckets()
        try:
            for b in range(k):
                c = self.gather(("comm", "rank", "seq", "op", "count", "dt", "bytes", "root", "nranks", "nsplit"),
                                (b, k) if k > 1 else None)
                split = c.pop("nsplit")
                c.pop("row", None)
                check(self._light(c), split)
                del c, split
        except TraceError:
            check(self.light(), self.split_lengths())  # raises the whole trace's message
            raise

    def patch(self, name: str, values: np.ndarray) -> None:
        """Set column ``name`` of all rows (``values`` in the trace's order), one part at a time."""
        by_part: dict[int, list[tuple[int, int, int]]] = {}
        for j, (k, a, n, _) in enumerate(self.segments):
            by_part.setdefault(k, []).append((a, n, int(self.seg_first[j])))
        for k, segs in by_part.items():
            m = self.store.load(k)
            for a, n, lo in segs:
                m[a:a + n, _COL[name]] = values[lo:lo + n]
            self.store.save(k, m)
            del m

    def patch_rows(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        """Set column ``name`` of some rows (``rows``: ascending trace row numbers), in place on disk: each
        part is mapped and only its touched rows are written, so no part is read whole into memory."""
        if not len(rows):
            return
        seg = np.searchsorted(self.seg_first, rows, side="right") - 1
        part = np.array([s[0] for s in self.segments], dtype=np.int64)[seg]
        start = np.array([s[1] for s in self.segments], dtype=np.int64)[seg]
        at = start + rows - self.seg_first[seg]  # row inside its part's matrix
        for k in np.unique(part).tolist():
            mine = part == k
            m = np.memmap(self.store.parts[k].path, dtype=np.int64, mode="r+",
                          shape=(self.store.parts[k].rows, len(ROW_FIELDS)))
            m[at[mine], _COL[name]] = values[mine]
            m.flush()
            del m

    def all_nan(self, name: str) -> bool:
        if name == "duration_s":
            return True
        if name == "t_start_s":
            return not len(self) or bool((self.gather(("ts_us",))["ts_us"] == NO_TS).all())
        return bool(np.isnan(self.columns()[name]).all())

    def n_ranks(self) -> int:
        return len(self.segments)

    def split_lengths(self) -> np.ndarray:
        return self.gather(("nsplit",))["nsplit"]

    def light(self) -> dict[str, np.ndarray]:
        return self._light(self.gather(("comm", "rank", "seq", "op", "count", "dt", "bytes", "root", "nranks")))

    def _light(self, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"comm": Text(c.pop("comm"), self.comm_name), "rank": c.pop("rank"), "seq": c.pop("seq"),
                "op": Text(c.pop("op"), OP_NAMES), "count": c.pop("count"), "dtype": Text(c.pop("dt"), self.dt_name),
                "bytes": c.pop("bytes"), "root": c.pop("root"), "nranks": c.pop("nranks")}


def _bucket_of(comm: np.ndarray, seq: np.ndarray, k: int) -> np.ndarray:
    """Bucket of each row's (comm, seq) among ``k`` (a multiplicative hash: consecutive seqs spread out)."""
    if k == 1:
        return np.zeros(len(comm), dtype=np.int64)
    h = (comm.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (seq.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F))
    return ((h >> np.uint64(33)) % np.uint64(k)).astype(np.int64)
