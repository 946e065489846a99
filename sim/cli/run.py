"""``simrun run --trace T --topo X [options]``: replay a trace over a topology (SPEC §2, §6).

Prints a summary table (makespan vs ideal, worst links, incast) and writes ``summary.json``,
``collectives.parquet``, ``links.parquet``, ``link_timeseries.parquet``, ``incast.parquet``,
``report.html`` (with PNG plots) and ``timeline.json`` into ``--out``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from sim.cli.common import parse_set_options, progress_bar
from sim.errors import OptionError
from sim.options import SET_KEYS, SimOptions, set_options

#: Default completion batching of the CLI (``sim.simulate`` itself defaults to exact). Measured on the main
#: job: see docs/simulator.md ("Measured figures") for its error against the exact solve and its speed.
DEFAULT_QUANTILE = 0.01  # <= 0.2 % makespan error against the exact solve (tests/sim/test_network.py)
#: ``--set`` keys that are simulator options (:data:`sim.options.SET_KEYS`); every other key is a topology
#: parameter.
SIM_KEYS = SET_KEYS
#: Options of ``simrun run`` that have a flag of their own: option name -> flag.
FLAGS = {"timing": "--timing", "completion_quantile": "--quantile", "fail_links": "--fail-links",
         "degrade_links": "--degrade-links", "stragglers": "--straggler"}


def default_out(trace: str, topo: str) -> Path:
    """``simrun-out/<trace stem>-<topo stem>/``."""
    return Path("simrun-out") / f"{Path(trace).stem}-{Path(topo).stem}"


def split_set(values: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set`` items -> (simulator options under their own names, topology parameters)."""
    options, _, topo = set_options(parse_set_options(values))
    return options, topo


def run_options(set_values=(), *, algo="auto", routing="ecmp", seed=0, trace_name=None, progress=None,
                **flags: Any) -> tuple[SimOptions, dict[str, Any]]:
    """``(SimOptions, topology parameters)`` of one ``simrun run``: ``--set`` items plus the flags.

    ``flags`` are the options with their own flag (:data:`FLAGS`; None or empty = not given). An option
    given both as a flag and by ``--set`` is refused; ``--quantile`` defaults to :data:`DEFAULT_QUANTILE`.

    Raises
    ------
    sim.errors.OptionError
    """
    values, spelled, topo_params = set_options(parse_set_options(set_values))
    for name, value in flags.items():
        if value is None or value == () or value == "":
            continue
        if name in values:
            raise OptionError(f"{FLAGS[name]} and --set {spelled[name]} both given; give one")
        values[name] = list(value) if name == "stragglers" else value
    values.setdefault("completion_quantile", DEFAULT_QUANTILE)
    opts = SimOptions.from_mapping(values, algo=algo, routing=routing, seed=seed, trace_name=trace_name,
                                   progress=progress, topology_params=topo_params)
    return opts, topo_params


def run(trace: str, topo: str, *, set_values=(), algo="auto", routing="ecmp", seed=0, out=None,
        fail_links=None, degrade_links=None, stragglers=(), timing=None, quantile=None, plots=True,
        progress=None):
    """Read, simulate and write; return ``(result, out_dir)`` (the CLI's whole job, minus printing)."""
    from sim.replay import simulate
    from traces.io import read_trace

    opts, _ = run_options(set_values, algo=algo, routing=routing, seed=seed, trace_name=Path(trace).name,
                          progress=progress, timing=timing, completion_quantile=quantile,
                          fail_links=fail_links, degrade_links=degrade_links, stragglers=tuple(stragglers))
    df = read_trace(trace)
    result = simulate(df, topo, options=opts)
    out_dir = Path(out) if out else default_out(trace, topo)
    result.write(out_dir, plots=plots)
    return result, out_dir


def _print_table(result, out_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    s = result.summary
    console = Console(soft_wrap=True)
    t = Table(title=f"{s['trace']} on {s['topology']} ({s['world_size']} GPUs)", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    ideal = s.get("ideal_makespan_s")
    t.add_row("makespan", f"{s['makespan_s'] * 1e3:.3f} ms")
    if ideal:
        t.add_row("ideal (non-blocking fabric)", f"{ideal * 1e3:.3f} ms  (x{s['makespan_s'] / ideal:.3f})")
    if s.get("slowdown_p50") is not None:
        t.add_row("collective slowdown p50 / p99", f"{s['slowdown_p50']:.3f} / {s['slowdown_p99']:.3f}")
    t.add_row("collectives / flows", f"{s['collectives']:,} / {s['flows']:,}")
    t.add_row("bytes on wire", f"{s['bytes_on_wire'] / 1e9:.3f} GB")
    t.add_row("link utilisation max / mean", f"{s['max_link_utilization']:.3f} / {s['mean_link_utilization']:.3f}")
    if s.get("ecmp_imbalance"):
        t.add_row("ECMP imbalance (max/mean uplink bytes)",
                  ", ".join(f"{k} {v:.2f}" for k, v in s["ecmp_imbalance"].items()))
    t.add_row("incast events / max fan-in", f"{s['incast_events']:,} / {s['max_incast_fanin']}")
    skipped = {k: v for k, v in (s.get("skipped") or {}).items() if v}
    if skipped:
        t.add_row("skipped", ", ".join(f"{k} {v}" for k, v in skipped.items()))
    t.add_row("simulation wall time", f"{s['sim_wall_s']:.2f} s")
    console.print(t)
    hot = s.get("hot_links") or []
    if hot:
        h = Table(title="worst links")
        h.add_column("link")
        h.add_column("mean utilisation", justify="right")
        h.add_column("GB", justify="right")
        for item in hot[:5]:
            h.add_row(item["link"], f"{item['utilization']:.3f}", f"{item['bytes'] / 1e9:.3f}")
        console.print(h)
    console.print(f"wrote {out_dir}/ (summary.json, *.parquet, report.html, timeline.json)")


@click.command("run")
@click.option("--trace", "trace", required=True, help="Trace file (Parquet, SPEC §3) or built-in name.")
@click.option("--topo", "topo", required=True, help="Preset (fat_tree, leaf_spine, rail_optimized, rail_only) or YAML.")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (k=8, oversubscription=2) or simulator option (timing, bin_s, quantile).")
@click.option("--algo", type=click.Choice(["auto", "ring", "tree", "direct"]), default="auto", show_default=True)
@click.option("--routing", type=click.Choice(["ecmp", "spray", "single"]), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Output folder [default: simrun-out/<trace>-<topo>/].")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout instead of the table.")
@click.option("--fail-links", default=None, metavar="N|u-v,...",
              help="Fail N switch links (seeded) or named ones; ITEM@T1-T2 for a window, @T1-T2/PERIOD to flap.")
@click.option("--degrade-links", default=None, metavar="N:FACTOR",
              help="Scale N switch links' capacity (FACTOR < 1: capacity left; > 1: times slower); "
                   "ITEM@T1-T2 for a window.")
@click.option("--straggler", "stragglers", multiple=True, metavar="RANK:DELAY_US",
              help="Delay every op of RANK by DELAY_US (repeatable).")
@click.option("--timing", type=click.Choice(["auto", "trace", "asap"]), default=None,
              help="trace: honour recorded issue times; asap: back to back; auto: trace when known. "
                   "[default: auto]")
@click.option("--quantile", type=float, default=None,
              help="Completion batching of the flow network, 0 <= q < 1: 0 re-solves at every completion "
                   "(exact); q jumps to the q-quantile of predicted finishes (see docs/simulator.md for the "
                   f"error). [default: {DEFAULT_QUANTILE}]")
@click.option("--no-report", is_flag=True, help="Skip report.html and its plots.")
def command(trace, topo, set_values, algo, routing, seed, out, as_json, fail_links, degrade_links, stragglers,
            timing, quantile, no_report) -> None:
    """Replay trace T over topology X; print a summary table and write the result files."""
    with progress_bar(1.0, "simulating") as advance:
        state = {"last": 0.0}

        def progress(fraction: float) -> None:
            advance(max(0.0, fraction - state["last"]))
            state["last"] = fraction

        result, out_dir = run(trace, topo, set_values=set_values, algo=algo, routing=routing, seed=seed,
                              out=out, fail_links=fail_links, degrade_links=degrade_links,
                              stragglers=stragglers, timing=timing, quantile=quantile, plots=not no_report,
                              progress=progress)
    if as_json:
        sys.stdout.write((out_dir / "summary.json").read_text())
        return
    _print_table(result, out_dir)


__all__ = ["DEFAULT_QUANTILE", "FLAGS", "SIM_KEYS", "command", "default_out", "run", "run_options", "split_set"]
