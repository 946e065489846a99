"""What the contract tests (SPEC.md, one file per section) share: the figures of the hand-made trace, the
columns SPEC names, nccl-tests' factors, and ways to run ``simrun``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import topologies
from sim.cli import main as simrun_main
from traces.schema import new_metadata

ROOT = Path(__file__).resolve().parents[2]
WORLD = 8
GPUS_PER_NODE = 4
# SPEC §3 dtype sizes (from the dtype names themselves, not from the code under test).
DTYPE_SIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "fp16": 2, "fp32": 4,
              "fp64": 8, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
TRACE_COLUMNS = {"rank": "int32", "comm": "string", "seq": "int64", "op": "string", "count": "int64",
                 "dtype": "string", "bytes": "int64", "root": "int32", "nranks": "int32",
                 "t_start_s": "float64", "duration_s": "float64", "host": "string", "device": "int32",
                 "context": "string", "algo": "string", "proto": "string"}
OPS = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Send", "Recv", "Gather",
       "Scatter"}
SUMMARY_KEYS = ["trace", "topology", "world_size", "collectives", "flows", "makespan_s", "ideal_makespan_s",
                "bytes_on_wire", "max_link_utilization", "mean_link_utilization", "hot_links", "incast_events",
                "max_incast_fanin", "slowdown_p50", "slowdown_p99", "sim_wall_s"]
COLLECTIVE_COLUMNS = ["comm", "seq", "op", "bytes", "nranks", "algo", "start_s", "end_s", "duration_s",
                      "ideal_s", "slowdown", "algbw_gbps", "busbw_gbps"]
LINK_COLUMNS = ["src", "dst", "kind", "capacity_gbps", "bytes", "mean_utilization", "peak_utilization",
                "busy_above_90_s"]
TIMESERIES_COLUMNS = ["src", "dst", "t_s", "utilization"]
INCAST_COLUMNS = ["port", "t_start_s", "t_end_s", "fanin", "demand_gbps", "capacity_gbps", "est_buffer_bytes"]
# nccl-tests doc/PERFORMANCE.md: S (bytes divided by time) relative to one rank's buffer, and busbw factor.
NCCLTESTS_S_FACTOR = {"AllReduce": lambda n: 1, "AllGather": lambda n: n, "Broadcast": lambda n: 1}
BUSBW_FACTOR = {"AllReduce": lambda n: 2 * (n - 1) / n, "AllGather": lambda n: (n - 1) / n,
                "Broadcast": lambda n: 1.0}
# The hand-made trace: op -> (count, dtype, per-rank bytes).
TINY_OPS = {"AllReduce": (262144, "fp32", 1 << 20), "AllGather": (65536, "bf16", 131072),
            "Broadcast": (1024, "fp16", 2048)}
SENDS = 2  # rank 0 sends twice to rank 4
SEND_BYTES = 4096


def tiny_trace() -> pd.DataFrame:
    """The hand-made trace: every op of ``TINY_OPS`` on all ``WORLD`` ranks, then ``SENDS`` Send/Recv pairs 0 -> 4."""
    rows = []

    def row(rank, seq, op, count, dtype, nbytes, root, t_s):
        return {"rank": rank, "comm": "world", "seq": seq, "op": op, "count": count, "dtype": dtype,
                "bytes": nbytes, "root": root, "nranks": WORLD, "t_start_s": t_s, "duration_s": np.nan,
                "host": f"node{rank // GPUS_PER_NODE}", "device": rank % GPUS_PER_NODE, "context": "",
                "algo": "", "proto": ""}

    for r in range(WORLD):
        for seq, (op, (count, dtype, nbytes)) in enumerate(TINY_OPS.items()):
            rows.append(row(r, seq, op, count, dtype, nbytes, 0 if op == "Broadcast" else -1, seq * 1e-3))
    for k in range(SENDS):
        rows.append(row(0, k, "Send", SEND_BYTES, "int8", SEND_BYTES, 4, 3e-3))
        rows.append(row(4, k, "Recv", SEND_BYTES, "int8", SEND_BYTES, 0, 3e-3))
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(WORLD, {"world": list(range(WORLD))}, "hand-made:test_contract",
                                       gpus_per_node=GPUS_PER_NODE)
    return df


def micro_trace(ranks: int = 4, count: int = 65536) -> pd.DataFrame:
    """The cheapest trace to replay: one fp32 AllReduce on ``ranks`` ranks, one GPU per server."""
    df = pd.DataFrame({"rank": range(ranks), "comm": "world", "seq": 0, "op": "AllReduce", "count": count,
                       "dtype": "fp32", "bytes": 4 * count, "root": -1, "nranks": ranks, "t_start_s": 0.0,
                       "duration_s": np.nan, "host": [f"node{r}" for r in range(ranks)], "device": 0,
                       "context": "", "algo": "", "proto": ""})
    df.attrs["collsim"] = new_metadata(ranks, {"world": list(range(ranks))}, "hand-made:test_contract",
                                       gpus_per_node=1)
    return df


def simrun(*args: str) -> tuple[int, str, str]:
    """Run ``simrun ARGS`` in this process; return (exit code, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            simrun_main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def simrun_process(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the installed ``simrun`` console script in a child process (no terminal)."""
    exe = Path(sys.executable).with_name("simrun")
    env = {k: v for k, v in os.environ.items() if k != "SIMRUN_QUIET_ERRORS"}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def without_wall(summary: dict) -> dict:
    """The summary without its wall-clock figure (the one that differs between runs)."""
    return {k: v for k, v in summary.items() if k != "sim_wall_s"}


def pair_fabric(link_gbps=100.0, latency_us=2.0):
    """A 4-GPU leaf-spine, one GPU per server: every flow between servers crosses the network."""
    return topologies.leaf_spine(num_gpus=4, gpus_per_server=1, link_gbps=link_gbps, latency_us=latency_us)


def path_latency_s(g, path):
    """Sum of the link latencies along ``path`` (node names), in seconds."""
    return sum(g.edges[u, v]["latency_us"] for u, v in zip(path, path[1:], strict=False)) * 1e-6


def run_json_and_links(tiny, out: Path, *extra: str) -> tuple[dict, pd.DataFrame]:
    """``simrun run`` of the tiny trace on a fat tree with ``extra`` arguments: (its --json summary, links.parquet)."""
    code, stdout, err = simrun("run", "--trace", str(tiny), "--topo", "fat_tree", "--json", "--no-report",
                               "--out", str(out), *extra)
    assert code == 0, err
    return json.loads(stdout), pd.read_parquet(out / "links.parquet")


__all__ = ["BUSBW_FACTOR", "COLLECTIVE_COLUMNS", "DTYPE_SIZE", "GPUS_PER_NODE", "INCAST_COLUMNS", "LINK_COLUMNS", "NCCLTESTS_S_FACTOR", "OPS", "ROOT", "SENDS", "SEND_BYTES", "SUMMARY_KEYS", "TIMESERIES_COLUMNS", "TINY_OPS", "TRACE_COLUMNS", "WORLD", "micro_trace", "pair_fabric", "path_latency_s", "run_json_and_links", "simrun", "simrun_process", "tiny_trace", "without_wall"]
