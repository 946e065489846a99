"""Cost of the trace boundary: ``read_trace`` (which validates) and ``validate`` alone on the built-in traces.

Prints the median CPU time (process time, so other jobs on the machine disturb it less) over ``--repeat``
runs. Run it on two trees to compare, e.g. ``PYTHONPATH=/path/to/other/tree python benchmarks/bench_validate.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    from traces.io import list_builtin, read_trace
    from traces.schema import validate

    for name, _ in list_builtin():
        read_s, check_s = [], []
        for _ in range(args.repeat):
            t0 = time.process_time()
            df = read_trace(name)
            t1 = time.process_time()
            validate(df)
            t2 = time.process_time()
            read_s.append(t1 - t0)
            check_s.append(t2 - t1)
        print(f"{name:<26} {len(df):>7} rows  read_trace {statistics.median(read_s) * 1e3:7.1f} ms  "
              f"validate {statistics.median(check_s) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
