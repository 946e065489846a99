"""`simrun export T --format nccl -o OUT`: write a trace as NCCL debug-log text."""

from __future__ import annotations

import os
from pathlib import Path

import click

_EXPORT_FORMATS = ["nccl"]


@click.command("export")
@click.argument("trace")
@click.option("--format", "fmt", required=True, help="Output format (only 'nccl': NCCL debug-log text).")
@click.option("-o", "--output", "--out", "output", required=True, type=click.Path(path_type=Path),
              help="Output file, or folder with --per-host.")
@click.option("--per-host", is_flag=True, help="Write one log file per host into the OUTPUT folder.")
def command(trace: str, fmt: str, output: Path, per_host: bool) -> None:
    """Write trace TRACE (a Parquet file or a built-in trace name) as NCCL debug-log text
    (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL), which `simrun ingest` and other NCCL-log tools read."""
    if fmt not in _EXPORT_FORMATS:
        raise click.UsageError(f"--format {fmt!r} is not supported; choose one of: {', '.join(_EXPORT_FORMATS)}")
    from traces.formats.nccl.reader import write_nccl_log
    from traces.io import read_trace, resolve_trace_path

    df = read_trace(trace)
    source = resolve_trace_path(trace)
    if output.is_file() and os.path.samefile(output, source):  # the log text would replace the trace
        raise click.UsageError(f"{output}: the output is the trace being exported; choose another -o")
    written = write_nccl_log(df, output, per_host=per_host)
    click.echo(f"wrote {len(df)} ops as NCCL log text to {len(written)} file(s): "
               + ", ".join(str(p) for p in written[:4]) + (" ..." if len(written) > 4 else ""))


__all__ = ["command"]
