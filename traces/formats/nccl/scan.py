"""Stream one NCCL debug-log file in large byte chunks and pull out what the reader needs.

Memory stays bounded: a file is read in ``CHUNK_BYTES`` pieces cut at the last newline. In each chunk a
literal substring search finds the COLL lines (``": opCount "``), the TUNING lines and the candidates for
the rare Init / ring / version lines. COLL and TUNING lines in the standard layouts are read positionally,
by the compiled kernel of :mod:`traces.formats.nccl.kernel_numba` (through :mod:`traces.formats.nccl.scan_numba`) or, where
numba is missing or the input small, by :mod:`traces.formats.nccl.kernel_numpy` (numpy, no regex per line); every
other COLL line (interleaved writes, lines without a prefix, unusual layouts) goes through the forgiving
per-line parser of :mod:`traces.formats.nccl.layout`. All paths give the same fields (tests check that).

This module holds the knobs (``CHUNK_BYTES``, ``ENGINE``, ``WORKERS``, ...), the choice of chunk reader and the
byte ranges; one chunk's numpy reading is :mod:`traces.formats.nccl.scan_numpy`, the joining of parts and
ranges :mod:`traces.formats.nccl.scan_merge`.
"""

from __future__ import annotations

import importlib.util
import lzma
import multiprocessing as mp
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from traces.arrays import factorize
from traces.formats.files import compression_of, open_binary
from traces.formats.nccl import kernel_aot
from traces.formats.nccl.records import (  # noqa: F401 - re-exported: the scans' records and parsers
    COLL_FIELDS,
    INT_FIELDS,
    NO_TS,
    TUNING_FIELDS,
    TUNING_INT,
    FileScan,
    append_record,
    empty_columns,
    note_ts,
    parse_other,
    parse_slow,
    recover_torn,
)
from traces.formats.nccl.scan_merge import TEXT_FIELDS, finish_columns, finish_tunings, merge_scans
from traces.formats.nccl.scan_numpy import scan_chunk
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import TraceError

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does
#: What reading (and decompressing) a file can raise.
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)
CHUNK_BYTES = 2 << 20  # measured: 2 MiB beat 1 and 8 MiB (cache-resident working set)
#: Files at least this large are scanned by ``WORKERS`` processes, each over its own byte range.
PARALLEL_BYTES = 48 << 20
#: Chunk reader: "auto" (see :func:`use_jit`), "jit" (numba's JIT kernel), "aot" (the same kernel built ahead of
#: time, :mod:`traces.formats.nccl.kernel_aot`; it must be built) or "numpy".
ENGINE = "auto"
JIT_MIN_BYTES = 64 << 20
WORKERS = 1  # measured: 2 processes were slower than 1 on the shared 2-core machine (see docs)


def use_jit(total_bytes: int) -> bool:
    """Whether to scan with the compiled kernel: numba's JIT kernel is already loaded in this process, or the
    input is at least ``JIT_MIN_BYTES`` and the kernel is there (built ahead of time, else numba installed).
    Importing numba and loading the cached machine code cost ~1.2 s per process and the kernel saves ~20 ms
    per MB over the numpy path (measured on the ingest benchmark), so a new process breaks even near 60 MB.
    ``ENGINE`` forces a choice; :func:`compiled_kernel` says which compiled kernel runs."""
    if ENGINE == "numpy":
        return False
    if ENGINE == "jit":
        _import_kernel()
        return True
    if ENGINE == "aot":
        compiled_kernel()
        return True
    if "traces.formats.nccl.kernel_numba" in sys.modules:
        return True
    if total_bytes < JIT_MIN_BYTES:
        return False
    if kernel_aot.load() is not None:
        return True
    if importlib.util.find_spec("numba") is None:
        return False
    try:  # a broken numba install (or a platform it cannot compile for) leaves the numpy path
        _import_kernel()
    except Exception:  # noqa: BLE001 - any failure to load the kernel means: do without it
        return False
    return True


#: What numba imports, once per process, to learn whether BLAS is there (scipy.linalg: ~0.6 s of CPU, a
#: fifth of a fresh ``simrun ingest``'s start). The kernel uses no BLAS.
_BLAS_PROBE = "scipy.linalg.cython_blas"


def compiled_kernel() -> ModuleType:
    """The compiled kernel a scan with ``jit`` runs: the ahead-of-time build of the current sources when there
    is one (:func:`traces.formats.nccl.kernel_aot.load`: no numba imported), else numba's JIT kernel;
    ``ENGINE = "jit"`` forces the JIT one.

    Raises
    ------
    TraceError
        With ``ENGINE = "aot"`` when no ahead-of-time build loads.
    """
    if ENGINE != "jit":
        built = kernel_aot.load()
        if built is not None:
            return built
        if ENGINE == "aot":
            raise TraceError("no ahead-of-time NCCL-log kernel is built for these sources; build it with "
                             "`python -m traces.formats.nccl.kernel_aot`")
    _import_kernel()
    return sys.modules["traces.formats.nccl.kernel_numba"]


def _import_kernel() -> None:
    """Import the compiled kernel without numba's BLAS probe importing scipy.

    numba's array registry, loaded with the first compiled function of a process, tries ``import
    scipy.linalg.cython_blas`` once and only notes the answer (it then computes ``np.correlate`` inner
    products with a loop); ``np.dot`` and ``np.linalg`` check again when a function using them is compiled.
    Blocking the probe while the kernel loads, and only then, costs nothing the kernel uses.
    """
    blocked = _BLAS_PROBE not in sys.modules and "numba.np.arraymath" not in sys.modules
    if blocked:
        sys.modules[_BLAS_PROBE] = None  # type: ignore[assignment] - None makes the import fail at once
    try:
        import traces.formats.nccl.kernel_numba  # noqa: F401
    finally:
        if blocked and sys.modules.get(_BLAS_PROBE, 0) is None:
            del sys.modules[_BLAS_PROBE]


def scan_file(path: Path, report: IngestReport, progress: Callable[[float], Any] | None = None,
              jit: bool = False, parts: Any = None, tunings: Any = None) -> FileScan:
    """Read one NCCL log file.

    Parameters
    ----------
    path : Path
        The log file.
    report : IngestReport
        Unusable COLL lines are counted here (reason and first ``file:line``).
    progress : callable, optional
        Called with the bytes consumed after each chunk (each range, when scanned in parallel).
    jit : bool
        Read chunks with the compiled kernel (:mod:`traces.formats.nccl.kernel_numba`) instead of the numpy path; both
        give the same scan.
    parts : list-like, optional
        Sink of the chunks' COLL column parts (``append``; ``parts[-1]`` reads the last one back), such as
        a :class:`traces.formats.nccl.spill.PartStore`; ``scan.coll`` then joins what it iterates over.
    tunings : list-like, optional
        Sink of the TUNING records' parts (``append``), such as a
        :class:`traces.formats.nccl.spill.TuningStore`; ``scan.tunings`` then joins what it iterates over.

    Returns
    -------
    FileScan

    Raises
    ------
    TraceError
        When the file cannot be read or holds binary data.
    """
    compressed = compression_of(path) is not None
    try:
        with open_binary(path) as handle:
            _check_text(path, handle.read(65536))
        size = os.path.getsize(path)
    except _READ_ERRORS as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if compressed:  # one stream, no byte ranges; progress in compressed bytes, once read
        scan, skips = _scan_range(str(path), 0, -1, None, jit, parts, tunings)
        if progress is not None:
            progress(size)
        return merge_scans(str(path), [(scan, skips)], report)
    if size >= PARALLEL_BYTES and WORKERS > 1 and "fork" in mp.get_all_start_methods():
        ranges = _ranges(path, size, 2 * WORKERS)
        # fork: workers inherit the imported modules, so they start at once; each reads its own range.
        with ProcessPoolExecutor(WORKERS, mp_context=mp.get_context("fork")) as pool:
            futures = [pool.submit(_scan_range_coded, str(path), a, b, jit) for a, b in ranges]
            results = []
            for (a, b), fut in zip(ranges, futures, strict=True):
                results.append(fut.result())
                if progress is not None:
                    progress(b - a)
        out = merge_scans(str(path), results, report)
        if parts is not None:  # the ranges' columns, joined, go to the sink too
            parts.append(out.coll)
            out.coll = {name: v[:0] for name, v in out.coll.items()}
        if tunings is not None:
            tunings.append(out.tunings)
            out.tunings = {name: v[:0] for name, v in out.tunings.items()}
        return out
    scan, skips = _scan_range(str(path), 0, size, progress, jit, parts, tunings)
    return merge_scans(str(path), [(scan, skips)], report)


def _ranges(path: Path, size: int, n: int) -> list[tuple[int, int]]:
    """``n`` byte ranges covering the file, each starting at a line start."""
    cuts = [0]
    with open(path, "rb") as handle:
        for k in range(1, n):
            handle.seek(max(k * size // n, cuts[-1]))
            handle.readline()
            cuts.append(min(max(handle.tell(), cuts[-1]), size))
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def _scan_range(path: str, begin: int, end: int, progress: Callable[[float], Any] | None = None,
                jit: bool = False, parts: Any = None, tunings: Any = None
                ) -> tuple[FileScan, list[tuple[str, int, int]]]:
    """Scan bytes [begin, end) of a file (cut at line starts; ``end`` < 0: the whole decompressed stream of a
    compressed file); line numbers count from the range start.

    Returns the scan and the skipped lines as (reason, first line, count).
    """
    scan = FileScan(path=path, coll={})
    report = IngestReport()
    parts = [] if parts is None else parts  # a sink of scan_file's, or joined below
    if tunings is not None:
        scan.tuning_parts = tunings  # likewise for the TUNING records
    line_base = 0
    try:
        with (open_binary(Path(path)) if end < 0 else open(path, "rb")) as handle:
            if jit:
                from traces.formats.nccl.scan_numba import scan_chunks

                line_base = scan_chunks(_chunks(handle, begin, end), scan, parts, report, progress,
                                        compiled_kernel())
            else:
                for buf in _chunks(handle, begin, end):
                    line_base += scan_chunk(buf, line_base, scan, parts, report)
                    if progress is not None:
                        progress(len(buf))
    except _READ_ERRORS as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    scan.lines = line_base
    scan.coll = finish_columns(parts)
    scan.tunings = finish_tunings(scan.tuning_parts)
    scan.tuning_parts = []
    skips = [(reason, int(report.examples[reason].rsplit(":", 1)[1]), n) for reason, n in report.skipped.items()]
    return scan, skips


def _chunks(handle: Any, begin: int, end: int) -> Iterator[bytes]:
    """Chunks of about ``CHUNK_BYTES`` of bytes [begin, end) of an open file, each ending at a line end
    (``end`` < 0: to the end of a stream, such as a decompressed one, which cannot seek)."""
    if begin:
        handle.seek(begin)
    rest = b""
    left = end - begin if end >= 0 else 1 << 62
    while True:
        data = handle.read(min(CHUNK_BYTES, left))
        left -= len(data)
        if not data:
            if rest:
                yield rest
            return
        buf = rest + data
        cut = buf.rfind(b"\n") + 1
        if cut == 0:  # no newline in a whole chunk: keep reading (one very long line)
            rest = buf
            continue
        rest = buf[cut:]
        yield buf[:cut]


def _scan_range_coded(path: str, begin: int, end: int, jit: bool = False
                      ) -> tuple[FileScan, list[tuple[str, int, int]]]:
    """:func:`_scan_range` for a worker process: text columns go back as integer codes plus the distinct
    values, which pickle far faster than one Python string per row."""
    scan, skips = _scan_range(path, begin, end, jit=jit)
    for name in TEXT_FIELDS:
        codes, uniq = factorize(scan.coll[name])
        scan.coll[name] = (codes.astype(np.int32), list(uniq))
    return scan, skips


def _check_text(path: Path, head: bytes) -> None:
    # NCCL writes plain text: control bytes other than tab/CR/LF mean a binary file (core dump, Parquet).
    sample = np.frombuffer(head[:65536], dtype=np.uint8)
    control = ((sample < 32) & (sample != 9) & (sample != 10) & (sample != 13)).sum()
    if control > len(sample) // 100 and b"NCCL" not in head[:65536]:
        raise TraceError(f"{path}: not a text NCCL log (binary data)")


__all__ = ["CHUNK_BYTES", "ENGINE", "JIT_MIN_BYTES", "PARALLEL_BYTES", "WORKERS", "compiled_kernel", "scan_file",
           "use_jit"]
