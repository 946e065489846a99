"""Compare two output folders of ``simrun`` figure by figure: ``python benchmarks/compare_outputs.py A B``.

Prints, per file and numeric column (``summary.json``: per numeric key, nested keys joined by ``.``), the
largest relative difference ``|a - b| / max(|a|, |b|)`` over rows (0 where both are 0; NaN vs NaN counts
as equal, NaN vs a number as inf). Rows are compared in order; tables of different lengths are reported.
The last line is the overall maximum. Exit code 0 always (it measures; the reader judges).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

TABLES = ("collectives.parquet", "links.parquet", "link_timeseries.parquet", "incast.parquet")


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest relative difference of two equal-length float arrays (see the module docstring).

    Examples
    --------
    >>> rel_diff(np.array([1.0, 0.0, np.nan]), np.array([1.0 + 1e-12, 0.0, np.nan])) < 1e-11
    True
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    if one_nan.any():
        return math.inf
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where((scale == 0) | both_nan | (a == b), 0.0, np.abs(a - b) / scale)
    return float(d.max()) if d.size else 0.0


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)


def compare(dir_a: Path, dir_b: Path, skip=("sim_wall_s",)) -> list[tuple[str, str, float]]:
    """Rows ``(file, column, max relative difference)`` of two output folders."""
    rows = []
    sa, sb = {}, {}
    _flatten("", json.loads((dir_a / "summary.json").read_text()), sa)
    _flatten("", json.loads((dir_b / "summary.json").read_text()), sb)
    for key in sorted(set(sa) | set(sb)):
        if key in skip:
            continue
        if key not in sa or key not in sb:
            rows.append(("summary.json", f"{key} (only in {'B' if key in sb else 'A'})", math.inf))
            continue
        rows.append(("summary.json", key, rel_diff(np.array([sa[key]]), np.array([sb[key]]))))
    for name in TABLES:
        fa, fb = dir_a / name, dir_b / name
        if not (fa.exists() and fb.exists()):
            rows.append((name, "(missing)", math.inf))
            continue
        ta, tb = pd.read_parquet(fa), pd.read_parquet(fb)
        if len(ta) != len(tb):
            rows.append((name, f"(rows {len(ta)} vs {len(tb)})", math.inf))
            continue
        for col in ta.columns:
            if col in tb.columns and pd.api.types.is_numeric_dtype(ta[col]) and not pd.api.types.is_bool_dtype(ta[col]):
                rows.append((name, col, rel_diff(ta[col].to_numpy(float), tb[col].to_numpy(float))))
            elif col in tb.columns and not ta[col].equals(tb[col]):
                rows.append((name, f"{col} (non-numeric, differs)", math.inf))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir_a", type=Path)
    parser.add_argument("dir_b", type=Path)
    parser.add_argument("--all", action="store_true", help="print every column (default: only differing ones)")
    args = parser.parse_args()
    rows = compare(args.dir_a, args.dir_b)
    worst = 0.0
    for name, col, d in rows:
        worst = max(worst, d)
        if args.all or d > 0:
            print(f"{name:26s} {col:40s} {d:.3e}")
    print(f"{'max':26s} {'(all files, all columns)':40s} {worst:.3e}   ({len(rows)} columns compared)")


if __name__ == "__main__":
    main()
