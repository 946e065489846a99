"""``simulate(trace, topology, ...) -> Result``: a trace replayed as NCCL-style flows over a topology.

The trace becomes a :class:`sim.engine.workload.Workload` (rank programs over op instances: one per
``(comm, seq)`` collective, one per matched Send/Recv pair); each op's transfers come from
:func:`sim.planning.collectives.plan_collective` and their routes from :class:`topologies.routing.Router`
(:mod:`sim.prepare`); the :class:`sim.engine.engine.Engine` runs them over a
:class:`sim.network.flow_network.FlowNetwork`. The same workload is run a
second time over :func:`topologies.nonblocking` of the graph (the ideal reference: same access links, one
non-blocking crossbar) for ``ideal_makespan_s`` and each collective's ``ideal_s``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import networkx as nx
import pandas as pd

from sim.engine.workload import OpTable, Workload, build_ops, build_workload, ideal_gaps
from sim.fabric import check_fit, load_topology
from sim.options import OPTION_NAMES, SimOptions, check_bin_count, resolve_options
from sim.prepare import Preparer, nvlink_records, op_keys, plan_op, plan_p2p, run_engine
from sim.setup import setup_replay

__all__ = ["OPTIONS", "OpTable", "Preparer", "Workload", "build_ops", "build_workload", "check_fit",
           "load_topology", "nvlink_records", "op_keys", "plan_op", "plan_p2p", "resolve_options", "run_engine",
           "run_ideal", "simulate"]

#: Keyword options of :func:`simulate` besides its named parameters (the fields of :class:`SimOptions`).
OPTIONS = tuple(name for name in OPTION_NAMES if name not in ("algo", "routing", "seed"))


def run_ideal(graph: nx.Graph, preparer: Preparer, opts: SimOptions, workload: Workload, *, timing: str,
              progress=None, label=None, memo: dict | None = None):
    """The replay over :func:`topologies.nonblocking` of ``graph`` (the ideal reference), sharing the
    plans of ``preparer`` (they depend on servers and per-GPU link rates, which the ideal fabric keeps)."""
    import topologies
    from topologies.routing import Router

    ideal_graph = topologies.nonblocking(graph)
    irouter = Router(ideal_graph, routing=opts.routing, seed=opts.seed)
    iprep = Preparer(preparer.ops, irouter, opts.algo, ideal_graph, preparer.meta, opts.plan_options(),
                     plans=preparer.plans)
    return run_engine(workload, iprep, irouter, timing=timing, completion_quantile=opts.completion_quantile,
                      bin_s=None, memoize=opts.memoize, progress=progress, label=label, link_stats=False,
                      memo=memo)


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
    routing : {"ecmp", "spray", "single"}
    seed : int
        Seeds routing and the choice of failed / degraded links; the same seed gives the same results.
    options : sim.options.SimOptions, optional
        Every option in one checked value (then ``algo``, ``routing``, ``seed`` come from it).
    **kwargs
        The compatibility form: the fields of :class:`sim.options.SimOptions` as keywords (``timing``,
        ``completion_quantile`` or ``quantile``, ``bin_s``, ``channels``, ``memoize``, ``ideal``,
        ``fail_links``, ``degrade_links``, ``stragglers``, ``progress``, ``trace_name``,
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
    graph, damaged, damage = setup.graph, setup.damaged, setup.damage
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

    user_progress = opts.progress
    runs = 2 if opts.ideal else 1
    total = max(1, runs * len(ops.frame))
    state = {"done": 0}

    def progress(k: int) -> None:
        state["done"] += k
        if user_progress is not None and (state["done"] % 64 == 0 or state["done"] == total):
            user_progress(state["done"] / total)

    router = Router(damaged, routing=routing, seed=seed)
    # time-varying anomalies and user processes change capacities in time: records made at nominal
    # capacity would not replay exactly, so they switch memoisation off (the ideal run keeps it)
    processes = [*anomalies.window_processes(damage, router.links), *opts.processes]
    prep = Preparer(ops, router, algo, damaged, meta, plan_options, plan_uses=2 if opts.ideal else 1)
    records: dict = {}
    ideal_log = None
    if timing == "gaps" and opts.ideal and df["duration_s"].isna().any():
        # no recorded ends: a step's compute gap is its issue time minus when the step before ends on the
        # ideal fabric, so the ideal replay keeps the trace's timeline and a slower fabric pushes it back
        ideal_log = run_ideal(graph, prep, opts, workload, timing="trace", progress=progress, label=label,
                              memo={})
        workload = replace(workload, step_gap_s=ideal_gaps(workload, ideal_log.op_end_s))
    from sim.results.flowfile import FlowParquet   # flows_out: every flow to Parquet as flows finish

    sinks = [FlowParquet(opts.flows_out, router.links)] if opts.flows_out else []
    log = run_engine(workload, prep, router, timing=timing, completion_quantile=quantile, bin_s=bin_s,
                     memoize=memoize and not processes, progress=progress, label=label, memo=records,
                     processes=processes, sinks=sinks)
    if opts.ideal and ideal_log is None:
        ideal_log = run_ideal(graph, prep, opts, workload, timing=timing, progress=progress, label=label,
                              memo=nvlink_records(records, prep, router))
    if user_progress is not None:
        user_progress(1.0)
    trace_name = opts.trace_name or meta.get("name") or meta.get("source") or "trace"
    return build_result(ops=ops, log=log, ideal=ideal_log, router=router, graph=damaged, damage=damage,
                        trace_name=str(trace_name), world_size=world, timing=timing, algo=algo,
                        routing=routing, seed=seed, wall0=wall0, completion_quantile=quantile,
                        roles=comm_roles(df, meta))
