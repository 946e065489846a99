"""``simrun traces``: list the built-in traces."""

from __future__ import annotations

import click

from traces.builtin import list_builtin


@click.command("traces")
def command() -> None:
    """List the built-in traces (usable by name wherever a trace is expected)."""
    found = list_builtin()
    if not found:
        click.echo("no built-in traces are installed")
        return
    width = max(len(name) for name, _ in found)
    for name, description in found:
        click.echo(f"{name:<{width}}  {description}")


__all__ = ["command"]
