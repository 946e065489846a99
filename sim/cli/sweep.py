"""``simrun sweep --trace T --topo X,Y [--set k=v1|v2,...]``: a what-if grid on Dask (SPEC §8)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from sim.cli.common import parse_set_options, progress_bar, wide_console

#: Summary figures printed in the terminal table (column, heading, scale, format), when the summary has them.
SHOWN = (("makespan_s", "makespan ms", 1e3, ".3f"), ("ideal_makespan_s", "ideal ms", 1e3, ".3f"),
         ("makespan_vs_ideal", "x ideal", 1.0, ".3f"), ("exposed_comm_s", "exposed comm ms", 1e3, ".3f"),
         ("slowdown_p99", "slowdown p99", 1.0, ".3f"), ("incast_events", "incast events", 1.0, ",.0f"),
         ("max_link_utilization", "max link util %", 100.0, ".1f"))


def _csv(value: str, option: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise click.BadParameter("needs at least one value", param_hint=option)
    return items


def parse_grid(values: tuple[str, ...]) -> dict[str, list]:
    """``--set k=v1|v2,...`` -> ``{k: [v1, v2]}``; each value is read as ``simrun run --set k=v`` reads it."""
    from sim.sweep import split_grid_values

    grid = {}
    try:
        items = parse_set_options(values)
    except click.BadParameter as exc:  # "k=1,2": a comma separates keys, not values
        raise click.BadParameter(f"{exc.message}; grid values are separated by '|', as in --set \"k=1|2\"",
                                 param_hint="--set") from None
    for key, raw in items.items():
        grid[key] = split_grid_values(raw, lambda part, key=key: parse_set_options([f"{key}={part}"])[key])
    return grid


def _fmt(value, scale: float = 1.0, spec: str = "g") -> str:
    """A table cell: numbers scaled and in a fixed format per column (so a column's values line up)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = float(value) * scale
        return "n/a" if not math.isfinite(value) else format(value, spec)
    return "n/a" if value is None else str(value)


def _print_table(table, points) -> None:
    from rich.table import Table

    from sim.sweep import varying_columns

    params = ["topo", *varying_columns(table)]
    shown = [col for col in SHOWN if col[0] in table.columns]
    out = Table(title=f"sweep: {len(points)} point(s)")
    for name in params:
        out.add_column(name, no_wrap=True)
    for _, head, _, _ in shown:
        out.add_column(head, justify="right")
    for row in table.to_dict("records"):
        out.add_row(*(_fmt(row[c]) for c in params), *(_fmt(row[c], scale, spec) for c, _, scale, spec in shown))
    console = wide_console()
    console.print(out)
    for line in verdict_lines(table, points):
        console.print(line, highlight=False)


def point_labels(table) -> list[str]:
    """Each point named by its topology and the parameters that vary across the sweep (what tells it apart).

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"point": [0, 1], "topo": ["fat_tree", "fat_tree"], "k": [4, 6], "gpus_per_server": [1, 1],
    ...                   "algo": ["auto", "auto"], "routing": ["ecmp", "ecmp"], "seed": [0, 0]})
    >>> point_labels(t)
    ['fat_tree k=4', 'fat_tree k=6']
    """
    from sim.sweep import varying_columns

    vary = varying_columns(table)
    return [" ".join([str(row["topo"]), *(f"{c}={_fmt(row[c])}" for c in vary)]) for row in table.to_dict("records")]


def verdict_lines(table, points) -> list[str]:
    """The ranking of :mod:`sim.results.verdict` per question, over the points' labels (ties called ties)."""
    from sim.results.verdict import verdicts

    labels = point_labels(table)
    if len(set(labels)) < len(labels):   # the same point twice: only the full labels tell them apart
        labels = [p.label() for p in points]
    rows = [dict(row, label=name) for row, name in zip(table.to_dict("records"), labels, strict=True)]
    return [text for _, _, text in verdicts(rows, label="label")]


@click.command("sweep")
@click.option("--trace", "trace", required=True, help="Trace: a Parquet file or a built-in name.")
@click.option("--topo", "topos", required=True, help="Topologies to compare, comma-separated (presets or YAML).")
@click.option("--set", "sets", multiple=True, metavar="KEY=V1|V2,...",
              help="Grid over a topology or simulator parameter; values separated by '|'. Repeatable.")
@click.option("--algo", "algos", default="auto", show_default=True, help="Algorithms, comma-separated.")
@click.option("--routing", "routings", default="ecmp", show_default=True, help="Routings, comma-separated.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every point.")
@click.option("--scheduler", default=None, metavar="ADDR", help="A running Dask scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker processes of the local Dask cluster (without --scheduler).")
@click.option("--serial", is_flag=True, help="Run the points in this process, without Dask.")
@click.option("-o", "--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default simrun-sweep/<trace-stem>/).")
def command(trace: str, topos: str, sets: tuple[str, ...], algos: str, routings: str, seed: int,
            scheduler: str | None, workers: int, serial: bool, out: Path | None) -> None:
    """Run one simulation per grid point (topologies x --set values x algos x routings).

    Example: simrun sweep --trace ds_v3.parquet --topo fat_tree,leaf_spine --set "oversubscription=1|2|4"

    Writes sweep.parquet (one row per point: its parameters and the run's summary figures) and sweep.png
    (makespan and slowdown per topology) into --out.
    """
    from sim.sweep import expand, plot_sweep, run_sweep
    from traces.io import read_trace

    if serial and scheduler:
        raise click.UsageError("--serial and --scheduler exclude each other")
    points = expand(_csv(topos, "--topo"), parse_grid(sets), _csv(algos, "--algo"), _csv(routings, "--routing"),
                    seed)
    df = read_trace(trace)
    name = Path(trace).name
    with progress_bar(len(points), f"sweep ({len(points)} points)") as advance:
        table = run_sweep(df, points, scheduler=scheduler, workers=workers, serial=serial, trace_name=name,
                          on_done=advance)
    from sim.results.outdir import clear_outputs

    folder = out if out is not None else Path("simrun-sweep") / Path(trace).stem
    clear_outputs(folder, force=True)  # a previous sweep's files go; other files stay
    folder.mkdir(parents=True, exist_ok=True)
    from sim.results.output import write_parquet

    write_parquet(table, folder / "sweep.parquet")  # atomic: temp file + rename
    plot_sweep(table, folder / "sweep.png", title=f"{name}: which topology wins (lower is better)")
    _print_table(table, points)
    click.echo(f"wrote {folder}/sweep.parquet and sweep.png")


__all__ = ["SHOWN", "command", "parse_grid", "point_labels", "verdict_lines"]
