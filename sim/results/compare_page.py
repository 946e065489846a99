"""``compare.html``: the verdict first, then a table per fabric, the cost proxy, and plots on one time axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.results.fmt import esc, gb, ms, pct, table_html, x
from sim.results.verdict import STATED_ERROR_REL, verdicts
from traces.atomic import save_figure, write_text_file

__all__ = ["FIGURES", "write_compare_page"]

#: Rows of the per-fabric table: column, heading, formatter.
FIGURES = (
    ("makespan_s", "makespan", ms), ("ideal_makespan_s", "ideal makespan (the reference, a lower bound)", ms),
    ("exposed_comm_s", "exposed communication (critical path)", ms),
    ("exposed_comm_share", "exposed communication, share of makespan", pct),
    ("comm_time_s", "time in collectives per rank", ms),
    ("fabric_delay_s", "fabric delay (sum over collectives of duration - ideal)", ms),
    ("fabric_delay_share", "fabric delay / makespan", pct),
    ("slowdown_p50", "collective slowdown p50", x), ("slowdown_p99", "collective slowdown p99", x),
    ("peak_link_utilization", "peak link utilisation", pct),
    ("incast_events", "incast events", lambda v: f"{int(v):,}"),
    ("max_incast_fanin", "max incast fan-in", lambda v: f"{int(v)}"),
    ("bytes_on_wire", "bytes on wire", gb),
)
COST = (("switches", "switches"), ("network_cables", "network cables"), ("optics", "optics (2 per cable)"),
        ("nvswitches", "NVSwitches"))


def _cell(fmt, v) -> str:
    try:
        return "n/a" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt(v)
    except (TypeError, ValueError):
        return str(v)


def _aligned_plot(table: pd.DataFrame, out: Path) -> str | None:
    """One row per fabric on one time axis: the busiest network link's and the mean utilisation per bin."""
    from matplotlib.figure import Figure

    series = []
    for row in table.to_dict("records"):
        folder = out / str(row["folder"])
        ts = pd.read_parquet(folder / "link_timeseries.parquet")
        links = pd.read_parquet(folder / "links.parquet", columns=["src", "dst", "kind"])
        net = links[links["kind"] != "nvlink"]
        key = set(zip(net["src"], net["dst"], strict=True))
        ts = ts[[k in key for k in zip(ts["src"], ts["dst"], strict=True)]]
        series.append((row["folder"], ts))
    if not any(len(ts) for _, ts in series):
        return None
    fig = Figure(figsize=(11, 1.9 * len(series) + 1.0), layout="constrained")
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False).ravel()
    for ax, (name, ts) in zip(axes, series, strict=True):
        if len(ts):
            g = ts.groupby("t_s")["utilization"]
            t_ms = g.max().index.to_numpy() * 1e3
            ax.step(t_ms, g.max().to_numpy() * 100, where="post", color="tab:red", lw=1.2, label="busiest link")
            ax.step(t_ms, g.mean().to_numpy() * 100, where="post", color="tab:blue", lw=1.2, label="mean of used links")
        else:
            ax.text(0.5, 0.5, "no traffic on network links (NVLink only)", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_ylim(0, 105)
        ax.set_ylabel(f"{name}\nutilisation (%)")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", ncols=2, fontsize=8, frameon=True)
    axes[-1].set_xlabel("simulated time (ms)")
    fig.suptitle("Network-link utilisation over time, one row per fabric (same time axis)")
    save_figure(fig, out / "compare_timeline.png", dpi=80)  # atomic: temp file + rename
    return "compare_timeline.png"


def write_compare_page(table: pd.DataFrame, out_dir: str | Path, trace_name: str = "") -> Path:
    """Write ``compare.html`` (and ``compare_timeline.png``) from the compare table and the fabric folders."""
    out = Path(out_dir)
    rows = table.to_dict("records")
    names = [str(r["folder"]) for r in rows]
    lines = [text for _, _, text in verdicts([dict(r, label=n) for r, n in zip(rows, names, strict=True)],
                                             label="label")]
    verdict = "".join(f"<li>{esc(t)}</li>" for t in lines)
    fig_rows = [[head, *(_cell(fmt, r.get(col)) for r in rows)] for col, head, fmt in FIGURES
                if any(r.get(col) is not None for r in rows)]
    roles = sorted({c.split("_")[1] for c in table.columns if c.startswith("role_") and c.endswith("_fabric_delay_s")})
    for role in roles:
        fig_rows.append([f"{role} fabric delay", *(_cell(ms, r.get(f"role_{role}_fabric_delay_s")) for r in rows)])
        fig_rows.append([f"{role} exposed", *(_cell(ms, r.get(f"role_{role}_exposed_s")) for r in rows)])
    count = lambda v: f"{int(v):,}"  # noqa: E731
    none = lambda v: v is None or (isinstance(v, float) and np.isnan(v))  # noqa: E731
    cost_rows = [[head, *(count(0 if none(r.get(col)) else r[col]) for r in rows)] for col, head in COST]
    for col in sorted(c for c in table.columns if c.startswith("optics_") or c.startswith("switches_")):
        cost_rows.append([col.replace("_", " "), *(count(0 if none(r.get(col)) else r[col]) for r in rows)])
    faster = [n for r, n in zip(rows, names, strict=True) if (r.get("fabric_delay_s") or 0) < 0]
    # the reference is a lower bound (sim.reference): a negative delay is float rounding or a bug
    caveat = (f"<p class='note'>{esc(', '.join(faster))}: negative fabric delay, below the reference, which "
              "bounds every fabric from below: report it as a bug.</p>" if faster else "")
    plot = _aligned_plot(table, out)
    links = " · ".join(f"<a href='{esc(n)}/report.html'>{esc(n)}</a>" for n in names)
    img = (f"<h2>Utilisation over time</h2><p>Each row is one fabric, on the same simulated-time axis: red is the "
           f"busiest network link in each time bin, blue the mean over the links that carried traffic (100 % = "
           f"line rate). A fabric that keeps red below 100 % for longer has headroom.</p><img src='{plot}' "
           f"alt='utilisation over time per fabric'>" if plot else
           "<p>No fabric carried traffic on its network links (everything stayed on NVLink): there is no "
           "utilisation plot to draw.</p>")
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>collsim compare: {esc(trace_name)}</title><style>body{{font-family:sans-serif;max-width:1150px;"
        "margin:auto;padding:0 12px}img{max-width:100%}td,th{text-align:right;padding:3px 10px}"
        "th:first-child{text-align:left}table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}"
        "</style></head><body>"
        f"<h1>Which fabric carries {esc(trace_name or 'this trace')} better?</h1>"
        f"<h2>Verdict</h2><ul class='verdict'>{verdict}</ul>"
        f"<p>Lower is better for every figure. Figures within {STATED_ERROR_REL * 100:.0f} % of each other are a "
        "tie: that is the simulator's stated error (docs/simulator.md).</p>"
        f"<h2>Figures per fabric</h2>{table_html(['figure', *names], fig_rows, 'figures')}{caveat}"
        f"<h2>Cost proxy</h2><p>Counts from each fabric's graph: switches (NVSwitches apart), cables that leave a "
        f"server, and optics at two transceivers per such cable (an upper bound where access links are copper)."
        f"</p>{table_html(['item', *names], cost_rows, 'cost')}{img}"
        f"<h2>Each fabric's report</h2><p>{links}</p></body></html>\n")
    path = out / "compare.html"
    write_text_file(path, page)  # atomic: temp file + rename
    return path
