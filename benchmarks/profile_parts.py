"""Shares of a py-spy raw profile by part of collsim (network, engine, plans, routes, results, ...).

Each sample goes to a phase when one of its frames is in it (the ideal reference under
``reference_durations`` / ``run_reference``, the set-up under ``setup_replay``, the result tables under
``build_result``, numba's compiler or cache loader), else to the project module nearest the leaf of its stack.

    py-spy record --native -r 50 -f raw -o prof.txt -- python benchmarks/bench_scale.py --child '{...}'
    python benchmarks/profile_parts.py prof_before.txt prof_after.txt      # a Markdown table, one column each
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

_FILE = re.compile(r"\(([^()]*?):\d+\)$")

#: (row label, test on a sample's part) in the order of the table; "- " rows are parts of the row above
ROWS = [
    ("network kernels (`sim/network`)", lambda p: p == "network"),
    ("engine (`sim/engine/`)", lambda p: p.startswith("engine:")),
    ("- link statistics (`stats.py`)", lambda p: p == "engine:stats.py"),
    ("- op runners (`transfers.py`, `csr.py`, `paths.py`)",
     lambda p: p in ("engine:transfers.py", "engine:csr.py", "engine:paths.py")),
    ("- network id map (`idmap.py`)", lambda p: p == "engine:idmap.py"),
    ("- event loop (`netproc.py`, `clock.py`, `engine.py`)",
     lambda p: p in ("engine:netproc.py", "engine:clock.py", "engine:engine.py")),
    ("- flow log, memo, materialise, workload",
     lambda p: p.startswith("engine:") and p[7:] not in ("stats.py", "transfers.py", "csr.py", "paths.py", "idmap.py",
                                                         "netproc.py", "clock.py", "engine.py")),
    ("plan building for the replay (`sim/planning` via `sim/prepare.py`)", lambda p: p == "plans"),
    ("route lookups (`topologies/`)", lambda p: p == "routes"),
    ("results: incast stream during the run (`sim/results/`)", lambda p: p == "results"),
    ("results: tables after the run (`build_result`)", lambda p: p == "build"),
    ("set-up (`sim/setup.py`)", lambda p: p == "setup"),
    ("ideal reference: its plans (`reference_durations`)", lambda p: p == "ref-plans"),
    ("ideal reference: bound and schedule", lambda p: p == "ref"),
    ("numba: loading (or compiling) kernels", lambda p: p == "numba"),
    ("lazy imports and other `sim/` modules in `simulate()`", lambda p: p == "other"),
    ("outside `simulate()` (imports, reading the trace)", lambda p: p == "outside"),
]


def frame_file(frame: str) -> str:
    """The file of a py-spy frame ``"func (path:line)"`` (the frame itself when it names none).

    Examples
    --------
    >>> frame_file("Engine.run (sim/engine/engine.py:263)")
    'sim/engine/engine.py'
    """
    m = _FILE.search(frame)
    return m.group(1) if m else frame


def sample_part(frames: list[str]) -> str:
    """The part of one sample (its stack, root first): a key of :data:`ROWS`' tests.

    Examples
    --------
    >>> sample_part(["simulate (sim/replay.py:228)", "Engine.run (sim/engine/engine.py:263)",
    ...              "advance (sim/network/flow_network.py:1)", "copyto (numpy/core.py:5)"])
    'network'
    """
    files = [frame_file(f) for f in frames]
    names = [f.split(" (")[0] for f in frames]
    if any("numba/core" in x for x in files):
        return "numba"
    if "sim/replay.py" not in files:
        return "outside"
    if any(n in ("reference_durations", "run_reference") for n in names) or "sim/reference.py" in files:
        return "ref-plans" if any(x.startswith("sim/planning") for x in files) else "ref"
    if "sim/setup.py" in files:
        return "setup"
    if "sim/results/build.py" in files:
        return "build"
    for x in reversed(files):
        if x.startswith("sim/network"):
            return "network"
        if x.startswith("sim/planning") or x == "sim/prepare.py":
            return "plans"
        if x.startswith("topologies/"):
            return "routes"
        if x.startswith("sim/results/"):
            return "results"
        if x.startswith("sim/engine/"):
            return "engine:" + x.rsplit("/", 1)[-1]
    return "other"


def parts(path: str) -> tuple[int, Counter]:
    """Samples of a py-spy ``--format raw`` file, in all and per part."""
    counts: Counter = Counter()
    total = 0
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, n = line.rsplit(" ", 1)
            counts[sample_part(stack.split(";"))] += int(n)
            total += int(n)
    return total, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", help="py-spy raw files")
    args = ap.parse_args()
    cols = [parts(p) for p in args.profiles]
    print("| part | " + " | ".join(args.profiles) + " |")
    print("|---|" + "---:|" * len(cols))
    for label, test in ROWS:
        cells = [f"{100 * sum(n for p, n in c.items() if test(p)) / max(t, 1):.1f} %" for t, c in cols]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| samples | " + " | ".join(str(t) for t, _ in cols) + " |")


if __name__ == "__main__":
    main()
