"""The ingest front door: the format registry, ``--format auto`` detection and :func:`ingest`.

Every reader has the signature ``read_X(paths: list[Path], *, strict=False, progress=None) ->
(DataFrame, IngestReport)``; ``progress``, when given, is called with the number of bytes of input just
consumed (a file's size once it is read), so a caller can drive a bar whose total is the input size.
Readers are imported lazily: importing this module is cheap and works before every reader exists.

The helpers the readers share live in :mod:`traces.formats.files` (opening compressed files, folders and
globs, JSON) and :mod:`traces.formats.common` (rows, frames, PyTorch names, rank maps); they are
re-exported here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path

# Re-exported: the readers and their tests import these helpers from here.
from traces.formats.common import (  # noqa: F401
    Ignored,
    Progress,
    RankMap,
    RowSink,
    as_int,
    finish_frame,
    parse_int_list,
    split_bytes_of,
    torch_count,
    torch_dtype,
    torch_op,
)
from traces.formats.files import (  # noqa: F401
    HEAD_BYTES,
    Inputs,
    expand_inputs,
    expand_paths,
    json_start,
    load_json,
    open_binary,
    read_head,
    read_text,
)
from traces.ingest_report import IngestReport
from traces.lazy import lazy_module
from traces.schema import METADATA_KEY, TraceError

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["BINARY_DETECTORS", "BINARY_MAGIC", "FORMATS", "JSON_FORMATS", "STREAMING", "Progress", "detect_format",
           "expand_paths", "ingest", "ingest_to_parquet",
           "supported_formats"]


#: format name -> (module, reader function, detector function). Order matters for detection: the
#: structured formats are tried before the free-text NCCL log, whose detector is the most lenient.
FORMATS: dict[str, tuple[str, str, str]] = {
    "inspector": ("traces.formats.inspector", "read_inspector", "looks_like_inspector"),
    "profiler": ("traces.formats.nccl_profiler", "read_nccl_profiler", "looks_like_nccl_profiler"),
    "flight_recorder": ("traces.formats.flight_recorder", "read_flight_recorder", "looks_like_flight_recorder"),
    "kineto": ("traces.formats.kineto", "read_kineto", "looks_like_kineto"),
    "param": ("traces.formats.param", "read_param", "looks_like_param"),
    "nccl-tests": ("traces.formats.nccl_tests", "read_nccl_tests", "looks_like_nccl_tests"),
    "nccl": ("traces.formats.nccl.reader", "read_nccl_logs", "looks_like_nccl_log"),
}


#: Formats whose files may be binary (a pickle): format -> detector of the raw first bytes, in its module.
BINARY_DETECTORS: dict[str, str] = {"flight_recorder": "looks_like_flight_recorder_pickle"}
#: The first byte each binary detector needs (a pickle of protocol 2+ starts with PROTO, 0x80): a file that
#: starts otherwise is not asked, so detecting an NCCL log imports no reader of another format.
BINARY_MAGIC: dict[str, bytes] = {"flight_recorder": b"\x80"}
#: JSON formats: their detectors claim only a head that :func:`traces.formats.files.json_start` accepts
#: (tested), so for any other head their modules are not imported to ask them.
JSON_FORMATS: frozenset[str] = frozenset({"inspector", "profiler", "flight_recorder", "kineto", "param"})


def _binary_format(path: Path) -> str | None:
    """The format of a binary file one of :data:`BINARY_DETECTORS` recognises, else None."""
    try:
        with open_binary(path) as fh:
            raw = fh.read(65536)
    except (OSError, EOFError, ValueError) as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    for fmt, detector in BINARY_DETECTORS.items():
        if raw.startswith(BINARY_MAGIC[fmt]) and getattr(_module(fmt), detector)(raw):
            return fmt
    return None


def supported_formats() -> list[str]:
    """Names accepted by ``--format`` besides ``auto``."""
    return list(FORMATS)


def _module(fmt: str):
    name = FORMATS[fmt][0]
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise TraceError(f"format '{fmt}' is not available ({exc})") from None


def detect_format(path: Path) -> str:
    """Return the format name of one file, judged from its content.

    Raises
    ------
    TraceError
        When no reader recognises the file; the message lists the supported formats.
    """
    binary = _binary_format(path)
    if binary is not None:
        return binary
    head = read_head(path)
    json_like = json_start(head)
    for fmt, (module_name, _, detector) in FORMATS.items():
        if fmt in JSON_FORMATS and not json_like:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a reader still being written: it cannot claim files yet
            continue
        if getattr(module, detector)(head):
            return fmt
    from traces.formats.inspector import looks_like_inspector_prometheus

    if looks_like_inspector_prometheus(head):
        raise TraceError(
            f"{path}: NCCL Inspector Prometheus output (NCCL_INSPECTOR_PROM_DUMP=1) holds aggregated metrics, "
            "not per-operation records, and is not supported; rerun with the default JSON output"
        )
    raise TraceError(
        f"{path}: cannot tell the trace format from its content; supported formats: "
        f"{', '.join(FORMATS)} (pass --format to choose one)"
    )


def _unknowns(df: pd.DataFrame, fmt: str) -> list[str]:
    """Notes on what the input could not tell (the schema's NaN columns), so nobody reads NaN as zero."""
    if not len(df):
        return []
    return _unknown_notes([c for c in ("duration_s", "t_start_s") if df[c].isna().all()], fmt, len(df))


def _unknown_notes(all_nan: list[str], fmt: str, n_rows: int) -> list[str]:
    """The notes of :func:`_unknowns` for the columns that are NaN on every one of ``n_rows`` rows."""
    if not n_rows:
        return []
    what = {"duration_s": "no durations in the input (duration_s is NaN)",
            "t_start_s": "no issue times in the input (t_start_s is NaN)"}
    return [f"{fmt}: {what[c]}" for c in ("duration_s", "t_start_s") if c in all_nan]


def _detect_all(inputs: Inputs) -> dict[Path, str]:
    """Format of every input; a file found in a folder or glob that is no trace is set aside (counted)."""
    found: dict[Path, str] = {}
    for path in list(inputs.files):
        try:
            found[path] = detect_format(path)
        except TraceError as exc:
            if path not in inputs.found:
                raise
            text = str(exc)
            inputs.drop(path, "empty" if "empty file" in text else "binary" if "binary" in text else "content")
    if not found:
        raise TraceError(f"no trace among the files given ({inputs.note()})")
    return found


def ingest(
    paths: str | Path | Iterable[str | Path],
    format: str = "auto",
    *,
    strict: bool = False,
    progress: Progress = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read measured collective traces into one §3 trace frame.

    Parameters
    ----------
    paths : str, Path or iterable of them
        Files, folders (every file under it, recursively) or glob patterns (``logs/**/*.log``); files
        found in folders or globs that are not traces (README, code, ...) are skipped and counted
        (metadata ``notes``, ``ingest.files_skipped``). Files may be gzip, bzip2, xz or zstd compressed.
    format : str
        ``"auto"`` (detect from content) or one of :func:`supported_formats`.
    strict : bool
        Turn any skipped record into a :class:`TraceError` naming the first place it happened.
    progress : callable, optional
        Called with the number of input bytes consumed as reading proceeds.
    allow_empty : bool
        Return an empty trace (with its metadata) when the input holds no collective operation, instead of
        raising the error ``simrun ingest`` prints (with the reader's hint, e.g. to log with
        ``NCCL_DEBUG_SUBSYS=COLL``).

    Returns
    -------
    pandas.DataFrame
        The §3 frame; ``df.attrs["collsim"]`` holds the metadata, with ``ingest`` (the
        :class:`IngestReport` as a dict) and ``notes``.

    Raises
    ------
    TraceError
        Unknown format, undetectable or mixed formats, unreadable or malformed input.

    Examples
    --------
    >>> df = ingest(["rank0.json", "rank1.json"], format="kineto")  # doctest: +SKIP
    >>> df.attrs["collsim"]["ingest"]["records"]  # doctest: +SKIP
    42
    """
    inputs, format = _inputs_and_format(paths, format)
    files = inputs.files
    module = _module(format)
    reader = getattr(module, FORMATS[format][1])
    df, report = reader(files, strict=strict, progress=progress)
    if report.disagreeing is None:
        report.check_agreement(df)
    df.attrs[METADATA_KEY] = _final_metadata(dict(df.attrs.get(METADATA_KEY) or {}), report, inputs, format,
                                             _unknowns(df, format))
    if df.empty and not allow_empty:
        raise TraceError(_no_collectives(files, report, df.attrs[METADATA_KEY]["notes"]))
    return df


#: Formats whose reader can hand its rows over a block at a time: format -> function of its module,
#: ``f(paths, progress=None) -> (rows, IngestReport)``, ``rows`` with ``meta``, ``__len__``, ``blocks()``,
#: ``light()``, ``check_collectives(check)`` and ``n_ranks()`` (:class:`traces.formats.nccl.output.CompactRows`).
STREAMING: dict[str, str] = {"nccl": "scan_nccl_logs"}


def _refuse_overwriting_an_input(out: str | Path, files: list[Path]) -> None:
    """``-o`` naming one of the inputs would replace the measured log with the trace made from it."""
    target = Path(out).expanduser()
    if not target.is_file():
        return
    for f in files:
        if os.path.samefile(target, f):
            raise TraceError(f"{out}: the output is one of the input files; it would be replaced by the trace")


def ingest_to_parquet(
    paths: str | Path | Iterable[str | Path],
    out: str | Path,
    format: str = "auto",
    *,
    strict: bool = False,
    progress: Progress = None,
) -> tuple[int, int, dict]:
    """:func:`ingest` straight into a Parquet trace (what ``simrun ingest`` does), a row group at a time.

    Formats in :data:`STREAMING` never build the whole trace as one frame: their rows stay compact and are
    framed, validated and written one block (row group) at a time, so memory stays far below the
    frame's; the rows are the ones :func:`ingest` returns, with the same metadata. Other formats go
    through :func:`ingest` and :func:`traces.io.write_trace`.

    Returns
    -------
    (int, int, dict)
        Rows written, distinct ranks, and the metadata written.

    Raises
    ------
    TraceError
        As :func:`ingest`, and when ``out`` cannot be written (no partial file is left).

    Examples
    --------
    >>> ingest_to_parquet(["rank0.log"], "trace.parquet")  # doctest: +SKIP
    (1000, 8, {...})
    """
    from traces.io import TraceWriter, write_trace

    inputs, format = _inputs_and_format(paths, format)
    _refuse_overwriting_an_input(out, inputs.files)
    if format not in STREAMING:
        df = ingest(paths, format, strict=strict, progress=progress)
        write_trace(df, out)
        return len(df), int(df["rank"].nunique()), df.attrs[METADATA_KEY]
    rows, report = getattr(_module(format), STREAMING[format])(inputs.files, progress=progress)
    unknown = [col for col in ("duration_s", "t_start_s") if rows.all_nan(col)]
    meta = _final_metadata(rows.meta, report, inputs, format, _unknown_notes(unknown, format, len(rows)))
    with TraceWriter(out, meta) as writer:
        for block in rows.blocks():
            try:
                writer.write(block)
            except TraceError:
                # A block sees its own rows only: the whole trace's check gives the message ingest gives (row
                # counted over all rows). Failures only: the full frame is built on this path alone.
                from traces.formats.common import inputs_text
                from traces.schema import validate

                whole = rows.frame()
                whole.attrs = {METADATA_KEY: {"world_size": meta["world_size"]}}
                try:
                    validate(whole, collectives=False)
                except TraceError as exc:  # the same message as the reader's (input files named)
                    raise TraceError(f"{inputs_text(report)}: {exc}") from None
                raise
        report.raise_if_strict(strict)  # after the rows' own checks, as the reader does
        if not len(rows):
            raise TraceError(_no_collectives(inputs.files, report, meta["notes"]))
        rows.check_collectives(writer.check_collectives)  # on light columns (a bucket at a time when spilled)
    return len(rows), rows.n_ranks(), meta


def _inputs_and_format(paths: str | Path | Iterable[str | Path], format: str) -> tuple[Inputs, str]:
    """The files to read and their one format (detected with ``"auto"``)."""
    inputs = expand_inputs(paths)
    if format == "auto":
        found = _detect_all(inputs)
        kinds = sorted(set(found.values()))
        if len(kinds) > 1:
            first = {f: p for p, f in reversed(list(found.items()))}  # one example file per format
            listing = "; ".join(f"{first[k].name} is {k}" for k in kinds)
            raise TraceError(f"mixed trace formats in one ingest ({', '.join(kinds)}): {listing}; ingest each "
                             "format separately")
        format = kinds[0]
    elif format not in FORMATS:
        raise TraceError(f"unknown format {format!r}; supported: auto, {', '.join(FORMATS)}")
    else:
        for path in inputs.files:
            if format not in BINARY_DETECTORS or _binary_format(path) != format:
                read_head(path)  # the same clear errors for empty or binary files as with auto
    return inputs, format


def _final_metadata(meta: dict, report: IngestReport, inputs: Inputs, fmt: str, unknown: list[str]) -> dict:
    """The reader's metadata with the ingest report, its notes and the files set aside."""
    report.notes += unknown
    meta["ingest"] = report.as_dict()
    skipped_files = inputs.note()
    meta["notes"] = list(dict.fromkeys([*meta.get("notes", []), *report.notes,
                                        *([skipped_files] if skipped_files else [])]))
    meta["ingest"]["files_skipped"] = len(inputs.skipped)
    return meta


def _no_collectives(files: list[Path], report: IngestReport, notes: list[str]) -> str:
    """One line: which input, what was read and skipped, and the readers' hints on what to do."""
    what = str(files[0]) if len(files) == 1 else f"{len(files)} files"
    hints = [n for n in notes if "log with" in n or "set " in n.lower() or "rerun" in n]
    return f"{what}: no collective operations found; {report.summary()}" + "".join(f"; {h}" for h in hints)


