"""An inference run's plan: engine, parallelism, cluster shape and workload (:class:`InferencePlan`), and
the checks that it is one the engines can run (:func:`check_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.schema import TraceError
from traces.synth.models import ModelSpec
from traces.synth.workload import (
    plan_from_options,
)

ENGINES: tuple[str, ...] = ("reference", "vllm", "sglang")


@dataclass(frozen=True)
class InferencePlan:
    """Parallelism and workload of an inference run (see :func:`synthesize_inference`)."""

    engine: str = "sglang"
    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    gpus_per_node: int = 8
    nodes: int | None = None
    requests: int = 1
    prompt_tokens: str | int = 1000
    output_tokens: str | int = 16
    arrival_rate: float | None = None
    seed: int = 0
    gpu: str = "h800"
    mfu: float = 0.45
    overhead_s: float | None = None
    max_batch: int = 8
    max_running: int = 256
    max_prefill_tokens: int = 16384
    dedup: str = "expert"
    router_skew: float = 0.5
    dispatch_fp8: bool | None = None
    prompt_broadcast: bool = True
    nvlink_gbps: float = 3600.0
    net_gbps: float = 400.0
    redundant_experts: int | None = None
    decode_batch: int = 0
    decode_context: int = 4096
    eplb_tokens: int = 4096

    @classmethod
    def from_options(cls, options: dict) -> InferencePlan:
        """Build a plan from keyword options, rejecting unknown names with one line."""
        return plan_from_options(cls, options, "inference")


def redundant_experts(plan: InferencePlan, spec: ModelSpec) -> int:
    """Redundant expert replicas: as given, else one slot per GPU when EP spans more GPUs than experts
    (DeepSeek-V3 decode at EP320, arXiv 2412.19437 §3.4.2), else none."""
    if plan.redundant_experts is not None:
        return plan.redundant_experts
    if plan.ep > spec.experts > 0:
        return plan.ep * -(-spec.experts // plan.ep) - spec.experts
    return 0


def check_plan(plan: InferencePlan, spec: ModelSpec) -> tuple[int, bool]:
    """Validate the plan; return (world size, expert-parallel all-to-all mode)."""
    if plan.engine not in ENGINES:
        raise TraceError(f"unknown engine {plan.engine!r} (known: {', '.join(ENGINES)})")
    for name in ("tp", "dp", "ep", "pp", "gpus_per_node", "max_batch", "max_running", "max_prefill_tokens"):
        value = getattr(plan, name)
        if not isinstance(value, int) or value < 1:
            raise TraceError(f"option '{name}' must be a positive integer, got {value!r}")
    for name in ("decode_batch", "eplb_tokens"):
        if not isinstance(getattr(plan, name), int) or getattr(plan, name) < 0:
            raise TraceError(f"option '{name}' must be a non-negative integer, got {getattr(plan, name)!r}")
    if not isinstance(plan.decode_context, int) or plan.decode_context < 1:
        raise TraceError(f"option 'decode_context' must be a positive integer, got {plan.decode_context!r}")
    red = plan.redundant_experts
    if red is not None and (not isinstance(red, int) or red < 0):
        raise TraceError(f"option 'redundant_experts' must be a non-negative integer, got {red!r}")
    if plan.dedup not in ("expert", "rank"):
        raise TraceError(f"option 'dedup' must be 'expert' or 'rank', got {plan.dedup!r}")
    world = plan.tp * plan.dp * plan.pp
    ep_mode = plan.ep > 1 and plan.dp > 1
    if plan.engine == "reference":
        if spec.name != "deepseek-v3":
            raise TraceError(f"engine 'reference' is DeepSeek-V3's own code; model {spec.name} needs vllm or sglang")
        if plan.dp != 1 or plan.pp != 1 or plan.ep not in (1, plan.tp):
            raise TraceError("engine 'reference' runs pure model parallelism: use --tp N with dp = pp = 1")
        ep_mode = False
    if plan.ep > 1 and not spec.is_moe:
        raise TraceError(f"option 'ep' needs an MoE model; {spec.name} is dense")
    if ep_mode:
        if world % plan.ep or plan.ep % plan.tp or plan.pp != 1:
            raise TraceError(f"expert parallelism with dp > 1 needs ep to divide tp × dp = {world} into whole "
                             f"replicas (independent EP deployments side by side) and pp = 1, "
                             f"got ep={plan.ep} pp={plan.pp}")
        physical = spec.experts + redundant_experts(plan, spec)
        if physical % plan.ep:
            raise TraceError(f"ep={plan.ep} does not divide {spec.experts} experts + {physical - spec.experts} "
                             "redundant: set redundant_experts so that every GPU hosts as many replicas")
    elif plan.ep > 1 and plan.ep != plan.tp:
        raise TraceError(f"with dp = 1, expert parallelism runs inside the TP group: ep must equal tp ({plan.tp})")
    if plan.nodes is not None and plan.nodes * plan.gpus_per_node != world:
        raise TraceError(f"--nodes {plan.nodes} × --gpus-per-node {plan.gpus_per_node} = "
                         f"{plan.nodes * plan.gpus_per_node} GPUs, but tp × dp × pp = {world}")
    if spec.layers < plan.pp:
        raise TraceError(f"pp={plan.pp} exceeds the {spec.layers} layers of {spec.name}")
    return world, ep_mode


__all__ = ["ENGINES", "InferencePlan", "check_plan", "redundant_experts"]
