"""Cases first tried in session 24: non-finite and out-of-range ``--set`` values, output paths that are
files or under a file, trace columns of the wrong type, and ``bench``/``validate`` inputs not yet covered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bad_inputs_cases.common import Case, run_args, small_trace, trace, with_value

__all__ = ["CASES"]


def out_file(d: Path) -> Path:
    """A regular file where the run folder should go."""
    p = d / "taken"
    p.write_text("not a folder\n")
    return p


def bench(*extra: str) -> Callable[[Path], list[str]]:
    """``bench all_reduce`` on fat_tree with ``extra`` options."""
    return lambda d: ["bench", "all_reduce", "--topo", "fat_tree", "-o", str(d / "b"), *extra]


def run_out(path_of: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    """``run`` of the small trace with ``--out`` at ``path_of(folder)``."""
    return lambda d: [
        "run",
        "--trace",
        str(small_trace(d)),
        "--topo",
        "fat_tree",
        "--out",
        str(path_of(d)),
        "--no-report",
    ]


def _header_only(d: Path) -> Path:
    """An nccl-tests table of its column header only (no rows)."""
    p = d / "h.txt"
    p.write_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    )
    return p


#: ``--set`` values that are numbers but not allowed ones: (case id, key=value, what the error must name).
_SET_VALUES = [
    ("s24-quantile-nan", "quantile=nan", "quantile"),
    ("s24-quantile-neg", "quantile=-0.5", "quantile"),
    ("s24-bin-inf", "bin_s=inf", "bin_s"),
    ("s24-bin-1e400", "bin_s=1e400", "bin_s"),  # parses as inf
    ("s24-bin-nan", "bin_s=nan", "bin_s"),
    ("s24-channels-neg", "channels=-1", "channels"),
    ("s24-channels-frac", "channels=1.5", "channels"),
    ("s24-channels-nan", "channels=nan", "channels"),
]

CASES: list[Case] = [
    *(Case(case_id, f"--set {kv}", expect=field, argv=run_args(small_trace, "--set", kv))
      for case_id, kv, field in _SET_VALUES),
    Case("s24-out-file", "--out naming an existing regular file", expect="taken", argv=run_out(out_file)),
    Case(
        "s24-out-under-file",
        "--out below a regular file",
        expect="taken",
        argv=run_out(lambda d: out_file(d) / "sub"),
    ),
    Case(
        "s24-bytes-text",
        "a bytes column of text",
        expect="bytes",
        argv=run_args(lambda d: trace(d, with_value("bytes", "lots", dtype=str))),
    ),
    Case(
        "s24-t-start-text",
        "a t_start_s column of text",
        expect="t_start_s",
        argv=run_args(lambda d: trace(d, with_value("t_start_s", "noon", dtype=str))),
    ),
    Case(
        "s24-rank-float",
        "a rank column of float64 with a NaN",
        expect="rank",
        argv=run_args(lambda d: trace(d, with_value("rank", float("nan"), dtype="float64"))),
    ),
    Case("s24-bench-b-neg", "bench -b -8", expect="size '-8'", argv=bench("-b", "-8", "-e", "64")),
    Case("s24-bench-d-empty", "bench -d ''", expect="datatype '' is not one of", argv=bench("-d", "")),
    Case(
        "s24-validate-folder",
        "validate of a folder",
        expect="is a directory",
        argv=lambda d: ["validate", str(d), "--topo", "fat_tree"],
    ),
    Case(
        "s24-validate-header",
        "validate of a table with only its header line",
        expect="h.txt",
        argv=lambda d: ["validate", str(_header_only(d)), "--topo", "fat_tree"],
    ),
]
