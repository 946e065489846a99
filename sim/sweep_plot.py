"""The sweep's comparison plots (``sweep.png``): makespan, makespan over ideal and slowdown p99 per
topology, one colour per combination of the other swept parameters.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from traces.atomic import save_figure

#: Summary figures of the comparison plots: column, axis label, transform to the plotted value.
PLOTTED = (("makespan_s", "makespan (ms)", lambda v: v * 1e3),
           ("makespan_vs_ideal", "makespan over ideal (%)", lambda v: (v - 1.0) * 100.0),
           ("slowdown_p99", "collective slowdown p99 (x ideal)", lambda v: v))


def varying_columns(table: pd.DataFrame) -> list[str]:
    """Point columns (other than ``point``, ``topo``, ``seed``) that take more than one value."""
    columns = list(table.columns)
    params = columns[columns.index("topo") + 1:columns.index("algo")] + ["algo", "routing"]
    return [c for c in params if c in table.columns and table[c].nunique(dropna=False) > 1]


def plot_sweep(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Comparison plots: makespan, makespan / ideal and slowdown p99 per topology (bars), one colour per
    combination of the other swept parameters. Lower is better: the lowest bar wins."""
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns
    from matplotlib.figure import Figure

    shown = [(c, label, f) for c, label, f in PLOTTED if c in table.columns and table[c].notna().any()]
    sns.set_theme(style="whitegrid", context="notebook")
    fig = Figure(figsize=(4.2 * max(len(shown), 1) + 1.0, 5.0), layout="constrained")
    axes = fig.subplots(1, max(len(shown), 1), squeeze=False).ravel()
    vary = varying_columns(table)
    data = table.copy()
    data["topo"] = data["topo"].map(lambda t: Path(str(t)).stem)  # a YAML path's name, not its folders
    hue = None
    if vary:
        hue = "setting"
        data[hue] = data[vary].astype(str).apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
    for ax, (column, label, transform) in zip(axes, shown, strict=False):
        data["_y"] = transform(data[column].astype(float))
        sns.barplot(data, x="topo", y="_y", hue=hue, ax=ax, errorbar=None, legend=False)
        for bars in ax.containers:
            ax.bar_label(bars, fmt="%.3g", fontsize=8)
        if column == "slowdown_p99":
            ax.set_ylim(bottom=1.0)  # 1 = as fast as on the ideal fabric
        ax.set(xlabel="", ylabel=label)
        ax.tick_params(axis="x", labelrotation=20)
    if hue is not None:
        import matplotlib.patches as mpatches

        palette = sns.color_palette(n_colors=data[hue].nunique())
        handles = [mpatches.Patch(color=c, label=name) for c, name in zip(palette, pd.unique(data[hue]), strict=True)]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), frameon=False)
    fig.suptitle(title or "which topology wins (lower is better)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out, dpi=120, format="png")  # atomic: temp file + rename
    return out


__all__ = ["PLOTTED", "plot_sweep", "varying_columns"]
