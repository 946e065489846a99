"""``simrun analyze T [--out DIR] [--window S]``: characterise a trace (SPEC §7 tables and plots)."""

from __future__ import annotations

import math
from pathlib import Path

import click


def default_out(trace: str) -> Path:
    """``simrun-analyze/<trace-stem>/``."""
    return Path("simrun-analyze") / Path(trace).stem


def analyze(trace: str, out: Path, window_s: float | None, plots: bool = True):
    """Compute every table, write them (and the plots) into ``out``; return (counts, bandwidth, comms)."""
    from traces import stats
    from traces.io import read_trace

    df = read_trace(trace)
    counts = stats.op_counts(df)
    bw = stats.bandwidth_over_time(df, window_s)
    by_comm_bw = stats.bandwidth_by_comm(df, bw.window_s)
    comms = stats.comm_summary(df, bw.window_s)
    hist = stats.size_histogram(df)
    tables = {
        "op_counts.csv": counts,
        "sizes.csv": stats.size_stats(df),
        "request_sizes.csv": hist,
        "bandwidth.csv": bw.table,
        "comms.csv": comms,
        "op_counts_by_comm.csv": stats.op_counts(df, by_comm=True),
        "sizes_by_comm.csv": stats.size_stats(df, by_comm=True),
        "bandwidth_by_comm.csv": by_comm_bw,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        from traces.atomic import write_csv

        write_csv(table, out / name)  # atomic: temp file + rename
    if plots:
        from traces import plots as draw

        name = Path(trace).name
        draw.plot_op_counts(counts, out / "op_counts.png", title=f"{name}: operation types and counts")
        draw.plot_sizes_per_op(df, out / "sizes_per_op.png", title=f"{name}: transfer sizes per op")
        draw.plot_request_sizes(hist, out / "request_sizes.png", title=f"{name}: request-size distribution")
        draw.plot_bandwidth(bw, out / "bandwidth.png", title=f"{name}: bytes issued over time")
        draw.plot_bandwidth_by_comm(by_comm_bw, out / "bandwidth_by_comm.png",
                                    title=f"{name}: bytes issued over time, top communicators")
    return counts, bw, comms


def _fmt(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3g}"


def burstiness_line(bw) -> str:
    """One line: peak, mean, peak/mean, CV, window, untimed rows."""
    line = (f"bandwidth: peak {_fmt(bw.peak_bytes_per_s / 1e9)} GB/s, mean {_fmt(bw.mean_bytes_per_s / 1e9)} GB/s, "
            f"peak/mean {_fmt(bw.peak_to_mean)}, CV {_fmt(bw.cv)} over {len(bw.table)} windows of {bw.window_s:g} s")
    if bw.untimed_rows:
        line += f"; {bw.untimed_rows} rows ({bw.untimed_bytes} bytes) without t_start_s not placed in time"
    return line


def _print_counts(counts, comms) -> None:
    from rich.table import Table

    from sim.cli.common import wide_console

    table = Table(title="operations")
    for name in ("op", "calls", "rank_calls", "bytes_total", "partial_calls"):
        table.add_column(name, justify="left" if name == "op" else "right")
    for row in counts.itertuples(index=False):
        table.add_row(row.op, f"{row.calls:,}", f"{row.rank_calls:,}", f"{row.bytes_total:,}", f"{row.partial_calls:,}")
    console = wide_console()
    console.print(table)
    console.print(f"{len(comms)} communicator(s); per-communicator tables in comms.csv and *_by_comm.csv")


@click.command("analyze")
@click.argument("trace")
@click.option("-o", "--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default simrun-analyze/<trace-stem>/).")
@click.option("--window", "window_s", type=float, default=None,
              help="Bandwidth window in seconds (default: a round value giving about 200 windows).")
@click.option("--no-plots", is_flag=True, help="Write the tables only.")
def command(trace: str, out: Path | None, window_s: float | None, no_plots: bool) -> None:
    """Characterise trace T (a Parquet file or a built-in name): op counts, sizes, bandwidth over time.

    Writes op_counts.csv, sizes.csv, request_sizes.csv, bandwidth.csv, comms.csv and the per-communicator
    tables, plus PNG plots, into --out; prints the op-count table and a burstiness summary.
    """
    if window_s is not None and not (window_s > 0 and math.isfinite(window_s)):
        raise click.BadParameter(f"{window_s!r} is not a positive number of seconds", param_hint="--window")
    folder = out if out is not None else default_out(trace)
    counts, bw, comms = analyze(trace, folder, window_s, plots=not no_plots)
    _print_counts(counts, comms)
    click.echo(burstiness_line(bw))
    click.echo(f"wrote {folder}/")


__all__ = ["analyze", "burstiness_line", "command", "default_out"]
