"""A sweep's points on Dask: a client of a running scheduler (:func:`connect`) or of a local cluster, every
point submitted with the trace scattered once, rows gathered in grid order (:func:`run_on_dask`).
"""

from __future__ import annotations

from typing import Any

from sim.errors import CollsimError, SimError
from sim.sweep_grid import naming_point
from sim.sweep_point import run_point_or_error


def local_client(workers: int):
    """A client of a new local cluster of ``workers`` single-threaded worker processes, and the cluster
    (both for the caller to close)."""
    import logging

    from distributed import Client, LocalCluster

    # no dashboard; the scheduler's HTTP server (it always has one) on a free port, so a cluster already
    # on the default port 8787 neither clashes nor prints a warning
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, silence_logs=logging.ERROR)
    return Client(cluster), cluster


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


def row_or_raise(value: dict[str, Any] | CollsimError) -> dict[str, Any]:
    """A point's row, or the bad-input error :func:`sim.sweep_point.run_point_or_error` returned, raised."""
    if isinstance(value, CollsimError):
        raise value
    return value


def run_on_dask(trace_df, points, client, scheduler, workers, trace_name, done, fn=None) -> list[dict[str, Any]]:
    """Every point on Dask (``client``; else a client of ``scheduler``; else a local cluster of ``workers``),
    the trace scattered once; ``done(1)`` per finished point. Returns the rows in grid order.

    Raises
    ------
    sim.errors.SimError, topologies.TopologyError
        The first point's bad-input error, naming the point; a client made here is closed either way.
    """
    from distributed import as_completed

    own = client is None
    cluster = None
    if client is None and scheduler:
        client = connect(scheduler)
    elif client is None:
        client, cluster = local_client(workers)
    try:
        trace_f = client.scatter(trace_df, broadcast=True)  # sent once, not once per point
        futures = {client.submit(run_point_or_error, trace_f, p, trace_name, fn, pure=False): p.index
                   for p in points}
        rows: list[dict[str, Any] | None] = [None] * len(points)
        for future in as_completed(futures):
            index = futures[future]
            rows[index] = naming_point(points[index], lambda future=future: row_or_raise(future.result()))
            done(1)
        return rows
    finally:
        if own:
            client.close()
        if cluster is not None:
            cluster.close()


__all__ = ["connect", "local_client", "row_or_raise", "run_on_dask"]
