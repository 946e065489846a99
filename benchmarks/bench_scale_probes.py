"""Probes of ``benchmarks/bench_scale.py``: start-up, warm calls and the numba crossovers, as medians.

``bench_scale.py --startup / --warm / --warm-analytical / --solver-crossover / --walk-crossover`` run
these: fresh-process start-up times (this tree against another checkout), warm ``simulate_flows`` and
analytical calls, and the measurements the max-min solver's and the route walk's numpy-or-compiled
choices rest on (``sim.network.maxmin.use_compiled``, ``topologies.routing.use_compiled_walk``). Each
prints medians; none writes a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["fresh_probe_cpu_s", "solver_crossover", "startup", "walk_crossover", "warm", "warm_analytical"]

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def startup(base: Path | None, repeats: int) -> None:
    """Fresh-process wall and CPU time of three commands, this tree against ``base`` (another checkout),
    interleaved so both see the same machine load; prints medians."""
    import statistics
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="collsim-startup-"))
    flows = tmp / "a2a64.csv"
    lines = ["src,dst,bytes,start_s"] + [f"{s},{d},{MIB},0.0" for s in range(64) for d in range(64) if s != d]
    flows.write_text("\n".join(lines) + "\n")
    api = ("import numpy as np, pandas as pd, sim, topologies; n = 64; s, d = np.divmod(np.arange(n * n), n); "
           "m = s != d; df = pd.DataFrame({'src': s[m], 'dst': d[m], 'bytes': 1 << 20, 'start_s': 0.0}); "
           "sim.simulate_flows(topologies.build('fat_tree', num_gpus=n, gpus_per_server=8), df)")
    commands = {"simrun traces": ["-m", "sim", "traces"], "simrun --help": ["-m", "sim", "--help"],
                "simrun flows (64-GPU all-to-all)": ["-m", "sim", "flows", str(flows), "--topo", "fat_tree", "--out",
                                                     str(tmp / "o")],
                "python -c simulate_flows (64-GPU a2a)": ["-c", api],
                "floor: import numpy, pandas, networkx": ["-c", "import numpy, pandas, networkx"]}
    trees = {"this tree": ROOT, **({"base": base} if base else {})}
    times: dict = {}
    for _ in range(repeats):
        for label, args in commands.items():
            for tree, root in trees.items():
                env = {**os.environ, "PYTHONPATH": str(root)}
                t0 = time.perf_counter()
                proc = subprocess.Popen([sys.executable, *args], cwd=tmp, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, code, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t0
                if code != 0:
                    raise SystemExit(f"{label} failed in {tree}")
                times.setdefault((label, tree), []).append((wall, usage.ru_utime + usage.ru_stime))
    for (label, tree), v in times.items():
        print(f"{label:<40} {tree:<10} median wall {statistics.median(w for w, _ in v):.3f} s  "
              f"CPU {statistics.median(c for _, c in v):.3f} s  ({len(v)} runs)")


def fresh_probe_cpu_s(probe: str, repeats: int) -> float:
    """Median of what ``python -c PROBE`` prints (a CPU time it measured) over ``repeats`` fresh processes,
    after one unmeasured run that compiles and caches whatever the probe loads."""
    import statistics

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True)
    return statistics.median(float(subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                                                  capture_output=True, text=True).stdout) for _ in range(repeats))


def solver_crossover(repeats: int) -> None:
    """What the max-min solver choice (``sim.network.maxmin.use_compiled``) rests on, as medians: the CPU
    cost of importing numba and loading the cached kernel in a fresh process, and the numpy solver's extra
    cost over the kernel on fat-tree problems of growing size, fitted as ``a`` per pass + ``b`` per
    incidence and pass (``NUMPY_PASS_S``, ``NUMPY_INCIDENCE_PASS_S``)."""
    import statistics

    import numpy as np

    probe = ("import time, numpy as np; c = time.process_time(); from sim.network.maxmin_numba import max_min_kernel; "
             "max_min_kernel(np.array([0, 1]), np.array([0]), np.array([1.0])); print(time.process_time() - c)")
    print(f"numba import + cached kernel load: median {fresh_probe_cpu_s(probe, repeats):.3f} s CPU "
          f"({repeats} fresh processes)")
    import topologies
    from sim.network import maxmin
    from sim.network.maxmin_numba import max_min_kernel
    from topologies.routing import Router

    router = Router(topologies.build("fat_tree", num_gpus=1024, gpus_per_server=8))
    cap = router.links["capacity_gbps"].to_numpy(float) * 1e9 / 8
    rng = np.random.default_rng(0)
    rows = []
    for flows in (10, 100, 1000, 3000, 10_000, 30_000):
        src = rng.integers(0, 1024, flows)
        dst = (src + rng.integers(1, 1024, flows)) % 1024
        r = router.route(src, dst, np.arange(flows))

        def cpu(fn, ptr=r.link_ptr, idx=r.link_idx):
            times = []
            for _ in range(max(3, repeats)):
                c = time.process_time()
                fn(ptr, idx, cap)
                times.append(time.process_time() - c)
            return statistics.median(times)

        passes = int(max_min_kernel(r.link_ptr, r.link_idx, cap)[1])
        excess = cpu(maxmin.max_min_rates_numpy) - cpu(max_min_kernel)
        rows.append((len(r.link_idx), passes, excess))
        print(f"flows {flows:>6}  incidences {len(r.link_idx):>7}  passes {passes:>3}  numpy - kernel "
              f"{excess * 1e3:9.3f} ms  model {maxmin.numpy_excess_s(len(r.link_idx), passes) * 1e3:9.3f} ms")
    inc, passes, excess = (np.array(c, float) for c in zip(*rows, strict=True))
    (a, b), *_ = np.linalg.lstsq(np.c_[passes, passes * inc], excess, rcond=None)
    print(f"fit: {a * 1e6:.1f} us per pass + {b * 1e9:.1f} ns per incidence-pass "
          f"(sim.network.maxmin uses {maxmin.NUMPY_PASS_S * 1e6:.0f} us and {maxmin.NUMPY_INCIDENCE_PASS_S * 1e9:.0f} ns)")


def walk_crossover(repeats: int) -> None:
    """What the route-walk choice (``topologies.routing.use_compiled_walk``) rests on, as medians: the CPU
    cost of importing numba and loading the cached walk in a fresh process, and the numpy walk's extra cost
    over the compiled one on a 1,024-GPU fat-tree for batches of growing size, fitted as ``a`` per call +
    ``b`` per flow (``WALK_CALL_S``, ``WALK_FLOW_S``)."""
    import statistics

    import numpy as np

    probe = ("import time, numpy as np; from topologies import Router, fat_tree, routing; r = Router(fat_tree(4)); "
             "routing.WALK = 'jit'; c = time.process_time(); r.route(np.arange(16), np.arange(16)[::-1], 0); "
             "print(time.process_time() - c)")
    print(f"numba import + cached walk load: median {fresh_probe_cpu_s(probe, repeats):.3f} s CPU "
          f"({repeats} fresh processes)")
    import topologies
    from topologies import routing
    from topologies.routing import Router

    router = Router(topologies.build("fat_tree", num_gpus=1024, gpus_per_server=8))
    rng = np.random.default_rng(0)
    rows = []
    for flows in (100, 1000, 10_000, 100_000, 1_000_000):
        src = rng.integers(0, 1024, flows)
        dst = (src + rng.integers(1, 1024, flows)) % 1024

        def cpu(walk, src=src, dst=dst):
            routing.WALK = walk
            times = []
            for _ in range(max(3, repeats)):
                c = time.process_time()
                router.route(src, dst, 7)
                times.append(time.process_time() - c)
            return statistics.median(times)

        cpu("jit")
        excess = cpu("numpy") - cpu("jit")
        rows.append((flows, excess))
        model = routing.WALK_CALL_S + routing.WALK_FLOW_S * flows
        print(f"flows {flows:>8}  numpy - compiled {excess * 1e3:9.3f} ms  model {model * 1e3:9.3f} ms")
    routing.WALK = "auto"
    flows, excess = (np.array(c, float) for c in zip(*rows, strict=True))
    w = 1.0 / np.maximum(excess, 1e-6)  # relative least squares: small batches count as much as large ones
    (a, b), *_ = np.linalg.lstsq(np.c_[np.ones_like(flows), flows] * w[:, None], excess * w, rcond=None)
    print(f"fit: {a * 1e6:.1f} us per call + {b * 1e9:.1f} ns per flow (topologies.routing uses "
          f"{routing.WALK_CALL_S * 1e6:.0f} us and {routing.WALK_FLOW_S * 1e9:.0f} ns)")


def warm_analytical(repeats: int, df) -> None:
    """Median CPU time of a warm ``simulate(model="analytical")`` on the 1,024-GPU all-to-all ``df``
    (fat_tree; ``bench_scale.a2a_trace(1024)``), after four calls that load what it needs."""
    import statistics

    from sim import simulate

    for _ in range(4):  # until the walk's size rule has loaded the compiled walk (each call charges ~0.3 s)
        simulate(df, "fat_tree", model="analytical")
    cpu = []
    for _ in range(repeats):
        c = time.process_time()
        simulate(df, "fat_tree", model="analytical")
        cpu.append(time.process_time() - c)
    print(f"warm simulate(model='analytical'), 1,024-GPU all-to-all: median CPU {statistics.median(cpu):.3f} s "
          f"({repeats} calls: {', '.join(f'{x:.3f}' for x in cpu)})")


def warm(repeats: int) -> None:
    """Median CPU and wall time of a warm ``sim.simulate_flows`` call on the 64-GPU all-to-all (4,032 flows),
    first on the solver a fresh process starts with (numpy), then with the compiled kernel loaded."""
    import statistics

    import numpy as np
    import pandas as pd

    import sim
    import topologies
    from sim.network import maxmin

    n = 64
    s, d = np.divmod(np.arange(n * n), n)
    keep = s != d
    df = pd.DataFrame({"src": s[keep], "dst": d[keep], "bytes": MIB, "start_s": 0.0})
    graph = topologies.build("fat_tree", num_gpus=n, gpus_per_server=8)
    for solver in ("numpy", "jit"):
        maxmin.SOLVER = solver
        sim.simulate_flows(graph, df)
        wall, cpu = [], []
        for _ in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            sim.simulate_flows(graph, df)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        print(f"warm simulate_flows, 64-GPU all-to-all, {solver:>5} solver: median CPU {statistics.median(cpu):.4f} s, "
              f"wall {statistics.median(wall):.4f} s ({repeats} calls)")
    maxmin.SOLVER = "auto"
