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
from sim.option_values import DEFAULT_QUANTILE, ROUTINGS
from sim.options import SET_KEYS, SimOptions, set_options

#: ``--set`` keys that are simulator options (:data:`sim.options.SET_KEYS`); every other key is a topology
#: parameter.
SIM_KEYS = SET_KEYS
#: Options of ``simrun run`` that have a flag of their own: option name -> flag.
FLAGS = {"timing": "--timing", "completion_quantile": "--quantile", "fail_links": "--fail-links",
         "degrade_links": "--degrade-links", "stragglers": "--straggler", "model": "--model"}


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


#: Suffixes of measured traces that ``simrun ingest`` turns into a §3 Parquet trace.
RAW_SUFFIXES = (".log", ".txt", ".json", ".gz", ".out")


def check_trace_path(trace: str) -> None:
    """A raw log given where a §3 trace is expected: say what to run first.

    Raises
    ------
    click.BadParameter
        For a ``.log`` / ``.txt`` / ``.json`` file.
    """
    if Path(trace).suffix.lower() in RAW_SUFFIXES and Path(trace).exists():
        raise click.BadParameter(f"{trace} looks like a measured log, not a §3 Parquet trace; convert it first: "
                                 f"simrun ingest {trace} -o {Path(trace).stem}.parquet", param_hint="--trace")


def count_ops(df) -> int:
    """Collectives (one per ``(comm, seq)``) plus Send/Recv pairs of a trace (the progress bar's total)."""
    p2p = df["op"].isin(["Send", "Recv"]).to_numpy()
    coll = df[~p2p]
    return int(len(coll.drop_duplicates(["comm", "seq"])) + p2p.sum() // 2)


def run(trace: str, topo: str, *, set_values=(), algo="auto", routing="ecmp", seed=0, out=None,
        fail_links=None, degrade_links=None, stragglers=(), timing=None, quantile=None, plots=True,
        progress=None, force=False, on_trace=None, model=None):
    """Read, simulate and write; return ``(result, out_dir)`` (the CLI's whole job, minus printing).

    ``on_trace(df)`` is called once the trace is read (the CLI sizes its progress bar from it).
    """
    from sim.replay import simulate
    from sim.results.outdir import clear_outputs
    from traces.io import read_trace

    opts, _ = run_options(set_values, algo=algo, routing=routing, seed=seed, trace_name=Path(trace).name,
                          progress=progress, timing=timing, completion_quantile=quantile,
                          fail_links=fail_links, degrade_links=degrade_links, stragglers=tuple(stragglers),
                          model=model)
    check_trace_path(trace)
    out_dir = Path(out) if out else default_out(trace, topo)
    clear_outputs(out_dir, force)  # before the work: a refused folder fails fast
    df = read_trace(trace)
    if on_trace is not None:
        on_trace(df)
    result = simulate(df, topo, options=opts)
    # the analytical tier keeps no time series or flows to plot
    analytical = opts.model == "analytical"
    result.write(out_dir, plots=plots and not analytical, timeline=not analytical)
    return result, out_dir


def _print_table(result, out_dir: Path, plots: bool = True) -> None:
    from rich.table import Table

    from sim.cli.common import wide_console
    from sim.results.fmt import ms, pct

    s = result.summary
    console = wide_console()
    t = Table(title=f"{s['trace']} on {s['topology']} ({s['world_size']} GPUs)", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    ideal = s.get("ideal_makespan_s")
    t.add_row("makespan", f"{s['makespan_s'] * 1e3:.3f} ms")
    if ideal:
        t.add_row("ideal (lower bound)", f"{ideal * 1e3:.3f} ms  (x{s['makespan_s'] / ideal:.3f})")
    if s.get("slowdown_p50") is not None:
        t.add_row("collective slowdown p50 / p99", f"{s['slowdown_p50']:.3f} / {s['slowdown_p99']:.3f}")
    if s.get("exposed_comm_s") is not None:
        t.add_row("exposed communication (critical path)",
                  f"{ms(s['exposed_comm_s'])}  ({pct(s.get('exposed_comm_share'))} of makespan)")
        t.add_row("time in collectives per rank", ms(s.get("comm_time_s")))
    if s.get("fabric_delay_s") is not None:
        t.add_row("fabric delay (sum of duration - ideal)",
                  f"{ms(s['fabric_delay_s'])}  ({pct(s.get('fabric_delay_share'))} of makespan)")
    t.add_row("timing", str(s.get("timing")))
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
    roles = s.get("by_role") or {}
    if roles:
        r = Table(title="per communicator role")
        for head in ("role", "calls", "time", "exposed", "fabric delay", "slowdown p99"):
            r.add_column(head, justify="left" if head == "role" else "right")
        for name, f in roles.items():
            p99 = f.get("slowdown_p99")
            r.add_row(name, f"{f['calls']:,}", ms(f["time_s"]), ms(f["exposed_s"]), ms(f["fabric_delay_s"]),
                      "n/a" if p99 is None else f"x{p99:.3f}")
        console.print(r)
    tiers = s.get("tiers") or {}
    if tiers:
        tt = Table(title="per link tier")
        for head in ("tier", "links used", "peak", "most time above 90 %", "links above 90 %"):
            tt.add_column(head, justify="left" if head == "tier" else "right")
        for name, f in tiers.items():
            tt.add_row(name, f"{f['links_used']}/{f['links']}", pct(f["peak_utilization"]),
                       ms(f["busy_above_90_max_s"]), f"{f['links_above_90']}")
        console.print(tt)
    worst = s.get("worst_collectives") or []
    if worst:
        w = Table(title="collectives the fabric delayed most")
        for head in ("collective", "start", "duration", "ideal", "delay", "waited at"):
            w.add_column(head, justify="left" if head in ("collective", "waited at") else "right")
        for c in worst[:5]:
            where = c["waited_at"] + (f" ({pct(c['waited_at_utilization'])} busy)" if c["waited_at"] else "")
            w.add_row(f"{c['op']} {c['comm']}#{c['seq']} ({c['role']})", ms(c["start_s"]), ms(c["duration_s"]),
                      ms(c["ideal_s"]), ms(c["fabric_delay_s"]), where or "-")
        console.print(w)
    busiest = s.get("busiest_links") or []
    if busiest:
        h = Table(title="busiest links (time above 90 %, then peak)")
        for head in ("link", "time above 90 %", "peak", "mean", "GB"):
            h.add_column(head, justify="left" if head == "link" else "right")
        for item in busiest[:5]:
            h.add_row(item["link"], ms(item["busy_above_90_s"]), pct(item["peak_utilization"]),
                      pct(item["utilization"]), f"{item['bytes'] / 1e9:.3f}")
        console.print(h)
    from sim.results.timeline import timeline_sampling

    # the file's own statement (otherData), so the line and timeline.json cannot disagree
    tl = timeline_sampling(result) if s.get("model") != "analytical" else None
    if tl and tl["flow_sampling_stride"] > 1:
        console.print(f"timeline.json holds one flow in {tl['flow_sampling_stride']} ({tl['flows_written']:,} of "
                      f"{tl['flows_total']:,}; all collectives)", highlight=False)
    if s.get("model") == "analytical":
        files = "summary.json, *.parquet"
    else:
        files = ("summary.json, *.parquet, " + ("report.html, " if plots else "") + "timeline.json"
                 + (", tiers.parquet" if s.get("model") == "both" else ""))
    console.print(f"wrote {out_dir}/ ({files})", highlight=False)


@click.command("run")
@click.option("--trace", "trace", required=True, help="Trace file (Parquet, SPEC §3) or built-in name.")
@click.option("--topo", "topo", required=True, help="Preset (fat_tree, leaf_spine, rail_optimized, rail_only) or YAML.")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (k=8, oversubscription=2) or simulator option (timing, bin_s, quantile).")
@click.option("--algo", type=click.Choice(["auto", "ring", "tree", "direct"]), default="auto", show_default=True)
@click.option("--routing", type=click.Choice(list(ROUTINGS)), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), default=None,
              help="Output folder [default: simrun-out/<trace>-<topo>/]; a previous run's files there are replaced.")
@click.option("--force", is_flag=True, help="Write into a folder that holds files collsim did not write.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout instead of the table.")
@click.option("--fail-links", default=None, metavar="N|u-v,...",
              help="Fail N switch links (seeded) or named ones; ITEM@T1-T2 for a window, @T1-T2/PERIOD to flap.")
@click.option("--degrade-links", default=None, metavar="N:FACTOR",
              help="Scale N switch links' capacity (FACTOR < 1: capacity left; > 1: times slower); "
                   "ITEM@T1-T2 for a window.")
@click.option("--straggler", "stragglers", multiple=True, metavar="RANK:DELAY_US",
              help="Delay every op of RANK by DELAY_US (repeatable).")
@click.option("--timing", type=click.Choice(["auto", "gaps", "trace", "asap"]), default=None,
              help="gaps: keep each rank's compute gaps, the network moves what follows (what-if); trace: "
                   "recorded issue times are a floor; asap: back to back; auto: gaps when issue times are known, "
                   "else asap. [default: auto]")
@click.option("--quantile", type=float, default=None,
              help="Completion batching of the flow network, 0 <= q < 1: 0 re-solves at every completion "
                   "(exact); q jumps to each op's q-quantile of predicted finishes (the default keeps makespan "
                   "within 0.5 % and the median collective within 1 % of exact on the measured cases: "
                   f"docs/network.md). [default: {DEFAULT_QUANTILE}]")
@click.option("--no-report", is_flag=True, help="Skip report.html and its plots.")
@click.option("--model", type=click.Choice(["flow", "analytical", "both"]), default=None,
              help="flow: the event-driven flow tier; analytical: per-collective bounds of the same plans (no "
                   "event loop); both: the flow tier plus tiers.parquet comparing them per collective. "
                   "[default: flow]")
def command(trace, topo, set_values, algo, routing, seed, out, force, as_json, fail_links, degrade_links,
            stragglers, timing, quantile, no_report, model) -> None:
    """Replay trace T over topology X; print a summary table and write the result files."""
    from sim.cli.common import show_progress

    state = {"last": 0, "total": 0, "advance": None}

    def on_trace(df) -> None:
        state["total"] = count_ops(df)

    def progress(fraction: float, sim_time_s: float | None = None) -> None:
        if state["advance"] is not None:
            done = int(round(fraction * state["total"]))
            status = None if sim_time_s is None else f"at {sim_time_s * 1e3:,.3f} ms simulated"
            state["advance"](max(0, done - state["last"]), status)
            state["last"] = done

    with _lazy_bar(state) as bar:
        result, out_dir = run(trace, topo, set_values=set_values, algo=algo, routing=routing, seed=seed,
                              out=out, fail_links=fail_links, degrade_links=degrade_links,
                              stragglers=stragglers, timing=timing, quantile=quantile, plots=not no_report,
                              progress=progress, force=force, on_trace=lambda df: (on_trace(df), bar()),
                              model=model)
    # the batching the run used (a flag, --set quantile=..., or the default), for the warm-up's kernels
    _warm_kernels_later(run_options(set_values, completion_quantile=quantile)[0].completion_quantile,
                        show_progress())
    if as_json:
        sys.stdout.write((out_dir / "summary.json").read_text())
        return
    _print_table(result, out_dir, plots=not no_report)


def _warm_kernels_later(quantile: float, tell: bool) -> None:
    """After a run on the numpy paths that cached kernels would have sped up, fill numba's cache in the
    background for the next run (:mod:`sim.warmup`; ``COLLSIM_KERNEL_BUILD=0`` turns it off)."""
    from sim.warmup import warm_in_background

    if warm_in_background(quantile) and tell:
        click.echo("compiling the simulator's kernels in the background for later runs "
                   "(COLLSIM_KERNEL_BUILD=0 turns this off)", err=True)


class _lazy_bar:  # noqa: N801 - a context manager used like a function
    """Opens the progress bar once the trace is read and its collectives counted."""

    def __init__(self, state: dict) -> None:
        self.state = state
        self.cm = None

    def __enter__(self):
        def open_bar() -> None:
            self.cm = progress_bar(self.state["total"], "replaying", unit="collectives done",
                                   status="at 0.000 ms simulated")
            self.state["advance"] = self.cm.__enter__()
        return open_bar

    def __exit__(self, *exc) -> bool:
        if self.cm is not None:
            self.cm.__exit__(*exc)
        return False


__all__ = ["DEFAULT_QUANTILE", "FLAGS", "SIM_KEYS", "check_trace_path", "command", "count_ops", "default_out",
           "run", "run_options", "split_set"]
