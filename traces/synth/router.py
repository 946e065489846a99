"""A seeded MoE router: which experts each token picks, hence how uneven the all-to-all is.

DeepSeek-V3's gate (inference/model.py ``Gate``) scores experts with a sigmoid, keeps the best
``topk_groups`` of ``expert_groups`` groups (a group's score is the sum of its two best experts), and takes
the ``top_k`` best experts inside those groups. Groups of consecutive experts live on consecutive ranks, so
this limits how many servers a token reaches (node-limited routing, arXiv 2412.19437 §2.1.2).

The model here draws the affinities as ``bias[layer, expert] + noise``: the per-layer bias (normal, scale
``skew``) makes some experts hot, as trained routers are, and the noise (uniform, unit variance) spreads
tokens. It is a stand-in for
a real router with the same shape constraints, seeded so a trace is reproducible.
"""

from __future__ import annotations

import numpy as np

from traces.synth.models import ModelSpec


class Router:
    """Expert choice per token for each MoE layer of one model.

    Parameters
    ----------
    spec : ModelSpec
        An MoE model.
    seed : int
        Seed of the per-layer expert popularity and of the per-token noise.
    skew : float
        Spread of expert popularity (standard deviation of the per-layer bias, in logit units).
    """

    def __init__(self, spec: ModelSpec, seed: int, skew: float = 0.5) -> None:
        self.spec = spec
        self.rng = np.random.default_rng([seed, 0x5EED])
        bias_rng = np.random.default_rng([seed, 0xB1A5])
        self.bias = bias_rng.normal(0.0, skew, size=(spec.layers, spec.experts))

    def route(self, layer: int, tokens: int) -> np.ndarray:
        """Experts chosen by ``tokens`` tokens at ``layer``: an int array of shape ``(tokens, top_k)``.

        Examples
        --------
        >>> from traces.synth.models import MODELS
        >>> Router(MODELS["deepseek-v3"], seed=0).route(3, 5).shape
        (5, 8)
        """
        spec = self.spec
        e, k = spec.experts, spec.top_k
        if tokens == 0:
            return np.zeros((0, k), dtype=np.int64)
        # float32 throughout: this is the hot path of large prefills (tokens x experts per MoE layer).
        # The sigmoid is monotonic, so ranking logits ranks scores; it is only applied where scores are
        # summed (a group's two best experts).
        # per-token noise: uniform with unit variance (three times cheaper to draw than a normal)
        logits = self.rng.random((tokens, e), dtype=np.float32)
        logits -= 0.5
        logits *= np.float32(np.sqrt(12.0))
        logits += self.bias[layer].astype(np.float32)
        groups = spec.expert_groups
        if groups > 1 and spec.topk_groups < groups:
            size = e // groups
            m = min(k, size)  # the top k overall are among each kept group's top m
            per_group = logits.reshape(tokens, groups, size)
            inner = np.argpartition(per_group, size - m, axis=2)[:, :, size - m:]  # (tokens, groups, m)
            values = np.take_along_axis(per_group, inner, axis=2)
            top_two = np.partition(values, m - 2, axis=2)[:, :, -2:] if m > 2 else values
            group_score = (1.0 / (1.0 + np.exp(-top_two))).sum(axis=2)
            drop = np.argpartition(group_score, groups - spec.topk_groups - 1, axis=1)[:, : groups - spec.topk_groups]
            np.put_along_axis(values, drop[:, :, None], -np.inf, axis=1)
            flat = values.reshape(tokens, -1)
            best = np.argpartition(-flat, k - 1, axis=1)[:, :k]
            within = np.take_along_axis(inner.reshape(tokens, -1), best, axis=1)
            return ((best // m) * size + within).astype(np.int64)
        # only the set of chosen experts matters for traffic: partial selection is enough
        return np.argpartition(-logits, k - 1, axis=1)[:, :k].astype(np.int64)


def copies_matrix(choice_per_source: list[np.ndarray], experts: int, ep: int,
                  dedup: str = "expert", dest_of: np.ndarray | None = None) -> np.ndarray:
    """Token copies from each EP rank to each EP rank (``(ep, ep)`` int matrix).

    Expert ``x`` lives on EP rank ``x // (experts // ep)``, unless ``dest_of`` says otherwise.

    Parameters
    ----------
    choice_per_source : list of numpy.ndarray
        For EP rank i, its tokens' chosen experts ``(tokens_i, top_k)``.
    dedup : str
        ``"expert"``: one copy per (token, expert) pair, so a rank's row sums to ``tokens × top_k``;
        ``"rank"``: one copy per (token, destination rank), as DeepEP's dispatch sends a token once to each
        rank that hosts any of its experts.
    dest_of : numpy.ndarray, optional
        ``(ep, experts)``: the EP rank a copy from source rank i to logical expert x goes to (redundant
        experts, :func:`traces.synth.eplb.dispatch_gpus`).
    """
    if dest_of is not None:
        return _copies_by_map(choice_per_source, ep, dedup, dest_of)
    per_rank = experts // ep
    out = np.zeros((ep, ep), dtype=np.int64)
    for i, chosen in enumerate(choice_per_source):
        if chosen.size == 0:
            continue
        dest = chosen // per_rank
        if dedup == "rank":
            hit = np.zeros((chosen.shape[0], ep), dtype=bool)
            np.put_along_axis(hit, dest, True, axis=1)
            out[i] = hit.sum(axis=0)
        else:
            out[i] = np.bincount(dest.ravel(), minlength=ep)
    return out


def _copies_by_map(choice_per_source: list[np.ndarray], ep: int, dedup: str, dest_of: np.ndarray) -> np.ndarray:
    out = np.zeros((ep, ep), dtype=np.int64)
    for i, chosen in enumerate(choice_per_source):
        if chosen.size == 0:
            continue
        dest = dest_of[i][chosen]
        if dedup == "rank":  # one copy per distinct destination rank of a token
            dest = np.sort(dest, axis=1)
            first = np.ones(dest.shape, dtype=bool)
            first[:, 1:] = dest[:, 1:] != dest[:, :-1]
            dest = dest[first]
        out[i] = np.bincount(dest.ravel(), minlength=ep)
    return out
__all__ = ["Router", "copies_matrix"]
