"""`simrun flows` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("flows", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Not built yet."""
    raise click.UsageError("'simrun flows' is not built yet")
