"""The result of a replay (SPEC §6, §9): a value (a summary dict and tables) and ``Result.write(dir)``.

It is built by :func:`sim.results.build.build_result`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from sim.engine.engine import EngineLog

__all__ = ["Result"]


@dataclass
class Result:
    """What :func:`sim.simulate` returns.

    Attributes
    ----------
    summary : dict
        SPEC §6 ``summary.json`` keys, plus ``ecmp_imbalance`` (per uplink tier, max/mean bytes over a
        switch's equal-cost uplinks), ``peak_link_utilization``, ``makespan_vs_ideal``, anomalies, timing
        mode, memo statistics and skipped-row counts.
    collectives, links, link_timeseries, incast : pandas.DataFrame
        The tables of ``collectives.parquet``, ``links.parquet``, ``link_timeseries.parquet`` and
        ``incast.parquet``.
    log : sim.engine.engine.EngineLog
        The raw replay log (flows, paths), used for ``timeline.json``.
    link_names : pandas.DataFrame
        The router's link table (``src``, ``dst``, ``kind``, ``capacity_gbps``, ``latency_us``).
    """

    summary: dict[str, Any]
    collectives: pd.DataFrame
    links: pd.DataFrame
    link_timeseries: pd.DataFrame
    incast: pd.DataFrame
    log: EngineLog | None = field(default=None, repr=False)
    link_names: pd.DataFrame | None = field(default=None, repr=False)
    graph: nx.Graph | None = field(default=None, repr=False)

    def write(self, out_dir: str | Path, plots: bool = True, timeline: bool = True) -> Path:
        """Write the SPEC §6 files (and ``timeline.json``) into ``out_dir``; return the folder.

        Parameters
        ----------
        out_dir : str or Path
            Created when missing. Written as :class:`sim.results.output.RunFolder` describes: each file
            replaced atomically, ``summary.json`` last, and a ``.incomplete`` marker until it is there.
        plots : bool
            Write ``report.html`` and its PNG plots.
        timeline : bool
            Write ``timeline.json`` (Chrome trace format; opens in Perfetto).
        """
        from sim.results import report
        from sim.results.output import RunFolder

        out = Path(out_dir)
        # Complete or marked incomplete: '.incomplete' until summary.json, written last, is in place.
        with RunFolder(out) as run:
            run.parquet(self.collectives, "collectives.parquet")
            run.parquet(self.links, "links.parquet")
            run.parquet(self.link_timeseries, "link_timeseries.parquet")
            run.parquet(self.incast, "incast.parquet")
            if timeline and self.log is not None:
                report.write_timeline(self, out / "timeline.json")
            if getattr(self, "tiers", None) is not None:  # --model both: inside the folder, before summary.json
                run.parquet(self.tiers, "tiers.parquet")
            if plots:
                report.write_report(self, out)
            run.summary(_jsonable(self.summary))
        return out


def _jsonable(value):
    """Plain JSON types (numpy scalars -> Python; NaN/inf -> None)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


__all__ = ["Result"]
