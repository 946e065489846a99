"""`simrun topo` (placeholder until its issue lands)."""

from __future__ import annotations

import click


@click.command("topo", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Not built yet."""
    raise click.UsageError("'simrun topo' is not built yet")
