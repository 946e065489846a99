"""Safe output files: atomic replacement, file names made from data, short echoes of bad values.

Every file collsim writes goes through :func:`atomic_output`: the bytes go to a temporary file in the
target's own folder, which is renamed over the target only once it is complete. A failed or interrupted
write (full disk, Ctrl-C) therefore leaves the old file, or none, never a truncated one, and collsim only
ever removes the temporary file it created itself. A target that exists and is not a regular file (a
device such as ``/dev/stdout`` or ``/dev/full``, a FIFO) is made in the temporary folder and copied into
it once complete; it is never removed or replaced.

This module imports nothing from the rest of collsim, so every package may use it.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_output", "safe_file_name", "save_figure", "short_repr", "write_csv", "write_text_file"]

#: Characters kept in a file name derived from data; every other character becomes ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
#: Longest echo of a bad value in an error message.
MAX_ECHO_CHARS = 60


def short_repr(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters, without building the repr of a huge value.

    Containers are summarised by type and length first, so an alias-bomb value of YAML is never expanded.

    Examples
    --------
    >>> short_repr("abc")
    "'abc'"
    >>> short_repr(list(range(1000)))
    'list of 1000 items [0, 1, 2, 3, 4, 5, 6, 7, ...]'
    """
    if isinstance(value, list | tuple | dict | set | frozenset):
        head = list(itertools.islice(value, 8))
        if len(value) > 8 or any(isinstance(v, list | tuple | dict) for v in head):
            inner = ", ".join(short_repr(v, 12) for v in head)
            text = f"{type(value).__name__} of {len(value)} items [{inner}{', ...' if len(value) > 8 else ''}]"
            return text if len(text) <= limit + 40 else text[: limit + 37] + "..."
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"... ({len(value)} chars)"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def safe_file_name(name: str, suffix: str = "") -> str:
    """A file name made from data (a host name, a comm id) that cannot leave its folder.

    Every character outside ``A-Z a-z 0-9 _ . + -`` becomes ``_`` (so no ``/`` or ``\\``), and a name
    that is empty or starts with ``.`` (``..``, hidden files) gets a leading ``_``.

    Examples
    --------
    >>> safe_file_name("../escaped", ".log")
    '_.._escaped.log'
    >>> safe_file_name("node-01.cluster", ".log")
    'node-01.cluster.log'
    """
    clean = _UNSAFE.sub("_", str(name))[:200]
    if not clean or clean.startswith("."):
        clean = "_" + clean
    return clean + suffix


def _is_special(path: Path) -> bool:
    """True when ``path`` exists and is not a regular file or a folder (a device, a FIFO, a socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``, on failure remove it.

    Parameters
    ----------
    path : str or Path
        The file to (re)place. Its folder must exist. An existing device or FIFO gets the complete file
        copied into it (never removed); an existing folder is refused.

    Yields
    ------
    Path
        Where the caller writes the complete file.

    Raises
    ------
    IsADirectoryError
        When ``path`` is a folder.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with atomic_output(folder / "a.txt") as tmp:
    ...     _ = tmp.write_text("hello")
    >>> (folder / "a.txt").read_text(), sorted(p.name for p in folder.iterdir())
    ('hello', ['a.txt'])
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, "is a folder, not a file", str(target))
    special = _is_special(target)
    # A device or FIFO is not ours to replace or delete (pyarrow removes a path whose write failed, which
    # once deleted /dev/full): the file is made in the temporary folder, then copied into the device.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:80]}.", suffix=".tmp",
                                    dir=None if special else target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if special:
            with open(tmp, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            tmp.unlink()
            return
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None or str(exc.filename) == str(tmp):  # name the file the user asked for
            raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_file(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path.

    Examples
    --------
    >>> import tempfile
    >>> p = write_text_file(Path(tempfile.mkdtemp()) / "a.html", "<p>hi</p>")
    >>> p.read_text()
    '<p>hi</p>'
    """
    path = Path(path)
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def write_csv(frame: Any, path: str | Path) -> Path:
    """Write a pandas DataFrame as CSV (no index) to ``path`` atomically; return the path."""
    path = Path(path)
    with atomic_output(path) as tmp:
        frame.to_csv(tmp, index=False)
    return path


def save_figure(fig: Any, path: str | Path, **savefig_kwargs: Any) -> Path:
    """``fig.savefig`` (matplotlib) to ``path`` atomically; the format comes from the suffix unless given.

    The temporary file's own suffix is ``.tmp``, so the format is passed explicitly.
    """
    path = Path(path)
    savefig_kwargs.setdefault("format", path.suffix.lstrip(".").lower() or "png")
    with atomic_output(path) as tmp:
        fig.savefig(tmp, **savefig_kwargs)
    return path


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide and not thread-safe
