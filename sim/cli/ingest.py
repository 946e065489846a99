"""`simrun ingest FILES... -o OUT.parquet`: measured collective traces -> one §3 Parquet trace."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sim.cli.common import progress_bar
from traces.ingest_report import IngestReport
from traces.readers import FORMATS

_FORMATS = ["auto", *FORMATS]


@click.command("ingest")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "--out", "output", required=True, type=click.Path(path_type=Path),
              help="Parquet trace to write.")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="auto", show_default=True,
              help="Input format; auto detects it from each file's content.")
@click.option("--strict", is_flag=True, help="Fail on the first record that cannot be used, instead of "
                                             "counting and reporting it.")
def command(files: tuple[Path, ...], output: Path, fmt: str, strict: bool) -> None:
    """Read measured collective traces into one Parquet trace (SPEC §3).

    \b
    Formats (--format; auto detects each file's):
      nccl             NCCL debug logs (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL)
      inspector        NCCL Inspector JSON
      profiler         NCCL profiler-plugin traces
      flight_recorder  PyTorch Flight Recorder dumps (JSON or pickle)
      kineto           PyTorch profiler (Kineto) traces
      param            PARAM comms traces and PyTorch execution traces
      nccl-tests       nccl-tests *_perf output

    FILES are files (gzip, bzip2, xz or zstd compressed too), folders (every file under them) or glob
    patterns; files found in folders or patterns that are no traces (README, code) are skipped and counted.
    """
    from traces.readers import expand_paths, ingest_to_parquet

    paths = expand_paths(files)
    total_bytes = float(sum(p.stat().st_size for p in paths))
    with progress_bar(total_bytes, "ingest") as advance:
        # the arguments, not the expanded paths: files found in folders that are no traces are skipped
        n_rows, n_ranks, meta = ingest_to_parquet(list(files), output, format=fmt, strict=strict, progress=advance)
    click.echo(f"{output}: {n_rows} rows, {n_ranks} ranks, {len(meta.get('comms', {}))} comms "
               f"[{meta.get('source', fmt)}]; {_report(meta.get('ingest', {})).summary()}"
               + "".join(f"; {n}" for n in meta.get("notes", []) if n.startswith("skipped ") and "not traces" in n))
    _build_kernel_later(total_bytes)


def _build_kernel_later(total_bytes: float) -> None:
    """After an NCCL-log ingest large enough for the compiled reader that loaded numba's JIT kernel (~0.7 s
    of CPU per process), build the kernel that loads without numba, in the background, for the next run."""
    scan = sys.modules.get("traces.formats.nccl.scan")
    if scan is not None and total_bytes >= scan.JIT_MIN_BYTES:
        from traces.formats.nccl.kernel_aot import build_in_background

        build_in_background()


def _report(stored: dict) -> IngestReport:
    """Rebuild the IngestReport that ``ingest`` stored in the metadata (for its one-line summary)."""
    return IngestReport.from_dict(stored)


__all__ = ["command"]
