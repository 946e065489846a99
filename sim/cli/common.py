"""Small helpers shared by the sub-commands: ``--set`` parsing, progress bars, output folders."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

#: Numbers in exponent form without a dot (``1e-6``), which YAML 1.1 reads as strings.
_EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def parse_set_options(values: Iterable[str]) -> dict[str, Any]:
    """Parse repeatable ``--set KEY=VALUE`` (also ``k1=v1,k2=v2``) into a dict.

    Values are read as YAML scalars (``4`` -> int, ``1.5`` -> float, ``true`` -> bool, else str); the
    receiving builder checks names and types.

    Raises
    ------
    click.BadParameter
        For an item without ``=``.

    Examples
    --------
    >>> parse_set_options(["k=8,oversubscription=2.0", "name=x", "bin_s=1e-6"])
    {'k': 8, 'oversubscription': 2.0, 'name': 'x', 'bin_s': 1e-06}
    """
    out: dict[str, Any] = {}
    values = list(values)
    if not values:
        return out
    import yaml  # only when there is something to parse (a fresh simrun start skips it)

    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"'{item}' is not KEY=VALUE", param_hint="--set")
            try:
                parsed = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError:
                parsed = raw
            if isinstance(parsed, str) and _EXPONENT_FLOAT.fullmatch(parsed.strip()):
                parsed = float(parsed)  # YAML 1.1 reads 1e-6 (no dot) as text; a number was meant
            out[key.strip().replace("-", "_")] = parsed if isinstance(parsed, int | float | bool | str) else raw
    return out


def show_progress() -> bool:
    """True when stderr is a terminal: long work shows a progress bar there and stays quiet otherwise."""
    return sys.stderr.isatty()


@contextmanager
def progress_bar(total: float | None, description: str, unit: str = "", status: str | None = None,
                 console=None):
    """A rich progress bar on a terminal, a no-op elsewhere.

    With ``unit`` (``"collectives"``) the bar shows ``done/total unit``; else a percentage. With ``status``
    (an initial text) a column after the count shows the ``status=`` text each call gives (e.g. the
    simulated time reached). Yields a callable ``advance(amount=1.0, status=None)``. ``console``: a rich
    console to draw on (default: stderr's, so that a bar never lands in redirected output).
    """
    if console is None and not show_progress():
        yield lambda amount=1.0, status=None: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = console if console is not None else Console(stderr=True)
    count = (TextColumn("{task.completed:>,.0f}/{task.total:,.0f} " + unit) if unit
             else TextColumn("{task.percentage:>5.1f}%"))
    columns = [TextColumn("{task.description}"), BarColumn(), count]
    if status is not None:
        columns.append(TextColumn("{task.fields[status]}"))
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    # 10 refreshes a second: the bar moves smoothly however bursty the calls are
    with Progress(*columns, transient=True, refresh_per_second=10, console=console) as progress:
        task = progress.add_task(description, total=total, status=status or "")

        def advance(amount: float = 1.0, status: str | None = None) -> None:
            if status is None:
                progress.advance(task, amount)
            else:
                progress.update(task, advance=amount, status=status)

        yield advance


@contextmanager
def stage_bar(description: str):
    """A rich bar for work in stages (parse, add nodes, add links...) on a terminal, a no-op elsewhere.

    Yields ``report(stage, done, total)`` (``total`` None: a pulsing bar), the callback of
    :func:`topologies.config.build_progress`.
    """
    if not show_progress():
        yield lambda stage, done, total=None: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task(description, total=None)

        def report(stage: str, done: float, total: float | None = None) -> None:
            progress.update(task, description=f"{description}: {stage}", completed=done, total=total)
        yield report


def writable_matplotlib_config() -> Path | None:
    """Give matplotlib a writable config folder when the user's is not (a read-only or missing HOME).

    matplotlib would otherwise warn on stderr (two lines on every run) and build its font cache anew in a
    fresh temporary folder each time. Sets ``MPLCONFIGDIR`` to ``<tmp>/collsim-matplotlib-<uid>`` (a folder
    this user owns) and returns it; returns None when the user's folder is fine or ``MPLCONFIGDIR`` is set.
    """
    if os.environ.get("MPLCONFIGDIR"):
        return None
    try:
        probe = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "matplotlib"
    except RuntimeError:  # no home folder at all
        probe = None
    if probe is not None:
        from sim.results.outdir import nearest_existing

        probe = nearest_existing(probe)
        if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
            return None
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"collsim-matplotlib-{uid}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if hasattr(os, "getuid") and folder.stat().st_uid != uid:  # someone else's: leave it to matplotlib
            return None
    except OSError:
        return None
    os.environ["MPLCONFIGDIR"] = str(folder)
    return folder


_CONSOLE_CLASS: list[type] = []  # the rich Console subclass, made on first use (rich is not imported at start)


def _console_class() -> type:
    if _CONSOLE_CLASS:
        return _CONSOLE_CLASS[0]
    import errno

    from rich.console import Console
    from rich.table import Table

    class CliConsole(Console):
        """rich's console, but a table too wide for the terminal wraps its values instead of cutting them to
        ``…`` (a number cut to ``0.…`` says nothing), and a closed pipe is passed on as BrokenPipeError
        (rich would exit 1, the code of an internal failure; ``sim.cli.main`` exits 141, quietly)."""

        def print(self, *objects: Any, **kwargs: Any) -> None:
            for obj in objects:
                if isinstance(obj, Table):
                    for column in obj.columns:
                        if column.overflow == "ellipsis":
                            column.overflow = "fold"
            super().print(*objects, **kwargs)

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "stdout closed by its reader")

    _CONSOLE_CLASS.append(CliConsole)
    return CliConsole


def wide_console():
    """A rich console; when output is redirected, wide enough that tables never truncate a value.

    On a terminal narrower than a table (``COLUMNS=40``) the table's values wrap within their cells.
    """
    console_class = _console_class()
    if sys.stdout.isatty():
        return console_class(soft_wrap=True)
    return console_class(soft_wrap=True, width=1000, no_color=True)


__all__ = ["parse_set_options", "progress_bar", "show_progress", "stage_bar",
           "wide_console", "writable_matplotlib_config"]
