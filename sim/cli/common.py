"""Small helpers shared by the sub-commands: ``--set`` parsing, progress bars, output folders."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from contextlib import contextmanager
from typing import Any

import click


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
    >>> parse_set_options(["k=8,oversubscription=2.0", "name=x"])
    {'k': 8, 'oversubscription': 2.0, 'name': 'x'}
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
            out[key.strip().replace("-", "_")] = parsed if isinstance(parsed, int | float | bool | str) else raw
    return out


def show_progress() -> bool:
    """True when stderr is a terminal: long work shows a progress bar there and stays quiet otherwise."""
    return sys.stderr.isatty()


@contextmanager
def progress_bar(total: float | None, description: str):
    """A rich progress bar on a terminal, a no-op elsewhere.

    Yields a callable ``advance(amount=1.0)``.
    """
    if not show_progress():
        yield lambda amount=1.0: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda amount=1.0: progress.advance(task, amount)
