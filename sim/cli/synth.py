"""``simrun synth MODEL -o OUT.parquet``: synthesize a trace for a model and parallelism plan."""

from __future__ import annotations

import click

from sim.cli.common import parse_set_options

_INFERENCE_ONLY = ("engine", "requests", "prompt_tokens", "output_tokens", "arrival_rate",
                   "max_batch", "max_running", "max_prefill_tokens", "dedup")


@click.command("synth")
@click.argument("model")
@click.option("-o", "--output", "--out", "output", required=True, type=click.Path(dir_okay=False),
              help="Parquet file to write.")
@click.option("--mode", type=click.Choice(["inference", "training"]), default="inference", show_default=True)
@click.option("--engine", type=click.Choice(["reference", "vllm", "sglang"]), default=None,
              help="Inference engine (default sglang).")
@click.option("--tp", type=int, default=None, help="Tensor parallelism (attention TP per replica with --dp).")
@click.option("--ep", type=int, default=None, help="Expert parallelism (== tp x dp for DeepEP all-to-all).")
@click.option("--dp", type=int, default=None, help="Data parallelism (DP-attention replicas in inference).")
@click.option("--pp", type=int, default=None, help="Pipeline stages.")
@click.option("--gpus-per-node", type=int, default=None, help="GPUs per server (default 8).")
@click.option("--nodes", type=int, default=None, help="Servers; must equal world size / gpus per node.")
@click.option("--requests", type=int, default=None, help="Requests in the serving run.")
@click.option("--prompt-tokens", default=None,
              help="Prompt length: N, uniform:LO:HI, normal:MEAN:STD, lognormal:MEDIAN:SIGMA or exp:MEAN.")
@click.option("--output-tokens", default=None,
              help="Generated tokens per request (same forms): N tokens = 1 prefill + N-1 decode forwards.")
@click.option("--arrival-rate", type=float, default=None, help="Poisson arrivals per second (0: all at t=0).")
@click.option("--seed", type=int, default=None, help="Seed of arrivals, lengths and the router (default 0).")
@click.option("--gpu", default=None, help="GPU type of the compute model: h100 h800 h200 a100 b200 mi300x.")
@click.option("--max-batch", type=int, default=None, help="Reference engine batch size (default 8).")
@click.option("--micro-batches", type=int, default=None, help="Training: micro-batches per step (default 2 x pp).")
@click.option("--micro-batch-size", type=int, default=None, help="Training: sequences per micro-batch.")
@click.option("--seq-len", type=int, default=None, help="Training: sequence length (default 4096).")
@click.option("--zero", type=click.IntRange(0, 3), default=None,
              help="Training: 0 bucket AllReduce, 1 distributed optimizer (RS + AG), 3 FSDP.")
@click.option("--sequence-parallel/--no-sequence-parallel", default=None, help="Training: Megatron SP.")
@click.option("--steps", type=int, default=None, help="Training: optimizer steps.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any other plan option (repeatable), e.g. --set dedup=rank --set mfu=0.5.")
def command(model: str, output: str, mode: str, sets: tuple[str, ...], **options) -> None:
    """Synthesize a trace for MODEL (deepseek-v3, llama3-8b/70b/405b, gpt3-175b, mixtral-8x7b).

    Examples:

      simrun synth deepseek-v3 --engine reference --tp 16 --nodes 2 --requests 1 -o ds.parquet

      simrun synth llama3-70b --mode training --tp 8 --pp 4 --dp 2 --micro-batches 8 -o t.parquet
    """
    from traces.io import write_trace
    from traces.synth import synthesize

    plan = {k: v for k, v in options.items() if v is not None}
    plan.update(parse_set_options(sets))
    if mode == "training":
        wrong = sorted(k for k in plan if k in _INFERENCE_ONLY)
        if wrong:
            raise click.UsageError(f"option(s) {', '.join('--' + w.replace('_', '-') for w in wrong)} "
                                   "apply to --mode inference only")
    df = synthesize(model, mode=mode, **plan)
    write_trace(df, output)
    meta = df.attrs["collsim"]
    ops = df.groupby("op").size().to_dict()
    summary = ", ".join(f"{op} {n}" for op, n in sorted(ops.items()))
    click.echo(f"wrote {output}: {len(df)} rows on {meta['world_size']} ranks ({summary}); "
               f"span {df['t_start_s'].max():.4f} s")


__all__ = ["command"]
