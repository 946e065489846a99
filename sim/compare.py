"""``simrun compare`` (SPEC §10): one run per fabric, side by side, with a verdict.

Each fabric is one point of :mod:`sim.sweep` (same seed, same ``--set`` values), run by its machinery
(serially, on a local Dask cluster, or behind a scheduler); each point also writes its own §6 folder
beneath the output folder. ``compare.parquet`` has one row per fabric: the §6 scalars, the §10 figures,
breakdowns per communicator role / op / tier flattened into columns, and a cost proxy of the fabric.
``compare.html`` puts the verdict first (:mod:`sim.results.verdict`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd

from sim.option_values import DEFAULT_QUANTILE

__all__ = ["compare_point", "cost_proxy", "fabric_folder", "flatten_answer", "run_compare"]


def cost_proxy(graph: nx.Graph) -> dict[str, Any]:
    """Switches per kind, cables per link kind and optics: a proxy of what a fabric costs.

    Optics count two transceivers per cable that leaves a server (every link kind but ``nvlink``), an upper
    bound where short access links would be copper.

    Examples
    --------
    >>> g = nx.Graph([("gpu0", "leaf0", {"kind": "access"}), ("leaf0", "spine0", {"kind": "leaf-spine"})])
    >>> nx.set_node_attributes(g, {"gpu0": "gpu", "leaf0": "leaf", "spine0": "spine"}, "kind")
    >>> cost_proxy(g)["switches"], cost_proxy(g)["optics"]
    (2, 4)
    """
    kinds = nx.get_node_attributes(graph, "kind")
    switches: dict[str, int] = {}
    for kind in kinds.values():
        if kind not in ("gpu",):
            switches[str(kind)] = switches.get(str(kind), 0) + 1
    cables: dict[str, int] = {}
    for _, _, d in graph.edges(data=True):
        k = str(d.get("kind", "link"))
        cables[k] = cables.get(k, 0) + 1
    network = {k: v for k, v in cables.items() if k != "nvlink"}
    out: dict[str, Any] = {"switches": int(sum(v for k, v in switches.items() if k != "nvswitch")),
                           "nvswitches": int(switches.get("nvswitch", 0)),
                           "network_cables": int(sum(network.values())), "optics": int(2 * sum(network.values()))}
    out.update({f"switches_{k}": v for k, v in sorted(switches.items())})
    out.update({f"cables_{k}": v for k, v in sorted(cables.items())})
    out.update({f"optics_{k}": 2 * v for k, v in sorted(network.items())})
    return out


def _col(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_.-]+", "_", text)


def flatten_answer(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Breakdowns of a summary as scalar columns: ``role_EP_fabric_delay_s``, ``op_AllToAll_exposed_s``,
    ``tier_leaf-spine_up_peak_utilization``...

    Examples
    --------
    >>> flatten_answer({"by_role": {"EP": {"calls": 3}}, "tiers": {"access up": {"links": 4}}})
    {'role_EP_calls': 3, 'tier_access_up_links': 4}
    """
    out: dict[str, Any] = {}
    for key, prefix in (("by_role", "role"), ("by_op", "op"), ("tiers", "tier")):
        for name, figures in (summary.get(key) or {}).items():
            for fig, value in figures.items():
                out[f"{prefix}_{_col(str(name))}_{fig}"] = value
    return out


def fabric_folder(point, points: Sequence) -> str:
    """The folder name of a point beneath ``--out``: the topology's stem, numbered when it repeats."""
    stem = _col(Path(point.topo).stem)
    same = [p for p in points if _col(Path(p.topo).stem) == stem]
    return stem if len(same) == 1 else f"{stem}-{point.index}"


def compare_point(trace_df: pd.DataFrame, point, trace_name: str = "", *, out_root: str, folder: Mapping[int, str],
                  plots: bool = True) -> dict[str, Any]:
    """Simulate one fabric, write its §6 folder, return its row (runs on a Dask worker)."""
    from sim import simulate
    from sim.sweep import point_options, scalar_summary

    options = point_options(point, trace_name)
    if not any(key in ("quantile", "completion_quantile") for key, _ in point.params):
        options = options.replace(completion_quantile=DEFAULT_QUANTILE)  # as simrun run does
    result = simulate(trace_df, point.topo, options=options)
    out = Path(out_root) / folder[point.index]
    result.write(out, plots=plots)
    row = point.row()
    row["folder"] = folder[point.index]
    for key, value in scalar_summary(result.summary).items():
        row.setdefault(key, value)
    row.update(flatten_answer(result.summary))
    row.update(cost_proxy(result.graph))
    return row


def run_compare(trace_df: pd.DataFrame, topos: Sequence[str], params: Mapping[str, Any], out: str | Path, *,
                algo: str = "auto", routing: str = "ecmp", seed: int = 0, serial: bool = False,
                scheduler: str | None = None, workers: int = 2, trace_name: str = "", plots: bool = True,
                on_done: Callable[[int], None] | None = None) -> tuple[pd.DataFrame, Path]:
    """Run every fabric, write ``compare.parquet`` and ``compare.html`` into ``out``; return the table and
    the page's path.

    More than one fabric runs on Dask unless ``serial`` (as :func:`sim.sweep.run_sweep`).
    """
    from sim.results.compare_page import write_compare_page
    from sim.sweep import expand, run_sweep

    points = expand(list(topos), {k: [v] for k, v in params.items()}, [algo], [routing], seed)
    folder = {p.index: fabric_folder(p, points) for p in points}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fn = partial(compare_point, out_root=str(out.resolve()), folder=folder, plots=plots)
    table = run_sweep(trace_df, points, scheduler=scheduler, workers=workers, serial=serial or len(points) == 1,
                      trace_name=trace_name, on_done=on_done, point_fn=fn)
    from sim.results.output import write_parquet

    write_parquet(table, out / "compare.parquet")  # atomic: temp file + rename
    page = write_compare_page(table, out, trace_name=trace_name)
    return table, page
