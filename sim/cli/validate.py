"""`simrun validate FILE --topo X [--set ...]`: measured nccl-tests table vs collsim (SPEC §10)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from sim.cli.common import parse_set_options
from sim.option_values import ROUTINGS


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.1%}"


def assumptions(entries: list[dict], params: dict) -> list[str]:
    """One line per fabric choice the file does not state and the user did not set (printed before the figures).

    Parameters
    ----------
    entries : list of dict
        The reader's tables (``trace.attrs["collsim"]["nccl_tests"]``: ``nranks``, ``gpus_per_node``, ``gpu``).
    params : dict
        The ``--set`` parameters.

    Returns
    -------
    list of str
        Lines without the leading ``# ``; empty when the file and ``--set`` state everything.

    Examples
    --------
    >>> for line in assumptions([{"nranks": 16, "gpus_per_node": None, "gpu": ""}], {}):
    ...     print(line)
    table 0: no '# Rank' lines: 8 GPUs per server assumed (--set gpus_per_server=N)
    no gpu= set: line-rate model (presets: a100, h100, h200, b200)
    >>> assumptions([{"nranks": 16, "gpus_per_node": 8, "gpu": "NVIDIA H100 80GB HBM3"}], {"gpu": "h100"})
    []
    """
    from sim.bench.validate import table_gpus_per_server
    from topologies.hardware import GPU_PRESETS, gpu_preset_for

    lines = [f"table {k}: no '# Rank' lines: {table_gpus_per_server(e)} GPUs per server assumed "
             "(--set gpus_per_server=N)" for k, e in enumerate(entries)
             if not e.get("gpus_per_node") and "gpus_per_server" not in params]
    if "gpu" not in params:
        names = sorted({e["gpu"] for e in entries if e.get("gpu")})
        presets = ", ".join(GPU_PRESETS)
        if not names:
            lines.append(f"no gpu= set: line-rate model (presets: {presets})")
        for name in names:
            key = gpu_preset_for(name)
            hint = f"--set gpu={key} applies its preset" if key else f"no preset describes it ({presets})"
            lines.append(f"the file names the GPU '{name}'; no gpu= set: line-rate model ({hint})")
    return lines


@click.command("validate")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topo", required=True, help="Preset name (rail_optimized, ...) or a YAML file.")
@click.option("--set", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Topology parameter (repeatable, or k1=v1,k2=v2): link_gbps, nvlink_gbps, gpu, nic, "
                   "gpus_per_server (when the file has no '# Rank' lines), ...")
@click.option("--routing", type=click.Choice(list(ROUTINGS)), default="ecmp", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the ECMP hash.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder [default: simrun-out/validate-<file>/].")
def command(path: Path, topo: str, set_options: tuple[str, ...], routing: str, seed: int,
            out_dir: Path | None) -> None:
    """Replay the nccl-tests output in FILE on topology X; print measured vs simulated busbw per size.

    FILE is *_perf stdout as saved (mpirun --tag-output or srun -l prefixes, several tables). Each table
    runs on X sized to its ranks and servers. Writes validate.parquet (size, busbw_measured, busbw_sim,
    ratio = sim / measured, ...), validate.csv and validate.png (the first table). The error of a size is
    |ratio - 1|. What the file does not state and --set does not give is printed first, one '#' line
    each (GPUs per server when there are no '# Rank' lines; the GPU the Rank lines name and the gpu=
    preset that describes it, not applied unless set). Rows the measured table contradicts (out-of-place
    time over twice its in-place time, or over twice a larger size's) are flagged (column flag), left out
    of the medians and counted.
    """
    import topologies
    from sim.bench.report import plot_validate, write_table
    from sim.bench.sizes import gpus_per_thread
    from sim.bench.validate import error_summary, table_gpus_per_server, validate_trace
    from traces.ingest_report import IngestReport
    from traces.readers import ingest

    params = parse_set_options(set_options)
    trace = ingest([path], format="nccl-tests")
    read = trace.attrs["collsim"].get("ingest", {})
    if read.get("skipped"):  # rows the reader could not use: say so before the figures
        click.echo("# " + IngestReport.from_dict(read).summary())

    def build(entry):
        kw = dict(params)
        kw["num_gpus"] = int(entry["nranks"])
        if entry.get("gpus_per_node") or "gpus_per_server" not in kw:  # the Rank lines win over --set
            kw["gpus_per_server"] = table_gpus_per_server(entry)
        return topologies.build(topo, **kw)

    for line in assumptions(trace.attrs["collsim"]["nccl_tests"], params):
        click.echo("# " + line)
    headers = [e["line"] for e in trace.attrs["collsim"]["nccl_tests"]]
    table = validate_trace(trace, build, routing=routing, seed=seed,
                           gpus_per_thread=gpus_per_thread(path.read_text(errors="replace"), headers))
    summary = error_summary(table)
    for k, grp in table.groupby("table", sort=True):
        entry = trace.attrs["collsim"]["nccl_tests"][k]
        click.echo(f"# table {k}: {entry['stem']}_perf, {entry['nranks']} ranks (line {entry['line']} of {path.name})")
        click.echo(f"#{'size':>12}  {'measured':>9}  {'collsim':>9}  {'ratio':>6}  {'algo':>5}  {'proto':>6}  flag")
        for r in grp.itertuples(index=False):
            click.echo(f" {int(r.size):>12}  {r.busbw_measured:>9.2f}  {r.busbw_sim:>9.2f}  {r.ratio:>6.3f}  "
                       f"{r.algo:>5}  {r.proto:>6}  {r.flag}".rstrip())
        s = summary[summary["table"] == k].iloc[0]
        click.echo(f"# busbw error: >= 256 MiB median {_pct(s.large_median)} worst {_pct(s.large_worst)} "
                   f"({int(s.large_n)} sizes); <= 1 MiB median {_pct(s.small_median)} worst {_pct(s.small_worst)} "
                   f"({int(s.small_n)} sizes); flagged rows left out: {int(s.large_flagged)} / "
                   f"{int(s.small_flagged)}")
    out = out_dir or Path("simrun-out") / f"validate-{path.stem}"
    files = write_table(table, out, "validate")
    files.append(plot_validate(table[table["table"] == table["table"].iloc[0]] if table["table"].nunique() > 1
                               else table, out / "validate.png", f"{path.name} on {topo}"))
    click.echo("# wrote " + ", ".join(str(f) for f in files))


__all__ = ["assumptions", "command"]
