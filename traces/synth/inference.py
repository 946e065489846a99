"""Inference traces: the collectives DeepSeek's reference code, vLLM and SGLang issue per forward pass.

Engines (``../shared/docs/workloads.md`` §2 has the sources):

``reference``
    DeepSeek-V3 ``inference/model.py`` with world size ``tp``: per forward one AllReduce for the embedding,
    one per attention output, one per dense MLP, two per MoE layer (shared expert, routed sum), each of
    ``T × hidden`` bf16; one logits AllGather of ``seqs × V/tp`` bf16 per rank; two Broadcasts per prompt
    (``broadcast_object_list``: an int64 size, then the pickled prompt). Static batching.
``vllm``, ``sglang`` with ``dp == 1``
    Tensor parallelism over ``tp`` (optionally ``pp`` stages): one AllReduce for the embedding and two per
    layer (attention output; MLP or shared + routed experts summed before one reduce), one logits
    AllGather. Continuous batching.
``vllm``, ``sglang`` with ``dp > 1`` and ``ep == tp × dp``
    DP attention (each replica runs attention with TP ``tp`` over its own requests) and expert parallelism
    over all ranks with DeepEP-style all-to-all: per MoE layer a dispatch (FP8 + per-128 scales) and a
    combine (bf16) ``AllToAll`` whose per-pair sizes come from a seeded router. Around them the replica's
    tokens are split over its TP ranks and gathered back: SGLang reduce-scatters the attention output
    (``LayerCommunicator`` scattered mode), vLLM all-reduces it and takes its slice; both all-gather after
    the combine. Idle replicas join the all-to-all with no tokens, as both engines run a dummy batch.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traces.schema import TraceError
from traces.synth.builder import TraceBuilder
from traces.synth.compute import ComputeModel, attention_flops, get_gpu, mlp_flops
from traces.synth.eplb import ExpertPlacement
from traces.synth.models import ModelSpec
from traces.synth.router import Router, copies_matrix
from traces.synth.workload import (
    Batch,
    Step,
    continuous_batching,
    decode_steps,
    make_requests,
    plan_from_options,
    static_batching,
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


def _redundant(plan: InferencePlan, spec: ModelSpec) -> int:
    """Redundant expert replicas: as given, else one slot per GPU when EP spans more GPUs than experts
    (DeepSeek-V3 decode at EP320, arXiv 2412.19437 §3.4.2), else none."""
    if plan.redundant_experts is not None:
        return plan.redundant_experts
    if plan.ep > spec.experts > 0:
        return plan.ep * -(-spec.experts // plan.ep) - spec.experts
    return 0


def ep_comm_name(instance: int, instances: int) -> str:
    """``ep`` for one EP deployment over all ranks, ``ep0``, ``ep1``, ... for several side by side."""
    return "ep" if instances == 1 else f"ep{instance}"


def _ctx(phase: str, step: int, layer: int | None, site: str) -> str:
    layer_part = "" if layer is None else f";layer={layer}"
    return f"phase={phase};step={step}{layer_part};site={site}"


def _check(plan: InferencePlan, spec: ModelSpec) -> tuple[int, bool]:
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
        physical = spec.experts + _redundant(plan, spec)
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


class _Costs:
    """Per-rank compute time of each part of a forward, from the compute model."""

    def __init__(self, spec: ModelSpec, comp: ComputeModel) -> None:
        self.spec, self.comp = spec, comp
        h = spec.hidden
        if spec.is_mla:
            self.kv_bytes_per_token = (spec.kv_lora + spec.qk_rope) * 2
        else:
            self.kv_bytes_per_token = 2 * spec.kv_heads * spec.head_dim * 2
        self.expert_params = spec.mlp_params(spec.moe_inter) if spec.is_moe else 0
        self.gate_flops_per_token = 2.0 * h * spec.experts

    def attention(self, batch_tokens, context, decode, shard: int):
        s = self.spec
        kv = np.asarray(context if decode else batch_tokens, dtype=float) * self.kv_bytes_per_token
        flops = attention_flops(s, np.asarray(batch_tokens, dtype=float), np.asarray(context, dtype=float))
        return self.comp.time_s(flops / shard, (s.attention_params() * s.weight_bytes + kv) / shard)

    def dense_mlp(self, tokens, shard: int):
        s = self.spec
        return self.comp.time_s(mlp_flops(s, np.asarray(tokens, dtype=float)) / shard,
                                s.mlp_params() * s.weight_bytes / shard)

    def experts(self, copies, local_experts: int, shared_tokens, shared_shard: int):
        """Routed experts over ``copies`` token copies on ``local_experts`` experts, plus the shared ones."""
        s = self.spec
        copies = np.asarray(copies, dtype=float)
        touched = np.minimum(copies, local_experts)
        routed_flops = 2.0 * self.expert_params * copies
        routed_bytes = touched * self.expert_params * s.weight_bytes
        shared = np.asarray(shared_tokens, dtype=float)
        shared_flops = s.shared_experts * 2.0 * self.expert_params * shared / shared_shard
        shared_bytes = s.shared_experts * self.expert_params * s.weight_bytes / shared_shard
        gate = self.gate_flops_per_token * shared / shared_shard
        return self.comp.time_s(routed_flops + shared_flops + gate, routed_bytes + shared_bytes)

    def head(self, seqs, shard: int):
        s = self.spec
        return self.comp.time_s(2.0 * s.hidden * s.vocab * np.asarray(seqs, dtype=float) / shard,
                                s.hidden * s.vocab * 2 / shard)

    def forward_estimate(self, batch: Batch, tp: int, world: int) -> float:
        """Rough compute time of one forward of ``batch`` (for the scheduler's clock)."""
        s = self.spec
        decode = batch.phase == "decode"
        t = self.attention(batch.tokens, batch.context_tokens, decode, tp) * s.layers
        t += self.dense_mlp(batch.tokens, tp) * s.dense_layers
        if s.is_moe:
            copies = batch.tokens * s.top_k / world
            t += self.experts(copies, max(1, s.experts // world), batch.tokens / tp, 1) * s.moe_layers
        return float(t + self.head(batch.seqs, tp))


def _vocab_per_rank(spec: ModelSpec, tp: int) -> int:
    # vLLM pads the vocabulary to a multiple of 64 before sharding; DeepSeek's code needs V % tp == 0.
    padded = math.ceil(spec.vocab / 64) * 64
    return math.ceil(padded / tp)


def _prompt_pickle_bytes(prompt_tokens: int) -> int:
    """Bytes of ``pickle.dumps(prompt)`` for a prompt of about 4 characters per token."""
    return len(pickle.dumps("x" * (4 * int(prompt_tokens))))


def _layers_of_stage(spec: ModelSpec, pp: int, stage: int) -> range:
    bounds = np.linspace(0, spec.layers, pp + 1).round().astype(int)
    return range(int(bounds[stage]), int(bounds[stage + 1]))


def _emit_tp_forward(b: TraceBuilder, spec: ModelSpec, plan: InferencePlan, costs: _Costs, step: Step,
                     replica: int, batch: Batch, world: int) -> None:
    """One forward of one TP (and PP) replica: the reference or vLLM/SGLang all-reduce pattern."""
    tp, pp = plan.tp, plan.pp
    h, k, phase = spec.hidden, step.index, batch.phase
    decode = phase == "decode"
    T = batch.tokens
    base = replica * pp * tp
    for stage in range(pp):
        ranks = np.arange(base + stage * tp, base + (stage + 1) * tp)
        tp_comm = f"tp{replica}" + (f".pp{stage}" if pp > 1 else "")
        if stage > 0:
            for t in range(tp):
                r = int(ranks[t])
                for site in ("pp_recv_hidden", "pp_recv_residual"):
                    b.p2p(r, f"pp{replica}.{t}", [("Recv", r - tp, T * h, "bf16")], _ctx(phase, k, None, site))
        if stage == 0:
            b.compute(ranks, costs.comp.overhead_s)
            if tp > 1:
                b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, None, "embed"))
        for layer in _layers_of_stage(spec, pp, stage):
            b.compute(ranks, costs.attention(T, batch.context_tokens, decode, tp))
            if tp > 1:
                b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, layer, "attn_out"))
            if layer < spec.dense_layers or not spec.is_moe:
                b.compute(ranks, costs.dense_mlp(T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, layer, "mlp_out"))
                continue
            experts_here = max(1, spec.experts // tp)
            if plan.engine == "reference":
                # shared expert (RowParallelLinear all_reduce), then all_reduce of the routed sum
                b.compute(ranks, costs.experts(0, experts_here, T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, layer, "moe_shared"))
                b.compute(ranks, costs.experts(T * spec.top_k / tp, experts_here, 0, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, layer, "moe_routed"))
            else:
                b.compute(ranks, costs.experts(T * spec.top_k / tp, experts_here, T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", _ctx(phase, k, layer, "moe_out"))
        if stage < pp - 1:
            for t in range(tp):
                r = int(ranks[t])
                for site in ("pp_send_hidden", "pp_send_residual"):
                    b.p2p(r, f"pp{replica}.{t}", [("Send", r + tp, T * h, "bf16")], _ctx(phase, k, None, site))
        else:
            b.compute(ranks, costs.head(batch.seqs, tp))
            if tp > 1:
                b.collective(tp_comm, "AllGather", batch.seqs * _vocab_per_rank(spec, tp), "bf16",
                             _ctx(phase, k, None, "logits"))


def _split(n: int, parts: int) -> np.ndarray:
    """``n`` tokens over ``parts`` ranks as evenly as possible (first ranks take the remainder)."""
    base, extra = divmod(int(n), parts)
    return np.array([base + (1 if i < extra else 0) for i in range(parts)], dtype=np.int64)


def _emit_ep_forward(b: TraceBuilder, spec: ModelSpec, plan: InferencePlan, costs: _Costs, step: Step,
                     router: Router, world: int, placement: ExpertPlacement | None = None) -> None:
    """One forward of all DP-attention replicas with DeepEP-style expert parallelism over every rank."""
    tp, dp, h, k = plan.tp, plan.dp, spec.hidden, step.index
    fp8 = plan.dispatch_fp8 if plan.dispatch_fp8 is not None else spec.weight_bytes == 1
    dispatch_copy_bytes = h + (h // 128) * 4 if fp8 else 2 * h  # FP8 values + one fp32 scale per 128
    dispatch_dtype = "fp8_e4m3" if fp8 else "bf16"
    combine_copy_bytes = 2 * h
    ep = plan.ep
    per_rank_experts = spec.experts // ep if placement is None else placement.slots_per_gpu
    instances = world // ep  # EP deployments side by side, each over ep consecutive ranks
    batches = step.batches
    T = np.array([bt.tokens for bt in batches], dtype=np.int64)
    local = np.concatenate([_split(t, tp) for t in T])  # tokens each rank dispatches
    slice_ = -(-T // tp)  # padded per-rank slice of each replica
    active = [d for d in range(dp) if T[d] > 0]
    tp_ranks = {d: np.arange(d * tp, (d + 1) * tp) for d in range(dp)}
    all_ranks = np.arange(world)
    step_phase = step.phase

    def each_active(fn) -> None:
        for d in active:
            fn(d, batches[d])

    b.compute(all_ranks, costs.comp.overhead_s)
    if tp > 1:
        each_active(lambda d, bt: b.collective(f"tp{d}", "AllReduce", bt.tokens * h, "bf16",
                                               _ctx(bt.phase, k, None, "embed")))
    for layer in range(spec.layers):
        for d in active:
            bt = batches[d]
            b.compute(tp_ranks[d], costs.attention(bt.tokens, bt.context_tokens, bt.phase == "decode", tp))
        if layer < spec.dense_layers:
            if tp > 1:
                each_active(lambda d, bt, layer=layer: b.collective(
                    f"tp{d}", "AllReduce", bt.tokens * h, "bf16", _ctx(bt.phase, k, layer, "attn_out")))
            for d in active:
                b.compute(tp_ranks[d], costs.dense_mlp(batches[d].tokens, tp))
            if tp > 1:
                each_active(lambda d, bt, layer=layer: b.collective(
                    f"tp{d}", "AllReduce", bt.tokens * h, "bf16", _ctx(bt.phase, k, layer, "mlp_out")))
            continue
        if tp > 1:
            for d in active:
                bt = batches[d]
                if plan.engine == "sglang":
                    b.collective(f"tp{d}", "ReduceScatter", int(slice_[d]) * h, "bf16",
                                 _ctx(bt.phase, k, layer, "attn_rs"))
                else:
                    b.collective(f"tp{d}", "AllReduce", bt.tokens * h, "bf16", _ctx(bt.phase, k, layer, "attn_out"))
        dest_of = None if placement is None else placement.dest_of(layer)
        for inst in range(instances):
            ranks, loc = all_ranks[inst * ep:(inst + 1) * ep], local[inst * ep:(inst + 1) * ep]
            comm = ep_comm_name(inst, instances)
            chosen = router.route(layer, int(loc.sum()))
            choices = np.split(chosen, np.cumsum(loc)[:-1])
            copies = copies_matrix(choices, spec.experts, ep, plan.dedup, dest_of)
            b.compute(ranks, costs.experts(0, per_rank_experts, loc, 1))  # gate + shared expert
            b.collective(comm, "AllToAll", 0, dispatch_dtype, _ctx(step_phase, k, layer, "moe_dispatch"),
                         split_bytes=copies * dispatch_copy_bytes)
            b.compute(ranks, costs.experts(copies.sum(axis=0), per_rank_experts, 0, 1))
            b.collective(comm, "AllToAll", 0, "bf16", _ctx(step_phase, k, layer, "moe_combine"),
                         split_bytes=copies.T * combine_copy_bytes)
        if tp > 1:
            each_active(lambda d, bt, layer=layer: b.collective(
                f"tp{d}", "AllGather", int(slice_[d]) * h, "bf16", _ctx(bt.phase, k, layer, "moe_ag")))
    for d in active:
        b.compute(tp_ranks[d], costs.head(batches[d].seqs, tp))
    if tp > 1:
        each_active(lambda d, bt: b.collective(f"tp{d}", "AllGather", bt.seqs * _vocab_per_rank(spec, tp), "bf16",
                                               _ctx(bt.phase, k, None, "logits")))


def synthesize_inference(spec: ModelSpec, plan: InferencePlan) -> pd.DataFrame:
    """Synthesize an inference (serving) trace.

    Parameters
    ----------
    spec : ModelSpec
        The model.
    plan : InferencePlan
        Engine, parallelism (``tp``, ``dp``, ``ep``, ``pp``), cluster shape and workload (requests, length
        distributions, Poisson ``arrival_rate`` in requests per second, ``seed``).

    Returns
    -------
    pandas.DataFrame
        A §3 trace with metadata.

    Raises
    ------
    TraceError
        For an inconsistent plan.
    """
    world, ep_mode = _check(plan, spec)
    # DeepSeek's reference code runs eagerly (many small kernels per block section); vLLM and SGLang
    # replay CUDA graphs, so their fixed cost per section is small
    overhead = plan.overhead_s if plan.overhead_s is not None else (150e-6 if plan.engine == "reference" else 20e-6)
    comp = ComputeModel(get_gpu(plan.gpu), mfu=plan.mfu, overhead_s=overhead, fp8=spec.weight_bytes == 1)
    costs = _Costs(spec, comp)
    reqs = make_requests(plan.requests, plan.prompt_tokens, plan.output_tokens, plan.arrival_rate, plan.seed)
    gpn = min(plan.gpus_per_node, world) if plan.nodes is None else plan.gpus_per_node
    if plan.nodes is None and world > gpn and world % gpn:
        raise TraceError(f"world size {world} is not a whole number of {gpn}-GPU servers")
    b = TraceBuilder(world, gpn, plan.nvlink_gbps, plan.net_gbps)
    per_op_s = 30e-6

    def estimate(step: Step) -> float:
        n_ops = 2 * spec.layers + 2
        return max(costs.forward_estimate(bt, plan.tp, world) for bt in step.batches if bt.phase != "idle") \
            + n_ops * per_op_s

    if plan.decode_batch > 0:  # one decode forward of running sequences, no requests scheduled
        replicas = 1 if plan.engine == "reference" else plan.dp
        steps = decode_steps(replicas, plan.decode_batch, plan.decode_context)
    elif plan.engine == "reference":
        steps = static_batching(reqs, plan.max_batch, estimate)
        replicas = 1
    else:
        replicas = plan.dp
        steps = continuous_batching(reqs, replicas, estimate, plan.max_running, plan.max_prefill_tokens,
                                    lockstep=ep_mode)
    for d in range(replicas):
        for s in range(plan.pp):
            first = d * plan.pp * plan.tp + s * plan.tp
            if plan.tp > 1 or plan.engine == "reference":
                b.add_comm(f"tp{d}" + (f".pp{s}" if plan.pp > 1 else ""), range(first, first + plan.tp))
        if plan.pp > 1:
            for t in range(plan.tp):
                base = d * plan.pp * plan.tp
                b.add_comm(f"pp{d}.{t}", [base + s * plan.tp + t for s in range(plan.pp)])
    if ep_mode:
        for inst in range(world // plan.ep):
            b.add_comm(ep_comm_name(inst, world // plan.ep), range(inst * plan.ep, (inst + 1) * plan.ep))
    router = Router(spec, plan.seed, plan.router_skew) if ep_mode else None
    redundant = _redundant(plan, spec) if ep_mode else 0
    placement = (ExpertPlacement.build(router, plan.ep, gpn, redundant, plan.seed, plan.eplb_tokens or 4096)
                 if redundant else None)
    for step in steps:
        if ep_mode:
            if step.new_requests:
                b.wait_until(range(world), float(reqs.arrival_s[step.new_requests].max()))
            _emit_ep_forward(b, spec, plan, costs, step, router, world, placement)
            continue
        for d, batch in enumerate(step.batches):
            if batch.phase == "idle":
                continue
            ranks = range(d * plan.pp * plan.tp, (d + 1) * plan.pp * plan.tp)
            if step.new_requests:
                b.wait_until(ranks, float(reqs.arrival_s[batch.requests].max()) if batch.phase == "prefill" else 0.0)
            if plan.engine == "reference":
                _emit_reference_broadcasts(b, step, reqs, plan)
                _emit_tp_forward(b, spec, plan, costs, step, 0, batch, world)
            else:
                _emit_tp_forward(b, spec, plan, costs, step, d, batch, world)
    parallelism = {"engine": plan.engine, "tp": plan.tp, "dp": plan.dp, "ep": plan.ep, "pp": plan.pp,
                   "mode": "dp-attention+ep" if ep_mode else "tp"}
    if ep_mode and world > plan.ep:
        parallelism["ep_instances"] = world // plan.ep
    if placement is not None:
        parallelism.update(redundant_experts=placement.redundant, expert_slots_per_gpu=placement.slots_per_gpu,
                           expert_placement=f"eplb-{placement.policy}")
    what = (f"{plan.decode_batch} running sequence(s) per replica, context {plan.decode_context}"
            if plan.decode_batch else f"{len(reqs)} request(s)")
    notes = [
        f"synthesized: {what}, {len(steps)} forward step(s), seed {plan.seed}",
        f"compute model: {plan.gpu}, mfu {plan.mfu}; t_start_s is the modelled issue time, durations are NaN",
        "a request with N output tokens runs 1 prefill forward and N-1 decode forwards",
    ]
    if ep_mode:
        notes.append(f"all-to-all copies counted per (token, {plan.dedup}); dispatch fp8+scales, combine bf16")
    if placement is not None:
        notes.append(f"{placement.redundant} redundant experts placed by EPLB ({placement.policy} policy, "
                     f"{placement.slots_per_gpu} per GPU); static dispatch: local replica, else an even spread")
    return b.frame(f"synth:{spec.name}:{plan.engine}", model=spec.name, parallelism=parallelism, notes=notes,
                   gpu=plan.gpu)


def _emit_reference_broadcasts(b: TraceBuilder, step: Step, reqs, plan: InferencePlan) -> None:
    """``dist.broadcast_object_list([prompt], 0)`` per new prompt: an int64 size, then the pickled bytes."""
    if not plan.prompt_broadcast:
        return
    for i in step.new_requests:
        ctx = f"phase=prefill;step={step.index};site=prompt_broadcast;request={i}"
        b.collective("tp0", "Broadcast", 1, "int64", ctx, root=0)
        b.collective("tp0", "Broadcast", _prompt_pickle_bytes(int(reqs.prompt_tokens[i])), "uint8", ctx, root=0)


__all__ = ["ENGINES", "InferencePlan", "synthesize_inference"]
