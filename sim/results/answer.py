"""Figures that answer *where does the fabric hurt?* (SPEC §10): communication time, exposed communication,
fabric-induced delay, breakdowns per op type, communicator role and link tier, and the worst collectives.

Definitions (all computed from the engine log; docs/report.md explains them with examples):

* ``comm_time_s``: for every rank and every step of its program, the time from the moment the rank issued
  the step to the moment the step was done on it (waiting for peers included), summed over ranks and
  divided by the world size.
* ``exposed_comm_s``: the communication on the *critical path*. Walk back from the op that ends last: the
  op ran from its start (the moment its last member issued it) to its end; that member issued it after its
  previous step was done plus a compute gap; continue from that previous step's latest op, until a rank's
  first step (with ``timing=trace``, or at a step whose recorded issue time was the binding floor). The makespan splits exactly into the op
  durations on this path (``exposed_comm_s``) and the rest (``compute_on_path_s``: compute gaps,
  straggler delays, recorded floors and the first issue time).
* ``fabric_delay_s``: the sum over collectives of ``duration_s - ideal_s`` (``ideal_s`` on the
  reference, a lower bound: :mod:`sim.reference`); ``fabric_delay_share`` divides it by the makespan (collectives overlap, so the
  share can exceed 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from sim.results.metrics import TIER

__all__ = ["ROLES", "answer_figures", "comm_roles", "comm_time_s", "critical_path", "link_tiers",
           "step_done_s", "tier_figures", "worst_collectives"]

#: Communicator roles, in display order.
ROLES = ("TP", "EP", "DP", "PP", "world", "other")
#: How many worst collectives the summary lists.
WORST = 10
_PREFIX = re.compile(r"^(tp|ep|dp|pp)(?![a-z])", re.IGNORECASE)
_SITE_ROLE = (("moe_dispatch", "EP"), ("moe_combine", "EP"), ("grad_sync", "DP"), ("send_", "PP"),
              ("recv_", "PP"))


def comm_roles(df: pd.DataFrame, meta: Mapping) -> dict[str, str]:
    """Role of every communicator: ``TP`` / ``EP`` / ``DP`` / ``PP`` / ``world`` / ``other``.

    From, in order: the communicator's name (``tp0``, ``ep``, ``dp1.3``), the ``site=`` of its rows'
    ``context`` (``moe_dispatch`` -> EP, ``grad_sync`` -> DP, ``send_``/``recv_`` -> PP), its size against
    the metadata ``parallelism`` sizes when exactly one matches, ``world`` when it spans every rank.

    Examples
    --------
    >>> df = pd.DataFrame({"comm": ["tp0", "a", "b"], "context": ["", "site=moe_dispatch", ""],
    ...                    "rank": [0, 0, 0]})
    >>> comm_roles(df, {"comms": {"b": [0, 1, 2, 3]}, "world_size": 4})
    {'tp0': 'TP', 'a': 'EP', 'b': 'world'}
    """
    comms = meta.get("comms") or {}
    world = int(meta.get("world_size") or 0)
    par = meta.get("parallelism") or {}
    sizes = {k.upper(): int(v) for k, v in par.items() if k in ("tp", "ep", "dp", "pp")
             and isinstance(v, int | float) and int(v) > 1}
    out: dict[str, str] = {}
    ctx = df["context"].astype(str) if "context" in df.columns else pd.Series([""] * len(df))
    for comm, idx in df.groupby("comm", sort=False).indices.items():
        comm = str(comm)
        m = _PREFIX.match(comm)
        if m:
            out[comm] = m.group(1).upper()
            continue
        sites = " ".join(pd.unique(ctx.iloc[idx].str.extract(r"site=([^;]*)", expand=False).dropna()))
        role = next((r for key, r in _SITE_ROLE if key in sites), None)
        n = len(comms.get(comm, [])) or int(df["rank"].iloc[idx].nunique())
        if role is None:
            match = [r for r, size in sizes.items() if size == n]
            role = match[0] if len(match) == 1 else ("world" if world and n == world else "other")
        out[comm] = role
    return out


def step_done_s(workload, op_end_s: np.ndarray) -> np.ndarray:
    """When each step of the rank programs was done: the end of its latest op."""
    if workload.n_steps == 0:
        return np.zeros(0)
    return np.maximum.reduceat(op_end_s[workload.step_op_idx], workload.step_op_ptr[:-1])


def comm_time_s(workload, step_issue_s: np.ndarray, op_end_s: np.ndarray, world_size: int) -> float:
    """Time ranks spend inside their steps (issue to done), summed over ranks, over the world size."""
    if workload.n_steps == 0 or world_size <= 0:
        return 0.0
    inside = step_done_s(workload, op_end_s) - step_issue_s
    return float(np.nansum(np.clip(inside, 0.0, None)) / world_size)


def critical_path(workload, step_issue_s: np.ndarray, op_start_s: np.ndarray, op_end_s: np.ndarray,
                  timing: str = "gaps") -> tuple[float, float, np.ndarray]:
    """Split the makespan along the critical path (module docstring).

    With ``timing="trace"`` the path ends at a step whose recorded issue time was the binding floor
    (what came before it on that rank did not move the makespan).

    Returns
    -------
    exposed_comm_s : float
        Sum of the durations of the ops on the path.
    other_s : float
        The rest of the makespan: compute gaps, delays and floors on the path.
    path_ops : ndarray of int64
        The ops on the path, last first.
    """
    w = workload
    if w.n_ops == 0 or np.all(np.isnan(op_end_s)):
        return 0.0, 0.0, np.zeros(0, dtype=np.int64)
    done = step_done_s(w, op_end_s)
    step_of = np.repeat(np.arange(w.n_steps, dtype=np.int64), np.diff(w.step_op_ptr))
    order = np.argsort(w.step_op_idx, kind="stable")
    op_steps, op_ptr = step_of[order], np.zeros(w.n_ops + 1, dtype=np.int64)
    np.cumsum(np.bincount(w.step_op_idx, minlength=w.n_ops), out=op_ptr[1:])
    first = np.zeros(w.n_steps, dtype=bool)
    first[w.prog_ptr[:-1][np.diff(w.prog_ptr) > 0]] = True
    op = int(np.nanargmax(op_end_s))
    comm = other = 0.0
    path = []
    seen = np.zeros(w.n_ops, dtype=bool)
    while not seen[op]:
        seen[op] = True
        path.append(op)
        comm += float(op_end_s[op] - op_start_s[op])
        steps = op_steps[op_ptr[op]:op_ptr[op + 1]]
        s = int(steps[np.argmax(step_issue_s[steps])])   # the member that issued it last
        floor = timing == "trace" and w.step_t_start_s[s] > done[s - 1] + w.step_gap_s[s] if not first[s] else False
        if first[s] or floor:
            other += float(step_issue_s[s])
            break
        other += float(step_issue_s[s] - done[s - 1])
        prev_ops = w.step_op_idx[w.step_op_ptr[s - 1]:w.step_op_ptr[s]]
        op = int(prev_ops[np.argmax(op_end_s[prev_ops])])
    return comm, other, np.asarray(path, dtype=np.int64)


def link_tiers(links: pd.DataFrame, graph) -> np.ndarray:
    """Tier label of each directed link: its kind, plus ``up`` / ``down`` for links between tiers."""
    kind = {n: d.get("kind") for n, d in graph.nodes(data=True)} if graph is not None else {}
    st = links["src"].map(lambda n: TIER.get(kind.get(n), 0)).to_numpy()
    dt = links["dst"].map(lambda n: TIER.get(kind.get(n), 0)).to_numpy()
    direction = np.where(dt > st, " up", np.where(dt < st, " down", ""))
    return (links["kind"].astype(str).to_numpy().astype(object) + direction).astype(str)


def tier_figures(links: pd.DataFrame, graph) -> dict[str, dict]:
    """Per tier: links, links used, peak utilisation, most and total time above 90 %, bytes."""
    tiers = link_tiers(links, graph)
    out = {}
    for tier in sorted(set(tiers.tolist())):
        sub = links[tiers == tier]
        out[tier] = {"links": int(len(sub)), "links_used": int((sub["bytes"] > 0).sum()),
                     "peak_utilization": float(sub["peak_utilization"].max()),
                     "busy_above_90_max_s": float(sub["busy_above_90_s"].max()),
                     "links_above_90": int((sub["busy_above_90_s"] > 0).sum()),
                     "bytes": float(sub["bytes"].sum())}
    return out


def _group_figures(coll: pd.DataFrame, key: pd.Series, on_path: np.ndarray) -> dict[str, dict]:
    out = {}
    for name, idx in coll.groupby(key.to_numpy(), sort=True).indices.items():
        sub = coll.iloc[idx]
        sl = sub["slowdown"].to_numpy(np.float64)
        sl = sl[np.isfinite(sl)]
        delay = (sub["duration_s"] - sub["ideal_s"]).to_numpy(np.float64)
        out[str(name)] = {
            "calls": int(len(sub)), "bytes": float(sub["bytes"].sum()),
            "time_s": float(np.nansum(sub["duration_s"])), "ideal_s": float(np.nansum(sub["ideal_s"])),
            "fabric_delay_s": float(np.nansum(delay)),
            "exposed_s": float(np.nansum(sub["duration_s"].to_numpy()[on_path[idx]])),
            "slowdown_p50": float(np.percentile(sl, 50)) if len(sl) else None,
            "slowdown_p99": float(np.percentile(sl, 99)) if len(sl) else None,
        }
    return out


def worst_collectives(coll: pd.DataFrame, roles: pd.Series, log, link_names: pd.DataFrame,
                      n: int = WORST) -> list[dict]:
    """The ``n`` collectives the fabric delayed most (``duration_s - ideal_s``), each with the link of its
    routes that was busiest while it ran (``waited_at``, its mean utilisation then)."""
    delay = (coll["duration_s"] - coll["ideal_s"]).to_numpy(np.float64)
    ok = np.flatnonzero(np.isfinite(delay) & (delay > 0))
    top = ok[np.argsort(-delay[ok], kind="stable")[:n]]
    width, bins = log.link_stats.binned(log.makespan_s)
    cap = link_names["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    names = (link_names["src"].astype(str) + "->" + link_names["dst"].astype(str)).to_numpy()
    out = []
    for i in top.tolist():
        r = coll.iloc[i]
        used = log.used_links(i)   # the links its flows crossed (the engine streams flows, not keeps them)
        item = {"comm": str(r["comm"]), "seq": int(r["seq"]), "op": str(r["op"]), "role": str(roles.iloc[i]),
                "bytes": int(r["bytes"]), "start_s": float(r["start_s"]), "duration_s": float(r["duration_s"]),
                "ideal_s": float(r["ideal_s"]), "slowdown": float(r["slowdown"]),
                "fabric_delay_s": float(delay[i]), "waited_at": "", "waited_at_utilization": None}
        if len(used) and len(bins):
            a = int(np.clip(r["start_s"] // width, 0, len(bins) - 1))
            b = int(np.clip(np.ceil(r["end_s"] / width), a + 1, len(bins)))
            util = bins[a:b, used].sum(axis=0) / (cap[used] * width * (b - a))
            j = int(np.argmax(util))
            item["waited_at"], item["waited_at_utilization"] = str(names[used[j]]), float(util[j])
        out.append(item)
    return out


def answer_figures(*, coll: pd.DataFrame, links: pd.DataFrame, log, ideal_log, graph, link_names: pd.DataFrame,
                   roles: Mapping[str, str] | None, world_size: int, timing: str = "gaps") -> dict:
    """The SPEC §10 summary keys and the breakdowns (see the module docstring)."""
    span = float(log.makespan_s)
    role = coll["comm"].map(lambda c: (roles or {}).get(c, "other")).astype(str)
    on_path = np.zeros(len(coll), dtype=bool)
    out: dict = {}
    if log.workload is not None and log.step_issue_s is not None:
        w = log.workload
        exposed, other, path = critical_path(w, log.step_issue_s, log.op_start_s, log.op_end_s, timing)
        on_path[path] = True
        out["comm_time_s"] = comm_time_s(w, log.step_issue_s, log.op_end_s, world_size)
        out["exposed_comm_s"] = exposed
        out["compute_on_path_s"] = other
        out["critical_path_ops"] = int(len(path))
        if ideal_log is not None and ideal_log.step_issue_s is not None:
            # the real run's workload: with gaps derived from the ideal run (sim.replay), the ideal run's
            # trace-floor issue times are exactly its gaps-mode ones
            out["ideal_exposed_comm_s"] = critical_path(w, ideal_log.step_issue_s, ideal_log.op_start_s,
                                                        ideal_log.op_end_s, timing)[0]
    delay = (coll["duration_s"] - coll["ideal_s"]).to_numpy(np.float64)
    out["fabric_delay_s"] = float(np.nansum(delay)) if np.isfinite(delay).any() else None
    if out["fabric_delay_s"] is not None and span > 0:
        out["fabric_delay_share"] = out["fabric_delay_s"] / span
    if "exposed_comm_s" in out and span > 0:
        out["exposed_comm_share"] = out["exposed_comm_s"] / span
    out["by_op"] = _group_figures(coll, coll["op"].astype(str), on_path)
    out["by_role"] = _group_figures(coll, role, on_path)
    out["tiers"] = tier_figures(links, graph)
    out["worst_collectives"] = worst_collectives(coll, role, log, link_names) if "ideal_s" in coll else []
    return out
