"""`simrun flows FLOWS --topo X`: simulate raw flows from CSV or Parquet (SPEC §2, §5)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from sim.cli.common import parse_set_options
from sim.option_values import ROUTINGS

#: ``--set`` keys that already fix a topology's size (then ``num_gpus`` is not derived from the flows).
_SIZE_KEYS = ("num_gpus", "k", "num_leaves", "num_units")


@click.command("flows")
@click.argument("flows_path", metavar="FLOWS", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topo", required=True, help="Preset name (fat_tree, leaf_spine, ...) or a YAML file.")
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (repeatable, or k1=v1,k2=v2).")
@click.option("--routing", type=click.Choice(list(ROUTINGS)), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the ECMP hash.")
@click.option("--completion-quantile", "--quantile", "completion_quantile", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.0,
              show_default=True,
              help="Batch completions up to this quantile of finish times before re-solving (0 = exact).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder [default: simrun-out/<flows>-<topo>/].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def command(flows_path: Path, topo: str, set_options: tuple[str, ...], routing: str, seed: int,
            completion_quantile: float, out_dir: Path | None, as_json: bool) -> None:
    """Simulate the flows in FLOWS (CSV or Parquet: src, dst, bytes, start_s) over topology X.

    Writes flows.parquet (the input plus finish_s and path) and links.parquet (per directed link: bytes,
    mean and peak utilization, time above 90 %), and prints a short summary.
    """
    import topologies
    from sim.errors import SimError
    from sim.flows import run_flows
    from sim.options import check_seed

    seed = check_seed(seed, "--seed")  # the range simrun run and sweep accept
    flows = _read_flows(flows_path)
    params = parse_set_options(set_options)
    if not any(key in params for key in _SIZE_KEYS) and len(flows):
        params["num_gpus"] = _num_gpus_for(flows, topo, params)
    graph = topologies.build(topo, **params)
    try:
        result = run_flows(graph, flows, routing=routing, seed=seed, completion_quantile=completion_quantile)
    except SimError as exc:
        raise SimError(f"{flows_path}: {exc}") from None
    out = out_dir or Path("simrun-out") / f"{flows_path.stem}-{Path(topo).stem}"
    out.mkdir(parents=True, exist_ok=True)
    from sim.results.output import write_parquet

    write_parquet(result.flows, out / "flows.parquet")  # atomic: temp file + rename
    write_parquet(result.links, out / "links.parquet")
    summary = _summary(result, graph, out)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"flows       {summary['flows']:,} ({summary['bytes']:,.0f} bytes) over {summary['topology']}, "
               f"routing {routing}")
    click.echo(f"makespan    {summary['makespan_s'] * 1e3:.6g} ms")
    click.echo(f"max link    {summary['max_link_utilization']:.1%} peak utilization; busiest "
               f"{summary['busiest_link']} at {summary['busiest_link_mean_utilization']:.1%} mean")
    click.echo(f"wrote       {out / 'flows.parquet'}, {out / 'links.parquet'}")


def _read_flows(path: Path):
    """A DataFrame from CSV or Parquet (by suffix); SimError naming the file when it cannot be parsed."""
    import pandas as pd

    from sim.errors import SimError

    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except OSError:
        raise
    except Exception as exc:  # pandas / pyarrow parse errors come in many types
        raise SimError(f"{path}: cannot read flows ({' '.join(str(exc).split()) or type(exc).__name__})") from None


def _num_gpus_for(flows, topo: str, params: dict[str, Any]) -> int:
    """GPUs the flows need (max slot + 1), rounded up to whole servers of the topology."""
    import pandas as pd
    import yaml

    from topologies import PRESETS, preset_parameters

    slots = pd.to_numeric(pd.concat([flows.get("src", pd.Series(dtype=float)),
                                     flows.get("dst", pd.Series(dtype=float))]), errors="coerce")
    needed = int(slots.max()) + 1 if slots.notna().any() and slots.max() >= 0 else 1
    preset, per_server = topo, params.get("gpus_per_server")
    if topo not in PRESETS:  # a YAML file: a preset file gives its preset and maybe gpus_per_server
        try:
            doc = yaml.safe_load(Path(topo).read_text())
        except (OSError, yaml.YAMLError):
            return needed       # topologies.build reports the file's problem
        if not isinstance(doc, dict) or doc.get("preset") not in PRESETS:
            return needed       # an explicit graph checks num_gpus against its GPUs
        preset = doc["preset"]
        per_server = per_server or doc.get("gpus_per_server")
    if per_server is None:
        per_server = preset_parameters(preset)["gpus_per_server"][1]
    if not isinstance(per_server, int) or per_server < 1:
        return needed
    return per_server * math.ceil(needed / per_server)


def _summary(result, graph, out: Path) -> dict[str, Any]:
    links = result.links
    busiest = int(links["mean_utilization"].to_numpy().argmax()) if len(links) else 0
    attrs = result.flows.attrs.get("collsim_flows", {})
    return {
        "flows": int(len(result.flows)),
        "bytes": float(attrs.get("bytes", 0.0)),
        "topology": str(graph.graph.get("name", "topology")),
        "num_gpus": int(graph.graph.get("num_gpus", 0)),
        "makespan_s": float(result.makespan_s),
        "max_link_utilization": float(links["peak_utilization"].max()) if len(links) else 0.0,
        "busiest_link": f"{links['src'].iat[busiest]}->{links['dst'].iat[busiest]}" if len(links) else "",
        "busiest_link_mean_utilization": float(links["mean_utilization"].max()) if len(links) else 0.0,
        "solves": int(result.network.stats["solves"]),
        "out": str(out),
    }


__all__ = ["command"]
