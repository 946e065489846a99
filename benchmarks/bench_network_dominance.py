"""Potential of dominated-link pruning and path-merged slots in the flow tier (measurement only).

A link ``L`` whose flows are all also carried by one other link ``M`` with ``capacity(M) <= capacity(L)``
can never be the unique bottleneck, so the max-min allocation is unchanged without it. This script runs one
``simulate()`` with the engine unchanged, records every slot the network creates (its link list as the
engine builds it, its weight, its start) and snapshots the live slots at sampled re-solves, then reports

* the statically dominated links: every flow of the run that crosses ``L`` also crosses some ``M`` with
  ``cap(M) <= cap(L)`` (ties of equal flow sets and capacities: the higher id is the dominated one);
* per sampled solve, live slots today, after pruning the dominated links and merging identical link lists
  with the same start, and with any start (and merging without pruning), and the link incidences per slot
  (the solver's work is one pass over the incidences per water-filling level);
* the same with links dominated *at that moment* (only the live flows counted).

    python benchmarks/bench_network_dominance.py --gpus 64            # decode step, fat_tree
    python benchmarks/bench_network_dominance.py --trace traces/data/ds_v3.parquet

Private links (rate ceilings) are reused across keys, so they are never counted as dominated statically.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]


class Recorder:
    """Hooks on :class:`LiveFlows.append` and :meth:`FlowNetwork._solve` (one run, every network)."""

    def __init__(self, every: int):
        self.every = every
        self.nets: dict[int, dict] = {}

    def _net(self, key: int) -> dict:
        return self.nets.setdefault(key, {"rows": [], "fid": [], "start": [], "w": [], "solves": 0,
                                          "samples": [], "num_public": None})

    def install(self):
        from sim.network.flow_network import FlowNetwork
        from sim.network.live import LiveFlows

        rec = self
        append0, solve0 = LiveFlows.append, FlowNetwork._solve

        def append(live, rows, deg, size_bytes, now_s, weight, group, fid):
            d = rec._net(id(live))
            d["rows"].append(np.sort(np.where(rows >= 0, rows, np.iinfo(np.int64).max), axis=1))
            d["fid"].append(np.asarray(fid, dtype=np.int64).copy())
            d["start"].append(np.full(deg.size, float(now_s)))
            d["w"].append(np.asarray(weight, dtype=np.float64).copy())
            return append0(live, rows, deg, size_bytes, now_s, weight, group, fid)

        def solve(net):
            live = net._live
            d = rec._net(id(live))
            d["num_public"] = net.num_links
            if net._dirty and live.n_slots:
                d["solves"] += 1
                if d["solves"] % rec.every == 1:
                    s = live.live_slots()
                    d["samples"].append({"now_s": net.now_s, "links": live.links[s].copy(), "fid": live.fid[s].copy(),
                                         "w": live.w[s].copy(), "cap": net._cap.copy()})
            return solve0(net)

        LiveFlows.append, FlowNetwork._solve = append, solve
        return lambda: (setattr(LiveFlows, "append", append0), setattr(FlowNetwork, "_solve", solve0))


def incidence(rows: np.ndarray, num_links: int) -> sp.csr_matrix:
    """Slots x links 0/1 matrix of padded rows (padding: negative or >= num_links)."""
    r, c = np.nonzero((rows >= 0) & (rows < num_links))
    return sp.csr_matrix((np.ones(r.size, dtype=np.int64), (r, rows[r, c])), shape=(rows.shape[0], num_links))


def dominated_links(rows: np.ndarray, cap: np.ndarray, num_links: int) -> np.ndarray:
    """Boolean mask of the links dominated over the flows ``rows`` (module docstring).

    Parameters
    ----------
    rows : ndarray of int64, shape (n, width)
        Link ids of each flow (distinct flows are enough), padded with a value outside ``0 .. num_links-1``.
    cap : ndarray of float64
        Capacity of each link (bytes/s).
    num_links : int
        Links considered (ids ``0 .. num_links - 1``); the others are never dominated.

    Returns
    -------
    ndarray of bool, shape (num_links,)

    Examples
    --------
    Links 0 and 1 carry the same two flows (equal capacities: 1 is the dominated twin); link 3's one flow
    also crosses link 2, but link 2 is faster, so neither dominates the other:

    >>> rows = np.array([[0, 1, 9], [0, 1, 2], [2, 3, 9]])
    >>> dominated_links(rows, np.array([1.0, 1.0, 1.0, 0.5]), 4).tolist()
    [False, True, False, False]
    """
    a = incidence(rows, num_links)
    co = (a.T @ a).tocoo()                  # co[L, M]: flows crossing both L and M
    n_l = np.asarray(a.sum(axis=0)).ravel()
    L, M, k = co.row, co.col, co.data
    sub = (L != M) & (k == n_l[L]) & (cap[M] <= cap[L])          # F(L) within F(M), cap(M) <= cap(L)
    same = sub & (k == n_l[M]) & (cap[M] == cap[L]) & (M > L)    # equal twins: the lower id is dominated by none
    sub &= ~same
    dom = np.zeros(num_links, dtype=bool)
    dom[L[sub]] = True
    return dom


def slot_counts(links: np.ndarray, start: np.ndarray, w: np.ndarray, dom: np.ndarray) -> dict:
    """Slots and incidences of one live set today, pruned, and merged by link list (+ start)."""
    big = np.iinfo(np.int64).max
    rows = np.where(links >= 0, links, big)
    keep = rows != big
    keep[keep] = ~dom[rows[keep]]
    pruned = np.sort(np.where(keep, rows, big), axis=1)
    plain = np.sort(rows, axis=1)
    inc0, inc1 = int((rows != big).sum()), int(keep.sum())

    def uniq(a, extra=None):
        key = a if extra is None else np.column_stack([a, extra.view(np.int64)])
        u = np.unique(key, axis=0)
        return u.shape[0], int((u[:, :a.shape[1]] != big).sum())

    n_plain, inc_plain = uniq(plain)
    n_start, inc_start = uniq(pruned, start)
    n_any, inc_any = uniq(pruned)
    return {"slots": int(links.shape[0]), "flows": float(w.sum()), "inc": inc0, "inc_pruned": inc1,
            "merge_only_slots": n_plain, "merge_only_inc": inc_plain,
            "pruned_same_start_slots": n_start, "pruned_same_start_inc": inc_start,
            "pruned_any_start_slots": n_any, "pruned_any_start_inc": inc_any}


def analyse(d: dict) -> dict:
    """The report of one network's recording."""
    num = d["num_public"]
    width = max(r.shape[1] for r in d["rows"])
    rows = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=np.iinfo(np.int64).max)
                           for r in d["rows"]])
    fid, start = np.concatenate(d["fid"]), np.concatenate(d["start"])
    order = np.argsort(fid)
    fid, start = fid[order], start[order]
    distinct = np.unique(rows, axis=0)
    cap = d["samples"][0]["cap"] if d["samples"] else None
    dom = dominated_links(distinct, cap, num)
    used = np.zeros(num, dtype=bool)
    used[np.unique(distinct[distinct < num])] = True
    out = {"slots_created": int(rows.shape[0]), "flows_created": float(np.concatenate(d["w"]).sum()),
           "distinct_link_lists": int(distinct.shape[0]), "public_links": int(num), "links_used": int(used.sum()),
           "dominated_static": int(dom.sum()), "solves": d["solves"], "samples": []}
    inc_all = distinct[distinct < num]
    out["dominated_by_cap"] = {f"{c:.4g}": [int((dom & (cap[:num] == c)).sum()), int((used & (cap[:num] == c)).sum())]
                               for c in np.unique(cap[:num][used])}
    out["incidences_per_distinct_list"] = [float(inc_all.size / distinct.shape[0]),
                                           float((~dom[inc_all]).sum() / distinct.shape[0])]
    for s in d["samples"]:
        st = start[np.searchsorted(fid, s["fid"])]
        row = {"now_ms": s["now_s"] * 1e3, **slot_counts(s["links"], st, s["w"], np.r_[dom, np.zeros(s["cap"].size - num, bool)])}
        live_rows = np.where(s["links"] >= 0, s["links"], np.iinfo(np.int64).max)
        dyn = dominated_links(live_rows, s["cap"], s["cap"].size)
        row["dominated_now"] = int(dyn.sum())
        dyn_counts = slot_counts(s["links"], st, s["w"], dyn)
        row["now_pruned_any_start_slots"] = dyn_counts["pruned_any_start_slots"]
        row["now_pruned_same_start_slots"] = dyn_counts["pruned_same_start_slots"]
        row["now_inc_pruned"] = dyn_counts["inc_pruned"]
        out["samples"].append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=None, help="decode step at this many GPUs (bench_scale cache)")
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--topo", default="fat_tree")
    ap.add_argument("--quantile", type=float, default=0.01)
    ap.add_argument("--samples", type=int, default=12, help="about this many sampled solves")
    ap.add_argument("--every", type=int, default=None, help="sample every N-th solve (default from --gpus)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/collsim-bench-scale"))
    ap.add_argument("--out", type=Path, default=None, help="write the JSON here (atomically)")
    args = ap.parse_args()
    from sim import simulate
    from traces import read_trace

    path = args.trace or args.cache / f"ds_v3_decode_{args.gpus}.parquet"
    every = args.every or max(1, {64: 59000, 256: 70000}.get(args.gpus, 12000) // args.samples)
    rec = Recorder(every)
    undo = rec.install()
    t0 = time.process_time()
    res = simulate(read_trace(path), args.topo, completion_quantile=args.quantile)
    cpu = time.process_time() - t0
    undo()
    key = max(rec.nets, key=lambda k: rec.nets[k]["solves"])
    report = {"trace": str(path), "topo": args.topo, "quantile": args.quantile, "cpu_s_recorded": cpu,
              "makespan_s": float(res.summary["makespan_s"]), "networks": len(rec.nets), **analyse(rec.nets[key])}
    text = json.dumps(report, indent=1)
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, args.out)
    s = report["samples"]
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1))
    print("now_ms slots inc/slot | merge-only | pruned+same-start | pruned+any-start | inc/slot pruned any | dyn any")
    for r in s:
        print(f"{r['now_ms']:8.3f} {r['slots']:7d} {r['inc'] / r['slots']:5.2f} | {r['merge_only_slots']:7d} | "
              f"{r['pruned_same_start_slots']:7d} ({r['slots'] / r['pruned_same_start_slots']:.2f}x) | "
              f"{r['pruned_any_start_slots']:7d} ({r['slots'] / r['pruned_any_start_slots']:.2f}x) | "
              f"{r['pruned_any_start_inc'] / r['pruned_any_start_slots']:5.2f} | "
              f"{r['now_pruned_any_start_slots']:7d} ({r['slots'] / r['now_pruned_any_start_slots']:.2f}x)")


if __name__ == "__main__":
    main()
