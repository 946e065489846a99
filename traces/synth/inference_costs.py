"""Per-rank compute time of each part of an inference forward (attention, MLP, experts, head), from the
compute model of :mod:`traces.synth.compute`.
"""

from __future__ import annotations

import math

import numpy as np

from traces.synth.compute import ComputeModel, attention_flops, mlp_flops
from traces.synth.models import ModelSpec
from traces.synth.workload import (
    Batch,
)


class ForwardCosts:
    """Per-rank compute time of each part of a forward, from the compute model.

    Parameters
    ----------
    spec : ModelSpec
        The model.
    comp : ComputeModel
        GPU, MFU and fixed overhead per section.

    Examples
    --------
    >>> from traces.synth.compute import get_gpu
    >>> from traces.synth.models import get_model
    >>> costs = ForwardCosts(get_model("llama3-8b"), ComputeModel(get_gpu("h100")))
    >>> bool(costs.dense_mlp(2048, 2) < costs.dense_mlp(2048, 1))
    True
    """

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
        """Seconds of one attention block over ``batch_tokens`` with ``context`` tokens of KV cache, split
        ``shard`` ways (KV bytes read: the context in decode, the batch in prefill)."""
        s = self.spec
        kv = np.asarray(context if decode else batch_tokens, dtype=float) * self.kv_bytes_per_token
        flops = attention_flops(s, np.asarray(batch_tokens, dtype=float), np.asarray(context, dtype=float))
        return self.comp.time_s(flops / shard, (s.attention_params() * s.weight_bytes + kv) / shard)

    def dense_mlp(self, tokens, shard: int):
        """Seconds of one dense MLP over ``tokens``, split ``shard`` ways."""
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
        """Seconds of the output head (logits) of ``seqs`` sequences, split ``shard`` ways."""
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


def vocab_per_rank(spec: ModelSpec, tp: int) -> int:
    """Logit columns per TP rank: the vocabulary padded to a multiple of 64, then sharded over ``tp``.

    Examples
    --------
    >>> from traces.synth.models import get_model
    >>> vocab_per_rank(get_model("deepseek-v3"), 8)
    16160
    """
    # vLLM pads the vocabulary to a multiple of 64 before sharding; DeepSeek's code needs V % tp == 0.
    padded = math.ceil(spec.vocab / 64) * 64
    return math.ceil(padded / tp)


__all__ = ["ForwardCosts", "vocab_per_rank"]
