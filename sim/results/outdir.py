"""Output folders never mix runs: the files a previous run wrote are removed before a new run writes.

A folder that also holds files collsim did not write is refused unless the caller forces it (those files
are then left alone: collsim only ever deletes its own outputs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sim.errors import SimError

__all__ = ["OUTPUT_NAMES", "check_writable", "clear_outputs", "nearest_existing"]

#: Files a run, a sweep or a comparison writes (plus every ``*.png``); ``.incomplete`` marks an interrupted
#: run's folder (sim/results/output.py), which the next run into it replaces.
OUTPUT_NAMES = frozenset({"summary.json", "collectives.parquet", "links.parquet", "link_timeseries.parquet",
                          "incast.parquet", "report.html", "timeline.json", "compare.parquet", "compare.html",
                          "sweep.parquet", "tiers.parquet", ".incomplete"})


def _ours(path: Path) -> bool:
    if path.is_dir():  # a fabric folder of ``simrun compare`` (complete, or marked by an interrupted run)
        marked = (path / "summary.json").is_file() or (path / ".incomplete").is_file()
        return marked and all(_ours(p) for p in path.iterdir())
    return path.name in OUTPUT_NAMES or path.suffix == ".png"


def nearest_existing(path: str | Path) -> Path:
    """``path`` itself when it exists, else its nearest existing parent (where a new folder would be made).

    Examples
    --------
    >>> nearest_existing("/") == Path("/")
    True
    """
    probe = Path(path)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def check_writable(folder: str | Path) -> None:
    """Refuse, before any work, an output folder that cannot be made or written.

    The nearest existing folder on the way to ``folder`` must be writable (a read-only working folder
    otherwise fails only when the run, minutes later, writes its first file).

    Raises
    ------
    SimError
        Naming ``folder``, what is in the way, and ``--out``.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_writable(d / "new" / "out")
    >>> _ = (d / "file").write_text("")
    >>> check_writable(d / "file" / "out")
    Traceback (most recent call last):
    ...
    sim.errors.SimError: ... is a file, not a folder; choose another --out
    """
    out = Path(folder)
    probe = nearest_existing(out)
    if not probe.is_dir():
        raise SimError(f"{out}: cannot make the output folder: {probe} is a file, not a folder; choose another --out")
    if not os.access(probe, os.W_OK | os.X_OK):
        read_only = hasattr(os, "statvfs") and bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        why = "a read-only file system" if read_only else "no write permission"
        raise SimError(f"{out}: cannot write the output folder ({why} at {probe.resolve()}); "
                       "choose another --out DIR")


def clear_outputs(folder: str | Path, force: bool = False) -> list[str]:
    """Remove a previous run's outputs from ``folder``; return the names removed.

    Raises
    ------
    SimError
        When ``folder`` holds other files and ``force`` is false, or cannot be made or written
        (:func:`check_writable`).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "summary.json").write_text("{}"); _ = (d / "old.png").write_bytes(b"")
    >>> clear_outputs(d)
    ['old.png', 'summary.json']
    """
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise SimError(f"{out}: output path exists and is not a folder")
    check_writable(out)
    if not out.exists():
        return []
    entries = sorted(out.iterdir())
    foreign = [p.name for p in entries if not _ours(p)]
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SimError(f"{out}: the output folder holds files collsim did not write ({shown}); choose another "
                       "--out or pass --force to write beside them")
    removed = []
    for p in entries:
        if _ours(p):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            removed.append(p.name)
    return removed
