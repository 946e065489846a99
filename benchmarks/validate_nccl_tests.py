"""Error table of collsim against the public nccl-tests tables in tests/data/nccl_tests/.

Each table is replayed on its own fabric (``fabrics.json``: preset and parameters) and the busbw error
``|sim / measured - 1|`` is summarised per table: median and worst at >= 256 MiB and at <= 1 MiB.

    python benchmarks/validate_nccl_tests.py [--no-presets] [--markdown] [--only NAME ...] [--detail]

``--no-presets`` drops the gpu=/nic= hardware presets (line rates, the model before the presets); the run's
NCCL environment (nccl_algo, nccl_proto, nvls, nccl_max_nchannels) stays.
``--only`` keeps the tables whose file name contains NAME (repeatable: one table reruns in a minute);
``--detail`` also prints every size: measured and simulated busbw and the simulated algorithm/protocol.

Rows the measured table itself contradicts (``sim.bench.row_flags``: out-of-place over twice its in-place
time, or over twice a larger size's time) are flagged, left out of the medians and counted in the
``flagged`` column (>= 256 MiB / <= 1 MiB); ``all <=1M`` is the small median over every row.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import topologies
from sim.bench.sizes import gpus_per_thread
from sim.bench.validate import error_summary, table_gpus_per_server, validate_trace
from topologies.hardware import without_presets
from traces.readers import ingest

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl_tests"


def _pct(x: float) -> str:
    return "  n/a" if not math.isfinite(x) else f"{x:5.1%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-presets", action="store_true", help="ignore gpu=/nic= (line-rate model)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="only the files whose name contains NAME (repeatable)")
    ap.add_argument("--detail", action="store_true", help="print every size with the simulated algo/proto")
    args = ap.parse_args()
    fabrics = json.loads((DATA / "fabrics.json").read_text())
    names = [n for n in fabrics if not n.startswith("_") and (not args.only or any(o in n for o in args.only))]
    if not names:
        raise SystemExit(f"validate_nccl_tests: error: no table file matches --only {args.only}")
    details = []
    rows = []
    t0 = time.perf_counter()
    for name in names:
        fab = fabrics[name]
        params = without_presets(fab["set"]) if args.no_presets else dict(fab["set"])
        trace = ingest([DATA / name], format="nccl-tests")

        def build(entry, params=params, fab=fab):
            return topologies.build(fab["topo"], num_gpus=int(entry["nranks"]),
                                    gpus_per_server=table_gpus_per_server(entry),
                                    **params)

        headers = [e["line"] for e in trace.attrs["collsim"]["nccl_tests"]]
        table = validate_trace(trace, build, gpus_per_thread=gpus_per_thread((DATA / name).read_text(), headers))
        details.append((name, table))
        for s in error_summary(table).itertuples(index=False):
            entry = trace.attrs["collsim"]["nccl_tests"][s.table]
            rows.append((f"{name}#{s.table}", entry["stem"], entry["nranks"], fab["transport"], s))
    sep = " | " if args.markdown else "  "
    head = ["table", "op", "ranks", "transport", "n>=256M", "median", "worst", "n<=1M", "median", "worst",
            "flagged", "all <=1M"]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print(sep.join(head))
    for name, stem, n, transport, s in rows:
        cells = [name, stem, str(n), transport, str(s.large_n), _pct(s.large_median), _pct(s.large_worst),
                 str(s.small_n), _pct(s.small_median), _pct(s.small_worst),
                 f"{s.large_flagged}/{s.small_flagged}", _pct(s.small_median_all)]
        print(("| " + " | ".join(cells) + " |") if args.markdown else sep.join(cells))
    if args.detail:
        for name, table in details:
            for k, grp in table.groupby("table", sort=True):
                print(f"\n{name}#{k}  size  busbw_measured  busbw_sim  ratio  time_us measured / sim / "
                      "NCCL's prediction  algo/proto")
                for r in grp.itertuples(index=False):
                    print(f"  {r.size:>12d}  {r.busbw_measured:9.2f}  {r.busbw_sim:9.2f}  {r.ratio:6.3f}  "
                          f"{r.time_measured_us:9.1f} {r.time_sim_us:9.1f} {r.time_nccl_us:9.1f}  {r.algo}/{r.proto}"
                          + (f"  flagged: {r.flag} (in-place {r.time_inplace_us:.1f} us)" if r.flag else ""))
    within_large = sum(1 for *_, s in rows if s.large_n and s.large_median <= 0.10)
    within_small = sum(1 for *_, s in rows if s.small_n and s.small_median <= 0.25)
    print(f"\n{len(rows)} tables; median error <= 10% at >= 256 MiB: {within_large} of "
          f"{sum(1 for *_, s in rows if s.large_n)}; <= 25% at <= 1 MiB: {within_small} of "
          f"{sum(1 for *_, s in rows if s.small_n)}; rows flagged: "
          f"{sum(s.large_flagged + s.small_flagged for *_, s in rows)} of the size classes' "
          f"{sum(s.large_n + s.small_n + s.large_flagged + s.small_flagged for *_, s in rows)}; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
