"""Requests and batching: Poisson arrivals, length distributions, continuous and static batching.

A serving run is a list of :class:`Step` (one forward pass of every replica). Engines turn steps into ops;
this module only decides which requests run in which forward, following the engines' schedulers:

- continuous batching (vLLM, SGLang): each step a replica either prefills the requests that have arrived
  (up to a token budget and a running-request cap; prefill first, as SGLang's default policy) or decodes one
  token for every running request;
- static batching (DeepSeek's ``generate.py``): a batch of up to ``max_batch`` prompts runs its
  generate loop to the end before the next batch starts.

A request with ``N`` output tokens takes one prefill forward (which yields the first token) and ``N - 1``
decode forwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from traces.schema import TraceError


def parse_length(spec: str | int) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Parse a token-length distribution and return ``sample(rng, n) -> int array`` (values ≥ 1).

    Forms: ``N`` or ``fixed:N``; ``uniform:LO:HI`` (inclusive); ``normal:MEAN:STD``;
    ``lognormal:MEDIAN:SIGMA``; ``exp:MEAN``.

    Raises
    ------
    TraceError
        For a malformed spec.

    Examples
    --------
    >>> parse_length("uniform:3:3")(np.random.default_rng(0), 2).tolist()
    [3, 3]
    """
    text = str(spec).strip()
    parts = text.split(":")
    try:
        if len(parts) == 1 or parts[0] == "fixed":
            value = int(parts[-1])
            if value < 1:
                raise ValueError
            return lambda rng, n: np.full(n, value, dtype=np.int64)
        kind, args = parts[0], [float(x) for x in parts[1:]]
        if kind == "uniform" and len(args) == 2 and 1 <= args[0] <= args[1]:
            lo, hi = int(args[0]), int(args[1])
            return lambda rng, n: rng.integers(lo, hi + 1, size=n).astype(np.int64)
        if kind == "normal" and len(args) == 2 and args[1] >= 0:
            mu, sd = args
            return lambda rng, n: np.maximum(1, np.rint(rng.normal(mu, sd, size=n))).astype(np.int64)
        if kind == "lognormal" and len(args) == 2 and args[0] > 0 and args[1] >= 0:
            med, sig = args
            return lambda rng, n: np.maximum(1, np.rint(med * np.exp(rng.normal(0, sig, size=n)))).astype(np.int64)
        if kind == "exp" and len(args) == 1 and args[0] > 0:
            mean = args[0]
            return lambda rng, n: np.maximum(1, np.rint(rng.exponential(mean, size=n))).astype(np.int64)
    except ValueError:
        pass
    raise TraceError(f"bad token-length distribution {text!r} (use N, fixed:N, uniform:LO:HI, normal:MEAN:STD, "
                     "lognormal:MEDIAN:SIGMA or exp:MEAN)")


@dataclass(frozen=True)
class Requests:
    """A seeded request set: arrival times (s), prompt and output token counts."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


def make_requests(n: int, prompt_tokens: str | int, output_tokens: str | int, arrival_rate: float | None,
                  seed: int) -> Requests:
    """Draw ``n`` requests: Poisson arrivals at ``arrival_rate`` per second (None or 0: all at t = 0).

    The first request arrives at t = 0; inter-arrival times are exponential with mean ``1/arrival_rate``.
    """
    if n < 1:
        raise TraceError(f"option 'requests' must be at least 1, got {n}")
    rng = np.random.default_rng([seed, 0xA77])
    if arrival_rate:
        if arrival_rate < 0:
            raise TraceError(f"option 'arrival_rate' must be positive, got {arrival_rate}")
        gaps = rng.exponential(1.0 / arrival_rate, size=n)
        gaps[0] = 0.0
        arrival = np.cumsum(gaps)
    else:
        arrival = np.zeros(n)
    prompts = parse_length(prompt_tokens)(rng, n)
    outputs = parse_length(output_tokens)(rng, n)
    return Requests(arrival, prompts, outputs)


@dataclass
class Batch:
    """What one replica runs in one forward.

    Attributes
    ----------
    phase : str
        ``prefill``, ``decode`` or ``idle``.
    tokens : int
        Tokens through the model (T).
    seqs : int
        Sequences that sample a token (logit rows).
    context_tokens : float
        Sum over the tokens of the keys each attends to (attention FLOPs).
    requests : list of int
        Request ids in the batch.
    """

    phase: str
    tokens: int = 0
    seqs: int = 0
    context_tokens: float = 0.0
    requests: list[int] = field(default_factory=list)


@dataclass
class Step:
    """One forward of every replica, issued no earlier than ``not_before_s``."""

    index: int
    batches: list[Batch]
    not_before_s: float = 0.0
    new_requests: list[int] = field(default_factory=list)

    @property
    def phase(self) -> str:
        """The step's phase over all replicas (``mixed`` when they differ)."""
        phases = {b.phase for b in self.batches if b.phase != "idle"}
        return phases.pop() if len(phases) == 1 else ("mixed" if phases else "idle")


def continuous_batching(reqs: Requests, replicas: int, step_time_s: Callable[[Step], float],
                        max_running: int = 256, max_prefill_tokens: int = 16384,
                        lockstep: bool = True) -> list[Step]:
    """Schedule requests over replicas with continuous batching (prefill first).

    Requests go to replicas round-robin in arrival order. ``step_time_s(step)`` estimates a step's duration
    so that the scheduler knows which requests have arrived by the next step. With ``lockstep`` every
    replica takes part in every step (DP attention with expert parallelism: idle replicas run an empty
    forward); otherwise replicas are scheduled one after another, each with its own clock (the caller gives
    each step to one replica only: the others are ``idle``).
    """
    owner = np.arange(len(reqs)) % replicas
    clocks = [0.0] * (1 if lockstep else replicas)
    order = np.argsort(reqs.arrival_s, kind="stable")
    waiting: list[list[int]] = [[int(i) for i in order if owner[i] == d] for d in range(replicas)]
    running: list[list[int]] = [[] for _ in range(replicas)]
    generated = np.zeros(len(reqs), dtype=np.int64)
    steps: list[Step] = []

    def plan(d: int, now: float) -> Batch:
        ready = [i for i in waiting[d] if reqs.arrival_s[i] <= now + 1e-12]
        if ready and len(running[d]) < max_running:
            take, budget = [], max_prefill_tokens
            for i in ready:
                if len(running[d]) + len(take) >= max_running:
                    break
                if take and reqs.prompt_tokens[i] > budget:
                    break
                take.append(i)
                budget -= int(reqs.prompt_tokens[i])
            lengths = reqs.prompt_tokens[take].astype(float)
            return Batch("prefill", int(lengths.sum()), len(take), float((lengths * (lengths + 1) / 2).sum()),
                         take)
        if running[d]:
            ctx = float(sum(int(reqs.prompt_tokens[i] + generated[i]) for i in running[d]))
            return Batch("decode", len(running[d]), len(running[d]), ctx, list(running[d]))
        return Batch("idle")

    def commit(d: int, batch: Batch) -> None:
        if batch.phase == "prefill":
            for i in batch.requests:
                waiting[d].remove(i)
                generated[i] = 1
                if reqs.output_tokens[i] > 1:
                    running[d].append(i)
        elif batch.phase == "decode":
            for i in batch.requests:
                generated[i] += 1
            running[d] = [i for i in running[d] if generated[i] < reqs.output_tokens[i]]

    def pending(d: int) -> bool:
        return bool(waiting[d] or running[d])

    while any(pending(d) for d in range(replicas)):
        members = range(replicas) if lockstep else [min((d for d in range(replicas) if pending(d)),
                                                        key=lambda d: (clocks[d], d))]
        c = 0 if lockstep else members[0]
        # jump to the next arrival when nothing can run now
        batches = {d: plan(d, clocks[c]) for d in members}
        if all(b.phase == "idle" for b in batches.values()):
            nxt = min(reqs.arrival_s[i] for d in members for i in waiting[d])
            clocks[c] = max(clocks[c], float(nxt))
            batches = {d: plan(d, clocks[c]) for d in members}
        step = Step(len(steps), [batches.get(d, Batch("idle")) for d in range(replicas)], clocks[c])
        step.new_requests = [i for b in step.batches if b.phase == "prefill" for i in b.requests]
        steps.append(step)
        for d, b in batches.items():
            commit(d, b)
        clocks[c] += step_time_s(step)
    return steps


def decode_steps(replicas: int, batch: int, context_tokens: int) -> list[Step]:
    """One decode forward in which every replica runs ``batch`` sequences of ``context_tokens`` keys each
    (a serving system in steady state, as DeepSeek's decode profile: no prefill, no scheduling).

    Examples
    --------
    >>> [(b.phase, b.tokens, b.context_tokens) for b in decode_steps(2, 4, 100)[0].batches]
    [('decode', 4, 400.0), ('decode', 4, 400.0)]
    """
    return [Step(0, [Batch("decode", batch, batch, float(batch * context_tokens)) for _ in range(replicas)])]


def static_batching(reqs: Requests, max_batch: int, step_time_s: Callable[[Step], float]) -> list[Step]:
    """Schedule requests as DeepSeek's ``generate.py`` does: fixed batches run to completion.

    A batch of prompts with lengths ``L_i`` and output counts ``N_i`` runs the loop
    ``for cur_pos in range(min L, max(L_i + N_i))``: the first forward takes ``B × min L`` tokens, every
    later one ``B`` tokens (rows that finished or are still inside their prompt are processed anyway).
    With equal lengths that is one prefill and ``N - 1`` decode forwards.
    """
    order = [int(i) for i in np.argsort(reqs.arrival_s, kind="stable")]
    steps: list[Step] = []
    clock = 0.0
    while order:
        clock = max(clock, float(reqs.arrival_s[order[0]]))
        batch = [i for i in order if reqs.arrival_s[i] <= clock + 1e-12][:max_batch]
        order = [i for i in order if i not in batch]
        lengths = reqs.prompt_tokens[batch]
        ends = lengths + reqs.output_tokens[batch]
        start, stop = int(lengths.min()), int(ends.max())
        prev = 0
        for cur in range(start, stop):
            b = len(batch)
            tokens = b * (cur - prev)
            ctx = float(b * sum(range(prev + 1, cur + 1)))
            phase = "prefill" if prev == 0 else "decode"
            step = Step(len(steps), [Batch(phase, tokens, b, ctx, list(batch))], clock)
            step.new_requests = list(batch) if prev == 0 else []
            steps.append(step)
            clock += step_time_s(step)
            prev = cur
    return steps


def plan_from_options(cls, options: dict, what: str):
    """Build the plan dataclass ``cls`` from keyword options, rejecting unknown names with one line.

    Raises
    ------
    TraceError
        Naming the unknown option(s) and listing the known ones.
    """
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TraceError(f"unknown {what} option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return cls(**options)


__all__ = [
    "Batch",
    "Requests",
    "Step",
    "continuous_batching",
    "make_requests",
    "parse_length",
    "plan_from_options",
    "static_batching",
]
