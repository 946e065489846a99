"""`simrun ingest FILES... -o OUT.parquet`: measured collective traces -> one §3 Parquet trace."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from sim.cli.common import progress_bar
from traces.ingest_report import IngestReport

_FORMATS = ["auto", "nccl", "inspector", "profiler", "kineto", "param", "nccl-tests"]


@click.command("ingest")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="Parquet trace to write.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="auto", show_default=True,
              help="Input format; auto detects it from each file's content.")
@click.option("--strict", is_flag=True, help="Fail on the first record that cannot be used, instead of "
                                             "counting and reporting it.")
def command(files: tuple[Path, ...], output: Path, fmt: str, strict: bool) -> None:
    """Read NCCL debug logs, NCCL Inspector / profiler-plugin output, PyTorch profiler (Kineto) traces,
    PARAM comms traces or PyTorch execution traces into one Parquet trace (SPEC §3).

    FILES are files or folders (a folder stands for the files directly inside it).
    """
    from traces.io import write_trace
    from traces.readers import expand_paths, ingest
    from traces.schema import TraceError

    paths = expand_paths(files)
    total_bytes = float(sum(p.stat().st_size for p in paths))
    with progress_bar(total_bytes, "ingest") as advance:
        df = ingest(paths, format=fmt, strict=strict, progress=advance)
    meta = df.attrs.get("collsim", {})
    if df.empty:  # nothing to simulate: say why instead of writing an empty trace
        raise TraceError(f"{paths[0] if len(paths) == 1 else f'{len(paths)} files'}: no collective operations "
                         f"found; {_report(meta.get('ingest', {})).summary()}")
    write_trace(df, output)
    click.echo(f"{output}: {len(df)} rows, {df['rank'].nunique()} ranks, {len(meta.get('comms', {}))} comms "
               f"[{meta.get('source', fmt)}]; {_report(meta.get('ingest', {})).summary()}")


def _report(stored: dict) -> IngestReport:
    """Rebuild the IngestReport that ``ingest`` stored in the metadata (for its one-line summary)."""
    return IngestReport(files=list(stored.get("files", [])), lines_read=int(stored.get("lines_read", 0)),
                        records=int(stored.get("records", 0)), skipped=Counter(stored.get("skipped", {})),
                        examples=dict(stored.get("examples", {})))
