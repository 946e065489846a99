"""Out-of-place over in-place time of the suite's nccl-tests tables, from the printed rows alone.

No simulation: for every all_gather / all_reduce / reduce_scatter table of tests/data/nccl_tests the median
of ``time out-of-place / time in-place`` over the rows >= 256 MiB, with the rank count. NCCL's ring
AllGather (``src/device/all_gather.h``, ``runRing``, v2.26.6-1) runs ``directCopySend`` instead of
``directSend`` in step 0 when the call is out of place: one of its ``nranks - 1`` sending steps also writes
the rank's own slice to the output, so an extra cost, if any, falls as ``1 / (nranks - 1)``; the column
``(r-1)(n-1)`` tells whether the tables follow that.

    python benchmarks/table_inplace_ratio.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from traces.readers import ingest

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "nccl_tests"
OPS = ("all_gather", "all_reduce", "reduce_scatter")


def inplace_ratio(size_bytes, time_us, time_inplace_us, min_bytes: int = 256 * 2**20) -> tuple[float, int]:
    """Median out-of-place / in-place time over the rows of at least ``min_bytes``.

    Parameters
    ----------
    size_bytes, time_us, time_inplace_us : array_like
        One table's sizes and its two printed times (nan where a time is missing).
    min_bytes : int
        Smallest size counted.

    Returns
    -------
    tuple of (float, int)
        The median ratio (nan if no row qualifies) and the number of rows used.

    Examples
    --------
    >>> inplace_ratio([2**28, 2**29], [110.0, 220.0], [100.0, 200.0])
    (1.1, 2)
    >>> inplace_ratio([1024], [1.0], [1.0])
    (nan, 0)
    """
    s = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_us, dtype=float)
    ti = np.asarray(time_inplace_us, dtype=float)
    keep = (s >= min_bytes) & np.isfinite(ti) & (ti > 0) & np.isfinite(t)
    if not keep.any():
        return float("nan"), 0
    return round(float(np.median(t[keep] / ti[keep])), 6), int(keep.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="only the files whose name contains NAME (repeatable)")
    args = ap.parse_args()
    fabrics = json.loads((DATA / "fabrics.json").read_text())
    rows = []
    for name in fabrics:
        if name.startswith("_") or (args.only and not any(o in name for o in args.only)):
            continue
        trace = ingest([DATA / name], format="nccl-tests")
        for k, e in enumerate(trace.attrs["collsim"]["nccl_tests"]):
            if e["stem"] not in OPS:
                continue
            inplace = e.get("time_inplace_us") or [float("nan")] * len(e["size"])
            r, used = inplace_ratio(e["size"], e["time_us"], inplace)
            if used:
                rows.append((e["stem"], int(e["nranks"]), int(e.get("gpus_per_node") or min(8, e["nranks"])),
                             r, used, f"{name}#{k}"))
    print("| op | ranks | GPUs/server | out/in | (r-1)(n-1) | rows | table |")
    print("|---|---|---|---|---|---|---|")
    for op, n, g, r, used, label in sorted(rows):
        print(f"| {op} | {n} | {g} | {r:.3f} | {(r - 1) * (n - 1):.3f} | {used} | {label} |")


if __name__ == "__main__":
    main()
