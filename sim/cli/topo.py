"""`simrun topo X [--set k=v] [--draw FILE.png] [--json]`: describe a topology (SPEC §2)."""

from __future__ import annotations

import json

import click

from sim.cli.common import parse_set_options, progress_bar, stage_bar


def _format_text(info: dict) -> str:
    lines = [f"topology {info['name']} ({info['preset']}): {info['num_gpus']} GPUs on {info['servers']} servers "
             f"x {info['gpus_per_server']}"]
    lines.append("nodes per tier: " + ", ".join(f"{k} {v}" for k, v in info["tiers"].items()))
    lines.append("links per kind:")
    for kind, entry in info["links"].items():
        lines.append(f"  {kind:<11} {entry['count']:>7} cables  {entry['capacity_gbps']:>14,.1f} Gbps per direction")
    bis = info["bisection_gbps"]
    lines.append("bisection bandwidth: " + ("n/a (one server)" if bis is None else
                                             f"{bis:,.1f} Gbps ({info['bisection_ratio']:.2f} of full bisection)"))
    over = info["access_oversubscription"]
    lines.append(f"oversubscription: {info['oversubscription']:g} configured, "
                 + ("no uplinks at the GPU-facing switches" if over is None else f"{over:.3g}:1 measured")
                 if info["oversubscription"] is not None else
                 "oversubscription: " + ("n/a" if over is None else f"{over:.3g}:1 measured"))
    lines.append(f"diameter: {info['diameter_hops']} hops GPU to GPU")
    params = {k: v for k, v in info["parameters"].items() if k != "description"}
    if params:
        lines.append("parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    return "\n".join(lines)


@click.command("topo")
@click.argument("topology")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (repeatable, or k1=v1,k2=v2), e.g. --set k=8 --set oversubscription=2.")
@click.option("--draw", "draw_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Draw the topology into this image file (e.g. fabric.png).")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
def command(topology: str, sets: tuple[str, ...], draw_path: str | None, as_json: bool) -> None:
    """Describe TOPOLOGY (a preset name or a YAML file): nodes per tier, links, bisection bandwidth,
    oversubscription and diameter.

    Presets: fat_tree, leaf_spine, rail_optimized, rail_only.
    """
    import topologies
    from topologies.config import build_progress
    from topologies.describe import summary

    # large fabrics take seconds to parse and build (limits: docs/limits.md): the bar names the stage
    with stage_bar(f"building {topology}") as report, build_progress(report):
        graph = topologies.build(topology, **parse_set_options(sets))
    with progress_bar(None, "describing (bisection, diameter)"):
        info = summary(graph)
    if draw_path:
        from topologies.draw import draw

        info["drawing"] = {"path": draw_path, "style": draw(graph, draw_path)}
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
    else:
        click.echo(_format_text(info))
        if draw_path:
            click.echo(f"drawing ({info['drawing']['style']}): {draw_path}")


__all__ = ["command"]
