"""Building a :class:`sim.results.result.Result` from the engine's logs (the results layer's job)."""

from __future__ import annotations

import time

import networkx as nx

from sim.engine.engine import EngineLog
from sim.reference import IdealLog
from sim.results import metrics
from sim.results.answer import answer_figures
from sim.results.incast import incast_events
from sim.results.result import Result

__all__ = ["build_result"]


def build_result(*, ops, log: EngineLog, ideal: IdealLog | None, router, graph: nx.Graph, damage,
                 trace_name: str, world_size: int, timing: str, algo: str, routing: str, seed: int,
                 wall0: float, completion_quantile: float = 0.0, roles: dict | None = None) -> Result:
    """Assemble the tables and the summary of a replay (used by :func:`sim.simulate`).

    Parameters
    ----------
    ops : sim.engine.workload.OpTable
    log, ideal : EngineLog
        The replay and its reference (:class:`sim.reference.IdealLog`; None: not computed).
    router : topologies.routing.Router
        Its link table names the links.
    graph : networkx.Graph
        The (damaged) topology.
    damage : sim.anomalies.Damage
    trace_name, world_size, timing, algo, routing, seed, completion_quantile
        Echoed in the summary.
    roles : dict, optional
        Communicator -> role (TP / EP / DP / PP ...) for the per-role breakdown
        (:func:`sim.results.answer.comm_roles`).
    wall0 : float
        ``time.perf_counter()`` at the start of the replay (for ``sim_wall_s``).

    Returns
    -------
    Result
    """
    coll = metrics.collectives_table(ops, log, ideal)
    links = metrics.links_table(router.links, log.link_stats, log.makespan_s)
    series = metrics.link_timeseries(router.links, log.link_stats, log.makespan_s)
    # streamed by the engine as flows finished (sim.results.incast_stream), else swept over the whole log
    incast = log.incast if log.incast is not None else incast_events(log, router.links, graph)
    imbalance = metrics.ecmp_imbalance(links, graph)
    extra = {
        "timing": timing, "algo": algo, "routing": routing, "seed": int(seed),
        "completion_quantile": float(completion_quantile),
        "skipped": dict(ops.skipped),
        "memo_records": int(log.memo_records), "memo_hits": int(log.memo_hits),
        "network_events": int(log.network_events),
        "bin_s": float(log.link_stats.binned(log.makespan_s)[0]),
        **damage.describe(),
    }
    summary = metrics.summary(trace=trace_name, topology=str(graph.graph.get("name", "topology")),
                              world_size=world_size, coll=coll, links=links, incast=incast, log=log,
                              ideal_log=ideal, imbalance=imbalance, n_flows=log.n_flows, extra=extra)
    summary.update(answer_figures(coll=coll, links=links, log=log, ideal_log=ideal, graph=graph,
                                  link_names=router.links, roles=roles, world_size=world_size, timing=timing))
    summary["sim_wall_s"] = time.perf_counter() - wall0
    return Result(summary=summary, collectives=coll, links=links, link_timeseries=series, incast=incast,
                  log=log, link_names=router.links, graph=graph)
