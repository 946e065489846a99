"""Seaborn plots of the characterisation tables (SPEC §7): PNG files, no screen needed.

Each function draws one figure from a table of :mod:`traces.stats` and writes it as PNG. Figures are built
with ``matplotlib.figure.Figure`` (not pyplot), so nothing global is touched and no display is opened: they
render with the Agg canvas on any machine.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no screen: plots are files

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from traces.atomic import save_figure
from traces.schema import OPS
from traces.stats import Bandwidth

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
DPI = 120


def human_bytes(value: float) -> str:
    """Binary-prefixed size: ``human_bytes(14336) == '14 KiB'``.

    Examples
    --------
    >>> human_bytes(0), human_bytes(1536), human_bytes(2**30)
    ('0 B', '1.5 KiB', '1 GiB')
    """
    if not value or not math.isfinite(value):
        return f"{value:g} B"
    exp = min(int(math.log2(abs(value)) // 10), len(_UNITS) - 1) if abs(value) >= 1 else 0
    return f"{value / 1024**exp:.4g} B" if exp == 0 else f"{value / 1024**exp:.3g} {_UNITS[exp]}"


def _bytes_axis(axis, log: bool = True) -> None:
    if log:
        axis.set_major_locator(LogLocator(base=2, subs=(1.0,), numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v)))


def _figure(rows: int = 1, cols: int = 1, size: tuple[float, float] = (8.0, 4.5)) -> tuple[Figure, np.ndarray]:
    sns.set_theme(style="whitegrid", context="notebook")
    fig = Figure(figsize=size, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    return fig, axes


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, dpi=DPI, format="png")  # atomic: temp file + rename
    return out


def _log_if_wide(ax, values: pd.Series) -> None:
    positive = values[values > 0]
    if len(positive) and positive.max() / positive.min() > 100:
        ax.set_xscale("log")


def plot_op_counts(counts: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Bar charts of operations per type: ``calls`` and ``rank_calls``, and ``bytes_total`` (in GB).

    Parameters
    ----------
    counts : pandas.DataFrame
        :func:`traces.stats.op_counts` output.
    path : str or Path
        PNG file to write.
    title : str
        Figure title (the trace name).

    Returns
    -------
    Path
    """
    fig, (left, right) = _figure(1, 2, (10.0, 0.5 * max(len(counts), 3) + 2.0))
    long = counts.melt(id_vars="op", value_vars=["calls", "rank_calls"], var_name="count", value_name="n")
    sns.barplot(long, y="op", x="n", hue="count", ax=left, orient="h")
    _log_if_wide(left, long["n"])
    left.set(xlabel="operations", ylabel="", title="calls (collective ops) and rank calls (rows)")
    gigabytes = counts.assign(gb=counts["bytes_total"] / 1e9)
    sns.barplot(gigabytes, y="op", x="gb", ax=right, orient="h", color=sns.color_palette()[2])
    _log_if_wide(right, gigabytes["gb"])
    right.set(xlabel="GB issued (10^9 bytes, sum over ranks)", ylabel="", title="payload per op")
    fig.suptitle(title or "operation types and counts")
    return _save(fig, path)


def plot_sizes_per_op(df: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Transfer size distribution per op: box plots of ``bytes`` per row on a log axis.

    Whiskers reach the minimum and maximum (as in ``sizes.csv``); each distinct size is a dot whose area is
    its share of the op's rows. Zero-byte rows cannot sit on a log axis and are counted in the title instead.
    """
    ops = [op for op in OPS if op in set(df["op"])]
    fig, (ax,) = _figure(1, 1, (9.0, 0.6 * max(len(ops), 3) + 2.0))
    positive = df.loc[df["bytes"] > 0, ["op", "bytes"]]
    zeros = int((df["bytes"] <= 0).sum())
    if not positive.empty:
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib's deprecated `vert`
            warnings.simplefilter("ignore", matplotlib.MatplotlibDeprecationWarning)
            sns.boxplot(positive, x="bytes", y="op", order=ops, ax=ax, whis=(0, 100), log_scale=True,
                        orient="h", color="0.85", fliersize=0)
        # Sizes repeat a lot (one per layer shape): a dot per distinct size, its area the share of the op's rows
        dots = positive.groupby(["op", "bytes"]).size().rename("rows").reset_index()
        dots["share"] = dots["rows"] / dots.groupby("op")["rows"].transform("sum")
        sns.scatterplot(dots, x="bytes", y="op", hue="op", hue_order=ops, size="share", sizes=(8, 300),
                        size_norm=(0, 1), ax=ax, alpha=0.7, legend=False, zorder=3)
        _bytes_axis(ax.xaxis)
    ax.set(xlabel="bytes per call per rank (log)", ylabel="")
    note = f" ({zeros} zero-byte rows not shown)" if zeros else ""
    fig.suptitle((title or "transfer sizes per operation") + note)
    return _save(fig, path)


def _bin_label(lo: int, hi: int) -> str:
    return "0" if hi <= 1 else human_bytes(lo)


def plot_request_sizes(hist: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Request-size distribution: share of requests and of bytes per power-of-two size bin, stacked by op.

    Parameters
    ----------
    hist : pandas.DataFrame
        :func:`traces.stats.size_histogram` output (not split by comm).
    """
    fig, (top, bottom) = _figure(2, 1, (10.0, 7.5))
    if not hist.empty:
        # every bin from the smallest to the largest request, empty ones too, so the x axis stays a log scale
        positive = hist.loc[hist["bin_lo_bytes"] > 0, "bin_lo_bytes"]
        lo_all = [0] if (hist["bin_lo_bytes"] == 0).any() else []
        if len(positive):
            k_lo, k_hi = int(positive.min()).bit_length() - 1, int(positive.max()).bit_length() - 1
            lo_all += [1 << k for k in range(k_lo, k_hi + 1)]
        labels = {lo: _bin_label(lo, 1 if lo == 0 else 2 * lo) for lo in lo_all}
        ops = list(pd.unique(hist["op"]))
        colors = dict(zip(ops, sns.color_palette(n_colors=len(ops)), strict=True))
        for ax, value, ylabel in ((top, "rows", "share of requests"), (bottom, "bytes", "share of bytes")):
            wide = hist.pivot_table(index="bin_lo_bytes", columns="op", values=value, aggfunc="sum", fill_value=0)
            wide = wide.reindex(index=lo_all, columns=ops, fill_value=0)
            share = wide / max(float(wide.to_numpy().sum()), 1.0)
            share.index = [labels[lo] for lo in share.index]
            share.plot.bar(stacked=True, ax=ax, width=0.9, color=[colors[op] for op in ops], legend=ax is top)
            ax.set(ylabel=ylabel, xlabel="")
            ax.tick_params(axis="x", labelrotation=60)
        bottom.set_xlabel("request size (bin start; bins are [2^k, 2^(k+1)) bytes)")
    fig.suptitle(title or "request-size distribution")
    return _save(fig, path)


def plot_bandwidth(bw: Bandwidth, path: str | Path, title: str = "") -> Path:
    """Bytes issued per second over time, with the peak and mean as horizontal lines."""
    fig, (ax,) = _figure(1, 1, (10.0, 4.5))
    table = bw.table
    if not table.empty:
        # repeat the last value at the end of its window so every window is drawn as a step
        t_s = np.append(table["t_s"].to_numpy(), table["t_s"].iloc[-1] + bw.window_s)
        gbps = np.append(table["bytes_per_s"].to_numpy(), table["bytes_per_s"].iloc[-1]) / 1e9
        ax.step(t_s, gbps, where="post", color=sns.color_palette()[0], linewidth=1.0, label="bytes issued")
        ax.axhline(bw.peak_bytes_per_s / 1e9, color="crimson", linestyle="--",
                   label=f"peak {bw.peak_bytes_per_s / 1e9:.3g} GB/s")
        ax.axhline(bw.mean_bytes_per_s / 1e9, color="black", linestyle=":",
                   label=f"mean {bw.mean_bytes_per_s / 1e9:.3g} GB/s")
        ax.legend(loc="upper right")
    ax.set(xlabel="time since trace start (s)", ylabel=f"GB/s issued (window {bw.window_s:g} s)")
    parts = [f"peak/mean {bw.peak_to_mean:.3g}", f"CV {bw.cv:.3g}"]
    if bw.untimed_rows:
        parts.append(f"{bw.untimed_rows} untimed rows not shown")
    fig.suptitle(f"{title or 'bandwidth over time'}: " + ", ".join(parts))
    return _save(fig, path)


def plot_bandwidth_by_comm(series: pd.DataFrame, path: str | Path, top: int = 6, title: str = "") -> Path:
    """Bytes issued per second over time for the ``top`` communicators with the most bytes.

    Parameters
    ----------
    series : pandas.DataFrame
        :func:`traces.stats.bandwidth_by_comm` output.
    """
    fig, (ax,) = _figure(1, 1, (10.0, 4.5))
    if not series.empty:
        heavy = series.groupby("comm")["bytes"].sum().sort_values(ascending=False).index[:top]
        shown = series[series["comm"].isin(heavy)].assign(gbps=lambda s: s["bytes_per_s"] / 1e9)
        sns.lineplot(shown, x="t_s", y="gbps", hue="comm", hue_order=list(heavy), ax=ax, drawstyle="steps-post",
                     linewidth=1.0, errorbar=None, estimator=None)
        ax.set(ylabel=f"GB/s issued (window {series['window_s'].iloc[0]:g} s)")
    ax.set(xlabel="time since trace start (s)")
    fig.suptitle(title or f"bandwidth over time, top {top} communicators by bytes")
    return _save(fig, path)


__all__ = [
    "DPI",
    "human_bytes",
    "plot_bandwidth",
    "plot_bandwidth_by_comm",
    "plot_op_counts",
    "plot_request_sizes",
    "plot_sizes_per_op",
]
