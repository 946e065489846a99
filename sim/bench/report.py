"""Output of ``simrun bench`` / ``simrun validate``: nccl-tests' text layout, files and plots.

The table text follows ``*_perf``'s own columns so people (and ``traces.formats.nccl_tests``) read it as
they read nccl-tests; plots are drawn on a ``matplotlib.figure.Figure`` (Agg, no screen).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no screen: plots are files

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sim.bench.run import average_busbw
from sim.results.output import write_parquet
from traces.atomic import save_figure, write_csv

__all__ = ["format_table", "format_time_us", "plot_bench", "plot_validate", "size_label", "write_table"]

DPI = 120


def format_time_us(time_us: float) -> str:
    """A time as nccl-tests prints it: fewer decimals as it grows.

    Examples
    --------
    >>> format_time_us(3.14159), format_time_us(1234.5), format_time_us(123456.0)
    ('3.14', '1234.5', '123456')
    """
    if not math.isfinite(time_us):
        return "N/A"
    if time_us >= 10000:
        return f"{time_us:.0f}"
    if time_us >= 100:
        return f"{time_us:.1f}"
    return f"{time_us:.2f}"


def format_table(table: pd.DataFrame, header: list[str] | None = None) -> str:
    """``*_perf``'s layout: ``#`` header lines, one row per size, then ``# Avg bus bandwidth``.

    Examples
    --------
    >>> t = pd.DataFrame(dict(size=[1024], count=[256], type=["float"], redop=["sum"], root=[-1],
    ...                       time=[10.0], algbw=[0.1024], busbw=[0.1792], algo=["ring"], proto=["LL"]))
    >>> print(format_table(t).splitlines()[-4])
             1024           256     float     sum      -1    10.00    0.10    0.18   ring      LL
    """
    lines = [f"# {h}" for h in (header or [])]
    lines += ["#",
              f"#{'size':>12}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
              f"{'busbw':>6}  {'algo':>5}  {'proto':>6}",
              f"#{'(B)':>12}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
              f"{'(GB/s)':>6}"]
    for r in table.itertuples(index=False):
        lines.append(f" {int(r.size):>12}  {int(r.count):>12}  {r.type:>8}  {r.redop:>6}  {int(r.root):>6}  "
                     f"{format_time_us(float(r.time)):>7}  {float(r.algbw):>6.2f}  {float(r.busbw):>6.2f}  "
                     f"{r.algo:>5}  {r.proto:>6}")
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {average_busbw(table):.4f} ", "#"]
    return "\n".join(lines)


def write_table(table: pd.DataFrame, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.parquet`` and ``stem.csv``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pq, csv = out_dir / f"{stem}.parquet", out_dir / f"{stem}.csv"
    write_parquet(table, pq)  # atomic: temp file + rename
    write_csv(table, csv)
    return [pq, csv]


def size_label(nbytes: float) -> str:
    """Binary-prefixed size for axis ticks.

    Examples
    --------
    >>> size_label(8), size_label(1 << 20), size_label(16 << 30)
    ('8B', '1M', '16G')
    """
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= (1 << shift):
            v = nbytes / (1 << shift)
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{nbytes:.0f}B"


def _size_axis(ax, sizes: np.ndarray) -> None:
    if sizes.size == 0:  # only 0-byte rows: nothing to place on a log axis
        ax.text(0.5, 0.5, "no rows above 0 bytes", transform=ax.transAxes, ha="center", va="center")
        return
    ax.set_xscale("log", base=2)
    lo, hi = np.log2(max(sizes.min(), 1)), np.log2(max(sizes.max(), 1))
    ticks = 2.0 ** np.arange(math.floor(lo), math.ceil(hi) + 1, max(1, math.ceil((hi - lo) / 10)))
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks])
    ax.set_xlabel("size (bytes, nccl-tests' size column)")
    ax.grid(True, which="major", alpha=0.3)


def _positive_sizes(table: pd.DataFrame, fig: Figure) -> pd.DataFrame:
    """The rows a log size axis can place; says on the figure how many 0-byte rows it left out.

    nccl-tests prints 0-byte rows (``-b 0``); they stay in the printed and written tables, but a log
    axis has no place for them and matplotlib would draw their line off to the left edge.
    """
    keep = table["size"].to_numpy(dtype=float) > 0
    left_out = int((~keep).sum())
    if left_out:
        fig.text(0.99, 0.005, f"{left_out} row(s) of 0 bytes not plotted (log axis)",
                 ha="right", va="bottom", fontsize=7, color="0.4")
    return table[keep]


def plot_bench(table: pd.DataFrame, path: Path, title: str) -> Path:
    """busbw against size, one marker colour per (algorithm, protocol) the tuner chose."""
    fig = Figure(figsize=(8, 4.5), dpi=DPI)
    ax = fig.add_subplot()
    table = _positive_sizes(table, fig)
    sizes = table["size"].to_numpy(dtype=float)
    busbw = table["busbw"].to_numpy(dtype=float)
    ax.plot(sizes, busbw, color="0.6", lw=1, zorder=1)
    combos = list(dict.fromkeys(zip(table["algo"], table["proto"], strict=True)))
    colors = matplotlib.colormaps["tab10"]
    for i, (algo, proto) in enumerate(combos):
        sel = ((table["algo"] == algo) & (table["proto"] == proto)).to_numpy()
        ax.scatter(sizes[sel], busbw[sel], color=colors(i % 10), s=28, zorder=2,
                   label=f"{algo or '?'} / {proto or '?'}")
    _size_axis(ax, sizes)
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=10)
    ax.legend(title="algorithm / protocol", fontsize=8, title_fontsize=8, loc="upper left")
    fig.tight_layout()
    save_figure(fig, path)  # atomic: temp file + rename
    return path


def plot_validate(table: pd.DataFrame, path: Path, title: str) -> Path:
    """Measured and simulated busbw against size (top) and their ratio (bottom); rows flagged by
    :func:`sim.bench.row_flags.flag_rows` (column ``flag``) are ringed in both panels."""
    fig = Figure(figsize=(8, 6), dpi=DPI)
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    table = _positive_sizes(table, fig)
    sizes = table["size"].to_numpy(dtype=float)
    ax.plot(sizes, table["busbw_measured"], "o-", color="black", ms=4, label="measured (nccl-tests)")
    ax.plot(sizes, table["busbw_sim"], "s--", color="tab:blue", ms=4, label="collsim")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, alpha=0.3)
    ax2.axhline(1.0, color="black", lw=0.8)
    ax2.axhspan(0.9, 1.1, color="tab:green", alpha=0.12, label="within 10%")
    ax2.plot(sizes, table["ratio"], "o-", color="tab:red", ms=4)
    flagged = (table["flag"].astype(str) != "").to_numpy() if "flag" in table else np.zeros(len(table), bool)
    if flagged.any():  # kept in the plot, marked as the table's own outliers
        ring = dict(s=70, facecolors="none", edgecolors="tab:orange", linewidths=1.5, zorder=5)
        ax.scatter(sizes[flagged], table["busbw_measured"].to_numpy()[flagged], label="flagged row", **ring)
        ax2.scatter(sizes[flagged], table["ratio"].to_numpy()[flagged], **ring)
        ax.legend(fontsize=8, loc="upper left")
    ax2.set_ylabel("sim / measured")
    ax2.legend(fontsize=8, loc="upper left")
    _size_axis(ax2, sizes)
    fig.tight_layout()
    save_figure(fig, path)  # atomic: temp file + rename
    return path
