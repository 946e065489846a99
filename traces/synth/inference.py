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

The plan and its checks are :mod:`traces.synth.inference_plan`, the compute costs
:mod:`traces.synth.inference_costs`, the collectives of one forward :mod:`traces.synth.inference_forward`;
this module schedules the forwards and assembles the trace (:func:`synthesize_inference`).
"""

from __future__ import annotations

import pandas as pd

from traces.schema import TraceError
from traces.synth.builder import TraceBuilder
from traces.synth.compute import ComputeModel, get_gpu
from traces.synth.eplb import ExpertPlacement
from traces.synth.inference_costs import ForwardCosts
from traces.synth.inference_forward import (
    emit_ep_forward,
    emit_reference_broadcasts,
    emit_tp_forward,
    ep_comm_name,
)
from traces.synth.inference_plan import ENGINES, InferencePlan, check_plan, redundant_experts
from traces.synth.models import ModelSpec
from traces.synth.router import Router
from traces.synth.workload import (
    Step,
    continuous_batching,
    decode_steps,
    make_requests,
    static_batching,
)


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
    world, ep_mode = check_plan(plan, spec)
    # DeepSeek's reference code runs eagerly (many small kernels per block section); vLLM and SGLang
    # replay CUDA graphs, so their fixed cost per section is small
    overhead = plan.overhead_s if plan.overhead_s is not None else (150e-6 if plan.engine == "reference" else 20e-6)
    comp = ComputeModel(get_gpu(plan.gpu), mfu=plan.mfu, overhead_s=overhead, fp8=spec.weight_bytes == 1)
    costs = ForwardCosts(spec, comp)
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
    redundant = redundant_experts(plan, spec) if ep_mode else 0
    placement = (ExpertPlacement.build(router, plan.ep, gpn, redundant, plan.seed, plan.eplb_tokens or 4096)
                 if redundant else None)
    for step in steps:
        if ep_mode:
            if step.new_requests:
                b.wait_until(range(world), float(reqs.arrival_s[step.new_requests].max()))
            emit_ep_forward(b, spec, plan, costs, step, router, world, placement)
            continue
        for d, batch in enumerate(step.batches):
            if batch.phase == "idle":
                continue
            ranks = range(d * plan.pp * plan.tp, (d + 1) * plan.pp * plan.tp)
            if step.new_requests:
                b.wait_until(ranks, float(reqs.arrival_s[batch.requests].max()) if batch.phase == "prefill" else 0.0)
            if plan.engine == "reference":
                emit_reference_broadcasts(b, step, reqs, plan)
                emit_tp_forward(b, spec, plan, costs, step, 0, batch, world)
            else:
                emit_tp_forward(b, spec, plan, costs, step, d, batch, world)
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


__all__ = ["ENGINES", "InferencePlan", "synthesize_inference"]
