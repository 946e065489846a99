"""``report.html`` with seaborn plots (PNG beside it) and ``timeline.json`` (Chrome trace format).

Plots: link utilisation by tier over time (heatmap), slowdown CDF, the hottest links, incast timeline.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from sim.results.metrics import TIER

#: Most incast events drawn in the timeline plot (the largest estimated bursts).
MAX_PLOTTED_INCAST = 2_000
#: Most flows written to timeline.json (the earliest ones); the collectives are always all written.
MAX_TIMELINE_FLOWS = 20_000

FIDELITY = (
    "Flow-level model: every transfer is a flow whose rate is max-min fair over directed link capacities, "
    "re-solved when flows start or end, plus NCCL's per-step software latencies and per-hop link latencies. "
    "What flow level cannot show: packet drops, PFC pauses and head-of-line blocking, congestion-control "
    "dynamics (ramp-up, oscillation, unfairness), switch buffer occupancy and queueing delay. Incast events "
    "mark where those would happen; their buffer figure is an estimate (demand above capacity for one "
    "round trip)."
)


def _tier_of(links: pd.DataFrame, graph) -> pd.Series:
    """Tier label of each directed link: its kind, plus up/down for switch links."""
    kind = {n: d.get("kind") for n, d in graph.nodes(data=True)} if graph is not None else {}
    st = links["src"].map(lambda n: TIER.get(kind.get(n), 0))
    dt = links["dst"].map(lambda n: TIER.get(kind.get(n), 0))
    direction = np.where(dt > st, " up", np.where(dt < st, " down", ""))
    return links["kind"].astype(str) + direction


def _plots(result, out: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    figs: list[tuple[str, str]] = []

    # 1. utilisation heatmap by tier over time
    ts = result.link_timeseries
    if len(ts):
        names = result.link_names
        tier = _tier_of(names, result.graph)
        key = names["src"].astype(str) + "->" + names["dst"].astype(str)
        tier_of = dict(zip(key, tier, strict=True))
        frame = ts.assign(tier=(ts["src"] + "->" + ts["dst"]).map(tier_of))
        frame = frame.assign(t_ms=(frame["t_s"] * 1e3).round(4))
        grid = frame.pivot_table(index="tier", columns="t_ms", values="utilization", aggfunc="mean")
        fig, ax = plt.subplots(figsize=(11, 0.5 * len(grid) + 2))
        sns.heatmap(grid, ax=ax, cmap="rocket_r", vmin=0, vmax=1, cbar_kws={"label": "mean utilisation"},
                    xticklabels=max(1, grid.shape[1] // 10))
        ax.set_xlabel("time (ms, bin start)")
        ax.set_ylabel("link tier")
        ax.set_title("Link utilisation by tier over time (mean over the tier's busy links)")
        fig.tight_layout()
        fig.savefig(out / "utilization_heatmap.png", dpi=90)
        plt.close(fig)
        figs.append(("utilization_heatmap.png", "Link utilisation by tier over time"))

    # 2. slowdown CDF
    coll = result.collectives
    sl = coll[np.isfinite(coll["slowdown"])]
    if len(sl):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        sns.ecdfplot(data=sl, x="slowdown", hue="op", ax=ax)
        ax.set_xlabel("slowdown (duration / ideal on a non-blocking fabric)")
        ax.set_title("Collective slowdown CDF")
        fig.tight_layout()
        fig.savefig(out / "slowdown_cdf.png", dpi=90)
        plt.close(fig)
        figs.append(("slowdown_cdf.png", "Slowdown CDF per op"))

    # 3. hot links
    links = result.links
    hot = links[links["bytes"] > 0].nlargest(10, "mean_utilization")
    if len(hot):
        hot = hot.assign(link=hot["src"] + "->" + hot["dst"])
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(hot) + 1.5))
        sns.barplot(data=hot, y="link", x="mean_utilization", hue="kind", dodge=False, ax=ax)
        ax.set_xlabel("mean utilisation over the run")
        ax.set_ylabel("")
        ax.set_title("Hottest links")
        fig.tight_layout()
        fig.savefig(out / "hot_links.png", dpi=90)
        plt.close(fig)
        figs.append(("hot_links.png", "Top 10 links by mean utilisation"))

    # 4. incast timeline
    inc = result.incast
    fig, ax = plt.subplots(figsize=(10, 4.5))
    shown = ""
    if len(inc) > MAX_PLOTTED_INCAST:  # the strongest bursts; the parquet file has them all
        shown = f" ({MAX_PLOTTED_INCAST:,} largest bursts of {len(inc):,})"
        inc = inc.nlargest(MAX_PLOTTED_INCAST, "est_buffer_bytes").sort_values("t_start_s")
    if len(inc):
        ports = {p: i for i, p in enumerate(pd.unique(inc["port"]))}
        y = inc["port"].map(ports).to_numpy()
        ax.hlines(y, inc["t_start_s"] * 1e3, inc["t_end_s"] * 1e3, colors="tab:red", linewidth=3)
        sc = ax.scatter(inc["t_start_s"] * 1e3, y, c=inc["fanin"], cmap="viridis", s=14, zorder=3)
        fig.colorbar(sc, ax=ax, label="fan-in (senders)")
        if len(ports) <= 30:
            ax.set_yticks(range(len(ports)), list(ports))
        else:
            ax.set_ylabel(f"egress port ({len(ports)} ports)")
    else:
        ax.text(0.5, 0.5, "no incast event: no switch port saw two or more senders above its capacity",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("time (ms)")
    ax.set_title(f"Incast events at switch egress ports{shown}")
    fig.tight_layout()
    fig.savefig(out / "incast_timeline.png", dpi=90)
    plt.close(fig)
    figs.append(("incast_timeline.png", "Incast events over time"))
    return figs


def write_report(result, out_dir: str | Path) -> Path:
    """Write ``report.html`` and its PNG plots into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = _plots(result, out)
    s = result.summary
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
                   for k, v in s.items() if k != "hot_links")
    imgs = "".join(f"<h2>{html.escape(title)}</h2><img src='{name}' alt='{html.escape(title)}'>"
                   for name, title in figs)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>collsim: {html.escape(str(s.get('trace')))}"
            f" on {html.escape(str(s.get('topology')))}</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}img{max-width:100%}"
            "td,th{text-align:left;padding:2px 8px}</style></head><body>"
            f"<h1>{html.escape(str(s.get('trace')))} on {html.escape(str(s.get('topology')))}</h1>"
            f"<p><b>Fidelity.</b> {html.escape(FIDELITY)}</p><table>{rows}</table>{imgs}</body></html>")
    path = out / "report.html"
    path.write_text(page)
    return path


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) or "-"
    return str(v)


def write_timeline(result, path: str | Path) -> Path:
    """Write the collectives (one track per communicator) and flows (one track per source GPU) as a
    Chrome trace (``traceEvents``, microseconds); open it in Perfetto or chrome://tracing."""
    coll = result.collectives
    log = result.log
    events: list[dict] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "collectives"}},
                          {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "flows"}}]
    comms = {c: i for i, c in enumerate(pd.unique(coll["comm"]))}
    events += [{"ph": "M", "pid": 1, "tid": i, "name": "thread_name", "args": {"name": f"comm {c}"}}
               for c, i in comms.items()]
    done = coll[np.isfinite(coll["start_s"]) & np.isfinite(coll["end_s"])]
    for r in done.itertuples(index=False):
        events.append({"ph": "X", "pid": 1, "tid": comms[r.comm], "name": r.op, "ts": r.start_s * 1e6,
                       "dur": max(r.duration_s, 0.0) * 1e6,
                       "args": {"seq": int(r.seq), "bytes": int(r.bytes), "algo": r.algo,
                                "slowdown": None if not np.isfinite(r.slowdown) else float(r.slowdown)}})
    n = len(log.flow_path)
    keep = np.argsort(log.flow_start_s, kind="stable")[:MAX_TIMELINE_FLOWS]
    names = result.link_names
    first_src = names["src"].astype(str).to_numpy()
    last_dst = names["dst"].astype(str).to_numpy()
    ptr, plinks = log.paths.ptr, log.paths.links
    op_names = coll["op"].to_numpy()
    tids: dict[str, int] = {}
    for f in keep.tolist():
        p = int(log.flow_path[f])
        a, b = int(ptr[p]), int(ptr[p + 1])
        if b <= a or not np.isfinite(log.flow_end_s[f]):
            continue
        src, dst = first_src[plinks[a]], last_dst[plinks[b - 1]]
        op = int(log.flow_op[f])
        tid = tids.get(src)
        if tid is None:  # one numbered track per source GPU, named after it
            tid = tids[src] = len(tids)
            events.append({"ph": "M", "pid": 2, "tid": tid, "name": "thread_name", "args": {"name": src}})
        events.append({"ph": "X", "pid": 2, "tid": tid, "name": f"{src}->{dst}",
                       "ts": float(log.flow_start_s[f]) * 1e6,
                       "dur": float(log.flow_end_s[f] - log.flow_start_s[f]) * 1e6,
                       "args": {"bytes": float(log.flow_bytes[f]), "op": str(op_names[op]), "op_id": op}})
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"flows_total": n, "flows_written": int(min(n, MAX_TIMELINE_FLOWS))}}
    out = Path(path)
    out.write_text(json.dumps(doc))
    return out


__all__ = ["FIDELITY", "MAX_PLOTTED_INCAST", "MAX_TIMELINE_FLOWS", "write_report", "write_timeline"]
