"""Network-only replay of ``benchmarks/bench_network.py`` (``--record`` / ``--replay``).

**Network-only replay** (the network alone on the exact work a simulation gives it): ``--record TRACE
--topo fat_tree --log LOG.npz [--stop-ms 20]`` runs ``sim.simulate`` on a trace (CLI defaults: q = 0.01)
and records every call the engine makes on its :class:`FlowNetwork` (``add_flows``, ``next_completion_s``,
``advance``, ``set_capacity``, in order) with what each returned; ``--stop-ms`` ends the run (and the log)
at that simulated time. ``--replay LOG.npz [--repeat N]`` makes the same calls on a fresh network of this
tree (numba loaded before the clock starts), prints the median CPU time and the time in each event kernel,
and checks every ``advance`` returns the same ids and finish times (max relative difference) and every
``next_completion_s`` the same time as the recording, and how many ``advance`` calls returned flows of
each big group (an op's batch ends). Record once on a base tree (``PYTHONPATH=BASE``) and replay on both
trees to compare them on identical work.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from sim.network.flow_network import FlowNetwork

__all__ = ["batch_ends_per_group", "record", "replay", "replay_report"]

_ADD, _NEXT, _ADVANCE, _CAPACITY = 0, 1, 2, 3   # the kinds of recorded calls


class _Stop(Exception):
    """The recording reached ``--stop-ms``."""


def record(trace: str, topo: str, q: float, log_path: str, stop_ms: float | None) -> None:
    """Run ``sim.simulate`` on ``trace`` and write the call log of its network to ``log_path``."""
    import sim.network.flow_network as fn
    from sim import simulate
    from traces import read_trace

    calls: dict[str, list] = {k: [] for k in ("kind", "t", "n", "grouped", "deg", "links", "size", "group",
                                              "cap_ids", "cap", "next", "done", "done_s", "n_done",
                                              "rate_cap", "cap_key")}
    made: list = []
    stop_s = math.inf if stop_ms is None else stop_ms * 1e-3

    class Recording(FlowNetwork):
        def __init__(self, capacity, **kw):
            super().__init__(capacity, **kw)
            self._rec = not made   # the run's network only (not a memo conflict's scratch network)
            made.append(self)
            if self._rec:
                calls["capacity"], calls["q"] = np.array(capacity, dtype=np.float64), kw["completion_quantile"]

        def add_flows(self, now_s, link_ptr, link_idx, size_bytes, group=None, rate_cap=None, cap_key=None):
            if self._rec:
                ptr = np.asarray(link_ptr, dtype=np.int64)
                size = np.asarray(size_bytes, dtype=np.float64).reshape(-1)
                calls["kind"].append(_ADD)
                calls["t"].append(float(now_s))
                calls["n"].append(size.size)
                calls["grouped"].append(group is not None)
                calls["deg"].append(np.diff(ptr).astype(np.int16))
                calls["links"].append(np.asarray(link_idx)[ptr[0]:ptr[-1]].astype(np.int32))
                calls["size"].append(size.copy())
                calls["group"].append(np.broadcast_to(np.asarray(0 if group is None else group, dtype=np.int64),
                                                      size.shape).copy())
                # rate ceilings (p2p connections): inf and each flow its own key when none
                calls["rate_cap"].append(np.full(size.size, np.inf) if rate_cap is None
                                         else np.asarray(rate_cap, dtype=np.float64).reshape(-1).copy())
                calls["cap_key"].append(np.arange(size.size, dtype=np.int64) if cap_key is None
                                        else np.asarray(cap_key, dtype=np.int64).reshape(-1).copy())
            return super().add_flows(now_s, link_ptr, link_idx, size_bytes, group=group, rate_cap=rate_cap,
                                     cap_key=cap_key)

        def next_completion_s(self):
            t = super().next_completion_s()
            if self._rec:
                calls["kind"].append(_NEXT)
                calls["t"].append(math.nan)
                calls["next"].append(t)
            return t

        def advance(self, t_s):
            if self._rec and t_s > stop_s:
                raise _Stop
            done = super().advance(t_s)
            if self._rec:
                calls["kind"].append(_ADVANCE)
                calls["t"].append(float(t_s))
                calls["n_done"].append(done.size)
                calls["done"].append(np.asarray(done, dtype=np.int64).copy())
                calls["done_s"].append(np.asarray(self.last_finish_s, dtype=np.float64).copy())
            return done

        def set_capacity(self, link_ids, capacity_bytes_per_s):
            if self._rec:
                ids = np.asarray(link_ids, dtype=np.int64).reshape(-1)
                calls["kind"].append(_CAPACITY)
                calls["t"].append(math.nan)
                calls["n"].append(0)     # add_flows and set_capacity rows share "n" and "grouped"
                calls["grouped"].append(False)
                calls["cap_ids"].append(ids)
                calls["cap"].append(np.broadcast_to(np.asarray(capacity_bytes_per_s, dtype=np.float64), ids.shape).copy())
            super().set_capacity(link_ids, capacity_bytes_per_s)

    df = read_trace(trace)
    fn.FlowNetwork = Recording   # sim.prepare.run_engine imports it at call time
    c0 = time.process_time()
    try:
        simulate(df, topo, completion_quantile=q)
    except _Stop:
        pass
    finally:
        fn.FlowNetwork = FlowNetwork
    cpu = time.process_time() - c0
    out = {"kind": np.array(calls["kind"], dtype=np.int8), "t": np.array(calls["t"])}
    cat = lambda key, dtype: (np.concatenate(calls[key]).astype(dtype) if calls[key]  # noqa: E731
                              else np.zeros(0, dtype=dtype))
    out.update(n=np.array(calls["n"], dtype=np.int64), grouped=np.array(calls["grouped"], dtype=bool),
               deg=cat("deg", np.int16), links=cat("links", np.int32), size=cat("size", np.float64),
               group=cat("group", np.int64), rate_cap=cat("rate_cap", np.float64),
               cap_key=cat("cap_key", np.int64), cap_ids=cat("cap_ids", np.int64), cap=cat("cap", np.float64),
               cap_n=np.array([a.size for a in calls["cap_ids"]], dtype=np.int64),
               next=np.array(calls["next"]), n_done=np.array(calls["n_done"], dtype=np.int64),
               done=cat("done", np.int64), done_s=cat("done_s", np.float64),
               capacity=calls["capacity"], q=np.float64(calls["q"]))
    np.savez(log_path, **out)
    kinds = out["kind"]
    print(f"recorded {log_path}: {int((kinds == _ADD).sum())} add_flows ({out['size'].size} flows), "
          f"{int((kinds == _ADVANCE).sum())} advance, {int((kinds == _NEXT).sum())} next_completion_s, "
          f"{int((kinds == _CAPACITY).sum())} set_capacity; simulate CPU {cpu:.1f} s")


def replay(log: dict, timed: dict | None = None) -> dict:
    """Make the calls of a call log on a fresh network; return CPU time, stats and the result checks."""
    kinds, t = log["kind"], log["t"]
    n, grouped, deg = log["n"], log["grouped"], log["deg"]
    links, size, group = log["links"], log["size"], log["group"]
    link_ptr = np.zeros(deg.size + 1, dtype=np.int64)
    np.cumsum(deg, out=link_ptr[1:])
    flow_at = np.r_[0, np.cumsum(n)]
    cap_at = np.r_[0, np.cumsum(log["cap_n"])]
    done_at = np.r_[0, np.cumsum(log["n_done"])]
    rec_next, rec_done, rec_s = log["next"], log["done"], log["done_s"]
    got_s = np.empty(rec_s.size)
    same_ids = True
    next_diff = 0.0
    i_add = i_next = i_adv = i_cap = 0
    c0 = time.process_time()
    net = FlowNetwork(log["capacity"], completion_quantile=float(log["q"]), keep_flow_times=False)
    for k, tk in zip(kinds.tolist(), t.tolist(), strict=True):
        if k == _ADD:
            a, b = flow_at[i_add], flow_at[i_add + 1]
            ptr = link_ptr[a:b + 1]
            caps = {}
            if "rate_cap" in log and np.isfinite(log["rate_cap"][a:b]).any():   # logs before ceilings have none
                caps = {"rate_cap": log["rate_cap"][a:b], "cap_key": log["cap_key"][a:b]}
            net.add_flows(tk, ptr - ptr[0], links[ptr[0]:ptr[-1]], size[a:b],
                          group=group[a:b] if grouped[i_add] else None, **caps)
            i_add += 1
        elif k == _NEXT:
            got = net.next_completion_s()
            want = rec_next[i_next]
            if got != want:
                next_diff = max(next_diff, abs(got - want) / max(abs(want), 1e-300))
            i_next += 1
        elif k == _ADVANCE:
            done = net.advance(tk)
            a, b = done_at[i_adv], done_at[i_adv + 1]
            if done.size != b - a or not np.array_equal(done, rec_done[a:b]):
                same_ids = False
            else:
                got_s[a:b] = net.last_finish_s
            i_adv += 1
        else:
            # a set_capacity row also has an "n" (0) and "grouped" entry: it moves the add counter
            a, b = cap_at[i_cap], cap_at[i_cap + 1]
            net.set_capacity(log["cap_ids"][a:b], log["cap"][a:b])
            i_cap += 1
            i_add += 1
    cpu = time.process_time() - c0
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(got_s - rec_s) / np.abs(rec_s)
    return {"cpu_s": cpu, "same_ids": same_ids, "max_rel_finish": float(np.nanmax(rel)) if rel.size else 0.0,
            "next_rel": next_diff, "stats": dict(net.stats), "peak_active": net.peak_active}


def _warm_compiled() -> None:
    """Load the compiled event kernels before a timed replay (their load is not the network's work)."""
    from sim.network import events

    events.backend(10**9)
    net = FlowNetwork(np.ones(2), completion_quantile=0.01)
    net.add_flows(0.0, np.array([0, 1, 3]), np.array([0, 0, 1]), np.array([1.0, 2.0]), group=np.array([0, 1]))
    net.advance(np.inf)


def _kernel_timer(totals: dict):
    """Wrap the compiled event operations to add their CPU time into ``totals``."""
    from sim.network import events

    ops = events._BACKEND["compiled"]
    for name in ("step", "solve", "next_event", "solve_next"):
        fn = getattr(ops, name, None)
        if fn is None:   # a tree before solve_next
            continue

        def timed(*a, _fn=fn, _name=name):
            c = time.process_time()
            try:
                return _fn(*a)
            finally:
                totals[_name] = totals.get(_name, 0.0) + time.process_time() - c
        setattr(ops, name, timed)


def replay_report(log_path: str, repeat: int) -> None:
    """``--replay``: medians of ``repeat`` replays, then one replay with the event kernels timed."""
    with np.load(log_path) as z:
        log = {k: z[k] for k in z.files}
    _warm_compiled()
    runs = [replay(log) for _ in range(repeat)]
    r = runs[0]
    cpu = statistics.median(x["cpu_s"] for x in runs)
    totals: dict = {}
    _kernel_timer(totals)
    replay(log)
    kinds = log["kind"]
    s = r["stats"]
    print(f"{log_path}: {int((kinds == _ADVANCE).sum())} advances, {log['size'].size} flows, "
          f"peak in flight {r['peak_active']}")
    each = ", ".join(f"{x['cpu_s']:.2f}" for x in runs)
    print(f"  CPU median {cpu:.3f} s of {repeat} ({each}); kernels: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(totals.items())))
    print(f"  solves {s['solves']}, flows solved {s['flows_solved']}, passes {s['iterations']}, steps {s['steps']}, "
          f"merged {s['merged']}")
    print(f"  same ids: {r['same_ids']}; max relative finish-time difference {r['max_rel_finish']:.3g}; "
          f"next_completion_s max relative difference {r['next_rel']:.3g}")
    print("  " + batch_ends_per_group(log))


def batch_ends_per_group(log: dict, min_flows: int = 1000) -> str:
    """How many ``advance`` calls of a call log returned flows of each group of ``min_flows`` flows or more
    (an op's batch ends, shared with whatever else finished then): median and max over those groups."""
    group, done, n_done = log["group"], log["done"], log["n_done"]
    keys, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    call = np.repeat(np.arange(n_done.size), n_done)          # the advance that returned each flow
    pairs = np.unique(inverse[done] * np.int64(n_done.size + 1) + call)
    per_group = np.bincount(pairs // (n_done.size + 1), minlength=keys.size)[counts >= min_flows]
    if not per_group.size:
        return f"no group of {min_flows:,}+ flows"
    return (f"{per_group.size} groups of {min_flows:,}+ flows (median {int(np.median(counts[counts >= min_flows])):,} "
            f"flows): advances returning their flows median {np.median(per_group):.0f}, max {per_group.max()}")
