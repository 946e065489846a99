"""One sweep point's run: its topology built as ``simrun run`` builds it, the simulation, and its row (the
point's columns and the scalar summary figures). These run on the Dask workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from sim.errors import CollsimError
from sim.sweep_grid import Point, point_options


def build_topology(topo: str, trace_meta: Mapping[str, Any], params: Mapping[str, Any]):
    """Build a point's topology as ``simrun run`` does: presets sized to the trace, YAML files as written.

    Raises
    ------
    topologies.TopologyError
        Unknown preset, bad or unknown parameter.
    SimError
        The trace does not fit the topology.
    """
    from sim.fabric import check_fit, load_topology

    world = int(trace_meta.get("world_size") or 0)
    graph = load_topology(topo, world, int(trace_meta.get("gpus_per_node") or 8), params)
    check_fit(graph, world)
    return graph


def scalar_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar figures of a §6 summary (lists and dicts such as ``hot_links`` are left out), with
    ``makespan_vs_ideal`` = ``makespan_s / ideal_makespan_s`` when the summary lacks it.

    Examples
    --------
    >>> scalar_summary({"makespan_s": 3.0, "ideal_makespan_s": 2.0, "hot_links": [1]})
    {'makespan_s': 3.0, 'ideal_makespan_s': 2.0, 'makespan_vs_ideal': 1.5}
    """
    out = {k: v for k, v in summary.items() if v is None or isinstance(v, bool | int | float | str)}
    span, ideal = out.get("makespan_s"), out.get("ideal_makespan_s")
    if "makespan_vs_ideal" not in out and isinstance(span, int | float) and isinstance(ideal, int | float):
        out["makespan_vs_ideal"] = span / ideal if ideal > 0 else math.nan
    return out


def run_point(trace_df: pd.DataFrame, point: Point, trace_name: str = "") -> dict[str, Any]:
    """Simulate one point and return its row (point columns + scalar summary). Runs on a Dask worker.

    The call is the one ``simrun run`` makes (the topology by name, sized to the trace by the simulator),
    except that completions are solved exactly unless the grid sets ``quantile`` (``simrun run`` defaults to
    ``--quantile 0.02``, :data:`sim.option_values.DEFAULT_QUANTILE`).
    """
    from sim import simulate

    result = simulate(trace_df, point.topo, options=point_options(point, trace_name))
    row = point.row()
    for key, value in scalar_summary(result.summary).items():
        row.setdefault(key, value)  # the point's own columns win over a summary echoing them
    return row


def run_point_or_error(trace_df: pd.DataFrame, point: Point, trace_name: str = "",
                       fn: Callable | None = None) -> dict[str, Any] | CollsimError:
    """``fn`` (default :func:`run_point`), with a bad-input error returned instead of raised.

    On a Dask worker a raised error is also logged by the worker (several lines of log beside the one
    error line); returned, it reaches the client as a value and is raised there once. Internal failures
    (any other exception) still raise, with the worker's traceback.
    """
    try:
        return (fn or run_point)(trace_df, point, trace_name)
    except CollsimError as exc:
        return exc


__all__ = ["build_topology", "run_point", "run_point_or_error", "scalar_summary"]
