"""Where the per-line data of a large NCCL-log ingest waits between passes: in memory, or spilled to disk.

An ingest of a log larger than :data:`SPILL_BYTES` does not hold every COLL line at once. The scan hands
each chunk's COLL columns to a :class:`PartStore` (one per file), which writes them to a temporary folder
as one int64 matrix per chunk (text columns as codes into a small table); the mapping passes
(:mod:`traces.formats.nccl.lines`) replay those chunks in scan order, and put each usable line into a
:class:`ProcessStore` file of its process (host, pid), from which the rows are built one process at a
time. Smaller inputs keep everything in memory and go through the same passes. The folder is made by
:func:`spill_folder` and removed when the ingest ends, also on an error.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from traces.formats.nccl.records import COLL_FIELDS, INT_FIELDS, TUNING_FIELDS, TUNING_INT

__all__ = ["PROCESS_FIELDS", "SPILL_BYTES", "TUNING_BLOCK", "Codes", "PartStore", "ProcessStore", "SpilledTunings",
           "TuningStore", "hand_over", "should_spill", "spill_folder"]

#: Inputs of at least this many bytes (compressed files counted at ``COMPRESSED_RATIO`` times their size)
#: spill their per-line data to disk. Below it, the in-memory passes peak under the memory budget
#: (~500 MiB: ~1.1 MiB of peak per MB of log, measured). Tests set 0 to run the spilled passes on samples.
SPILL_BYTES = 160 << 20
#: TUNING records a :class:`TuningStore` holds before it writes them as one block.
TUNING_BLOCK = 1 << 16
COMPRESSED_RATIO = 10

#: Stored COLL columns (``tid`` is never read after the scan).
_STORED = tuple(name for name in COLL_FIELDS if name != "tid")
_TEXT = tuple(name for name in _STORED if name not in INT_FIELDS)

#: Columns of one usable, mapped COLL line in a :class:`ProcessStore` (all int64).
PROCESS_FIELDS = ("pos", "inst", "op", "opc", "count", "dt", "root", "nranks", "ts_us")


def should_spill(sizes_bytes: list[tuple[int, bool]]) -> bool:
    """Whether inputs of these (size, compressed) spill their per-line data.

    Examples
    --------
    >>> should_spill([(1 << 20, False)]), should_spill([(SPILL_BYTES, False)])
    (False, True)
    """
    return sum(n * (COMPRESSED_RATIO if packed else 1) for n, packed in sizes_bytes) >= SPILL_BYTES


_HANDED: set[Path] = set()


@contextmanager
def spill_folder(enabled: bool) -> Iterator[Path | None]:
    """A temporary folder for spilled data (None when not ``enabled``), removed on exit, also on an error,
    unless :func:`hand_over` gave it to an object that outlives the block."""
    if not enabled:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="collsim-ingest-"))
    try:
        yield folder
    finally:
        if folder not in _HANDED:
            shutil.rmtree(folder, ignore_errors=True)


def hand_over(owner: Any, folder: Path) -> None:
    """Keep ``folder`` until ``owner`` is collected (or the interpreter exits), then remove it."""
    _HANDED.add(folder)
    weakref.finalize(owner, _remove, folder)


def _remove(folder: Path) -> None:
    _HANDED.discard(folder)
    shutil.rmtree(folder, ignore_errors=True)


class Codes:
    """Text values <-> int64 codes (a handful of hosts, op names and pointers per log)."""

    def __init__(self) -> None:
        self.code: dict[Any, int] = {}
        self.values: list[Any] = []
        self._table: np.ndarray | None = None

    def encode(self, column: np.ndarray) -> np.ndarray:
        from traces.arrays import factorize

        codes, uniq = factorize(column, na_sentinel=False)
        local = np.array([self._code_of(v) for v in uniq], dtype=np.int64)
        return local[codes] if len(codes) else np.empty(0, dtype=np.int64)

    def _code_of(self, value: Any) -> int:
        k = self.code.get(value)
        if k is None:
            k = self.code[value] = len(self.values)
            self.values.append(value)
            self._table = None
        return k

    def decode(self, codes: np.ndarray) -> np.ndarray:
        if self._table is None:
            self._table = np.empty(len(self.values), dtype=object)
            self._table[:] = self.values
        return self._table[codes]


class PartStore:
    """The scan's sink for one file's COLL column parts (``append``), spilled to ``folder`` as they come.

    It stands where :func:`traces.formats.nccl.scan.scan_file` keeps its list of parts: the scan reads the
    last part back (``store[-1]``) and finds nothing left to join (iteration is empty), so its own
    columns come back empty and the parts are replayed from here with :meth:`chunks`.
    """

    def __init__(self, folder: Path, name: str):
        self.path = folder / f"{name}.coll"
        self.path.write_bytes(b"")
        self.rows = 0
        self._lengths: list[int] = []
        self._last: dict[str, Any] | None = None
        self._codes = {name: Codes() for name in _TEXT}

    def append(self, part: dict[str, Any]) -> None:
        self._last = part
        n = len(part["line"])
        if not n:
            return
        matrix = np.empty((n, len(_STORED)), dtype=np.int64)
        for k, name in enumerate(_STORED):
            if name in _TEXT:
                matrix[:, k] = self._codes[name].encode(np.asarray(part[name], dtype=object))
            else:
                matrix[:, k] = np.asarray(part[name], dtype=np.int64)
        with open(self.path, "ab") as handle:
            matrix.tofile(handle)
        self._lengths.append(n)
        self.rows += n

    def __getitem__(self, k: int) -> dict[str, Any]:
        if k != -1 or self._last is None:
            raise IndexError(k)
        return self._last

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(())  # nothing for the scan to join: the parts are here

    def __len__(self) -> int:
        return 0

    def clear(self) -> None:
        self._last = None

    def drop(self) -> None:
        """Remove the file once the last pass has replayed it (disk space)."""
        self.path.unlink(missing_ok=True)
        self._lengths = []

    def chunks(self) -> Iterator[dict[str, np.ndarray]]:
        """The parts in the order they came, as columns (text decoded), one at a time."""
        width = len(_STORED)
        if not self._lengths:
            return
        with open(self.path, "rb") as handle:
            for n in self._lengths:
                matrix = np.fromfile(handle, dtype=np.int64, count=n * width).reshape(n, width)
                yield {name: (self._codes[name].decode(matrix[:, k]) if name in _TEXT else matrix[:, k])
                       for k, name in enumerate(_STORED)}
                del matrix


class TuningStore:
    """The scan's sink for one file's TUNING records (``append`` of column parts, as ``FileScan.tuning_parts``),
    spilled to ``folder`` in blocks of :data:`TUNING_BLOCK` records (the per-line parser appends one record a
    part); iteration is empty, so the scan's own TUNING columns come back empty and :meth:`chunks` replays
    them. ``len`` is the number of records."""

    def __init__(self, folder: Path, name: str):
        self.path = folder / f"{name}.tuning"
        self.path.write_bytes(b"")
        self.rows = 0
        self._lengths: list[int] = []
        self._pending: list[dict[str, Any]] = []
        self._pending_rows = 0
        self._codes = {name: Codes() for name in TUNING_FIELDS if name not in TUNING_INT}

    def append(self, part: dict[str, Any]) -> None:
        n = len(part["line"])
        if not n:
            return
        self._pending.append(part)
        self._pending_rows += n
        self.rows += n
        if self._pending_rows >= TUNING_BLOCK:
            self.flush()

    def flush(self) -> None:
        """Write the records appended since the last flush as one block."""
        if not self._pending_rows:
            return
        n = self._pending_rows
        matrix = np.empty((n, len(TUNING_FIELDS)), dtype=np.int64)
        for k, name in enumerate(TUNING_FIELDS):
            if name in self._codes:
                column = np.empty(n, dtype=object)
                column[:] = [v for p in self._pending for v in p[name]]
                matrix[:, k] = self._codes[name].encode(column)
            else:
                matrix[:, k] = np.concatenate([np.asarray(p[name], dtype=np.int64) for p in self._pending])
        with open(self.path, "ab") as handle:
            matrix.tofile(handle)
        self._lengths.append(n)
        self._pending, self._pending_rows = [], 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(())  # nothing for the scan to join: the records are here

    def __len__(self) -> int:
        return self.rows

    def chunks(self) -> Iterator[dict[str, np.ndarray]]:
        """The records in the order they came, as ``FileScan.tunings`` columns, one block at a time."""
        self.flush()
        width = len(TUNING_FIELDS)
        with open(self.path, "rb") as handle:
            for n in self._lengths:
                matrix = np.fromfile(handle, dtype=np.int64, count=n * width).reshape(n, width)
                yield {name: (self._codes[name].decode(matrix[:, k]) if name in self._codes else matrix[:, k])
                       for k, name in enumerate(TUNING_FIELDS)}
                del matrix


class ProcessStore:
    """Usable COLL lines grouped by process, in the order they are added (:data:`PROCESS_FIELDS`), held in
    memory or (``folder`` given) appended to one file per process."""

    def __init__(self, folder: Path | None, fields: tuple[str, ...] = PROCESS_FIELDS, name: str = "proc"):
        self.folder = folder
        self.fields = fields  # int64 columns
        self.name = name  # file names: several stores may share one folder
        self._parts: dict[Any, list[tuple[dict[str, np.ndarray], np.ndarray | None]]] = {}
        self._files: dict[Any, Path] = {}

    def add(self, proc: Any, columns: dict[str, np.ndarray], rows: np.ndarray | None = None) -> None:
        """Lines ``rows`` (all when None) of ``columns`` for process ``proc``. In memory the columns are
        shared and the rows taken only by :meth:`take` (one process at a time: no second copy of a chunk)."""
        if self.folder is None:
            self._parts.setdefault(proc, []).append((columns, rows))
            return
        path = self._files.get(proc)
        if path is None:
            path = self._files[proc] = self.folder / f"{self.name}{len(self._files)}.lines"
        with open(path, "ab") as handle:
            np.column_stack([np.asarray(columns[k] if rows is None else columns[k][rows], dtype=np.int64)
                             for k in self.fields]).tofile(handle)

    def processes(self) -> list[Any]:
        return list(self._files if self.folder is not None else self._parts)

    def take(self, proc: Any) -> dict[str, np.ndarray]:
        """All lines of one process as columns (in the order added), dropped from the store."""
        if self.folder is None:
            parts = [{k: v if rows is None else v[rows] for k, v in cols.items()} for cols, rows in self._parts.pop(proc)]
            if len(parts) == 1:
                return parts[0]
            return {k: np.concatenate([p[k] for p in parts]) for k in self.fields}
        path = self._files.pop(proc)
        matrix = np.fromfile(path, dtype=np.int64).reshape(-1, len(self.fields))
        path.unlink()
        return {k: np.ascontiguousarray(matrix[:, j]) for j, k in enumerate(self.fields)}


class SpilledTunings:
    """TUNING records of a spilled ingest, one file per process (``traces.formats.nccl.reader``); text as codes."""

    def __init__(self, store: ProcessStore, text: dict[str, Codes]):
        self.store, self.text = store, text

    def take(self, proc: int) -> dict[str, np.ndarray]:
        """The records of one process (in file and line order), text decoded; none when it has none."""
        if proc not in self.store.processes():
            return {k: np.empty(0, dtype=np.int64 if k in ("pos", "proc", "nbytes") else object)
                    for k in self.store.fields}
        cols = self.store.take(proc)
        for name, codes in self.text.items():
            cols[name] = codes.decode(cols[name])
        return cols

    def unknown(self, known: list[int]) -> int:
        """Records of processes not in ``known`` (their lines gave no rows), or of no known process."""
        return sum(len(self.take(p)["pos"]) for p in self.store.processes() if p not in known)
