"""What both tiers (flow and analytical) build from a trace before they run it: the checked trace, the
fabric sized to it, its anomalies, the timing mode, the op instances and the rank programs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import pandas as pd

from sim.engine.workload import OpTable, Workload, build_ops, build_workload
from sim.fabric import check_fit, load_topology
from sim.options import SimOptions
from sim.prepare import op_classes, op_keys

__all__ = ["ReplaySetup", "resolve_timing", "setup_replay"]


@dataclass(frozen=True)
class ReplaySetup:
    """A trace ready to replay (see :func:`setup_replay`)."""

    df: pd.DataFrame
    meta: dict[str, Any]
    world: int
    graph: nx.Graph        # the fabric as built
    damaged: nx.Graph      # with failed links removed and degraded capacities
    damage: Any            # sim.anomalies.Damage
    timing: str            # resolved: gaps, trace or asap
    ops: OpTable
    keys: list
    workload: Workload


def resolve_timing(timing: str, df: pd.DataFrame) -> str:
    """``auto`` -> ``gaps`` when every issue time is known (what-if replay: compute gaps kept, the network
    moves what follows), else ``asap``; other modes as given.

    Examples
    --------
    >>> resolve_timing("auto", pd.DataFrame({"t_start_s": [0.0, 1.0]})), resolve_timing("trace", pd.DataFrame())
    ('gaps', 'trace')
    """
    if timing != "auto":
        return timing
    return "gaps" if len(df) and not df["t_start_s"].isna().any() else "asap"


def setup_replay(trace_df: pd.DataFrame, topology, opts: SimOptions) -> ReplaySetup:
    """Validate the trace, build and check the fabric, apply the anomalies, resolve the timing, and turn
    the rows into op instances and rank programs.

    Raises
    ------
    traces.errors.TraceError, topologies.errors.TopologyError, sim.errors.SimError
        A bad trace, fabric or anomaly.
    """
    from sim import anomalies
    from traces.schema import validate

    df = validate(trace_df)
    meta = dict(df.attrs.get("collsim") or {})
    world = int(meta.get("world_size") or (int(df["rank"].max()) + 1 if len(df) else 0))
    gpn = int(meta.get("gpus_per_node") or 8)
    graph = load_topology(topology, world, gpn, opts.topology_params)
    check_fit(graph, world)
    damaged, damage = anomalies.apply(graph, fail_links=opts.fail_links, degrade_links=opts.degrade_links,
                                      seed=opts.seed)
    if damage.failed:
        anomalies.check_reachable(damaged, world, damage)
    ops, row_op = build_ops(df, meta.get("comms") or {})
    keys = op_keys(ops, opts.algo)
    workload = build_workload(df, row_op, len(ops.frame), keys, world,
                              {r: d * 1e-6 for r, d in opts.stragglers.items()},
                              op_class=op_classes(ops, opts.algo, meta))
    return ReplaySetup(df=df, meta=meta, world=world, graph=graph, damaged=damaged, damage=damage,
                       timing=resolve_timing(opts.timing, df), ops=ops, keys=keys, workload=workload)
