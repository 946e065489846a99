"""Redundant experts placed as DeepSeek's expert-parallel load balancer (EPLB) places them.

With expert parallelism over more GPUs than a model has experts (DeepSeek-V3 decode at EP320: "each GPU
hosts only one expert, and 64 GPUs are responsible for hosting redundant experts", arXiv 2412.19437
§3.4.2), or with a few spare slots per GPU (EP144, two experts per GPU), a deployment hosts
``physical = experts + redundant`` expert replicas, the same number on every GPU. Written from the
algorithm's description in github.com/deepseek-ai/EPLB (README and ``eplb.py``):

1. **replicate**: every expert starts with one replica; each redundant slot goes, one at a time, to the
   expert with the largest load per replica (``load / replicas``; ties to the lowest expert id);
2. **pack**: replicas (each carrying ``load / replicas`` of its expert) go to GPUs in descending order of
   load, each to the least-loaded GPU that still has a free slot (ties to the lowest GPU), so every GPU
   gets the same number of replicas;
3. **hierarchical** policy when the number of servers divides the number of expert groups: groups are
   first packed onto servers (step 2 with whole groups as items), then steps 1-2 run inside each server,
   which keeps a group's replicas on one server (node-limited routing stays node-limited); otherwise the
   **global** policy runs steps 1-2 over all GPUs at once.

Loads are estimates, as in a deployment (EPLB takes "a moving average of historical statistics"): the
synthesizer routes a calibration batch drawn independently of the traced tokens.

Which replica a token uses follows SGLang's static dispatch (``ep_dispatch_algorithm=static``,
``sglang/srt/eplb/expert_location.py``): a source GPU that hosts a replica of the expert uses it; the other
GPUs are spread evenly over the expert's replicas (each replica serves ``⌊k/c⌋`` or ``⌈k/c⌉`` of them, in a
seeded random order).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

__all__ = ["ExpertPlacement", "balanced_packing", "calibration_load", "dispatch_gpus", "place_experts",
           "replicate_experts"]


def replicate_experts(load: np.ndarray, physical: int) -> tuple[np.ndarray, np.ndarray]:
    """Give ``physical - len(load)`` redundant replicas to the experts with the most load per replica.

    Parameters
    ----------
    load : numpy.ndarray
        Estimated load of each logical expert (tokens), shape ``(experts,)``.
    physical : int
        Replicas in all (``>= experts``).

    Returns
    -------
    phy2log : numpy.ndarray
        Logical expert of each replica, shape ``(physical,)``: the first ``experts`` entries are
        ``0..experts-1``, then the redundant replicas in the order they were given.
    count : numpy.ndarray
        Replicas per logical expert, shape ``(experts,)``.

    Examples
    --------
    >>> phy, cnt = replicate_experts(np.array([10.0, 1.0, 4.0]), 5)
    >>> phy.tolist(), cnt.tolist()
    ([0, 1, 2, 0, 0], [3, 1, 1])
    """
    load = np.asarray(load, dtype=np.float64)
    experts = len(load)
    if physical < experts:
        raise ValueError(f"{physical} replicas cannot host {experts} experts")
    count = np.ones(experts, dtype=np.int64)
    phy2log = np.empty(physical, dtype=np.int64)
    phy2log[:experts] = np.arange(experts)
    heap = [(-float(w), x) for x, w in enumerate(load)]  # max load per replica first; ties: lowest id
    heapq.heapify(heap)
    for slot in range(experts, physical):
        _, x = heapq.heappop(heap)
        phy2log[slot] = x
        count[x] += 1
        heapq.heappush(heap, (-float(load[x]) / count[x], x))
    return phy2log, count


def balanced_packing(weight: np.ndarray, packs: int) -> np.ndarray:
    """Pack ``n`` weighted items into ``packs`` bins of exactly ``n / packs`` items, heaviest first into
    the lightest bin with room (ties: the lowest bin).

    Parameters
    ----------
    weight : numpy.ndarray
        Weight of each item, shape ``(n,)``; ``n`` a multiple of ``packs``.
    packs : int

    Returns
    -------
    numpy.ndarray
        Bin of each item (int64, shape ``(n,)``).

    Examples
    --------
    >>> balanced_packing(np.array([5.0, 1.0, 4.0, 2.0]), 2).tolist()
    [0, 0, 1, 1]
    """
    weight = np.asarray(weight, dtype=np.float64)
    n = len(weight)
    if packs < 1 or n % packs:
        raise ValueError(f"{n} items do not split evenly over {packs} packs")
    per_pack = n // packs
    if per_pack == 1:
        return np.arange(n, dtype=np.int64)
    order = np.argsort(-weight, kind="stable")
    out = np.empty(n, dtype=np.int64)
    heap = [(0.0, p) for p in range(packs)]  # (load, bin): bins that still have room
    filled = np.zeros(packs, dtype=np.int64)
    for item in order:
        total, p = heapq.heappop(heap)
        out[item] = p
        filled[p] += 1
        if filled[p] < per_pack:
            heapq.heappush(heap, (total + float(weight[item]), p))
    return out


def _place_flat(load: np.ndarray, physical: int, gpus: int) -> np.ndarray:
    """Global policy for one layer: replicate, then pack replicas onto ``gpus``; ``(gpus, per_gpu)``."""
    phy2log, count = replicate_experts(load, physical)
    share = load[phy2log] / count[phy2log]
    gpu = balanced_packing(share, gpus)
    per_gpu = physical // gpus
    # slots of a GPU in the order they were listed (replica order), as EPLB's rank inside a pack
    order = np.lexsort((np.arange(physical), gpu))
    return phy2log[order].reshape(gpus, per_gpu)


def place_experts(load: np.ndarray, physical: int, groups: int, nodes: int, gpus: int) -> tuple[np.ndarray, str]:
    """EPLB placement of every layer: the logical expert on each physical slot.

    Parameters
    ----------
    load : numpy.ndarray
        Estimated tokens per logical expert, shape ``(layers, experts)``.
    physical : int
        Replicas per layer, a multiple of ``gpus``.
    groups : int
        Expert groups of the model's node-limited routing.
    nodes, gpus : int
        Servers and GPUs (``gpus`` a multiple of ``nodes``).

    Returns
    -------
    phy2log : numpy.ndarray
        Shape ``(layers, physical)``: slot ``s`` is on GPU ``s // (physical // gpus)``.
    policy : str
        ``"hierarchical"`` (servers divide the groups) or ``"global"``.

    Examples
    --------
    >>> load = np.array([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86]], dtype=float)
    >>> phy, policy = place_experts(load, 16, 4, 2, 8)
    >>> policy, phy.shape, sorted(set(phy[0].tolist())) == list(range(12))
    ('hierarchical', (1, 16), True)
    """
    load = np.asarray(load, dtype=np.float64)
    layers, experts = load.shape
    if physical % gpus or gpus % nodes or physical < experts:
        raise ValueError(f"{physical} replicas on {gpus} GPUs of {nodes} servers: needs equal replicas per GPU "
                         f"and at least one per expert")
    out = np.empty((layers, physical), dtype=np.int64)
    hierarchical = nodes > 1 and groups % nodes == 0 and experts % groups == 0
    if not hierarchical:
        for layer in range(layers):
            out[layer] = _place_flat(load[layer], physical, gpus).ravel()
        return out, "global"
    group_size = experts // groups
    per_node_gpus, per_node_phy = gpus // nodes, physical // nodes
    for layer in range(layers):
        group_load = load[layer].reshape(groups, group_size).sum(axis=1)
        node_of_group = balanced_packing(group_load, nodes)
        for node in range(nodes):
            members = np.flatnonzero(node_of_group == node)  # groups on this server, in group order
            logical = (members[:, None] * group_size + np.arange(group_size)).ravel()
            local = _place_flat(load[layer, logical], per_node_phy, per_node_gpus)
            out[layer, node * per_node_phy:(node + 1) * per_node_phy] = logical[local.ravel()]
    return out, "hierarchical"


def dispatch_gpus(phy2log: np.ndarray, experts: int, gpus: int, rng: np.random.Generator) -> np.ndarray:
    """GPU each source GPU sends a token's copy for each logical expert to (one layer), SGLang's static
    dispatch: the local replica when the source hosts one, else an even, seeded spread over the replicas.

    Parameters
    ----------
    phy2log : numpy.ndarray
        Logical expert of each slot, shape ``(physical,)``; slot ``s`` lives on GPU ``s // (physical // gpus)``.
    experts : int
        Logical experts.
    gpus : int
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray
        ``(gpus, experts)`` int64: destination GPU of a copy from source GPU ``i`` to logical expert ``x``.

    Examples
    --------
    >>> m = dispatch_gpus(np.array([0, 1, 0, 1]), 2, 4, np.random.default_rng(0))
    >>> m[[0, 2], 0].tolist(), sorted(m[[1, 3], 0].tolist())  # hosts of expert 0 keep it; others spread
    ([0, 2], [0, 2])
    """
    physical = len(phy2log)
    per_gpu = physical // gpus
    gpu_of_slot = np.arange(physical) // per_gpu
    out = np.empty((gpus, experts), dtype=np.int64)
    order = np.argsort(phy2log, kind="stable")
    bounds = np.searchsorted(phy2log[order], np.arange(experts + 1))
    for x in range(experts):
        replicas = gpu_of_slot[order[bounds[x]:bounds[x + 1]]]  # one entry per replica (a GPU may repeat)
        if len(replicas) == 0:
            raise ValueError(f"expert {x} has no replica")
        col = np.full(gpus, -1, dtype=np.int64)
        col[replicas] = replicas
        rest = np.flatnonzero(col < 0)
        q, r = divmod(len(rest), len(replicas))
        picks = np.concatenate([np.tile(replicas, q), rng.choice(replicas, size=r, replace=False)])
        rng.shuffle(picks)
        col[rest] = picks
        out[:, x] = col
    return out


def calibration_load(router, moe_layers: range, tokens: int, seed: int) -> np.ndarray:
    """Tokens per logical expert of each MoE layer from a calibration batch (EPLB's load estimate).

    The batch goes through the same gate (same per-layer expert popularity) with token noise drawn from
    its own stream, so the estimate is historical statistics, not the traced tokens themselves.

    Returns
    -------
    numpy.ndarray
        ``(len(moe_layers), experts)`` float64.
    """
    from traces.synth.router import Router

    cal = Router(router.spec, seed)
    cal.bias = router.bias
    cal.rng = np.random.default_rng([seed, 0xCA1B])
    experts = router.spec.experts
    return np.stack([np.bincount(cal.route(layer, tokens).ravel(), minlength=experts).astype(np.float64)
                     for layer in moe_layers])


@dataclass(frozen=True)
class ExpertPlacement:
    """Redundant-expert deployment of one model over ``gpus`` GPUs (every MoE layer).

    Attributes
    ----------
    phy2log : numpy.ndarray
        ``(moe_layers, physical)`` logical expert of each slot; slot ``s`` is on GPU ``s // slots_per_gpu``.
    first_moe_layer : int
        Model layer of row 0.
    experts, gpus : int
    policy : str
        EPLB policy used (``hierarchical`` or ``global``).
    seed : int
        Seed of the dispatch spread.
    """

    phy2log: np.ndarray
    first_moe_layer: int
    experts: int
    gpus: int
    policy: str
    seed: int

    @property
    def slots_per_gpu(self) -> int:
        """Expert replicas on every GPU."""
        return self.phy2log.shape[1] // self.gpus

    @property
    def redundant(self) -> int:
        """Replicas beyond one per logical expert."""
        return self.phy2log.shape[1] - self.experts

    def dest_of(self, layer: int) -> np.ndarray:
        """``(gpus, experts)`` destination GPU of a copy from each source GPU at model ``layer``."""
        rng = np.random.default_rng([self.seed, 0xD15, layer])
        return dispatch_gpus(self.phy2log[layer - self.first_moe_layer], self.experts, self.gpus, rng)

    @classmethod
    def build(cls, router, gpus: int, gpus_per_node: int, redundant: int, seed: int,
              calibration_tokens: int = 4096) -> ExpertPlacement:
        """EPLB placement of ``experts + redundant`` replicas over ``gpus`` GPUs of ``gpus_per_node``."""
        spec = router.spec
        moe = range(spec.dense_layers, spec.layers)
        load = calibration_load(router, moe, calibration_tokens, seed)
        nodes = max(1, gpus // gpus_per_node)
        phy2log, policy = place_experts(load, spec.experts + redundant, spec.expert_groups, nodes, gpus)
        return cls(phy2log, spec.dense_layers, spec.experts, gpus, policy, seed)
