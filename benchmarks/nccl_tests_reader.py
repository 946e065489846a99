"""CPU time of the nccl-tests reader (``parse_tables``) on every file of tests/data/nccl_tests: prints medians.

Run from a worktree root: ``PYTHONPATH=$PWD python benchmarks/nccl_tests_reader.py [repeats]``. Also reads a
large synthetic file (the 16-rank all_reduce table of the first file repeated 2,000 times) to show the cost
per line.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from traces.formats.nccl_tests import parse_tables

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl_tests"


def _cpu_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def main(repeats: int = 15) -> None:
    texts = [(p.name, p.read_text()) for p in sorted(DATA.glob("*.txt"))]
    lines = sum(t.count("\n") for _, t in texts)
    suite = _cpu_s(lambda: [parse_tables(t, n) for n, t in texts], repeats)
    print(f"suite: {len(texts)} files, {lines} lines: median {suite * 1e3:.2f} ms CPU per pass ({repeats} passes)")
    big = texts[0][1] * 2000
    big_lines = big.count("\n")
    t_big = _cpu_s(lambda: parse_tables(big, "big"), max(3, repeats // 5))
    print(f"big: {big_lines} lines: median {t_big:.3f} s CPU, {t_big / big_lines * 1e6:.2f} us per line")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
