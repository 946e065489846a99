"""What-if sweeps (SPEC §8): one simulation per grid point, on Dask, into one table and comparison plots.

A grid is the cartesian product of topologies, ``--set`` values, algorithms and routings. Each point is
exactly ``simrun run --trace T --topo X --set ... --algo A --routing R --seed N``: the same seed for every
point, so a point's row depends on its parameters only, and the table is the same whether the points run
serially, on a local Dask cluster, or on many machines behind a scheduler. (``sim_wall_s`` is wall-clock
time and the only column that differs between runs.)

``--set`` keys that are :func:`sim.simulate` options (``completion_quantile``, ``fail_links``, ...: the
one list is :data:`sim.options.SET_KEYS`) go to the simulator; every other key is a topology builder
parameter (``k``, ``oversubscription``, ...).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sim.errors import CollsimError, SimError
from sim.options import ALGOS, ROUTINGS, SET_KEYS, SimOptions, check_seed, set_options
from traces.atomic import save_figure

#: Separates the values of one grid key inside ``--set`` (``oversubscription=1|2|4``).
GRID_SEPARATOR = "|"
#: Columns of a row that describe the point (the rest are the §6 summary figures).
POINT_COLUMNS = ("point", "topo", "algo", "routing", "seed")
#: Summary figures of the comparison plots: column, axis label, transform to the plotted value.
PLOTTED = (("makespan_s", "makespan (ms)", lambda v: v * 1e3),
           ("makespan_vs_ideal", "makespan over ideal (%)", lambda v: (v - 1.0) * 100.0),
           ("slowdown_p99", "collective slowdown p99 (x ideal)", lambda v: v))


@dataclass(frozen=True)
class Point:
    """One grid point.

    Attributes
    ----------
    index : int
        Position in the grid (row order of ``sweep.parquet``).
    topo : str
        Topology preset name or YAML path, as given on the command line.
    params : tuple of (str, value)
        The ``--set`` values of this point, in command-line order.
    algo, routing : str
    seed : int
    """

    index: int
    topo: str
    params: tuple[tuple[str, Any], ...]
    algo: str
    routing: str
    seed: int

    def row(self) -> dict[str, Any]:
        """The point's columns: ``point, topo, <--set keys>, algo, routing, seed``."""
        return {"point": self.index, "topo": self.topo, **dict(self.params), "algo": self.algo,
                "routing": self.routing, "seed": self.seed}

    def label(self) -> str:
        """``fat_tree oversubscription=2 algo=ring routing=ecmp``."""
        parts = [self.topo, *(f"{k}={v}" for k, v in self.params), f"algo={self.algo}", f"routing={self.routing}"]
        return " ".join(parts)


def simulator_keys() -> frozenset[str]:
    """``--set`` keys that go to :func:`sim.simulate` as options (the rest go to the topology builder)."""
    return SET_KEYS


def split_grid_values(raw: Any, parse: Callable[[str], Any]) -> list[Any]:
    """Split one ``--set`` value on ``|`` into grid values, each parsed by ``parse``.

    Examples
    --------
    >>> split_grid_values("1|2|4", int)
    [1, 2, 4]
    >>> split_grid_values(8, int)
    [8]
    """
    if not isinstance(raw, str) or GRID_SEPARATOR not in raw:
        return [raw]
    parts = [part.strip() for part in raw.split(GRID_SEPARATOR)]
    if any(not part for part in parts):
        raise SimError(f"grid value {raw!r}: empty value between '{GRID_SEPARATOR}' separators")
    return [parse(part) for part in parts]


def expand(topos: Sequence[str], grid: Mapping[str, Sequence[Any]], algos: Sequence[str] = ("auto",),
           routings: Sequence[str] = ("ecmp",), seed: int = 0) -> list[Point]:
    """The cartesian product of the grid, topology outermost, then ``grid`` keys in order, algo, routing.

    Raises
    ------
    SimError
        When a dimension is empty, or an algo or routing is unknown.

    Examples
    --------
    >>> pts = expand(["fat_tree", "leaf_spine"], {"oversubscription": [1, 2]}, ["ring"])
    >>> [p.label() for p in pts][:2]
    ['fat_tree oversubscription=1 algo=ring routing=ecmp', 'fat_tree oversubscription=2 algo=ring routing=ecmp']
    >>> len(pts)
    4
    """
    dims = {"--topo": list(topos), **{f"--set {k}": list(v) for k, v in grid.items()}, "--algo": list(algos),
            "--routing": list(routings)}
    for name, values in dims.items():
        if not values:
            raise SimError(f"{name}: no values to sweep over")
    for name, values, known in (("--algo", algos, ALGOS), ("--routing", routings, ROUTINGS)):
        bad = [v for v in values if v not in known]
        if bad:
            raise SimError(f"{name} {bad[0]!r} is not one of: {', '.join(known)}")
    seed = check_seed(seed, "--seed")
    keys = list(grid)
    points = []
    for i, combo in enumerate(itertools.product(topos, *(grid[k] for k in keys), algos, routings)):
        topo, *values, algo, routing = combo
        points.append(Point(i, str(topo), tuple(zip(keys, values, strict=True)), str(algo), str(routing), int(seed)))
    return points


def split_params(params: Iterable[tuple[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(topology_params, simulate_options)`` of a point's ``--set`` values (options under their own names).

    Raises
    ------
    sim.errors.OptionError
        For an option given under two spellings, or one ``--set`` cannot give (``seed``).
    """
    options, _, topo = set_options(dict(params))
    return topo, options


def point_options(point: Point, trace_name: str = "") -> SimOptions:
    """The checked simulator options of one point (what :func:`run_point` passes to ``simulate``).

    Raises
    ------
    sim.errors.OptionError
        For a bad value (checked before any point runs, by :func:`check_points`).
    """
    topo_params, options = split_params(point.params)
    return SimOptions.from_mapping(options, algo=point.algo, routing=point.routing, seed=point.seed,
                                   trace_name=trace_name or None, topology_params=topo_params)


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
    ``--quantile 0.01``).
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


def _row_or_raise(value: dict[str, Any] | CollsimError) -> dict[str, Any]:
    if isinstance(value, CollsimError):
        raise value
    return value


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


def _local_client(workers: int):
    import logging

    from distributed import Client, LocalCluster

    # no dashboard; the scheduler's HTTP server (it always has one) on a free port, so a cluster already
    # on the default port 8787 neither clashes nor prints a warning
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, silence_logs=logging.ERROR)
    return Client(cluster), cluster


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
            rows[p.index] = _named(p, lambda p=p: fn(trace_df, p, trace_name))
            done(1)
    else:
        rows = _run_dask(trace_df, points, client, scheduler, workers, trace_name, done, fn)
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
        _named(p, lambda p=p: point_options(p))
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
            _named(p, lambda p=p, topo_params=topo_params: build_topology(p.topo, meta, topo_params))


def _named(point: Point, call: Callable[[], Any]) -> Any:
    """Run ``call``; a bad-input error names the point."""
    try:
        return call()
    except ValueError as exc:
        raise type(exc)(f"point {point.index} ({point.label()}): {exc}") from None


def connect(scheduler: str):
    """A Dask client of the scheduler at ``scheduler`` (``tcp://host:8786``).

    Raises
    ------
    SimError
        In one line, when the address is malformed or nothing answers there within 10 s.
    """
    from distributed import Client

    try:
        return Client(scheduler, timeout="10s")
    except (ValueError, TypeError, OSError, TimeoutError) as exc:  # bad scheme or address, refused, timed out
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise SimError(f"--scheduler {scheduler!r}: cannot connect to a Dask scheduler there ({reason})") from None


def _run_dask(trace_df, points, client, scheduler, workers, trace_name, done, fn=None) -> list[dict[str, Any]]:
    from distributed import as_completed

    own = client is None
    cluster = None
    if client is None and scheduler:
        client = connect(scheduler)
    elif client is None:
        client, cluster = _local_client(workers)
    try:
        trace_f = client.scatter(trace_df, broadcast=True)  # sent once, not once per point
        futures = {client.submit(run_point_or_error, trace_f, p, trace_name, fn, pure=False): p.index
                   for p in points}
        rows: list[dict[str, Any] | None] = [None] * len(points)
        for future in as_completed(futures):
            index = futures[future]
            rows[index] = _named(points[index], lambda future=future: _row_or_raise(future.result()))
            done(1)
        return rows
    finally:
        if own:
            client.close()
        if cluster is not None:
            cluster.close()


def varying_columns(table: pd.DataFrame) -> list[str]:
    """Point columns (other than ``point``, ``topo``, ``seed``) that take more than one value."""
    columns = list(table.columns)
    params = columns[columns.index("topo") + 1:columns.index("algo")] + ["algo", "routing"]
    return [c for c in params if c in table.columns and table[c].nunique(dropna=False) > 1]


def plot_sweep(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Comparison plots: makespan, makespan / ideal and slowdown p99 per topology (bars), one colour per
    combination of the other swept parameters. Lower is better: the lowest bar wins."""
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns
    from matplotlib.figure import Figure

    shown = [(c, label, f) for c, label, f in PLOTTED if c in table.columns and table[c].notna().any()]
    sns.set_theme(style="whitegrid", context="notebook")
    fig = Figure(figsize=(4.2 * max(len(shown), 1) + 1.0, 5.0), layout="constrained")
    axes = fig.subplots(1, max(len(shown), 1), squeeze=False).ravel()
    vary = varying_columns(table)
    data = table.copy()
    data["topo"] = data["topo"].map(lambda t: Path(str(t)).stem)  # a YAML path's name, not its folders
    hue = None
    if vary:
        hue = "setting"
        data[hue] = data[vary].astype(str).apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
    for ax, (column, label, transform) in zip(axes, shown, strict=False):
        data["_y"] = transform(data[column].astype(float))
        sns.barplot(data, x="topo", y="_y", hue=hue, ax=ax, errorbar=None, legend=False)
        for bars in ax.containers:
            ax.bar_label(bars, fmt="%.3g", fontsize=8)
        if column == "slowdown_p99":
            ax.set_ylim(bottom=1.0)  # 1 = as fast as on the ideal fabric
        ax.set(xlabel="", ylabel=label)
        ax.tick_params(axis="x", labelrotation=20)
    if hue is not None:
        import matplotlib.patches as mpatches

        palette = sns.color_palette(n_colors=data[hue].nunique())
        handles = [mpatches.Patch(color=c, label=name) for c, name in zip(palette, pd.unique(data[hue]), strict=True)]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), frameon=False)
    fig.suptitle(title or "which topology wins (lower is better)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, dpi=120, format="png")  # atomic: temp file + rename
    return out


__all__ = [
    "GRID_SEPARATOR",
    "PLOTTED",
    "POINT_COLUMNS",
    "Point",
    "build_topology",
    "check_points",
    "check_topologies",
    "connect",
    "expand",
    "plot_sweep",
    "point_options",
    "run_point",
    "run_point_or_error",
    "run_sweep",
    "scalar_summary",
    "simulator_keys",
    "split_grid_values",
    "split_params",
    "varying_columns",
]
