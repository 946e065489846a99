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

#: Default completion batching of the CLI (``sim.simulate`` itself defaults to exact). Measured on the main
#: job: see docs/simulator.md ("Measured figures") for its error against the exact solve and its speed.
DEFAULT_QUANTILE = 0.01  # <= 0.2 % makespan error against the exact solve (tests/sim/test_network.py)
#: ``--set`` keys that are simulator options; every other key is a topology parameter.
SIM_KEYS = {"timing", "completion_quantile", "quantile", "bin_s", "channels", "memoize", "ideal"}


def default_out(trace: str, topo: str) -> Path:
    """``simrun-out/<trace stem>-<topo stem>/``."""
    return Path("simrun-out") / f"{Path(trace).stem}-{Path(topo).stem}"


def split_set(values: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set`` items -> (simulator options, topology parameters)."""
    items = parse_set_options(values)
    sim_opts = {k: v for k, v in items.items() if k in SIM_KEYS}
    if "quantile" in sim_opts:
        sim_opts["completion_quantile"] = sim_opts.pop("quantile")
    topo = {k: v for k, v in items.items() if k not in SIM_KEYS}
    return sim_opts, topo


def run(trace: str, topo: str, *, set_values=(), algo="auto", routing="ecmp", seed=0, out=None,
        fail_links=None, degrade_links=None, stragglers=(), timing="auto", quantile=None, plots=True,
        progress=None, model="flow"):
    """Read, simulate and write; return ``(result, out_dir)`` (the CLI's whole job, minus printing)."""
    from sim.replay import simulate
    from traces.io import read_trace

    sim_opts, topo_params = split_set(tuple(set_values))
    df = read_trace(trace)
    opts: dict[str, Any] = dict(sim_opts)
    opts.setdefault("timing", timing)
    if quantile is not None:
        opts["completion_quantile"] = quantile
    if fail_links:
        opts["fail_links"] = int(fail_links) if str(fail_links).strip().isdigit() else fail_links
    if degrade_links:
        opts["degrade_links"] = degrade_links
    if stragglers:
        opts["stragglers"] = list(stragglers)
    if model != "flow":  # the analytical tier has no event loop: no progress, no batching knob
        opts["model"] = model
        if model == "analytical":
            opts.pop("completion_quantile", None)
            progress = None
    result = simulate(df, topo, algo=algo, routing=routing, seed=seed, trace_name=Path(trace).name,
                      topology_params=topo_params, progress=progress, **opts)
    out_dir = Path(out) if out else default_out(trace, topo)
    # the analytical tier keeps no time series or flows to plot
    result.write(out_dir, plots=plots and model != "analytical", timeline=model != "analytical")
    tiers = getattr(result, "tiers", None)
    if tiers is not None:
        tiers.to_parquet(out_dir / "tiers.parquet", index=False)
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
    if s.get("incast_events") is None:
        t.add_row("incast events / max fan-in", "not modelled (analytical tier)")
    else:
        t.add_row("incast events / max fan-in", f"{s['incast_events']:,} / {s['max_incast_fanin']}")
    if s.get("analytical_makespan_s") is not None:
        t.add_row("analytical makespan / wall time",
                  f"{s['analytical_makespan_s'] * 1e3:.3f} ms / {s['analytical_wall_s']:.2f} s")
        t.add_row("flow / analytical - 1 per collective, p50 / max",
                  f"{s['tier_disagreement_p50']:.4f} / {s['tier_disagreement_max']:.4f}")
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
    if s.get("model") == "analytical":
        console.print(f"wrote {out_dir}/ (summary.json, *.parquet)")
    else:
        console.print(f"wrote {out_dir}/ (summary.json, *.parquet, report.html, timeline.json"
                      + (", tiers.parquet)" if s.get("model") == "both" else ")"))


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
@click.option("--fail-links", default=None, metavar="N|u-v,...", help="Fail N switch links (seeded) or named ones.")
@click.option("--degrade-links", default=None, metavar="N:FACTOR",
              help="Scale N switch links' capacity (FACTOR < 1: capacity left; > 1: times slower).")
@click.option("--straggler", "stragglers", multiple=True, metavar="RANK:DELAY_US",
              help="Delay every op of RANK by DELAY_US (repeatable).")
@click.option("--timing", type=click.Choice(["auto", "trace", "asap"]), default="auto", show_default=True,
              help="trace: honour recorded issue times; asap: back to back; auto: trace when known.")
@click.option("--quantile", type=click.FloatRange(0.0, 1.0, max_open=True), default=DEFAULT_QUANTILE,
              show_default=True,
              help="Completion batching of the flow network: 0 re-solves at every completion (exact); q jumps "
                   "to the q-quantile of predicted finishes (see docs/simulator.md for the error).")
@click.option("--no-report", is_flag=True, help="Skip report.html and its plots.")
@click.option("--model", type=click.Choice(["flow", "analytical", "both"]), default="flow", show_default=True,
              help="flow: the event-driven flow tier; analytical: per-collective bounds of the same plans (no "
                   "event loop); both: the flow tier plus tiers.parquet comparing them per collective.")
def command(trace, topo, set_values, algo, routing, seed, out, as_json, fail_links, degrade_links, stragglers,
            timing, quantile, no_report, model) -> None:
    """Replay trace T over topology X; print a summary table and write the result files."""
    with progress_bar(1.0, "simulating") as advance:
        state = {"last": 0.0}

        def progress(fraction: float) -> None:
            advance(max(0.0, fraction - state["last"]))
            state["last"] = fraction

        result, out_dir = run(trace, topo, set_values=set_values, algo=algo, routing=routing, seed=seed,
                              out=out, fail_links=fail_links, degrade_links=degrade_links,
                              stragglers=stragglers, timing=timing, quantile=quantile, plots=not no_report,
                              progress=progress, model=model)
    if as_json:
        sys.stdout.write((out_dir / "summary.json").read_text())
        return
    _print_table(result, out_dir)


__all__ = ["command", "default_out", "run", "split_set"]
