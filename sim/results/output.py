"""Writing a run's output folder so that it is either complete or visibly incomplete.

:class:`RunFolder` is how :meth:`sim.results.result.Result.write` writes the SPEC §6 files:

1. the folder is created and the marker file ``.incomplete`` is written in it first;
2. a ``summary.json`` left from an earlier run is removed, so that it cannot sit beside new tables;
3. every file is written to a temporary file beside it and renamed into place when complete
   (:func:`traces.atomic.atomic_output`): a full disk or Ctrl-C leaves the earlier file or none, never a
   truncated Parquet file without its footer;
4. ``summary.json`` is written last, and ``.incomplete`` is removed only after it.

So a folder holding ``summary.json`` and no ``.incomplete`` is complete; a folder with ``.incomplete`` is
the remains of a run that did not finish (its other files may be from either run).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd

from traces.atomic import atomic_output, write_text_file

__all__ = ["INCOMPLETE_MARKER", "RunFolder", "write_json", "write_parquet"]

#: Present while a run's folder is being written, and after a run that did not finish.
INCOMPLETE_MARKER = ".incomplete"
_MARKER_TEXT = ("collsim is writing this folder, or the run that wrote it did not finish: its files are not a "
                "complete result (see sim/results/output.py)\n")


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` to Parquet atomically (no index); return the path.

    Examples
    --------
    >>> import tempfile
    >>> p = write_parquet(pd.DataFrame({"a": [1]}), Path(tempfile.mkdtemp()) / "a.parquet")
    >>> pd.read_parquet(p)["a"].tolist()
    [1]
    """
    path = Path(path)
    with atomic_output(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return path


def write_json(value: Any, path: str | Path) -> Path:
    """Write ``value`` as indented JSON text atomically; return the path."""
    path = Path(path)
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(value, indent=2) + "\n")
    return path


class RunFolder:
    """Context manager over a run's output folder (see the module docstring for the protocol).

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "run"
    >>> with RunFolder(out) as run:
    ...     _ = run.parquet(pd.DataFrame({"a": [1]}), "t.parquet")
    ...     (out / INCOMPLETE_MARKER).exists()
    ...     _ = run.summary({"makespan_s": 1.0})
    True
    >>> sorted(p.name for p in out.iterdir())
    ['summary.json', 't.parquet']
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.path = Path(out_dir)

    def __enter__(self) -> RunFolder:
        created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            write_text_file(self.path / INCOMPLETE_MARKER, _MARKER_TEXT)
        except BaseException:
            if created:  # an empty unmarked folder would look like a foreign one to the next run
                self.path.rmdir()
            raise
        old = self.path / "summary.json"
        if old.is_file() and not old.is_symlink():
            old.unlink()  # an earlier run's summary must not vouch for this run's files
        self._summary_written = False
        return self

    def parquet(self, frame: pd.DataFrame, name: str) -> Path:
        """Write one table atomically into the folder."""
        return write_parquet(frame, self.path / name)

    def summary(self, summary: dict[str, Any]) -> Path:
        """Write ``summary.json`` (call it last: it marks the folder complete on exit)."""
        self._summary_written = True
        return write_json(summary, self.path / "summary.json")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None and self._summary_written:
            (self.path / INCOMPLETE_MARKER).unlink(missing_ok=True)
        # on an error the marker stays: the folder is visibly incomplete
