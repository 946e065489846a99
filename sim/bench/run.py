"""A virtual nccl-tests: one collective swept over sizes, replayed by :func:`sim.simulate`.

:func:`bench_trace` writes the sweep as a SPEC §3 trace (one op per size on a world communicator, run
back to back), :func:`run_trace_sizes` replays any such trace and reads each size's time, and
:func:`run_bench` does both and returns the table ``*_perf`` prints (:data:`BENCH_COLUMNS`).

The algorithm and protocol follow ``NCCL_ALGO`` / ``NCCL_PROTO`` through the topology's graph attributes
``nccl_algo`` / ``nccl_proto``, which the planner's tuner reads (``sim.planning.collectives.graph_cost_model``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from sim.bench.sizes import NCCLTESTS_DTYPES, op_counts, redop_of
from sim.errors import SimError
from sim.planning import tuning
from sim.planning.collectives import graph_machine
from traces.schema import DTYPE_BYTES, new_metadata, normalize

__all__ = ["BENCH_COLUMNS", "average_busbw", "bench_table", "bench_trace", "run_bench", "run_trace_sizes"]

#: Columns of ``bench.parquet``: nccl-tests' own (time in us, algbw/busbw in GB/s = 1e9 B/s), then the
#: algorithm and protocol the tuner chose.
BENCH_COLUMNS = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "algo", "proto")
_INV_DTYPE = {v: k for k, v in NCCLTESTS_DTYPES.items() if k in
              ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
               "f8e4m3", "f8e5m2")}


def _dtype(name: str) -> str:
    key = str(name).strip()
    if key in NCCLTESTS_DTYPES:
        return NCCLTESTS_DTYPES[key]
    if key in DTYPE_BYTES:
        return key
    raise SimError(f"datatype {name!r} is not one of: {', '.join(sorted(_INV_DTYPE.values()))}")


def bench_trace(op: str, sizes: Sequence[int], nranks: int, *, dtype: str = "float", root: int = 0,
                gpus_per_node: int = 8) -> pd.DataFrame:
    """The sweep as a trace: for each size, one ``op`` on all ``nranks`` ranks, back to back.

    Sizes follow nccl-tests (``size`` column: the whole array for AllGather/ReduceScatter/AllToAll);
    a size below one element per rank is left out. ``sendrecv`` (op ``Send``) is nccl-tests' ring:
    every rank sends to the next and receives from the previous, in one group.

    Parameters
    ----------
    op : str
        SPEC §3 op (``sim.bench.sizes.trace_op`` of the binary name).
    sizes : sequence of int
        Bytes per row, as nccl-tests prints them.
    nranks : int
        Ranks (global ranks ``0 .. nranks-1``).
    dtype : str
        nccl-tests or SPEC dtype name.
    root : int
        Root of Broadcast / Reduce.
    gpus_per_node : int
        Written to the trace metadata.

    Returns
    -------
    pandas.DataFrame
        A SPEC §3 trace; ``attrs["collsim"]["bench_sizes"]`` lists the sizes kept.

    Examples
    --------
    >>> t = bench_trace("AllGather", [64, 1024], 4)
    >>> t["bytes"].tolist()[:4], t.attrs["collsim"]["bench_sizes"]
    ([16, 16, 16, 16], [64, 1024])
    """
    dt = _dtype(dtype)
    elem = DTYPE_BYTES[dt]
    if nranks < 1:
        raise SimError(f"ranks {nranks} must be >= 1")
    if op in ("Broadcast", "Reduce") and not 0 <= root < nranks:
        raise SimError(f"root {root} is not a rank of {nranks}")
    rows: list[dict[str, Any]] = []
    kept = []
    ranks = np.arange(nranks)
    for size in sizes:
        _, count = op_counts(op, int(size), elem, nranks)
        if count <= 0:
            continue
        seq = len(kept)
        kept.append(int(size))
        base = dict(comm="world", count=count, dtype=dt, bytes=count * elem, nranks=nranks,
                    t_start_s=math.nan, duration_s=math.nan, host="", device=-1, context=f"size={size}",
                    algo="", proto="")
        if op == "Send":
            for r in ranks:
                rows.append({**base, "rank": r, "seq": seq, "op": "Send", "root": (r + 1) % nranks, "group": seq})
                rows.append({**base, "rank": r, "seq": seq, "op": "Recv", "root": (r - 1) % nranks, "group": seq})
        else:
            r_root = root if op in ("Broadcast", "Reduce") else -1
            rows += [{**base, "rank": r, "seq": seq, "op": op, "root": r_root, "group": -1} for r in ranks]
    frame = pd.DataFrame(rows) if rows else None
    meta = new_metadata(nranks, {"world": list(range(nranks))}, "bench", gpus_per_node, bench_sizes=kept)
    if frame is None:
        from traces.schema import empty_trace

        frame = empty_trace()
    return normalize(frame, meta)


def run_trace_sizes(trace: pd.DataFrame, graph: nx.Graph, *, routing: str = "ecmp", seed: int = 0,
                    completion_quantile: float = 0.0) -> pd.Series:
    """Replay a bench-shaped trace (one op per ``seq`` on ``world``) and return each seq's time (s).

    The time of a size is from its first transfer's issue to its last arrival; for ``sendrecv`` it is
    its slowest pair's duration. nccl-tests starts every size after a barrier (``Barrier(args)`` before
    the timed loop, ``src/common.cu``) and a sendrecv ring's ranks wait on their neighbours only, so in
    the back-to-back replay ranks whose pairs are fast (NVLink) start the next size while a network
    pair of the previous one still runs: the first-issue-to-last-arrival span of a size would add the
    previous size's slowest pair (twice the time for equal sizes).
    """
    from sim import simulate

    res = simulate(trace, graph, routing=routing, seed=seed, ideal=False, memoize=False, timing="asap",
                   completion_quantile=completion_quantile)
    coll = res.collectives
    grouped = coll.groupby("seq")
    span = grouped["end_s"].max() - grouped["start_s"].min()
    p2p = coll["op"].isin(("Send", "Recv")).to_numpy()
    if p2p.any():
        pair = (coll["end_s"] - coll["start_s"])[p2p].groupby(coll["seq"][p2p]).max()
        span.loc[pair.index] = pair
    return span.sort_index()


def bench_table(op: str, sizes: Sequence[int], times_s: Sequence[float], nranks: int, graph: nx.Graph | None,
                *, dtype: str = "float", root: int = 0) -> pd.DataFrame:
    """The nccl-tests table of measured or simulated times (:data:`BENCH_COLUMNS`).

    ``algo`` / ``proto`` are the tuner's choice on ``graph`` (empty without one).

    Examples
    --------
    >>> t = bench_table("AllReduce", [1 << 20], [1e-4], 8, None)
    >>> round(float(t["busbw"][0]), 2)  # 1 MiB in 100 us: algbw 10.49, x 2*7/8
    18.35
    """
    dt = _dtype(dtype)
    elem = DTYPE_BYTES[dt]
    type_name = _INV_DTYPE.get(dt, dt)
    servers, model = (graph_machine(graph, range(nranks)) if graph is not None else (None, None))
    nnodes = len(np.unique(servers)) if servers is not None else 1
    rows = []
    for size, t in zip(sizes, times_s, strict=True):
        count, trace_count = op_counts(op, int(size), elem, nranks)
        nbytes = count * elem
        t = float(t)
        algbw = nbytes / t / 1e9 if t > 0 else math.nan
        factor = tuning.busbw_factor(op, nranks)
        algo = proto = ""
        if model is not None and nranks > 1:
            algo, proto = tuning.choose_algorithm(op, trace_count * elem, nranks, nnodes, "auto", None, model)
        rows.append(dict(size=nbytes, count=count, type=type_name, redop=redop_of(op),
                         root=root if op in ("Broadcast", "Reduce") else -1, time=t * 1e6, algbw=algbw,
                         busbw=algbw * factor, algo=algo, proto=proto))
    return pd.DataFrame(rows, columns=list(BENCH_COLUMNS))


def run_bench(op: str, topology: nx.Graph, sizes: Sequence[int], *, nranks: int | None = None,
              dtype: str = "float", root: int = 0, algo: str | None = None, proto: str | None = None,
              routing: str = "ecmp", seed: int = 0, completion_quantile: float = 0.0) -> pd.DataFrame:
    """Simulated ``*_perf`` table of ``op`` over ``topology``.

    Parameters
    ----------
    op : str
        SPEC §3 op (``Send`` for nccl-tests' sendrecv).
    topology : networkx.Graph
        A built SPEC §4 topology; its GPUs ``0 .. nranks-1`` take part.
    sizes : sequence of int
        nccl-tests sizes (bytes).
    nranks : int, optional
        Ranks (default: every GPU of the topology).
    algo, proto : str, optional
        ``NCCL_ALGO`` / ``NCCL_PROTO`` values (``ring``, ``tree``, ``^LL``, ...).

    Returns
    -------
    pandas.DataFrame
        :data:`BENCH_COLUMNS`, one row per size with at least one element per rank.

    Raises
    ------
    SimError
        Bad names or values.
    """
    graph = topology.copy()
    for key, value in (("nccl_algo", algo), ("nccl_proto", proto)):
        if value:
            tuning.parse_nccl_list(value, key[5:])  # a clear error before any work
            graph.graph[key] = value
    n = int(nranks or graph.graph.get("num_gpus") or 0)
    gpn = int(graph.graph.get("gpus_per_server") or 8)
    trace = bench_trace(op, sizes, n, dtype=dtype, root=root, gpus_per_node=gpn)
    kept = trace.attrs["collsim"]["bench_sizes"]
    if not kept:
        return pd.DataFrame(columns=list(BENCH_COLUMNS))
    times = run_trace_sizes(trace, graph, routing=routing, seed=seed, completion_quantile=completion_quantile)
    return bench_table(op, kept, times.to_numpy(), n, graph, dtype=dtype, root=root)


def average_busbw(table: pd.DataFrame) -> float:
    """nccl-tests' ``# Avg bus bandwidth``: the mean busbw over the rows (GB/s).

    Examples
    --------
    >>> average_busbw(pd.DataFrame({"busbw": [1.0, 3.0]}))
    2.0
    """
    vals = pd.to_numeric(table["busbw"], errors="coerce").dropna()
    return float(vals.mean()) if len(vals) else 0.0
