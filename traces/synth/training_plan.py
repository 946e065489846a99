"""A training run's plan (:class:`TrainingPlan`), its checks (:func:`check_plan`), and what each rank holds:
the padded vocabulary, a block's parameters per rank, the blocks of a pipeline stage and its parameter units
in forward order (:func:`param_units`, the gradient buckets' and FSDP's units).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from traces.schema import TraceError
from traces.synth.models import ModelSpec
from traces.synth.workload import plan_from_options


@dataclass(frozen=True)
class TrainingPlan:
    """Parallelism and batch of a training run (see :func:`synthesize_training`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    gpus_per_node: int = 8
    nodes: int | None = None
    micro_batches: int | None = None
    micro_batch_size: int = 1
    seq_len: int = 4096
    zero: int = 0
    bucket_elems: int = 40_000_000
    grad_dtype: str = "fp32"
    sequence_parallel: bool = False
    steps: int = 1
    seed: int = 0
    gpu: str = "h100"
    mfu: float = 0.4
    router_skew: float = 0.5
    nvlink_gbps: float = 3600.0
    net_gbps: float = 400.0

    @classmethod
    def from_options(cls, options: dict) -> TrainingPlan:
        """Build a plan from keyword options, rejecting unknown names with one line."""
        return plan_from_options(cls, options, "training")


def padded_vocab(spec: ModelSpec, tp: int, multiple: int = 128) -> int:
    """Megatron pads the vocabulary to a multiple of ``multiple × tp`` (``--make-vocab-size-divisible-by``)."""
    step = multiple * tp
    return math.ceil(spec.vocab / step) * step


def layer_params_per_rank(spec: ModelSpec, tp: int, ep: int = 1, moe: bool = False) -> dict[str, int]:
    """Parameters of one block held by one rank, split into ``dense`` (reduced over DP) and ``expert``.

    Column-parallel weights and biases are split over ``tp``; row-parallel biases and norms are replicated.
    """
    h, hd = spec.hidden, spec.head_dim
    qkv_out = (spec.heads + 2 * spec.kv_heads) * hd
    attn = (h * qkv_out + spec.heads * hd * h) // tp
    if spec.bias:
        attn += qkv_out // tp + h
    norms = spec.norm_params_per_layer()
    if moe:
        experts = (spec.experts // ep) * spec.mlp_params(spec.moe_inter) // tp
        return {"dense": attn + norms + h * spec.experts, "expert": experts}
    if spec.mlp == "swiglu":
        mlp = 3 * h * spec.ffn_inter // tp
    else:
        mlp = 2 * h * spec.ffn_inter // tp + (spec.ffn_inter // tp + h if spec.bias else 0)
    return {"dense": attn + mlp + norms, "expert": 0}


def stage_layers(spec: ModelSpec, pp: int, stage: int) -> range:
    """Blocks of pipeline ``stage`` (an even split)."""
    bounds = np.linspace(0, spec.layers, pp + 1).round().astype(int)
    return range(int(bounds[stage]), int(bounds[stage + 1]))


def param_units(spec: ModelSpec, plan: TrainingPlan, stage: int) -> list[tuple[str, int, int]]:
    """The stage's parameter units in forward order: ``(name, dense params, expert params)`` per rank."""
    tp, pp = plan.tp, plan.pp
    out: list[tuple[str, int, int]] = []
    vocab_rows = padded_vocab(spec, tp) // tp
    if stage == 0:
        out.append(("embed", vocab_rows * spec.hidden + spec.learned_positions * spec.hidden, 0))
    for layer in stage_layers(spec, pp, stage):
        p = layer_params_per_rank(spec, tp, plan.ep, spec.is_moe and layer >= spec.dense_layers)
        out.append((f"layer{layer}", p["dense"], p["expert"]))
    if stage == pp - 1:
        norm = 2 * spec.hidden if spec.bias else spec.hidden
        head = 0 if (spec.tied_embeddings and pp == 1) else vocab_rows * spec.hidden
        out.append(("head", norm + head, 0))
    return out


def check_plan(spec: ModelSpec, plan: TrainingPlan) -> int:
    """Validate the plan against the model; return the world size ``tp × pp × dp``.

    Raises
    ------
    TraceError
        The first option out of range or inconsistent with the model, named.

    Examples
    --------
    >>> from traces.synth.models import get_model
    >>> check_plan(get_model("llama3-8b"), TrainingPlan(tp=2, pp=2, dp=2))
    8
    """
    for name in ("tp", "pp", "dp", "ep", "gpus_per_node", "micro_batch_size", "seq_len", "bucket_elems", "steps"):
        value = getattr(plan, name)
        if not isinstance(value, int) or value < 1:
            raise TraceError(f"option '{name}' must be a positive integer, got {value!r}")
    if plan.zero not in (0, 1, 3):
        raise TraceError(f"option 'zero' must be 0, 1 or 3, got {plan.zero!r}")
    if plan.grad_dtype not in ("fp32", "bf16"):
        raise TraceError(f"option 'grad_dtype' must be fp32 or bf16, got {plan.grad_dtype!r}")
    if spec.heads % plan.tp or spec.kv_heads % plan.tp:
        raise TraceError(f"tp={plan.tp} must divide the {spec.heads} heads and {spec.kv_heads} KV heads of {spec.name}")
    if spec.is_mla:
        raise TraceError(f"training synthesis covers Llama, GPT and Mixtral; {spec.name} uses MLA (use inference)")
    if plan.ep > 1:
        if not spec.is_moe:
            raise TraceError(f"option 'ep' needs an MoE model; {spec.name} is dense")
        if plan.tp != 1 or plan.dp % plan.ep or spec.experts % plan.ep:
            raise TraceError(f"ep={plan.ep} needs tp = 1 and must divide dp ({plan.dp}) and the {spec.experts} experts")
        if plan.zero == 3:
            raise TraceError("zero=3 (FSDP) with expert parallelism is not modelled; use zero 0 or 1")
    if plan.pp > spec.layers:
        raise TraceError(f"pp={plan.pp} exceeds the {spec.layers} layers of {spec.name}")
    world = plan.tp * plan.pp * plan.dp
    if plan.nodes is not None and plan.nodes * plan.gpus_per_node != world:
        raise TraceError(f"--nodes {plan.nodes} × --gpus-per-node {plan.gpus_per_node} = "
                         f"{plan.nodes * plan.gpus_per_node} GPUs, but tp × pp × dp = {world}")
    if plan.micro_batches is not None and plan.micro_batches < 1:
        raise TraceError(f"option 'micro_batches' must be at least 1, got {plan.micro_batches}")
    return world


__all__ = ["TrainingPlan", "check_plan", "layer_params_per_rank", "padded_vocab", "param_units", "stage_layers"]
