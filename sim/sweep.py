"""What-if sweeps (SPEC §8): one simulation per grid point, on Dask, into one table and comparison plots.

A grid is the cartesian product of topologies, ``--set`` values, algorithms and routings. Each point is
exactly ``simrun run --trace T --topo X --set ... --algo A --routing R --seed N``: the same seed for every
point, so a point's row depends on its parameters only, and the table is the same whether the points run
serially, on a local Dask cluster, or on many machines behind a scheduler. (``sim_wall_s`` is wall-clock
time and the only column that differs between runs.)

``--set`` keys that are :func:`sim.simulate` options (``completion_quantile``, ``fail_links``, ...: the
one list is :data:`sim.options.SET_KEYS`) go to the simulator; every other key is a topology builder
parameter (``k``, ``oversubscription``, ...).

The grid is :mod:`sim.sweep_grid`, one point's run :mod:`sim.sweep_point`, the Dask side
:mod:`sim.sweep_dask`, the plots :mod:`sim.sweep_plot`; this module checks a grid and runs it
(:func:`run_sweep`), and re-exports their public names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from sim.sweep_dask import connect, run_on_dask
from sim.sweep_grid import (
    GRID_SEPARATOR,
    POINT_COLUMNS,
    Point,
    expand,
    naming_point,
    point_options,
    simulator_keys,
    split_grid_values,
    split_params,
)
from sim.sweep_plot import PLOTTED, plot_sweep, varying_columns
from sim.sweep_point import build_topology, run_point, run_point_or_error, scalar_summary


def _tidy(table: pd.DataFrame) -> pd.DataFrame:
    """Give every object column one Arrow type: numbers stay numbers, mixed columns become strings."""
    for name in table.columns:
        col = table[name]
        if col.dtype != object:
            continue
        values = [v for v in col if v is not None]
        if all(isinstance(v, bool) for v in values):
            continue
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            table[name] = pd.to_numeric(col)
        elif not all(isinstance(v, str) for v in values):
            table[name] = col.map(lambda v: None if v is None else str(v))
    return table


def run_sweep(trace_df: pd.DataFrame, points: Sequence[Point], *, scheduler: str | None = None,
              workers: int = 2, serial: bool = False, client=None, trace_name: str = "",
              on_done: Callable[[int], None] | None = None, point_fn: Callable | None = None) -> pd.DataFrame:
    """Run every point and return the sweep table (one row per point, in grid order).

    Options and topologies are checked here first, so a bad key, value or name fails before any work is sent.

    Parameters
    ----------
    trace_df : pandas.DataFrame
        A §3 trace (sent once to every worker).
    points : sequence of Point
        From :func:`expand`.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``); its workers need collsim installed.
    workers : int
        Worker processes of the local cluster used when no scheduler is given.
    serial : bool
        Run in this process, no Dask (the reference a distributed sweep must equal).
    client : distributed.Client, optional
        Use this Dask client (left open) instead of a new cluster or ``scheduler``.
    trace_name : str
        The ``trace`` of each summary.
    on_done : callable, optional
        Called with 1 each time a point finishes (a progress bar).
    point_fn : callable, optional
        ``point_fn(trace_df, point, trace_name) -> row`` instead of :func:`run_point` (a picklable
        module-level function or partial; ``simrun compare`` also writes each point's folder).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    topologies.TopologyError, sim.errors.SimError
        Bad topology or grid key (before running), or a point that cannot be simulated (naming it).
    """
    check_points(trace_df, points)
    done = on_done or (lambda _n: None)
    fn = point_fn or run_point
    rows: list[dict[str, Any] | None] = [None] * len(points)
    if serial:
        for p in points:
            rows[p.index] = naming_point(p, lambda p=p: fn(trace_df, p, trace_name))
            done(1)
    else:
        rows = run_on_dask(trace_df, points, client, scheduler, workers, trace_name, done, fn)
    return _tidy(pd.DataFrame(rows))


def check_points(trace_df: pd.DataFrame, points: Sequence[Point]) -> None:
    """Check every point's simulator options, then build each distinct topology once: a bad option, name,
    key or value fails before any work is sent.

    Raises
    ------
    sim.errors.OptionError, topologies.TopologyError, sim.errors.SimError
        Naming the point.
    """
    for p in points:
        naming_point(p, lambda p=p: point_options(p))
    check_topologies(trace_df, points)


def check_topologies(trace_df: pd.DataFrame, points: Sequence[Point]) -> None:
    """Build each distinct topology of the grid once, so a bad name, key or value fails before any work.

    Raises
    ------
    topologies.TopologyError, sim.errors.SimError
        As :func:`build_topology`, naming the point.
    """
    meta = trace_df.attrs.get("collsim") or {}
    seen: set[tuple] = set()
    for p in points:
        topo_params, _ = split_params(p.params)
        key = (p.topo, tuple(sorted((k, repr(v)) for k, v in topo_params.items())))
        if key not in seen:
            seen.add(key)
            naming_point(p, lambda p=p, topo_params=topo_params: build_topology(p.topo, meta, topo_params))


__all__ = ["GRID_SEPARATOR", "PLOTTED", "POINT_COLUMNS", "Point", "build_topology", "check_points",
           "check_topologies", "connect", "expand", "plot_sweep", "point_options", "run_point",
           "run_point_or_error", "run_sweep", "scalar_summary", "simulator_keys", "split_grid_values",
           "split_params", "varying_columns"]
