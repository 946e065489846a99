"""Input files as people have them: compressed (gzip, bzip2, xz, zstd), in folders, named by globs.

Compression is told from the first bytes, not the name: ``open_binary`` returns a stream of the
decompressed bytes for every reader (the JSON ones and the NCCL-log scan). zstd is read through pyarrow's
codec (a project dependency), so no extra package is needed; where pyarrow was built without it, the
error says what to install.

A folder or glob stands for the files under it (recursively, hidden files skipped, name order).
Files found that way which are plainly not traces (README, licences, code, images: see
:data:`NON_TRACE_SUFFIXES`) are skipped and counted; a file named explicitly is always read.
"""

from __future__ import annotations

import bz2
import codecs
import glob
import gzip
import io
import json
import lzma
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from traces.schema import TraceError

__all__ = ["HEAD_BYTES", "NON_TRACE_SUFFIXES", "Inputs", "compression_of", "expand_inputs", "expand_paths",
           "json_start", "load_json", "open_binary", "read_head", "read_text"]

#: How many bytes of each file detection looks at (Kineto puts ``traceEvents`` after its header).
HEAD_BYTES = 256 * 1024
#: Magic bytes -> compression name.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
    # text with a byte-order mark: Windows PowerShell's `>` writes UTF-16 LE with one, Notepad and some
    # exporters put one before UTF-8; read as UTF-8 text without it (a UTF-16 file without a BOM cannot be
    # told from binary data and stays refused)
    (b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
#: The entries of :data:`_MAGIC` that are text encodings, recoded to UTF-8 by :func:`open_binary`.
_TEXT_ENCODINGS = ("utf-8-sig", "utf-16")
#: Names never taken for traces when a folder or glob is expanded (compared lower-case).
NON_TRACE_SUFFIXES = (".md", ".rst", ".py", ".sh", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".png",
                      ".jpg", ".jpeg", ".svg", ".pdf", ".html", ".css", ".parquet", ".csv", ".tsv", ".tar", ".zip")
NON_TRACE_STEMS = ("readme", "license", "licence", "copying", "changelog", "notice", "makefile")
_GLOB_CHARS = set("*?[")


def compression_of(path: Path) -> str | None:
    """``"gzip"``, ``"bzip2"``, ``"xz"``, ``"zstd"``, a byte-order-marked text encoding (``"utf-8-sig"``,
    ``"utf-16"``) or None, from a file's first bytes: anything but None is read as one decoded stream.

    Raises
    ------
    TraceError
        When the file cannot be read.
    """
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return next((name for m, name in _MAGIC if magic.startswith(m)), None)


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip, bzip2, xz and zstd on the fly, and recoding text with
    a byte-order mark (UTF-16, UTF-8) to plain UTF-8.

    Raises
    ------
    TraceError
        When the file cannot be read, or is zstd-compressed and no zstd codec is available.
    """
    kind = compression_of(path)
    try:
        if kind == "gzip":
            return gzip.open(path, "rb")  # type: ignore[return-value]
        if kind == "bzip2":
            return bz2.open(path, "rb")  # type: ignore[return-value]
        if kind == "xz":
            return lzma.open(path, "rb")  # type: ignore[return-value]
        if kind == "zstd":
            return _open_zstd(path)
        if kind in _TEXT_ENCODINGS:  # UTF-8 bytes out, the mark dropped
            return _open_marked_text(path, kind)
        return open(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _open_marked_text(path: Path, encoding: str) -> BinaryIO:
    """A text file with a byte-order mark as a stream of UTF-8 bytes.

    Two bytes FF FE also start binary files: a UTF-16 head that is not mostly ASCII (every trace format is:
    log lines, JSON keys, numbers) reads as one NUL byte, which every reader's binary check refuses with its
    usual message, as for a file without a mark.
    """
    if encoding == "utf-16":
        with open(path, "rb") as fh:
            head = fh.read(65536)
        text = head[: len(head) & ~1].decode("utf-16", errors="replace")
        if text and sum(ch < "\x80" for ch in text) < 0.9 * len(text):
            return io.BytesIO(b"\x00")
    return codecs.EncodedFile(open(path, "rb"), "utf-8", encoding)  # type: ignore[return-value]


def _open_zstd(path: Path) -> BinaryIO:
    try:
        import pyarrow as pa

        if not pa.Codec.is_available("zstd"):
            raise ImportError("pyarrow without zstd")
        return pa.CompressedInputStream(pa.OSFile(str(path)), "zstd")  # type: ignore[return-value]
    except ImportError:
        pass
    try:
        import zstandard  # noqa: PLC0415 - optional

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"))  # type: ignore[return-value]
    except ImportError:
        raise TraceError(f"{path}: zstd-compressed, and no zstd decoder is installed (pip install zstandard, "
                         "or decompress it first: zstd -d)") from None


_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def json_start(head: str) -> bool:
    """Whether a file head can start a JSON object or an array of objects: its first non-blank character is
    ``{``, or ``[`` followed by ``{``, ``]`` or nothing. Every JSON format's detector claims only such heads
    (an NCCL 2.26 log line starts ``[2025-...``), so the registry asks them only then.

    Examples
    --------
    >>> json_start('[ {"a": 1}'), json_start("{"), json_start("[2025-01-01 00:00:00] h:1:1 [0] NCCL INFO")
    (True, True, False)
    """
    text = head.lstrip()
    if text[:1] == "{":
        return True
    return text[:1] == "[" and text[1:].lstrip()[:1] in ("{", "]", "")


def read_head(path: Path, n_bytes: int = HEAD_BYTES) -> str:
    """Return the first ``n_bytes`` (decompressed) of a file as text.

    Raises
    ------
    TraceError
        When the file cannot be read, is empty, or is binary (NUL bytes or not UTF-8).
    """
    try:
        with open_binary(path) as fh:
            raw = fh.read(n_bytes)
    except _READ_ERRORS as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if not raw.strip():
        raise TraceError(f"{path}: empty file")
    if b"\x00" in raw:
        raise TraceError(f"{path}: binary data, not a trace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(raw) - 4:  # the head cut a multi-byte character in two
            return raw[: exc.start].decode("utf-8")
        raise TraceError(f"{path}: binary data, not a trace (byte {exc.start} is not UTF-8)") from None


def read_bytes(path: Path) -> bytes:
    """A whole file's (decompressed) bytes.

    Raises
    ------
    TraceError
        When it cannot be read.
    """
    try:
        with open_binary(path) as fh:
            return fh.read()
    except _READ_ERRORS as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def read_text(path: Path) -> str:
    """Read a whole (possibly compressed) UTF-8 file.

    Raises
    ------
    TraceError
        When it cannot be read or is not UTF-8 text.
    """
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"{path}: binary data, not a trace") from None


def load_json(path: Path) -> Any:
    """Parse a whole JSON file.

    Raises
    ------
    TraceError
        Naming the file, line and column of the first syntax error, or the read failure.
    """
    text = read_text(path)
    if not text.strip():
        raise TraceError(f"{path}: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}:{exc.lineno}: malformed JSON at column {exc.colno} ({exc.msg})") from None
    except RecursionError:  # arrays or objects nested deeper than the parser's stack: no trace is shaped so
        raise TraceError(f"{path}: JSON nested too deeply to read (not a trace)") from None


@dataclass
class Inputs:
    """The files an ingest reads, in argument order (``found``: those that came from a folder or glob, which
    are skipped when their content is not a trace); ``skipped`` lists ``(path, why)`` of those set aside."""

    files: list[Path] = field(default_factory=list)
    found: set[Path] = field(default_factory=set)
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def add(self, path: Path, found: bool) -> None:
        if path not in self.files:
            self.files.append(path)
            if found:
                self.found.add(path)

    def drop(self, path: Path, why: str) -> None:
        """Set a found file aside (not a trace)."""
        self.files.remove(path)
        self.found.discard(path)
        self.skipped.append((path, why))

    def note(self) -> str | None:
        """``skipped 2 file(s) that are not traces: README.md (name), x.txt (content)``, or None."""
        if not self.skipped:
            return None
        listing = ", ".join(f"{p.name} ({why})" for p, why in self.skipped[:5])
        return f"skipped {len(self.skipped)} file(s) that are not traces: {listing}" + (
            " ..." if len(self.skipped) > 5 else "")


def _not_a_trace_name(path: Path) -> bool:
    name = path.name.lower()
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        name = name.removesuffix(ext)
    return name.endswith(NON_TRACE_SUFFIXES) or name.split(".")[0] in NON_TRACE_STEMS


def _walk(folder: Path) -> list[Path]:
    """Regular files under ``folder`` (recursive), hidden files and folders skipped, in path order."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).parts
        if p.is_file() and not any(part.startswith(".") for part in rel):
            out.append(p)
    return sorted(out)


def expand_inputs(paths: str | Path | list[str | Path] | tuple) -> Inputs:
    """Turn paths (files, folders, globs such as ``logs/**/*.log``) into the files to read.

    Raises
    ------
    TraceError
        For a path that does not exist (and matches nothing as a glob), a folder or glob with no files, or
        no path at all.
    """
    if not isinstance(paths, str | os.PathLike | list | tuple):
        raise TraceError(f"input files are a path or a list of paths, got {type(paths).__name__}")
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not items:
        raise TraceError("no input files given")
    out = Inputs()
    for item in items:
        if not isinstance(item, str | os.PathLike):
            raise TraceError(f"an input file is a path, got {type(item).__name__}")
        path = Path(item).expanduser()
        if path.is_file():
            out.add(path, found=False)
            continue
        if path.is_dir():
            files = _walk(path)
            where = f"{path}: folder"
        elif _GLOB_CHARS & set(str(item)):
            files = sorted({Path(p) for p in glob.glob(str(path), recursive=True)})
            files = [f for g in files for f in ([g] if g.is_file() else _walk(g))]
            where = f"{item}: pattern"
            if not files:
                raise TraceError(f"{item}: no file matches this pattern")
        elif path.exists():  # a FIFO, socket or device: formats are told from the head, then read again
            raise TraceError(f"{path}: not a regular file (a FIFO or device); give the file itself")
        else:
            raise TraceError(f"{path}: no such file or folder")
        kept = [f for f in files if not _not_a_trace_name(f)]
        out.skipped += [(f, "name") for f in files if _not_a_trace_name(f)]
        if not files:
            raise TraceError(f"{where} holds no files")
        if not kept:
            raise TraceError(f"{where} holds no trace files ({len(files)} skipped by name: "
                             f"{', '.join(f.name for f in files[:3])}{' ...' if len(files) > 3 else ''})")
        for f in kept:
            out.add(f, found=True)
    return out


def expand_paths(paths: str | Path | list[str | Path] | tuple) -> list[Path]:
    """The files of :func:`expand_inputs`, as a list."""
    return expand_inputs(paths).files
