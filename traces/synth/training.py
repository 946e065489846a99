"""Training traces: Megatron-style tensor, pipeline, data (and expert) parallelism.

Rank layout is Megatron's default order (tensor innermost, then data, then pipeline):
``rank = tp_rank + tp × (dp_rank + dp × stage)``.

Per micro-batch and layer (``b`` micro-batch size, ``s`` sequence length, ``h`` hidden, bf16):

- tensor parallelism without sequence parallelism: forward AllReduce of the attention and MLP outputs,
  backward AllReduce of the two column-parallel input gradients (``b·s·h``);
- with sequence parallelism: forward AllGather + ReduceScatter around attention and MLP (``b·s·h/t`` per
  rank), backward AllGather (grad of the ReduceScatter), AllGather (input re-gathered for the weight
  gradient) and ReduceScatter (input gradient) per block;
- vocabulary-parallel embedding AllReduce (first stage) and three fp32 AllReduces of ``b·s`` in the
  vocabulary-parallel cross-entropy (last stage);
- pipeline: 1F1B (``forward_backward_pipelining_without_interleaving``): activations and their gradients
  (``b·s·h`` bf16, ``/t`` with sequence parallelism) by Send/Recv on the pipeline communicator, the
  steady-state pairs ``send_forward_recv_backward`` and ``send_backward_recv_forward`` issued as one group;
- expert parallelism (MoE models, ``tp = 1``): per MoE layer a dispatch and a combine AllToAll in forward
  and their two mirrors in backward, sizes from the seeded router;
- gradients: ``zero=0`` one AllReduce per gradient bucket over data parallelism (``grad_dtype``, fp32 by
  default as Megatron accumulates bf16 training's gradients in fp32), issued as buckets fill during the
  last micro-batch's backward; ``zero=1`` (distributed optimizer) a ReduceScatter per bucket instead and an
  AllGather of the updated bf16 parameters after the step; ``zero=3`` (FSDP) an AllGather of each layer's
  parameters before its forward and backward and a ReduceScatter of its gradients, every micro-batch;
- after the gradient sync: the tied-embedding AllReduce between first and last stage (GPT with ``pp > 1``),
  the sequence-parallel norm-gradient AllReduce over TP, and one fp32 AllReduce of the gradient norm over
  the model-parallel group.

The plan, its checks and the per-rank parameter arithmetic are :mod:`traces.synth.training_plan`; this
module emits the run (:func:`synthesize_training`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traces.schema import DTYPE_BYTES, TraceError
from traces.synth.builder import TraceBuilder
from traces.synth.compute import ComputeModel, get_gpu
from traces.synth.models import ModelSpec
from traces.synth.router import Router, copies_matrix
from traces.synth.training_plan import (
    TrainingPlan,
    check_plan,
    layer_params_per_rank,
    padded_vocab,
    param_units,
    stage_layers,
)


class _Training:
    """Emits one training run into a :class:`TraceBuilder`."""

    def __init__(self, spec: ModelSpec, plan: TrainingPlan, world: int) -> None:
        self.spec, self.plan = spec, plan
        gpn = min(plan.gpus_per_node, world) if plan.nodes is None else plan.gpus_per_node
        if plan.nodes is None and world > gpn and world % gpn:
            raise TraceError(f"world size {world} is not a whole number of {gpn}-GPU servers")
        self.b = TraceBuilder(world, gpn, plan.nvlink_gbps, plan.net_gbps)
        self.comp = ComputeModel(get_gpu(plan.gpu), mfu=plan.mfu)
        self.m = plan.micro_batches if plan.micro_batches is not None else max(1, 2 * plan.pp)
        self.tokens = plan.micro_batch_size * plan.seq_len
        self.act = self.tokens * spec.hidden // (plan.tp if plan.sequence_parallel else 1)
        self.router = Router(spec, plan.seed, plan.router_skew) if plan.ep > 1 else None
        self._register_comms()

    # -- layout ---------------------------------------------------------------------------------------
    def rank(self, t: int, d: int, s: int) -> int:
        return t + self.plan.tp * (d + self.plan.dp * s)

    def _register_comms(self) -> None:
        p, b = self.plan, self.b
        for s in range(p.pp):
            for d in range(p.dp):
                if p.tp > 1:
                    b.add_comm(f"tp{d}.{s}", [self.rank(t, d, s) for t in range(p.tp)])
            for t in range(p.tp):
                if p.dp > 1:
                    b.add_comm(f"dp{s}.{t}", [self.rank(t, d, s) for d in range(p.dp)])
                if p.ep > 1:
                    for blk in range(p.dp // p.ep):
                        b.add_comm(f"ep{s}.{t}.{blk}", [self.rank(t, blk * p.ep + e, s) for e in range(p.ep)])
                    if p.dp // p.ep > 1:
                        for e in range(p.ep):
                            b.add_comm(f"edp{s}.{t}.{e}",
                                       [self.rank(t, blk * p.ep + e, s) for blk in range(p.dp // p.ep)])
        for d in range(p.dp):
            for t in range(p.tp):
                if p.pp > 1:
                    b.add_comm(f"pp{d}.{t}", [self.rank(t, d, s) for s in range(p.pp)])
                if p.pp > 1 and self.spec.tied_embeddings:
                    b.add_comm(f"emb{d}.{t}", [self.rank(t, d, 0), self.rank(t, d, p.pp - 1)])
            if p.tp * p.pp > 1:
                b.add_comm(f"mp{d}", [self.rank(t, d, s) for s in range(p.pp) for t in range(p.tp)])

    def stage_ranks(self, s: int) -> np.ndarray:
        return np.array([self.rank(t, d, s) for d in range(self.plan.dp) for t in range(self.plan.tp)])

    # -- helpers ----------------------------------------------------------------------------------------
    def tp_coll(self, s: int, op: str, count: int, dtype: str, ctx: str) -> None:
        if self.plan.tp > 1:
            for d in range(self.plan.dp):
                self.b.collective(f"tp{d}.{s}", op, count, dtype, ctx)

    def dp_coll(self, s: int, op: str, count: int, dtype: str, ctx: str, expert: bool = False) -> None:
        p = self.plan
        if expert and p.ep > 1:
            if p.dp // p.ep > 1:
                for t in range(p.tp):
                    for e in range(p.ep):
                        self.b.collective(f"edp{s}.{t}.{e}", op, count, dtype, ctx)
            return
        if p.dp > 1:
            for t in range(p.tp):
                self.b.collective(f"dp{s}.{t}", op, count, dtype, ctx)

    def layer_time(self, layer_params: int, backward: bool) -> float:
        spec, p = self.spec, self.plan
        flops = 2.0 * layer_params * self.tokens / p.tp
        flops += 4.0 * p.micro_batch_size * p.seq_len**2 * spec.hidden / p.tp
        return self.comp.time_s(flops * (2.0 if backward else 1.0))

    # -- one micro-batch --------------------------------------------------------------------------------
    def forward(self, s: int, mb: int, step: int) -> None:
        spec, p, b = self.spec, self.plan, self.b
        ranks = self.stage_ranks(s)
        full = self.tokens * spec.hidden
        ctx = f"phase=forward;step={step};microbatch={mb}"
        sp = p.sequence_parallel and p.tp > 1
        for name, dense, expert in param_units(spec, p, s):
            if p.zero == 3:
                self.dp_coll(s, "AllGather", _shard(dense + expert, p.dp), "bf16", f"{ctx};unit={name};site=fsdp_ag")
            if name == "embed":
                b.compute(ranks, self.comp.time_s(0.0, self.tokens * spec.hidden * 2))
                self.tp_coll(s, "ReduceScatter" if sp else "AllReduce", self.act if sp else full, "bf16",
                             f"{ctx};site=embed")
            elif name == "head":
                if sp:
                    self.tp_coll(s, "AllGather", self.act, "bf16", f"{ctx};site=head_ag")
                b.compute(ranks, self.comp.time_s(2.0 * self.tokens * spec.hidden * padded_vocab(spec, p.tp) / p.tp))
                for site in ("ce_max", "ce_target", "ce_sumexp"):
                    self.tp_coll(s, "AllReduce", self.tokens, "fp32", f"{ctx};site={site}")
            else:
                layer = int(name[5:])
                lctx = f"{ctx};layer={layer}"
                moe = spec.is_moe and layer >= spec.dense_layers
                b.compute(ranks, self.layer_time(spec.attention_params(), False))
                if sp:
                    self.tp_coll(s, "AllGather", self.act, "bf16", f"{lctx};site=attn_ag")
                    self.tp_coll(s, "ReduceScatter", self.act, "bf16", f"{lctx};site=attn_rs")
                else:
                    self.tp_coll(s, "AllReduce", full, "bf16", f"{lctx};site=attn_out")
                if moe and p.ep > 1:
                    self.moe(s, layer, lctx, backward=False)
                    continue
                b.compute(ranks, self.layer_time(spec.mlp_params(spec.moe_inter if moe else None) *
                                                 (spec.top_k if moe else 1), False))
                if sp:
                    self.tp_coll(s, "AllGather", self.act, "bf16", f"{lctx};site=mlp_ag")
                    self.tp_coll(s, "ReduceScatter", self.act, "bf16", f"{lctx};site=mlp_rs")
                else:
                    self.tp_coll(s, "AllReduce", full, "bf16", f"{lctx};site=mlp_out")

    def moe(self, s: int, layer: int, ctx: str, backward: bool) -> None:
        """Dispatch and combine over each EP group (tp = 1), sizes from the router."""
        spec, p, b = self.spec, self.plan, self.b
        copy_bytes = 2 * spec.hidden
        for blk in range(p.dp // p.ep):
            members = [self.rank(0, blk * p.ep + e, s) for e in range(p.ep)]
            chosen = self.router.route(layer, self.tokens * p.ep)
            copies = copies_matrix(np.split(chosen, p.ep), spec.experts, p.ep)
            expert_t = self.comp.time_s(2.0 * spec.mlp_params(spec.moe_inter) * copies.sum(axis=0)
                                        * (2.0 if backward else 1.0))
            first, second = (copies.T, copies) if backward else (copies, copies.T)
            kind = ("combine_grad", "dispatch_grad") if backward else ("dispatch", "combine")
            b.collective(f"ep{s}.0.{blk}", "AllToAll", 0, "bf16", f"{ctx};site=moe_{kind[0]}",
                         split_bytes=first * copy_bytes)
            b.compute(members, expert_t)
            b.collective(f"ep{s}.0.{blk}", "AllToAll", 0, "bf16", f"{ctx};site=moe_{kind[1]}",
                         split_bytes=second * copy_bytes)

    def backward(self, s: int, mb: int, step: int, buckets: list | None) -> None:
        """Backward of one micro-batch; on the last one, issue gradient buckets as they fill."""
        spec, p, b = self.spec, self.plan, self.b
        ranks = self.stage_ranks(s)
        full = self.tokens * spec.hidden
        ctx = f"phase=backward;step={step};microbatch={mb}"
        sp = p.sequence_parallel and p.tp > 1
        gdt = p.grad_dtype
        for name, dense, expert in reversed(param_units(spec, p, s)):
            if p.zero == 3:
                self.dp_coll(s, "AllGather", _shard(dense + expert, p.dp), "bf16", f"{ctx};unit={name};site=fsdp_ag")
            if name == "head":
                b.compute(ranks, self.comp.time_s(4.0 * self.tokens * spec.hidden * padded_vocab(spec, p.tp) / p.tp))
                if sp:
                    self.tp_coll(s, "AllGather", self.act, "bf16", f"{ctx};site=head_ag")
                    self.tp_coll(s, "ReduceScatter", self.act, "bf16", f"{ctx};site=head_rs")
                else:
                    self.tp_coll(s, "AllReduce", full, "bf16", f"{ctx};site=head_dgrad")
            elif name != "embed":
                layer = int(name[5:])
                lctx = f"{ctx};layer={layer}"
                moe = spec.is_moe and layer >= spec.dense_layers
                if moe and p.ep > 1:
                    self.moe(s, layer, lctx, backward=True)
                else:
                    b.compute(ranks, self.layer_time(spec.mlp_params(spec.moe_inter if moe else None) *
                                                     (spec.top_k if moe else 1), True))
                    self._block_backward(s, lctx, "mlp", sp, full)
                b.compute(ranks, self.layer_time(spec.attention_params(), True))
                self._block_backward(s, lctx, "attn", sp, full)
            else:
                b.compute(ranks, self.comp.time_s(0.0, self.tokens * spec.hidden * 4))
            if p.zero == 3:
                self.dp_coll(s, "ReduceScatter", _shard(dense + expert, p.dp), gdt, f"{ctx};unit={name};site=fsdp_rs")
            if buckets is not None:
                self._flush_buckets(s, name, buckets, step)

    def _block_backward(self, s: int, ctx: str, block: str, sp: bool, full: int) -> None:
        if sp:
            self.tp_coll(s, "AllGather", self.act, "bf16", f"{ctx};site={block}_dgrad_ag")
            self.tp_coll(s, "AllGather", self.act, "bf16", f"{ctx};site={block}_wgrad_ag")
            self.tp_coll(s, "ReduceScatter", self.act, "bf16", f"{ctx};site={block}_dgrad_rs")
        else:
            self.tp_coll(s, "AllReduce", full, "bf16", f"{ctx};site={block}_dgrad")

    # -- gradients ----------------------------------------------------------------------------------------
    def make_buckets(self, s: int) -> list[dict]:
        """Gradient buckets of stage ``s`` in backward order: ``{"last": unit, "dense": n, "expert": n}``."""
        out, cur = [], {"dense": 0, "expert": 0}
        for name, dense, expert in reversed(param_units(self.spec, self.plan, s)):
            cur["dense"] += dense
            cur["expert"] += expert
            if cur["dense"] + cur["expert"] >= self.plan.bucket_elems:
                out.append({"last": name, **cur})
                cur = {"dense": 0, "expert": 0}
        if cur["dense"] + cur["expert"]:
            out.append({"last": param_units(self.spec, self.plan, s)[0][0], **cur})
        return out

    def _flush_buckets(self, s: int, unit: str, buckets: list[dict], step: int) -> None:
        p = self.plan
        while buckets and buckets[0]["last"] == unit:
            bucket = buckets.pop(0)
            ctx = f"phase=backward;step={step};site=grad_sync;unit={unit}"
            for kind in ("dense", "expert"):
                n = bucket[kind]
                if not n:
                    continue
                if p.zero == 0:
                    self.dp_coll(s, "AllReduce", n, p.grad_dtype, ctx, expert=kind == "expert")
                else:
                    self.dp_coll(s, "ReduceScatter", _shard(n, p.dp), p.grad_dtype, ctx, expert=kind == "expert")
                    self.pending_ag[s].append((kind, n))

    # -- the schedule -------------------------------------------------------------------------------------
    def p2p(self, s: int, ops: list[tuple[str, int, int]], ctx: str) -> None:
        """Every rank of stage ``s`` issues ``ops`` = ``[(op, stage_delta, microbatch)]`` as one group."""
        p = self.plan
        for d in range(p.dp):
            for t in range(p.tp):
                me = self.rank(t, d, s)
                batch = [(op, self.rank(t, d, s + delta), self.act, "bf16") for op, delta, _ in ops
                         if 0 <= s + delta < p.pp]
                site = "+".join(f"{op.lower()}_{'next' if delta > 0 else 'prev'}_mb{mb}" for op, delta, mb in ops
                                if 0 <= s + delta < p.pp)
                self.b.p2p(me, f"pp{d}.{t}", batch, f"{ctx};site={site}")

    def stage_program(self, s: int, step: int) -> None:
        p, m = self.plan, self.m
        warmup = min(p.pp - s - 1, m)
        remaining = m - warmup
        buckets = self.make_buckets(s) if p.zero in (0, 1) else []
        ctx = f"phase=pipeline;step={step}"
        last_bwd = m - 1
        for i in range(warmup):
            self.p2p(s, [("Recv", -1, i)], ctx)
            self.forward(s, i, step)
            self.p2p(s, [("Send", +1, i)], ctx)
        if remaining:
            self.p2p(s, [("Recv", -1, warmup)], ctx)
        for j in range(remaining):
            f = warmup + j
            self.forward(s, f, step)
            self.p2p(s, [("Send", +1, f), ("Recv", +1, j)], ctx)
            self.backward(s, j, step, buckets if j == last_bwd else None)
            if j == remaining - 1:
                self.p2p(s, [("Send", -1, j)], ctx)
            else:
                self.p2p(s, [("Send", -1, j), ("Recv", -1, f + 1)], ctx)
        for i in range(warmup):
            j = remaining + i
            self.p2p(s, [("Recv", +1, j)], ctx)
            self.backward(s, j, step, buckets if j == last_bwd else None)
            self.p2p(s, [("Send", -1, j)], ctx)

    def run(self) -> pd.DataFrame:
        spec, p, b = self.spec, self.plan, self.b
        for step in range(p.steps):
            self.pending_ag: dict[int, list] = {s: [] for s in range(p.pp)}
            for s in range(p.pp):
                self.stage_program(s, step)
            ctx = f"phase=optimizer;step={step}"
            if p.pp > 1 and spec.tied_embeddings:
                rows = padded_vocab(spec, p.tp) // p.tp * spec.hidden
                for d in range(p.dp):
                    for t in range(p.tp):
                        b.collective(f"emb{d}.{t}", "AllReduce", rows, p.grad_dtype, f"{ctx};site=embedding_grads")
            if p.sequence_parallel and p.tp > 1:
                for s in range(p.pp):
                    norms = spec.norm_params_per_layer() * len(stage_layers(spec, p.pp, s))
                    self.tp_coll(s, "AllReduce", norms, p.grad_dtype, f"{ctx};site=sp_norm_grads")
            if p.tp * p.pp > 1:
                for d in range(p.dp):
                    b.collective(f"mp{d}", "AllReduce", 1, "fp32", f"{ctx};site=grad_norm")
            for s in range(p.pp):
                b.compute(self.stage_ranks(s), self.comp.time_s(0.0, sum(c[1] + c[2] for c in param_units(spec, p, s))
                                                                * 16 / max(1, p.dp if p.zero else 1)))
                for kind, n in self.pending_ag[s]:
                    self.dp_coll(s, "AllGather", _shard(n, p.dp), "bf16", f"{ctx};site=param_ag",
                                 expert=kind == "expert")
        parallelism = {"tp": p.tp, "pp": p.pp, "dp": p.dp, "ep": p.ep, "zero": p.zero,
                       "micro_batches": self.m, "micro_batch_size": p.micro_batch_size, "seq_len": p.seq_len,
                       "sequence_parallel": p.sequence_parallel}
        notes = [f"synthesized Megatron-style training, {p.steps} step(s) of {self.m} micro-batch(es), seed {p.seed}",
                 f"compute model: {p.gpu}, mfu {p.mfu}; t_start_s is the modelled issue time, durations are NaN",
                 f"gradients in {p.grad_dtype} ({DTYPE_BYTES[p.grad_dtype]} B per parameter), buckets of "
                 f"{p.bucket_elems} elements"]
        return b.frame(f"synth:{spec.name}:megatron", model=spec.name, parallelism=parallelism, notes=notes,
                       gpu=p.gpu)


def _shard(n: int, dp: int) -> int:
    """Per-rank share of ``n`` elements over ``dp`` ranks, the bucket padded to a multiple of ``dp``."""
    return -(-int(n) // dp)


def synthesize_training(spec: ModelSpec, plan: TrainingPlan) -> pd.DataFrame:
    """Synthesize a Megatron-style training trace (see the module docstring for what is issued).

    Parameters
    ----------
    spec : ModelSpec
        A Llama, GPT or Mixtral model.
    plan : TrainingPlan
        ``tp``, ``pp``, ``dp``, ``ep``, micro-batches, ``zero`` (0, 1 or 3), bucket size, steps.

    Returns
    -------
    pandas.DataFrame
        A §3 trace with metadata.

    Raises
    ------
    TraceError
        For an inconsistent plan.
    """
    world = check_plan(spec, plan)
    return _Training(spec, plan, world).run()


__all__ = ["TrainingPlan", "layer_params_per_rank", "padded_vocab", "stage_layers", "synthesize_training"]
