"""``simrun compare --trace T --topo X,Y[,...] [--set k=v]``: one run per fabric, one page with a verdict
(SPEC §10)."""

from __future__ import annotations

from pathlib import Path

import click

from sim.cli.common import parse_set_options, progress_bar, wide_console
from sim.option_values import ROUTINGS


def _print(table, page: Path) -> None:
    from rich.table import Table

    from sim.results.compare_page import FIGURES
    from sim.results.verdict import verdicts

    rows = table.to_dict("records")
    names = [str(r["folder"]) for r in rows]
    console = wide_console()
    t = Table(title="compare")
    t.add_column("figure")
    for n in names:
        t.add_column(n, justify="right")
    for col, head, fmt in FIGURES:
        if col in table.columns and table[col].notna().any():
            t.add_row(head, *(fmt(r[col]) if r[col] is not None and r[col] == r[col] else "n/a" for r in rows))
    console.print(t)
    for _, _, text in verdicts([dict(r, label=n) for r, n in zip(rows, names, strict=True)], label="label"):
        console.print(text, highlight=False)
    click.echo(f"wrote {page.parent}/ (compare.parquet, compare.html, one folder per fabric)")


@click.command("compare")
@click.option("--trace", "trace", required=True, help="Trace: a Parquet file or a built-in name.")
@click.option("--topo", "topos", required=True, help="Fabrics to compare, comma-separated (presets or YAML).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter or simulator option applied to every fabric (repeatable).")
@click.option("--algo", type=click.Choice(["auto", "ring", "tree", "direct"]), default="auto", show_default=True)
@click.option("--routing", type=click.Choice(list(ROUTINGS)), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder [default: simrun-compare/<trace>/].")
@click.option("--scheduler", default=None, metavar="ADDR", help="A running Dask scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker processes of the local Dask cluster (without --scheduler).")
@click.option("--serial", is_flag=True, help="Run the fabrics in this process, without Dask.")
@click.option("--no-report", is_flag=True, help="Skip each fabric's report.html and plots.")
@click.option("--force", is_flag=True, help="Write into a folder that holds files collsim did not write.")
def command(trace, topos, sets, algo, routing, seed, out, scheduler, workers, serial, no_report, force) -> None:
    """Run one simulation per fabric and write compare.html with a verdict (which fabric wins on exposed
    communication, p99 slowdown and incast, and by how much; ties within the simulator's stated error)."""
    from sim.cli.run import check_trace_path
    from sim.compare import run_compare
    from sim.results.outdir import clear_outputs
    from traces.io import read_trace

    if serial and scheduler:
        raise click.UsageError("--serial and --scheduler exclude each other")
    names = [t.strip() for t in topos.split(",") if t.strip()]
    if not names:
        raise click.BadParameter("needs at least one fabric", param_hint="--topo")
    check_trace_path(trace)
    df = read_trace(trace)
    folder = out if out is not None else Path("simrun-compare") / Path(trace).stem
    clear_outputs(folder, force)
    with progress_bar(len(names), f"fabrics done (of {len(names)})") as advance:
        table, page = run_compare(df, names, parse_set_options(sets), folder, algo=algo, routing=routing,
                                  seed=seed, serial=serial, scheduler=scheduler, workers=workers,
                                  trace_name=Path(trace).name, plots=not no_report, on_done=advance)
    _print(table, page)


__all__ = ["command"]
