"""Model specifications as data: the dimensions that decide a model's collective traffic.

Every number comes from the model's published configuration (the ``source`` of each entry). Nothing here
computes traffic; :mod:`traces.synth.inference` and :mod:`traces.synth.training` read these fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from traces.schema import TraceError


@dataclass(frozen=True)
class ModelSpec:
    """Dimensions of one transformer model.

    Attributes
    ----------
    name : str
        Canonical name (``deepseek-v3``, ``llama3-70b``, ...).
    hidden : int
        Model dimension ``h``.
    layers : int
        Transformer blocks.
    dense_layers : int
        Leading blocks with a dense MLP (all blocks for a dense model; the rest are MoE).
    ffn_inter : int
        Dense MLP inner size.
    heads, kv_heads, head_dim : int
        Attention heads, key/value heads (GQA), dimension per head.
    vocab : int
        Vocabulary size.
    mlp : str
        ``"swiglu"`` (three matrices) or ``"gelu"`` (two matrices, with biases).
    bias : bool
        Linear layers carry biases (GPT-3).
    tied_embeddings : bool
        The output head reuses the word embedding.
    learned_positions : int
        Rows of a learned position embedding (GPT-3: 2048), 0 for RoPE models.
    experts, shared_experts, top_k, moe_inter : int
        Routed experts, shared experts, experts per token, expert inner size (0 for dense models).
    expert_groups, topk_groups : int
        Node-limited routing: experts form ``expert_groups`` groups; a token may use ``topk_groups`` of them.
    q_lora, kv_lora, qk_nope, qk_rope, v_head : int
        Multi-head latent attention dimensions (DeepSeek); 0 for standard attention.
    weight_bytes : int
        Bytes per served weight (DeepSeek-V3 ships FP8 weights: 1; others bf16: 2); used by the compute model.
    source : str
        Where the numbers come from.
    """

    name: str
    hidden: int
    layers: int
    dense_layers: int
    ffn_inter: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    mlp: str = "swiglu"
    bias: bool = False
    tied_embeddings: bool = False
    learned_positions: int = 0
    experts: int = 0
    shared_experts: int = 0
    top_k: int = 0
    moe_inter: int = 0
    expert_groups: int = 1
    topk_groups: int = 1
    q_lora: int = 0
    kv_lora: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    weight_bytes: int = 2
    source: str = ""

    @property
    def is_moe(self) -> bool:
        """True when the model has routed experts."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Blocks with an MoE MLP."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention."""
        return self.kv_lora > 0

    def attention_params(self) -> int:
        """Weights of one attention block (projections only; norms excluded).

        Examples
        --------
        >>> MODELS["llama3-8b"].attention_params()
        41943040
        """
        h = self.hidden
        if self.is_mla:
            qk = self.qk_nope + self.qk_rope
            q = (h * self.q_lora + self.q_lora + self.q_lora * self.heads * qk) if self.q_lora else h * self.heads * qk
            kv = h * (self.kv_lora + self.qk_rope) + self.kv_lora + self.kv_lora * self.heads * (self.qk_nope + self.v_head)
            return q + kv + self.heads * self.v_head * h
        qkv = h * (self.heads + 2 * self.kv_heads) * self.head_dim
        out = self.heads * self.head_dim * h
        biases = (self.heads + 2 * self.kv_heads) * self.head_dim + h if self.bias else 0
        return qkv + out + biases

    def mlp_params(self, inter: int | None = None) -> int:
        """Weights of one MLP of inner size ``inter`` (default: the dense MLP)."""
        inter = self.ffn_inter if inter is None else inter
        if self.mlp == "swiglu":
            return 3 * self.hidden * inter
        return 2 * self.hidden * inter + (inter + self.hidden if self.bias else 0)

    def norm_params_per_layer(self) -> int:
        """Norm weights of one block: RMSNorm has ``h`` per norm, LayerNorm ``2h`` (weight and bias)."""
        per_norm = 2 * self.hidden if self.bias else self.hidden
        return 2 * per_norm


def _llama3(name: str, hidden: int, layers: int, heads: int, ffn: int, source: str) -> ModelSpec:
    return ModelSpec(name=name, hidden=hidden, layers=layers, dense_layers=layers, ffn_inter=ffn, heads=heads,
                     kv_heads=8, head_dim=128, vocab=128_256, source=source)


#: The models, by canonical name. Sources are the published configs.
MODELS: dict[str, ModelSpec] = {
    "deepseek-v3": ModelSpec(
        name="deepseek-v3", hidden=7168, layers=61, dense_layers=3, ffn_inter=18_432, heads=128, kv_heads=128,
        head_dim=128, vocab=129_280, experts=256, shared_experts=1, top_k=8, moe_inter=2048, expert_groups=8,
        topk_groups=4, q_lora=1536, kv_lora=512, qk_nope=128, qk_rope=64, v_head=128, weight_bytes=1,
        source="github.com/deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json",
    ),
    "llama3-8b": _llama3("llama3-8b", 4096, 32, 32, 14_336, "huggingface.co/meta-llama/Meta-Llama-3-8B config.json"),
    "llama3-70b": _llama3("llama3-70b", 8192, 80, 64, 28_672, "huggingface.co/meta-llama/Meta-Llama-3-70B config.json"),
    "llama3-405b": _llama3("llama3-405b", 16_384, 126, 128, 53_248,
                           "huggingface.co/meta-llama/Llama-3.1-405B config.json"),
    "gpt3-175b": ModelSpec(
        name="gpt3-175b", hidden=12_288, layers=96, dense_layers=96, ffn_inter=49_152, heads=96, kv_heads=96,
        head_dim=128, vocab=50_257, mlp="gelu", bias=True, tied_embeddings=True, learned_positions=2048,
        source="Brown et al. 2020 (arXiv 2005.14165) Table 2.1; GPT-2 BPE vocabulary",
    ),
    "mixtral-8x7b": ModelSpec(
        name="mixtral-8x7b", hidden=4096, layers=32, dense_layers=0, ffn_inter=14_336, heads=32, kv_heads=8,
        head_dim=128, vocab=32_000, experts=8, top_k=2, moe_inter=14_336,
        source="huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json",
    ),
}

_ALIASES: dict[str, str] = {
    "deepseek-v3": "deepseek-v3", "deepseekv3": "deepseek-v3", "ds-v3": "deepseek-v3", "ds_v3": "deepseek-v3",
    "llama3-8b": "llama3-8b", "llama-3-8b": "llama3-8b", "llama3_8b": "llama3-8b",
    "llama3-70b": "llama3-70b", "llama-3-70b": "llama3-70b", "llama3_70b": "llama3-70b",
    "llama3-405b": "llama3-405b", "llama-3-405b": "llama3-405b", "llama3_405b": "llama3-405b",
    "gpt3-175b": "gpt3-175b", "gpt-3-175b": "gpt3-175b", "gpt3": "gpt3-175b", "gpt-3": "gpt3-175b",
    "mixtral-8x7b": "mixtral-8x7b", "mixtral": "mixtral-8x7b",
}


def get_model(name: str) -> ModelSpec:
    """Return the spec of a model by name or alias (case-insensitive).

    Raises
    ------
    TraceError
        For an unknown model; the message lists the known names.

    Examples
    --------
    >>> get_model("DeepSeek-V3").hidden
    7168
    """
    key = _ALIASES.get(str(name).strip().lower())
    if key is None:
        raise TraceError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    return MODELS[key]


__all__ = ["MODELS", "ModelSpec", "get_model"]
