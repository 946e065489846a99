"""Cases of sizes and simulator options: unbounded memory from tiny inputs, values out of range."""

from __future__ import annotations

import json
from pathlib import Path

from bad_inputs_cases.common import Case, Outcome, run_args, small_trace

__all__ = ["CASES"]


def flows_far(d: Path) -> Path:
    p = d / "far.csv"
    p.write_text(f"src,dst,bytes,start_s\n0,{10**12},1000,0\n")
    return p



def check_quantile_zero(folder: Path, out: Outcome) -> str | None:
    summary = json.loads(out.stdout)
    return None if summary.get("completion_quantile") == 0.0 else f"quantile used: {summary.get('completion_quantile')}"



CASES: list[Case] = [
    # 4. unbounded memory from tiny inputs
    Case("flows-far-gpu", "a flows file naming GPU 10**12", argv=lambda d: ["flows", str(flows_far(d)), "--topo", "fat_tree"],
         expect="is above the limit of 65,536 GPUs"),
    Case("synth-requests", "synth --requests 1e8",
         argv=lambda d: ["synth", "deepseek-v3", "--requests", "100000000", "-o", str(d / "s.parquet")],
         expect="option 'requests' must be an integer"),
    # simulator options: fixed in the options branch
    Case("opt-quantile-0", "--set quantile=0 is used exactly", code=0, owner="options",
         argv=lambda d: ["run", "--trace", str(small_trace(d)), "--topo", "fat_tree", "--out", str(d / "o"),
                         "--no-report", "--json", "--set", "quantile=0"], check=check_quantile_zero),
    Case("opt-quantile-2", "--set quantile=2", owner="options", expect="quantile",
         argv=run_args(small_trace, "--set", "quantile=2")),
    Case("opt-bin-0", "--set bin_s=0", owner="options", expect="bin_s", argv=run_args(small_trace, "--set", "bin_s=0")),
    Case("opt-bin-neg", "--set bin_s=-1", owner="options", expect="bin_s", argv=run_args(small_trace, "--set", "bin_s=-1")),
    Case("opt-bin-tiny", "--set bin_s=1e-15", owner="options", expect="bin_s",
         argv=run_args(small_trace, "--set", "bin_s=1.0e-15")),
    Case("opt-channels", "--set channels=1000000", owner="options", expect="channels",
         argv=run_args(small_trace, "--set", "channels=1000000")),
    Case("opt-seed-neg", "--seed -1 --fail-links 1", owner="options", expect="seed=-1: must be an integer from 0",
         argv=run_args(small_trace, "--seed", "-1", "--fail-links", "1")),
    Case("opt-seed-huge", "--seed 2**70", owner="options", expect="must be an integer from 0 to 2**63-1", argv=run_args(small_trace, "--seed", str(2**70))),
    Case("opt-scheduler", "sweep --scheduler garbage://x", owner="options", expect="scheduler",
         argv=lambda d: ["sweep", "--trace", str(small_trace(d)), "--topo", "fat_tree", "--scheduler", "garbage://x",
                         "--out", str(d / "sw")]),
    Case("opt-worker-error", "a sweep point that fails on a Dask worker: one error line", owner="options",
         argv=lambda d: ["sweep", "--trace", str(small_trace(d)), "--topo", "fat_tree", "--set", "k=3|4",
                         "--out", str(d / "sw")], expect="k"),
]
