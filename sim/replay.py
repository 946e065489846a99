"""``simulate(trace, topology, ...) -> Result``: a trace replayed as NCCL-style flows over a topology.

The trace becomes a :class:`sim.engine.workload.Workload` (rank programs over op instances: one per
``(comm, seq)`` collective, one per matched Send/Recv pair); each op's transfers come from
:func:`sim.planning.collectives.plan_collective` and their routes from :class:`topologies.routing.Router`
(:mod:`sim.prepare`); the :class:`sim.engine.engine.Engine` runs them over a
:class:`sim.network.flow_network.FlowNetwork`. Each collective's ``ideal_s`` is the lower bound of its plan
on the reference fabric (:mod:`sim.reference`: the same servers, NICs pooled per server over NVLink, a
non-blocking core), and ``ideal_makespan_s`` the rank programs run with those durations: a proven lower
bound on every fabric, routing and anomaly (docs/report.md).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from sim.engine.workload import OpTable, Workload, build_ops, build_workload, ideal_gaps
from sim.errors import SimError
from sim.fabric import check_fit, load_topology
from sim.options import OPTION_NAMES, SimOptions, check_bin_count, resolve_options
from sim.prepare import KEEP_PLAN_TRANSFERS, Preparer, op_keys, plan_op, plan_p2p, run_engine
from sim.reference import IdealLog
from sim.setup import ReplaySetup, setup_replay

__all__ = ["OPTIONS", "OpTable", "Preparer", "Workload", "build_ops", "build_workload", "check_fit",
           "load_topology", "op_keys", "plan_op", "plan_p2p", "reference_durations", "resolve_options",
           "run_engine", "run_reference", "simulate"]

#: Keyword options of :func:`simulate` besides its named parameters (the fields of :class:`SimOptions`).
OPTIONS = tuple(name for name in OPTION_NAMES if name not in ("algo", "routing", "seed"))


def reference_durations(setup: ReplaySetup, preparer: Preparer) -> np.ndarray:
    """``ideal_s`` of every op: its plan's lower bound on the reference fabric of ``setup.graph`` (as built,
    before anomalies), one bound per op identity.

    Returns
    -------
    ndarray of float64
        One value per op instance, seconds.
    """
    from sim.reference import ReferenceModel, plan_bound_s
    from topologies.builders.ideal import reference_ports

    model = ReferenceModel(reference_ports(setup.graph, preparer.router.num_gpus))
    out = np.zeros(len(preparer.keys))
    done: dict = {}
    relays = _plans_relay(preparer)
    for op, key in enumerate(preparer.keys):
        if key not in done:
            # kept for the replay (which routes it), except the relay-free plan made for the bound and
            # big plans: every plan of a 1,024-GPU decode step held from here to its op would be ~0.5 GB,
            # and making a plan again costs less than routing it, which the replay does anyway
            plan = _bound_plan(preparer, op, relays)
            done[key] = plan_bound_s(plan, model)
            if len(plan.src) > KEEP_PLAN_TRANSFERS:
                preparer.plans.pop(key, None)
        out[op] = done[key]
    return out


def _bound_plan(preparer: Preparer, op: int, relays: bool):
    """The plan the reference bounds for op ``op``: without PXN relays (:func:`_plans_relay`).

    Where the fabric needs no relays, a plan that is not direct is the replay's own (made and kept here);
    a direct plan is bounded without NCCL's p2p PXN relays, which it gets on any fabric. An op that NCCL
    runs only as point-to-point sends (``supported_algos == ("direct",)``: AllToAll, Send/Recv, Gather,
    Scatter) is planned without relays first, so the replay's relayed plan is made once, when the op
    starts, and not also here only to learn its algorithm (dropped again when big: three plans of every
    AllToAll of the 256-GPU decode step instead of two). The bound and the replay's plans are the same
    either way; the order saves plans.

    Examples
    --------
    >>> from topologies.routing import Router
    >>> from traces.schema import new_metadata, normalize
    >>> df = pd.DataFrame({"rank": range(16), "comm": "w", "seq": 0, "op": "AllToAll", "count": 1024,
    ...                    "dtype": "uint8", "bytes": 1024, "root": -1, "nranks": 16, "t_start_s": 0.0,
    ...                    "duration_s": np.nan, "host": "", "device": -1, "context": "", "algo": "", "proto": ""})
    >>> setup = setup_replay(normalize(df, new_metadata(16, {"w": list(range(16))}, "doc")), "fat_tree",
    ...                      resolve_options(None, "auto", "ecmp", 0, {}))
    >>> prep = Preparer(setup.ops, Router(setup.damaged), "auto", setup.damaged, setup.meta)
    >>> _bound_plan(prep, 0, False).algo, len(prep.plans)   # the relayed plan is left to the replay
    ('direct', 0)
    """
    from sim.planning.tuning import supported_algos

    if relays:
        return preparer.plan(op, pxn=False)
    if preparer.plan_options.get("pxn") is False:
        return preparer.plan(op)
    if supported_algos(preparer.collective(op)) == ("direct",):
        plan = preparer.plan(op, pxn=False)
        if plan.algo == "direct":
            return plan
    plan = preparer.plan(op)
    if plan.algo == "direct":
        plan = preparer.plan(op, pxn=False)   # NCCL's p2p PXN relays direct plans on any fabric
    return plan


def _plans_relay(preparer: Preparer) -> bool:
    """True when this fabric's plans carry PXN relays (rails that cannot reach each other, or ``pxn=True``).

    The reference pools a server's NICs over NVLink already (it has PXN's freedom), so it bounds the plan
    without relays: the same bound for every fabric built with the same servers, and no larger than the
    relayed plan's (a relay only adds an NVLink leg before the network leg)."""
    from sim.planning.pxn import network_rails

    mode = preparer.plan_options.get("pxn")
    if mode is False:
        return False
    return bool(mode) or len(set(network_rails(preparer.graph).values())) > 1


def run_reference(workload: Workload, ideal_s: np.ndarray, timing: str) -> IdealLog:
    """The rank programs with every op lasting its ``ideal_s`` (:func:`sim.analytical.tier.schedule`).

    Raises
    ------
    SimError
        When the programs deadlock.
    """
    from sim.analytical.tier import schedule
    from sim.reference import issue_times

    start, end = schedule(workload, ideal_s, timing)
    makespan = float(np.nanmax(end)) if len(end) and not np.all(np.isnan(end)) else 0.0
    return IdealLog(op_start_s=start, op_end_s=end, step_issue_s=issue_times(workload, end, timing),
                    makespan_s=makespan, ideal_s=np.asarray(ideal_s, np.float64))


def _with_time(callback):
    """``callback(fraction, t_s)`` when the user's progress callable takes two arguments, else
    ``callback(fraction)`` (the documented form); None stays None."""
    import inspect

    if callback is None:
        return None
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):   # a builtin without a signature: the documented one-argument form
        return lambda fraction, t_s: callback(fraction)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) >= 2:
        return callback
    return lambda fraction, t_s: callback(fraction)


def simulate(trace_df: pd.DataFrame, topology, algo: str = "auto", routing: str = "ecmp", seed: int = 0,
             *, options: SimOptions | None = None, **kwargs: Any):
    """Replay a trace over a topology (SPEC §9).

    Parameters
    ----------
    trace_df : pandas.DataFrame
        A §3 trace (``traces.read_trace``); metadata in ``attrs["collsim"]``.
    topology : networkx.Graph or str
        A §4 graph, a preset name or a YAML path (built with ``num_gpus = world_size`` and
        ``gpus_per_server = gpus_per_node``; ``topology_params`` adds builder parameters).
    algo : {"auto", "ring", "tree", "direct"}
        Collective algorithm (``auto`` chooses per op and size as NCCL does).
    routing : {"ecmp", "spray", "single", "dmodk"}
    seed : int
        Seeds routing and the choice of failed / degraded links; the same seed gives the same results.
    options : sim.options.SimOptions, optional
        Every option in one checked value (then ``algo``, ``routing``, ``seed`` come from it).
    **kwargs
        The compatibility form: the fields of :class:`sim.options.SimOptions` as keywords (``timing``,
        ``completion_quantile`` or ``quantile``, ``bin_s``, ``channels``, ``memoize``, ``ideal``,
        ``fail_links``, ``degrade_links``, ``stragglers``, ``progress`` (``progress(fraction)``, or
        ``progress(fraction, t_s)`` with the simulated time reached), ``trace_name``,
        ``topology_params``, ``processes`` (simpy processes ``fn(env, net)`` started with the replay, see
        ``docs/simulator.md``; they switch memoisation off)), converted to one ``SimOptions``. ``fail_links`` and
        ``degrade_links`` items may carry a time window (``N@T1-T2``, ``N@T1-T2/PERIOD``,
        ``N:F@T1-T2``; :mod:`sim.anomalies`). ``model`` ("flow", default; "analytical": per-collective
        bounds of the same plans, no event loop; "both": the flow Result plus ``tiers``, see
        :mod:`sim.analytical`).

    Returns
    -------
    sim.results.result.Result

    Raises
    ------
    SimError
        Bad options (:class:`sim.errors.OptionError`), a trace that does not fit the topology, a
        disconnected topology, a deadlocked trace.

    Examples
    --------
    >>> res = simulate(read_trace("ds_v3.parquet"), "fat_tree")  # doctest: +SKIP
    >>> res.summary["makespan_s"] >= res.summary["ideal_makespan_s"]  # doctest: +SKIP
    True
    """
    from sim import anomalies
    from sim.results.answer import comm_roles
    from sim.results.build import build_result
    from topologies.routing import Router

    opts = resolve_options(options, algo, routing, seed, kwargs)
    algo, routing, seed = opts.algo, opts.routing, opts.seed
    if opts.model != "flow":  # the analytical tier, or both tiers side by side
        from sim.analytical.dispatch import with_tiers
        from sim.analytical.tier import simulate_analytical

        analytical = simulate_analytical(trace_df, topology, options=opts)
        if opts.model == "analytical":
            return analytical
        return with_tiers(simulate(trace_df, topology, options=opts.replace(model="flow")), analytical)
    wall0 = time.perf_counter()
    setup = setup_replay(trace_df, topology, opts)
    df, meta, world, timing = setup.df, setup.meta, setup.world, setup.timing
    damaged, damage = setup.damaged, setup.damage
    ops, workload = setup.ops, setup.workload
    quantile = opts.completion_quantile
    bin_s = opts.bin_s
    if bin_s is not None and timing in ("trace", "gaps") and len(df):  # lasts at least the issue span
        check_bin_count(bin_s, float(df["t_start_s"].max() - df["t_start_s"].min()), "the trace")
    memoize = opts.memoize
    plan_options = opts.plan_options()
    labels = ops.frame

    def label(op: int) -> str:
        rec = labels.iloc[op]
        return f"{rec['op']} on comm {rec['comm']!r} seq {rec['seq']}"

    user_progress = _with_time(opts.progress)
    total = max(1, len(ops.frame))
    state = {"done": 0, "wall": 0.0}

    def progress(k: int, t_s: float) -> None:
        state["done"] += k
        now = time.perf_counter()
        # every op's end is cheap to count; the caller hears of it at most 20 times a second
        if user_progress is not None and (now - state["wall"] >= 0.05 or state["done"] == total):
            state["wall"] = now
            user_progress(state["done"] / total, t_s)

    router = Router(damaged, routing=routing, seed=seed)
    # time-varying anomalies and user processes change capacities in time: records made at nominal
    # capacity would not replay exactly, so they switch memoisation off
    processes = [*anomalies.window_processes(damage, router.links), *opts.processes]
    prep = Preparer(ops, router, algo, damaged, meta, plan_options)
    ideal_log, deadlock = None, None
    if opts.ideal:
        ideal_s = reference_durations(setup, prep)
        try:
            if timing == "gaps" and df["duration_s"].isna().any():
                # no recorded ends: a step's compute gap is its issue time minus when the step before ends
                # on the reference under recorded issue times, so the reference keeps the trace's timeline
                # and a slower fabric pushes it back
                traced = run_reference(workload, ideal_s, "trace")
                workload = replace(workload, step_gap_s=ideal_gaps(workload, traced.op_end_s))
            ideal_log = run_reference(workload, ideal_s, timing)
        except SimError as exc:   # a deadlocked trace: the engine's own message says more
            deadlock = exc
    from sim.results.flowfile import FlowParquet  # flows_out: every flow to Parquet as flows finish

    sinks = [FlowParquet(opts.flows_out, router.links)] if opts.flows_out else []
    log = run_engine(workload, prep, router, timing=timing, completion_quantile=quantile, bin_s=bin_s,
                     memoize=memoize and not processes, progress=progress, label=label, memo={},
                     processes=processes, sinks=sinks)
    if deadlock is not None:
        raise deadlock
    if user_progress is not None:
        user_progress(1.0, log.makespan_s)
    trace_name = opts.trace_name or meta.get("name") or meta.get("source") or "trace"
    return build_result(ops=ops, log=log, ideal=ideal_log, router=router, graph=damaged, damage=damage,
                        trace_name=str(trace_name), world_size=world, timing=timing, algo=algo,
                        routing=routing, seed=seed, wall0=wall0, completion_quantile=quantile,
                        roles=comm_roles(df, meta))
