"""CPU of one fresh process's imports, ``read_trace`` and ``simulate(model="analytical")``, as one JSON line.

    PYTHONPATH=<tree> python benchmarks/read_sim_cpu.py TRACE.parquet fat_tree [LABEL]

Run it for two trees in turn (pairs) on a shared machine: ``time.process_time`` counts this process's CPU
(pyarrow's reader threads included), which other jobs disturb less than wall time; the load average at the
end is printed with it.
"""

from __future__ import annotations

import json
import resource
import sys
import time


def main() -> None:
    trace, topo = sys.argv[1], sys.argv[2]
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    c0 = time.process_time()
    from sim import simulate
    from traces import read_trace

    c1 = time.process_time()
    df = read_trace(trace)
    c2 = time.process_time()
    res = simulate(df, topo, model="analytical")
    c3 = time.process_time()
    with open("/proc/loadavg") as fh:
        load = float(fh.read().split()[0])
    print(json.dumps({"label": label, "trace": trace.rsplit("/", 1)[-1], "topo": topo,
                      "import_cpu_s": round(c1 - c0, 2), "read_cpu_s": round(c2 - c1, 2),
                      "sim_cpu_s": round(c3 - c2, 2), "makespan_s": float(res.summary["makespan_s"]),
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
                      "load": load}))


if __name__ == "__main__":
    main()
