"""Long pipelines as pieces (``sim.planning.plan.assemble``) against chunk-by-chunk plans.

For each case: simulated time (or busbw), flows and CPU seconds, with the default budget
(``max_pipeline_transfers`` = 4,096: heads, lagged bodies and tails past it) and with every NCCL chunk a
transfer. Medians over ``--repeat`` runs of the CPU time.

    python benchmarks/bench_pipeline_pieces.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

import sim
import topologies
from sim.bench.run import run_bench
from sim.planning import collectives, pat_nvls
from sim.planning import plan as plan_module
from traces.schema import new_metadata, validate

MIB = 1 << 20
_ASSEMBLE = plan_module.assemble


def _use_budget(budget: int | None) -> None:
    """Plan with ``budget`` as the pipeline budget (``None``: one transfer per chunk)."""

    def assemble(*args, **kwargs):
        return _ASSEMBLE(*args[:6], budget)

    collectives.assemble = assemble
    pat_nvls.assemble = assemble


def _step_trace(world: int = 16, steps: int = 2, nbytes: int = 16 * MIB) -> pd.DataFrame:
    """The results tests' data-parallel step (one GPU per server), at 16 MiB per AllReduce."""
    order = [r for j in range(4) for r in range(j, world, 4)]
    rows = [dict(rank=r, comm="dp", seq=k, op="AllReduce", count=nbytes, dtype="uint8", bytes=nbytes, root=-1,
                 nranks=world, t_start_s=k * 20e-3, duration_s=np.nan, host="", device=-1,
                 context="site=grad_sync", algo="", proto="") for r in range(world) for k in range(steps)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"dp": order}, "bench", gpus_per_node=1)
    return validate(df)


def _cases():
    step = _step_trace()
    leaf_spine = topologies.build("leaf_spine", num_gpus=16, gpus_per_server=1, gpus_per_leaf=4, oversubscription=2)

    def run_step():
        res = sim.simulate(step, leaf_spine, ideal=False)
        return f"{res.summary['makespan_s'] * 1e3:.3f} ms, {res.summary['flows']:,} flows"

    def bench(**kw):
        graph = topologies.build("rail_optimized", **kw)

        def run():
            table = run_bench("AllReduce", graph, [16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB])
            return "busbw " + " / ".join(f"{b:.1f}" for b in table["busbw"]) + " GB/s"
        return run

    return [("2 x 16 MiB step, 16 x 1 GPU, leaf_spine 2:1", run_step),
            ("2 x 8 A100 RoCE tree, 16 MiB - 1 GiB", bench(num_gpus=16, gpus_per_server=8, gpu="a100", nic="roce",
                                                           link_gbps=200)),
            ("2 x 8 H100 IB NVLSTree, 16 MiB - 1 GiB", bench(num_gpus=16, gpus_per_server=8, gpu="h100", nic="ib",
                                                             link_gbps=400))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for name, run in _cases():
        for label, budget in (("pieces", collectives.PlanOptions().max_pipeline_transfers), ("chunks", None)):
            _use_budget(budget)
            cpu, out = [], ""
            for _ in range(args.repeat):
                t0 = time.process_time()
                out = run()
                cpu.append(time.process_time() - t0)
            print(f"{name:45s} {label:7s} {out}  cpu median {statistics.median(cpu):.1f} s")
    _use_budget(collectives.PlanOptions().max_pipeline_transfers)


if __name__ == "__main__":
    main()
