"""The analytical tier: every collective's time from its own transfer plan's bounds, no event loop.

Each op instance of the trace is planned exactly as the flow tier plans it
(:func:`sim.planning.collectives.plan_collective`), its transfers are routed over the same fabric with the
same ECMP keys, and its time is the larger of the plan's critical path and its busiest link
(:mod:`sim.analytical.bounds`). Ops with equal traffic (same comm, op, size, splits) are computed once.
``ideal_s`` is the same bound on the reference fabric (:mod:`sim.reference`), without routing.
Ops then run in the trace's rank programs (a rank issues in order; an op starts when every member has
issued it), which gives start and end times and the makespan.

The tier ignores contention between concurrent ops and the max-min sharing inside an op, so on any fabric
its durations are lower bounds of the flow tier's (up to the flow tier's completion batching), and on a
non-blocking fabric it is the alpha-beta closed form.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from sim.analytical.bounds import op_time_s
from sim.analytical.key_routes import KeyRoutes
from sim.analytical.plans import plan_op_pair
from sim.errors import SimError
from sim.planning.plan_latency import paid_path_latency_s
from sim.prepare import flow_key_base
from sim.reference import ReferenceModel
from topologies.routing import use_compiled_walk

__all__ = ["SCHEDULE", "SCHEDULE_MIN_STEPS", "op_times", "schedule", "simulate_analytical"]

#: :func:`schedule`'s loop: "auto" (compiled by :func:`_compiled_schedule`'s rule), "jit" or "numpy" (Python).
SCHEDULE = "auto"
#: Steps from which the compiled loop pays for loading numba in a fresh process: the Python loop costs
#: about 3 us a step (0.78 s a call at the 1,024-GPU decode step's 245,760 steps, three calls a run; the
#: compiled loop 0.03 s) against about 0.75 s to load numba.
SCHEDULE_MIN_STEPS = 200_000


def _bound(plan, comm: str, routes: KeyRoutes | None, ports: ReferenceModel | None):
    """(time, path, link, flows, link loads or None) of one plan on routed links or on ports."""
    src, dst = np.asarray(plan.src, np.int64), np.asarray(plan.dst, np.int64)
    nbytes = np.asarray(plan.bytes, np.float64)
    n = len(src)
    if n == 0:
        return 0.0, 0.0, 0.0, 0, None
    delay = np.asarray(plan.delay_s, np.float64)
    dep_ptr, dep_idx = np.asarray(plan.dep_ptr, np.int64), np.asarray(plan.dep_idx, np.int64)
    spb, lat = np.zeros(n), np.zeros(n)
    remote = src != dst
    if ports is not None:
        load, spb[remote], lat[remote] = ports.loads(src[remote], dst[remote], nbytes[remote])
        cap = ports.capacity_bytes_per_s
    else:
        # every NCCL channel (and PXN connection) hashes as its own flow key: all keys in one call
        key = flow_key_base(comm) + np.asarray(plan.channel, np.int64)[remote]
        load, spb[remote], lat[remote] = routes.loads(src[remote], dst[remote], nbytes[remote], key)
        cap = routes.capacity_bytes_per_s
    # NCCL's step latencies include the wire: the replay's rule (sim.planning.plan_latency.paid_path_latency_s)
    lat = paid_path_latency_s(lat, delay, getattr(plan, "chunk", None))
    t, path, link = op_time_s(delay, nbytes, spb, lat, dep_ptr, dep_idx, load, cap)
    return t, path, link, int(remote.sum()), (load if ports is None else None)


def _split_equal(a, b) -> bool:
    """Whether two ops' split matrices (or None) are the same content."""
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def op_times(ops, keys: list, algo: str, graph, ideal_graph, router, meta: Mapping,
             plan_options: Mapping[str, Any]) -> pd.DataFrame:
    """Analytical time of every op instance (one computation per distinct traffic).

    Ops are computed once per :func:`sim.op_identity.op_keys` key and split matrix: the memo compares the
    matrices themselves (the key holds only their checksum), so a hit is an op with the same transfers.

    Returns
    -------
    pandas.DataFrame
        One row per op: ``time_s``, ``path_s``, ``link_s``, ``ideal_s``, ``algo``, ``flows``; and
        ``attrs["link_bytes"]``, the bytes each link carries over the whole trace.
    """
    routes = KeyRoutes(router)
    from topologies.builders.ideal import reference_ports

    ports = ReferenceModel(reference_ports(ideal_graph, router.num_gpus))
    records = ops.frame.to_dict("records")
    cache: dict = {}
    servers: dict = {}
    out = np.zeros((len(records), 5))
    algos = []
    link_bytes = np.zeros(routes.n_links)
    for i, rec in enumerate(records):
        split = ops.splits[i]
        same = cache.setdefault(keys[i], [])
        # the memo keeps the op's index, not its matrix (split matrices are built per access: holding them
        # all would hold every AllToAll's n x n matrix at once)
        hit = next((h for j, h in same if _split_equal(None if split is None else ops.splits[j], split)), None)
        if hit is None:
            plan, bare = plan_op_pair(rec, split, algo, graph, meta, plan_options, servers)
            t, path, link, flows, load = _bound(plan, str(rec["comm"]), routes, None)
            if plan.algo == "direct" and plan_options.get("pxn") is not False:
                # as the flow tier (sim.replay.reference_durations): the bound of the plan without NCCL's p2p
                # PXN relays, which the reference's pooled NICs already allow
                if bare is None:
                    bare = plan_op_pair(rec, split, algo, graph, meta, {**plan_options, "pxn": False}, servers)[0]
                ideal = _bound(bare, str(rec["comm"]), None, ports)[0]
            else:
                ideal = _bound(plan, str(rec["comm"]), None, ports)[0]
            hit = ((t, path, link, ideal, flows), plan.algo, load)
            same.append((i, hit))
        out[i] = hit[0]
        algos.append(hit[1])
        if hit[2] is not None:
            link_bytes += hit[2]
    frame = pd.DataFrame(out, columns=["time_s", "path_s", "link_s", "ideal_s", "flows"])
    frame["flows"] = frame["flows"].astype(np.int64)
    frame["algo"] = algos
    frame.attrs["link_bytes"] = link_bytes
    frame.attrs["routed_pairs"] = routes.routed_pairs
    return frame


def schedule(workload, duration_s: np.ndarray, timing: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every op when ranks run their programs with fixed op durations.

    A rank issues its steps in order (``timing="trace"``: not before the recorded issue time, nor before
    the previous step's end plus its recorded gap; ``gaps``: at the previous step's end plus its recorded
    gap; ``asap``: at the previous step's end), plus its
    straggler delay; an op starts when its last member issued it and lasts ``duration_s``.

    Raises
    ------
    SimError
        When the programs deadlock.
    """
    w = workload
    n_ops, n_prog = int(w.n_ops), len(w.prog_ptr) - 1
    n_steps = len(w.step_t_start_s)
    need_a = np.bincount(w.step_op_idx, minlength=n_ops)
    # op -> steps waiting on it
    step_of = np.repeat(np.arange(n_steps), np.diff(w.step_op_ptr))
    order = np.argsort(w.step_op_idx, kind="stable")
    optr_a = np.zeros(n_ops + 1, dtype=np.int64)
    np.cumsum(need_a, out=optr_a[1:])
    step_prog_a = np.repeat(np.arange(n_prog), np.diff(w.prog_ptr))
    if _compiled_schedule(n_steps):
        from sim.analytical.schedule_kernel import run_programs

        mode = 0 if timing == "trace" else 1 if timing == "gaps" else 2
        i64, f64 = (lambda a: np.ascontiguousarray(a, np.int64)), (lambda a: np.ascontiguousarray(a, np.float64))
        start_a, end_a, cur_a = run_programs(
            mode, i64(w.step_op_ptr), i64(w.step_op_idx), i64(need_a), optr_a, i64(step_of[order]),
            i64(w.prog_ptr), i64(step_prog_a), f64(w.step_t_start_s), f64(w.step_gap_s), f64(w.prog_delay_s),
            f64(duration_s), np.diff(w.step_op_ptr).astype(np.int64))
        return _check_done(cur_a.tolist(), w.prog_ptr.tolist(), n_prog, start_a, end_a)
    sptr, sidx = w.step_op_ptr.tolist(), w.step_op_idx.tolist()
    need = need_a.tolist()
    op_steps, optr = step_of[order].tolist(), optr_a.tolist()
    prog_ptr = w.prog_ptr.tolist()
    step_prog = step_prog_a.tolist()
    t0, gap, delay = w.step_t_start_s.tolist(), w.step_gap_s.tolist(), w.prog_delay_s.tolist()
    dur = np.asarray(duration_s, np.float64).tolist()
    arrived, latest = [0] * n_ops, [0.0] * n_ops
    start, end = [np.nan] * n_ops, [np.nan] * n_ops
    remaining = np.diff(w.step_op_ptr).tolist()
    step_end = [0.0] * n_steps
    cur = prog_ptr[:-1]
    prev_done: list[float | None] = [None] * n_prog
    stack = [p for p in range(n_prog) if prog_ptr[p] < prog_ptr[p + 1]]
    trace, gaps = timing == "trace", timing == "gaps"
    while stack:
        p = stack.pop()
        s = cur[p]
        before = prev_done[p]
        if trace or gaps:
            if before is None:
                t = t0[s]
            else:
                t = before + gap[s] if gaps else max(t0[s], before + gap[s])
        else:
            t = 0.0 if before is None else before
        t += delay[p]
        if sptr[s] == sptr[s + 1]:
            remaining[s] = -1
            ready = [s]
            step_end[s] = t
        else:
            ready = []
        for k in range(sptr[s], sptr[s + 1]):
            op = sidx[k]
            arrived[op] += 1
            if t > latest[op]:
                latest[op] = t
            if arrived[op] == need[op]:
                start[op] = latest[op]
                end[op] = latest[op] + dur[op]
                for j in range(optr[op], optr[op + 1]):
                    st = op_steps[j]
                    remaining[st] -= 1
                    step_end[st] = max(step_end[st], end[op])
                    if remaining[st] == 0:
                        ready.append(st)
        for st in ready:
            q = step_prog[st]
            prev_done[q] = step_end[st]
            cur[q] += 1
            if cur[q] < prog_ptr[q + 1]:
                stack.append(q)
    return _check_done(cur, prog_ptr, n_prog, np.array(start), np.array(end))


def _check_done(cur: list, prog_ptr: list, n_prog: int, start: np.ndarray, end: np.ndarray):
    """``(start, end)``, or the deadlock error when a program did not reach its end."""
    stuck = [p for p in range(n_prog) if cur[p] < prog_ptr[p + 1]]
    if stuck:
        raise SimError(f"deadlock: rank {stuck[0]} never completes step {cur[stuck[0]] - prog_ptr[stuck[0]]} "
                       f"of its program ({len(stuck)} rank(s) stuck)")
    return start, end


def _compiled_schedule(n_steps: int) -> bool:
    """Whether :func:`schedule` runs the compiled loop: where numba is loaded already (the route walk's rule,
    :func:`topologies.routing.use_compiled_walk`) or the programs have :data:`SCHEDULE_MIN_STEPS` steps."""
    if SCHEDULE == "numpy":
        return False
    return SCHEDULE == "jit" or n_steps >= SCHEDULE_MIN_STEPS or use_compiled_walk()


def simulate_analytical(trace_df: pd.DataFrame, topology, algo: str = "auto", routing: str = "ecmp",
                        seed: int = 0, *, options=None, **kwargs: Any):
    """The analytical tier of :func:`sim.simulate` (``model="analytical"``): same arguments, same Result
    tables (``collectives`` with the §6 columns plus ``path_s`` and ``link_s``; ``links`` with bytes and
    mean utilisation; no link time series or incast: they need the event loop).

    Examples
    --------
    >>> from traces import read_trace
    >>> res = simulate_analytical(read_trace("ds_v3_tp16.parquet"), "fat_tree")
    >>> res.summary["model"], bool((res.collectives["duration_s"] >= res.collectives["ideal_s"] - 1e-12).all())
    ('analytical', True)
    """
    import topologies
    from sim.engine.workload import ideal_gaps
    from sim.options import resolve_options
    from sim.setup import setup_replay
    from topologies.routing import Router

    opts = resolve_options(options, algo, routing, seed, kwargs)
    algo, routing, seed = opts.algo, opts.routing, opts.seed
    wall0 = time.perf_counter()
    setup = setup_replay(trace_df, topology, opts)
    df, meta, world, timing = setup.df, setup.meta, setup.world, setup.timing
    graph, damaged, damage = setup.graph, setup.damaged, setup.damage
    ops, keys, workload = setup.ops, setup.keys, setup.workload
    if damage.windows and opts.model == "analytical":  # used exactly or refused: this tier has no clock
        from sim.errors import OptionError

        raise OptionError("time-windowed --fail-links/--degrade-links (ITEM@T1-T2) need the flow tier: the "
                          "analytical tier has no time line; use --model flow or both")
    plan_options = opts.plan_options()
    router = Router(damaged, routing=routing, seed=seed)
    ideal_graph = graph if graph.graph.get("nonblocking") else topologies.nonblocking(graph)
    times = op_times(ops, keys, algo, damaged, ideal_graph, router, meta, plan_options)
    if timing == "gaps" and df["duration_s"].isna().any():
        # no recorded ends: gaps from the ideal schedule under recorded issue times, as the flow tier does
        _, ideal_trace_end = schedule(workload, times["ideal_s"].to_numpy(), "trace")
        workload = replace(workload, step_gap_s=ideal_gaps(workload, ideal_trace_end))
    start, end = schedule(workload, times["time_s"].to_numpy(), timing)
    _, ideal_end = schedule(workload, times["ideal_s"].to_numpy(), timing)
    from sim.analytical.result import build_result

    return build_result(ops=ops, times=times, start=start, end=end, ideal_end=ideal_end, router=router,
                        graph=damaged, trace_name=str(opts.trace_name or meta.get("source") or "trace"),
                        world=world, timing=timing, algo=algo, routing=routing, seed=seed, wall0=wall0,
                        extra=damage.describe())
