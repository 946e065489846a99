"""``report.html``: what a person reads after a run. The run's identity, the verdict, then figures.

Order: a header that identifies the run (trace, topology with every parameter, anomalies, routing,
algorithm, timing, seed, collsim version); the verdict (where this workload hurts the fabric, in
sentences); headline figures with units; the per-communicator-role and per-op tables; link tiers; hot
links ranked by time above 90 % with the time series of the top ones; the slowdown CDF per op type;
incast by switch port; the collectives the fabric delayed most. Each figure has a sentence on how to read
it; a run without network traffic says so in words instead of drawing empty plots. Nothing time- or
machine-dependent is written (no wall time, no dates), so identical runs give identical pages.
"""

from __future__ import annotations

from pathlib import Path

from sim.results import report_plots
from sim.results.fmt import esc, gb, ms, pct, table_html, us, x
from sim.results.timeline import MAX_TIMELINE_FLOWS, write_timeline
from sim.results.verdict import STATED_ERROR_REL
from traces.atomic import write_text_file

__all__ = ["FIDELITY", "MAX_TIMELINE_FLOWS", "header_rows", "verdict_sentences", "write_report", "write_timeline"]

FIDELITY = (
    "Flow-level model: every transfer is a flow whose rate is max-min fair over directed link capacities, "
    "re-solved when flows start or end, plus NCCL's per-step software latencies and per-hop link latencies. "
    "What flow level cannot show: packet drops, PFC pauses and head-of-line blocking, congestion-control "
    "dynamics (ramp-up, oscillation, unfairness), switch buffer occupancy and queueing delay. Incast events "
    "mark where those would happen; their buffer figure is an estimate (demand above capacity for one "
    "round trip)."
)
_CSS = ("body{font-family:system-ui,sans-serif;max-width:1150px;margin:auto;padding:0 14px;color:#222}"
        "img{max-width:100%;display:block;margin:6px 0}table{border-collapse:collapse;margin:6px 0}"
        "td,th{text-align:right;padding:3px 10px;border-bottom:1px solid #ddd}th:first-child{text-align:left}"
        "thead th{background:#eee}.verdict li{margin:4px 0}.how{color:#444;font-size:0.95em}"
        "header{background:#f6f6f6;padding:8px 14px;border-radius:6px}header td{text-align:left}.note{color:#555;font-size:0.9em}")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("collsim")
    except Exception:  # not installed (a source tree on PYTHONPATH)
        return "unknown"


def header_rows(result) -> list[list[str]]:
    """(what, value) rows that identify the run."""
    s = result.summary
    g = result.graph.graph if result.graph is not None else {}
    params = ", ".join(f"{k}={v}" for k, v in g.items() if k not in ("name", "preset"))
    failed = s.get("failed_links") or []
    degraded = s.get("degraded_links") or {}
    anomalies = "; ".join(filter(None, [
        f"failed links: {', '.join(failed)}" if failed else "",
        "degraded links: " + ", ".join(f"{k} x{v}" for k, v in degraded.items()) if degraded else ""])) or "none"
    return [["trace", f"{s.get('trace')} ({s.get('world_size')} ranks, {s.get('collectives'):,} collectives)"],
            ["topology", f"{s.get('topology')}: {params}" if params else str(s.get("topology"))],
            ["anomalies", anomalies], ["routing", str(s.get("routing"))], ["algorithm", str(s.get("algo"))],
            ["timing", str(s.get("timing"))], ["seed", str(s.get("seed"))],
            ["completion quantile", str(s.get("completion_quantile"))], ["collsim version", _version()]]


def verdict_sentences(s: dict) -> list[str]:
    """Where this workload hurts this fabric, in sentences (the top of the page)."""
    out = []
    span, ideal = s.get("makespan_s"), s.get("ideal_makespan_s")
    if ideal:
        extra = span / ideal - 1
        if abs(extra) <= STATED_ERROR_REL:
            out.append(f"The trace runs in {ms(span)}, as fast as its lower bound on an ideal fabric ({ms(ideal)}) "
                       f"within the simulator's stated error of {STATED_ERROR_REL * 100:.0f} %: this fabric does not "
                       "slow it.")
        else:
            out.append(f"The trace runs in {ms(span)}, {pct(abs(extra))} {'longer' if extra > 0 else 'shorter'} than "
                       f"its lower bound on an ideal fabric ({ms(ideal)}: the same servers and NICs, a non-blocking "
                       "core).")
    else:
        out.append(f"The trace runs in {ms(span)} (no ideal reference was computed).")
    if s.get("exposed_comm_s") is not None:
        out.append(f"Ranks wait on collectives on the critical path for {ms(s['exposed_comm_s'])} "
                   f"({pct(s.get('exposed_comm_share'))} of the makespan); the rest is compute and recorded gaps.")
    if s.get("fabric_delay_s") is not None:
        roles = {k: v["fabric_delay_s"] for k, v in (s.get("by_role") or {}).items() if v["fabric_delay_s"] > 0}
        who = ""
        if roles and s["fabric_delay_s"] > 0:
            top = max(sorted(roles), key=roles.get)
            who = f", {pct(roles[top] / s['fabric_delay_s'], 0)} of it in {top} collectives"
        out.append(f"The fabric adds {ms(s['fabric_delay_s'])} to collectives in total (sum of duration minus "
                   f"ideal, {pct(s.get('fabric_delay_share'))} of the makespan){who}.")
    tiers = {k: v for k, v in (s.get("tiers") or {}).items() if k != "nvlink" and v["links_used"]}
    if tiers:
        hot = max(sorted(tiers), key=lambda k: tiers[k]["busy_above_90_max_s"])
        t = tiers[hot]
        out.append(f"The hottest network tier is {hot}: {t['links_above_90']} of its {t['links']} links run above 90 % "
                   f"of line rate at some moment, the busiest for {ms(t['busy_above_90_max_s'])}.")
    elif s.get("bytes_on_wire", 0) == 0 or not tiers:
        out.append("No traffic crosses a network link: every collective stays inside NVLink domains, so the "
                   "fabric cannot matter for this trace on this topology.")
    worst = (s.get("worst_collectives") or [])[:1]
    if worst:
        c = worst[0]
        where = f"; its busiest link then was {c['waited_at']} ({pct(c['waited_at_utilization'])} busy)" \
            if c["waited_at"] else ""
        out.append(f"The collective the fabric delayed most is {c['op']} on {c['comm']} (#{c['seq']}, {c['role']}) at "
                   f"{ms(c['start_s'])}: {us(c['duration_s'])} instead of {us(c['ideal_s'])}{where}.")
    if s.get("incast_events"):
        out.append(f"Incast: {s['incast_events']:,} events at switch egress ports, up to {s['max_incast_fanin']} "
                   "senders at once (see the incast timeline).")
    return out


def _figures_table(s: dict) -> str:
    rows = [["makespan", ms(s.get("makespan_s"))], ["ideal makespan (lower bound)", ms(s.get("ideal_makespan_s"))],
            ["makespan / ideal", x(s.get("makespan_vs_ideal"))],
            ["exposed communication (critical path)", f"{ms(s.get('exposed_comm_s'))} ({pct(s.get('exposed_comm_share'))})"],
            ["time in collectives per rank", ms(s.get("comm_time_s"))],
            ["fabric delay (sum of duration - ideal)", f"{ms(s.get('fabric_delay_s'))} ({pct(s.get('fabric_delay_share'))})"],
            ["collective slowdown p50 / p99", f"{x(s.get('slowdown_p50'))} / {x(s.get('slowdown_p99'))}"],
            ["collectives / flows", f"{s.get('collectives', 0):,} / {s.get('flows', 0):,}"],
            ["bytes on wire", gb(s.get("bytes_on_wire"))],
            ["peak link utilisation", pct(s.get("peak_link_utilization"))],
            ["incast events / max fan-in", f"{s.get('incast_events', 0):,} / {s.get('max_incast_fanin', 0)}"]]
    if s.get("ecmp_imbalance"):
        rows.append(["ECMP imbalance (max / mean uplink bytes)",
                     ", ".join(f"{k} {v:.2f}" for k, v in s["ecmp_imbalance"].items())])
    skipped = {k: v for k, v in (s.get("skipped") or {}).items() if v}
    if skipped:
        rows.append(["skipped trace rows", ", ".join(f"{k} {v}" for k, v in skipped.items())])
    return table_html(["figure", "value"], rows)


def _group_table(groups: dict, first: str) -> str:
    rows = [[name, f"{g['calls']:,}", gb(g["bytes"]), ms(g["time_s"]), ms(g["ideal_s"]), ms(g["exposed_s"]),
             ms(g["fabric_delay_s"]), x(g["slowdown_p50"]), x(g["slowdown_p99"])] for name, g in groups.items()]
    return table_html([first, "calls", "bytes", "time (sum)", "ideal (sum)", "exposed", "fabric delay",
                       "slowdown p50", "slowdown p99"], rows)


def _tier_table(tiers: dict) -> str:
    rows = [[name, f"{t['links_used']} / {t['links']}", gb(t["bytes"]), pct(t["peak_utilization"]),
             ms(t["busy_above_90_max_s"]), f"{t['links_above_90']}"] for name, t in tiers.items()]
    return table_html(["tier (direction)", "links used", "bytes", "peak utilisation", "longest time above 90 %",
                       "links above 90 % at some moment"], rows)


def _worst_table(worst: list) -> str:
    rows = [[f"{c['op']} {c['comm']} #{c['seq']}", c["role"], gb(c["bytes"]), ms(c["start_s"]), us(c["duration_s"]),
             us(c["ideal_s"]), us(c["fabric_delay_s"]), x(c["slowdown"]),
             f"{c['waited_at']} ({pct(c['waited_at_utilization'])})" if c["waited_at"] else "-"] for c in worst]
    return table_html(["collective", "role", "size", "start", "duration", "ideal", "delay", "slowdown",
                       "busiest link while it ran"], rows)


def _figure(fig, title: str) -> str:
    name, how = fig
    return f"<h3>{esc(title)}</h3><p class='how'>{esc(how)}</p><img src='{esc(name)}' alt='{esc(title)}'>"


def write_report(result, out_dir: str | Path) -> Path:
    """Write ``report.html`` and its PNG figures into ``out_dir``; return the page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = result.summary
    net = result.links[(result.links["kind"] != "nvlink") & (result.links["bytes"] > 0)]
    parts = [f"<header><h1>{esc(s.get('trace'))} on {esc(s.get('topology'))}</h1>"
             f"{table_html(['run', 'value'], header_rows(result))}</header>",
             "<h2>Verdict</h2><ul class='verdict'>" + "".join(f"<li>{esc(t)}</li>" for t in verdict_sentences(s))
             + "</ul>", f"<h2>Figures</h2>{_figures_table(s)}",
             "<p class='how'>Exposed communication: the op durations on the critical path (the chain of "
             "collectives and compute gaps that ends last); fabric delay: the sum over collectives of their "
             "duration minus their ideal duration (a lower bound: the same servers, NVLink and NICs, a non-blocking "
             "core, each server's NICs shared by its GPUs over NVLink).</p>"]
    if s.get("by_role"):
        parts.append("<h2>Per communicator role</h2><p class='how'>Roles come from the communicator names, the "
                     "trace's context and its parallelism metadata; times are sums over collectives, "
                     "'exposed' is the part on the critical path.</p>" + _group_table(s["by_role"], "role"))
    if s.get("by_op"):
        parts.append("<h2>Per op type</h2>" + _group_table(s["by_op"], "op"))
    if s.get("tiers"):
        parts.append("<h2>Link tiers</h2><p class='how'>Per tier and direction (up = towards the core): peak "
                     "utilisation over the run and time above 90 % of line rate.</p>" + _tier_table(s["tiers"]))
    parts.append("<h2>Hot links</h2>")
    if not len(net):
        parts.append("<p>No traffic crossed a network link: everything stayed on NVLink, so the fabric cannot "
                     "slow this trace. The link figures below show the NVLink ports instead.</p>")
    for draw, title in ((report_plots.hot_links, "Time above 90 % per link"),
                        (report_plots.top_link_series, "Top links over time"),
                        (report_plots.link_heatmap, "Utilisation heatmap")):
        fig = draw(result, out)
        if fig is not None:
            parts.append(_figure(fig, title))
    parts.append("<h2>Collective slowdown</h2>")
    fig = report_plots.slowdown_cdf(result, out)
    parts.append(_figure(fig, "Slowdown CDF per op type") if fig is not None else
                 "<p>No collective has a finite slowdown (no ideal reference was run, or no collective ran).</p>")
    parts.append("<h2>Incast</h2>")
    fig = report_plots.incast_timeline(result, out)
    parts.append(_figure(fig, "Incast timeline") if fig is not None else
                 "<p>No incast event: no switch egress port ever had two or more senders above its line rate.</p>")
    if s.get("worst_collectives"):
        parts.append("<h2>Collectives the fabric delayed most</h2><p class='how'>Delay is duration minus ideal; "
                     "the last column is the link of the collective's routes with the highest mean utilisation "
                     "while it ran: where it waited.</p>" + _worst_table(s["worst_collectives"]))
    parts.append(f"<h2>Fidelity</h2><p class='note'>{esc(FIDELITY)}</p>")
    page = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>collsim: {esc(s.get('trace'))} on "
            f"{esc(s.get('topology'))}</title><style>{_CSS}</style></head><body>" + "".join(parts) + "</body></html>\n")
    path = out / "report.html"
    write_text_file(path, page)  # atomic: temp file + rename
    return path
