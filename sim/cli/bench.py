"""`simrun bench OP --topo X`: a virtual nccl-tests (SPEC §10)."""

from __future__ import annotations

from pathlib import Path

import click

from sim.cli.common import parse_set_options
from sim.option_values import ROUTINGS

_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")


def _presets_help() -> str:
    from topologies.hardware import preset_help

    return preset_help()


class _BenchCommand(click.Command):
    """Appends the hardware preset table to ``--help`` (read from ``topologies.hardware``)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Hardware presets (--set gpu=NAME, --set nic=NAME)"):
            formatter.write_text(_presets_help())


@click.command("bench", cls=_BenchCommand)
@click.argument("op", type=click.Choice(_OPS))
@click.option("--topo", required=True, help="Preset name (rail_optimized, fat_tree, ...) or a YAML file.")
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (repeatable, or k1=v1,k2=v2): num_gpus, gpus_per_server, link_gbps, "
                   "nvlink_gbps, gpu, nic, ...")
@click.option("--nodes", type=click.IntRange(min=1), default=None,
              help="Servers taking part (num_gpus = nodes x gpus_per_server) [default: 1].")
@click.option("-b", "--minbytes", "min_size", default="8", show_default=True, help="Smallest size (K/M/G suffixes).")
@click.option("-e", "--maxbytes", "max_size", default="1G", show_default=True, help="Largest size.")
@click.option("-f", "--stepfactor", "factor", type=float, default=2.0, show_default=True,
              help="Multiply the size by this factor each row.")
@click.option("-i", "--stepbytes", "step", default=None, help="Add this many bytes each row instead of -f.")
@click.option("-d", "--datatype", "dtype", default="float", show_default=True,
              help="nccl-tests datatype: float, half, bfloat16, double, int8, int32, ...")
@click.option("-r", "--root", type=int, default=0, show_default=True, help="Root of broadcast / reduce.")
@click.option("--algo", default=None, metavar="NCCL_ALGO",
              help="Algorithms the tuner may use, as NCCL_ALGO (NCCL 2.2x names, any case): Ring, Tree, NVLS "
                   "(NVSwitch SHARP, one H100/H200/B200 server), NVLSTree (NVLS in servers, tree across), PAT "
                   "(AllGather/ReduceScatter, one GPU per server), CollNetDirect, CollNetChain (need SHARP "
                   "switches: ignored, as NCCL does without them); lists 'Ring,Tree', exclusions '^NVLS'.")
@click.option("--proto", default=None, metavar="NCCL_PROTO",
              help="Protocols the tuner may use, as NCCL_PROTO: LL, LL128, Simple, '^LL'.")
@click.option("--routing", type=click.Choice(list(ROUTINGS)), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the ECMP hash.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder [default: simrun-out/bench-<op>-<topo>/].")
def command(op: str, topo: str, set_options: tuple[str, ...], nodes: int | None, min_size: str, max_size: str,
            factor: float, step: str | None, dtype: str, root: int, algo: str | None, proto: str | None,
            routing: str, seed: int, out_dir: Path | None) -> None:
    """Simulate nccl-tests' OP_perf over topology X: busbw per size, as a cluster would print it.

    Prints nccl-tests' table (size, count, type, redop, root, time in us, algbw and busbw in GB/s =
    1e9 B/s, with nccl-tests' busbw factors) plus the algorithm and protocol NCCL's tuner picks at each
    size, then '# Avg bus bandwidth'. Writes bench.parquet, bench.csv and bench.png (busbw against size,
    coloured by algorithm/protocol).

    Example: simrun bench all_reduce --topo rail_optimized --nodes 2 --set nic=ib,gpu=h100 -b 1M -e 16G
    """
    import topologies
    from sim.bench.report import format_table, plot_bench, write_table
    from sim.bench.run import run_bench
    from sim.bench.sizes import bench_sizes, parse_size, trace_op

    params = parse_set_options(set_options)
    gps = params.setdefault("gpus_per_server", 8)
    if nodes is not None:
        if "num_gpus" in params:
            raise click.BadParameter("give --nodes or --set num_gpus, not both", param_hint="--nodes")
        if not isinstance(gps, int) or isinstance(gps, bool):
            raise click.BadParameter(f"gpus_per_server {gps!r} must be an int", param_hint="--set")
        params["num_gpus"] = nodes * gps
    params.setdefault("num_gpus", gps)
    graph = topologies.build(topo, **params)
    sizes = bench_sizes(parse_size(min_size), parse_size(max_size), factor,
                        None if step is None else parse_size(step))
    table = run_bench(trace_op(op), graph, sizes, dtype=dtype, root=root, algo=algo, proto=proto,
                      routing=routing, seed=seed)
    n = int(graph.graph.get("num_gpus") or params["num_gpus"])
    name = graph.graph.get("name", topo)
    hw = graph.graph.get("hardware") or {}
    header = [f"collsim bench {op}_perf: {n} ranks on {name} ({n // gps if isinstance(gps, int) else '?'} "
              f"servers x {gps}), routing {routing}, seed {seed}",
              "hardware: " + (", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in hw.items()) if hw else "line rates (no preset)"),
              f"NCCL_ALGO={algo or '(tuner)'} NCCL_PROTO={proto or '(tuner)'}"]
    click.echo(format_table(table, header))
    out = out_dir or Path("simrun-out") / f"bench-{op}-{Path(topo).stem}"
    files = write_table(table, out, "bench")
    if len(table):
        files.append(plot_bench(table, out / "bench.png", f"{op}_perf, {n} ranks on {name}"))
    click.echo("# wrote " + ", ".join(str(f) for f in files))


__all__ = ["command"]
