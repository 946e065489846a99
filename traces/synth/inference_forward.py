"""The collectives of one inference forward: a TP (and PP) replica's all-reduce pattern (reference, vLLM,
SGLang), DP attention with DeepEP-style expert parallelism, and the reference engine's prompt broadcasts.
"""

from __future__ import annotations

import pickle

import numpy as np

from traces.synth.builder import TraceBuilder
from traces.synth.eplb import ExpertPlacement
from traces.synth.inference_costs import ForwardCosts, vocab_per_rank
from traces.synth.inference_plan import InferencePlan
from traces.synth.models import ModelSpec
from traces.synth.router import Router, copies_matrix
from traces.synth.workload import Batch, Step


def ep_comm_name(instance: int, instances: int) -> str:
    """``ep`` for one EP deployment over all ranks, ``ep0``, ``ep1``, ... for several side by side."""
    return "ep" if instances == 1 else f"ep{instance}"


def op_context(phase: str, step: int, layer: int | None, site: str) -> str:
    """The ``context`` field of one collective: phase, step, layer (when there is one) and call site.

    Examples
    --------
    >>> op_context("decode", 3, None, "embed"), op_context("prefill", 0, 7, "attn_out")
    ('phase=decode;step=3;site=embed', 'phase=prefill;step=0;layer=7;site=attn_out')
    """
    layer_part = "" if layer is None else f";layer={layer}"
    return f"phase={phase};step={step}{layer_part};site={site}"


def prompt_pickle_bytes(prompt_tokens: int) -> int:
    """Bytes of ``pickle.dumps(prompt)`` for a prompt of about 4 characters per token."""
    return len(pickle.dumps("x" * (4 * int(prompt_tokens))))


def layers_of_stage(spec: ModelSpec, pp: int, stage: int) -> range:
    """The layers of pipeline stage ``stage`` of ``pp`` (as even as rounding allows).

    Examples
    --------
    >>> from traces.synth.models import get_model
    >>> [layers_of_stage(get_model("llama3-8b"), 3, s) for s in range(3)]
    [range(0, 11), range(11, 21), range(21, 32)]
    """
    bounds = np.linspace(0, spec.layers, pp + 1).round().astype(int)
    return range(int(bounds[stage]), int(bounds[stage + 1]))


def emit_tp_forward(b: TraceBuilder, spec: ModelSpec, plan: InferencePlan, costs: ForwardCosts, step: Step,
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
                    b.p2p(r, f"pp{replica}.{t}", [("Recv", r - tp, T * h, "bf16")], op_context(phase, k, None, site))
        if stage == 0:
            b.compute(ranks, costs.comp.overhead_s)
            if tp > 1:
                b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, None, "embed"))
        for layer in layers_of_stage(spec, pp, stage):
            b.compute(ranks, costs.attention(T, batch.context_tokens, decode, tp))
            if tp > 1:
                b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, layer, "attn_out"))
            if layer < spec.dense_layers or not spec.is_moe:
                b.compute(ranks, costs.dense_mlp(T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, layer, "mlp_out"))
                continue
            experts_here = max(1, spec.experts // tp)
            if plan.engine == "reference":
                # shared expert (RowParallelLinear all_reduce), then all_reduce of the routed sum
                b.compute(ranks, costs.experts(0, experts_here, T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, layer, "moe_shared"))
                b.compute(ranks, costs.experts(T * spec.top_k / tp, experts_here, 0, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, layer, "moe_routed"))
            else:
                b.compute(ranks, costs.experts(T * spec.top_k / tp, experts_here, T, tp))
                if tp > 1:
                    b.collective(tp_comm, "AllReduce", T * h, "bf16", op_context(phase, k, layer, "moe_out"))
        if stage < pp - 1:
            for t in range(tp):
                r = int(ranks[t])
                for site in ("pp_send_hidden", "pp_send_residual"):
                    b.p2p(r, f"pp{replica}.{t}", [("Send", r + tp, T * h, "bf16")], op_context(phase, k, None, site))
        else:
            b.compute(ranks, costs.head(batch.seqs, tp))
            if tp > 1:
                b.collective(tp_comm, "AllGather", batch.seqs * vocab_per_rank(spec, tp), "bf16",
                             op_context(phase, k, None, "logits"))


def split_tokens(n: int, parts: int) -> np.ndarray:
    """``n`` tokens over ``parts`` ranks as evenly as possible (first ranks take the remainder)."""
    base, extra = divmod(int(n), parts)
    return np.array([base + (1 if i < extra else 0) for i in range(parts)], dtype=np.int64)


def emit_ep_forward(b: TraceBuilder, spec: ModelSpec, plan: InferencePlan, costs: ForwardCosts, step: Step,
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
    local = np.concatenate([split_tokens(t, tp) for t in T])  # tokens each rank dispatches
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
                                               op_context(bt.phase, k, None, "embed")))
    for layer in range(spec.layers):
        for d in active:
            bt = batches[d]
            b.compute(tp_ranks[d], costs.attention(bt.tokens, bt.context_tokens, bt.phase == "decode", tp))
        if layer < spec.dense_layers:
            if tp > 1:
                each_active(lambda d, bt, layer=layer: b.collective(
                    f"tp{d}", "AllReduce", bt.tokens * h, "bf16", op_context(bt.phase, k, layer, "attn_out")))
            for d in active:
                b.compute(tp_ranks[d], costs.dense_mlp(batches[d].tokens, tp))
            if tp > 1:
                each_active(lambda d, bt, layer=layer: b.collective(
                    f"tp{d}", "AllReduce", bt.tokens * h, "bf16", op_context(bt.phase, k, layer, "mlp_out")))
            continue
        if tp > 1:
            for d in active:
                bt = batches[d]
                if plan.engine == "sglang":
                    b.collective(f"tp{d}", "ReduceScatter", int(slice_[d]) * h, "bf16",
                                 op_context(bt.phase, k, layer, "attn_rs"))
                else:
                    b.collective(f"tp{d}", "AllReduce", bt.tokens * h, "bf16", op_context(bt.phase, k, layer, "attn_out"))
        dest_of = None if placement is None else placement.dest_of(layer)
        for inst in range(instances):
            ranks, loc = all_ranks[inst * ep:(inst + 1) * ep], local[inst * ep:(inst + 1) * ep]
            comm = ep_comm_name(inst, instances)
            chosen = router.route(layer, int(loc.sum()))
            choices = np.split(chosen, np.cumsum(loc)[:-1])
            copies = copies_matrix(choices, spec.experts, ep, plan.dedup, dest_of)
            b.compute(ranks, costs.experts(0, per_rank_experts, loc, 1))  # gate + shared expert
            b.collective(comm, "AllToAll", 0, dispatch_dtype, op_context(step_phase, k, layer, "moe_dispatch"),
                         split_bytes=copies * dispatch_copy_bytes)
            b.compute(ranks, costs.experts(copies.sum(axis=0), per_rank_experts, 0, 1))
            b.collective(comm, "AllToAll", 0, "bf16", op_context(step_phase, k, layer, "moe_combine"),
                         split_bytes=copies.T * combine_copy_bytes)
        if tp > 1:
            each_active(lambda d, bt, layer=layer: b.collective(
                f"tp{d}", "AllGather", int(slice_[d]) * h, "bf16", op_context(bt.phase, k, layer, "moe_ag")))
    for d in active:
        b.compute(tp_ranks[d], costs.head(batches[d].seqs, tp))
    if tp > 1:
        each_active(lambda d, bt: b.collective(f"tp{d}", "AllGather", bt.seqs * vocab_per_rank(spec, tp), "bf16",
                                               op_context(bt.phase, k, None, "logits")))


def emit_reference_broadcasts(b: TraceBuilder, step: Step, reqs, plan: InferencePlan) -> None:
    """``dist.broadcast_object_list([prompt], 0)`` per new prompt: an int64 size, then the pickled bytes."""
    if not plan.prompt_broadcast:
        return
    for i in step.new_requests:
        ctx = f"phase=prefill;step={step.index};site=prompt_broadcast;request={i}"
        b.collective("tp0", "Broadcast", 1, "int64", ctx, root=0)
        b.collective("tp0", "Broadcast", prompt_pickle_bytes(int(reqs.prompt_tokens[i])), "uint8", ctx, root=0)


__all__ = ["emit_ep_forward", "emit_reference_broadcasts", "emit_tp_forward", "ep_comm_name", "layers_of_stage",
           "op_context", "prompt_pickle_bytes", "split_tokens"]
