"""Synthetic traces in the §3 schema: model specs, inference and training generators, ``synthesize``.

``synthesize("deepseek-v3", engine="sglang", tp=8, dp=4, ep=32, requests=4, ...)`` returns a trace frame;
``mode="training"`` selects the Megatron-style training generator. See ``docs/synthesis.md``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from traces.atomic import short_repr
from traces.schema import TraceError
from traces.synth.models import MODELS, ModelSpec, get_model

__all__ = ["MODELS", "NUMBER_RANGES", "SIZE_LIMITS", "ModelSpec", "check_numbers", "get_model", "synthesize"]

#: Upper bounds of the options that size a synthesized run (the trace itself is capped at
#: ``traces.synth.builder.MAX_SYNTH_ROWS`` rows).
SIZE_LIMITS: dict[str, int] = {"requests": 100_000, "steps": 10_000, "micro_batches": 100_000}


#: Number options of both plans: (lowest, highest, lowest included). Checked before any plan uses them.
NUMBER_RANGES: dict[str, tuple[float, float, bool]] = {
    "mfu": (0.0, 1.0, False), "arrival_rate": (0.0, math.inf, True), "router_skew": (0.0, math.inf, True),
    "nvlink_gbps": (0.0, math.inf, False), "net_gbps": (0.0, math.inf, False), "overhead_s": (0.0, 3600.0, True),
}


def check_numbers(options: dict) -> None:
    """Refuse a seed that is not an integer in ``0..2**63-1`` and a number option that is not a finite
    number in its range (NaN arrival rates gave an empty trace; ``mfu`` as text failed deep in the model).

    Examples
    --------
    >>> check_numbers({"mfu": float("nan")})
    Traceback (most recent call last):
    ...
    traces.errors.TraceError: option 'mfu' must be a finite number in (0, 1], got nan
    """
    seed = options.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise TraceError(f"option 'seed' must be an integer from 0 to 2**63-1, got {short_repr(seed)}")
    for key, (low, top, low_ok) in NUMBER_RANGES.items():
        value = options.get(key)
        if value is None:
            continue
        fits = (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                and (low <= value if low_ok else low < value) and value <= top)
        if not fits:
            span = f"{'[' if low_ok else '('}{low:g}, {top:g}]" if math.isfinite(top) else f"{'>=' if low_ok else '>'} {low:g}"
            raise TraceError(f"option '{key}' must be a finite number {'in ' if math.isfinite(top) else ''}{span}, "
                             f"got {short_repr(value)}")


def synthesize(model: str, mode: str = "inference", **plan: Any) -> pd.DataFrame:
    """Synthesize a §3 trace for ``model`` under a parallelism plan.

    Parameters
    ----------
    model : str
        A model name or alias (see :data:`traces.synth.models.MODELS`).
    mode : str
        ``"inference"`` (:class:`traces.synth.inference.InferencePlan` options) or ``"training"``
        (:class:`traces.synth.training.TrainingPlan` options).
    **plan
        Options of the chosen plan; ``None`` values take the plan's default. ``layers=N`` keeps only the
        model's first N blocks (a size knob for quick simulations; per-forward counts shrink with it).

    Returns
    -------
    pandas.DataFrame
        The trace, metadata in ``df.attrs["collsim"]``.

    Raises
    ------
    TraceError
        For an unknown model, mode or option, or an inconsistent plan.

    Examples
    --------
    >>> df = synthesize("deepseek-v3", engine="reference", tp=16, nodes=2, requests=1,
    ...                 prompt_tokens=8, output_tokens=1)
    >>> int((df["op"] == "AllReduce").sum() // 16)
    181
    """
    spec = get_model(model)
    options = {k: v for k, v in plan.items() if v is not None}
    for key, top in SIZE_LIMITS.items():  # checked before anything is allocated for them
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top):
            raise TraceError(f"option '{key}' must be an integer in 1..{top:,}, got {short_repr(value)} "
                             "(docs/limits.md)")
    check_numbers(options)
    layers = options.pop("layers", None)
    if layers is not None:
        if not isinstance(layers, int) or not 1 <= layers <= spec.layers:
            raise TraceError(f"option 'layers' must be an integer in 1..{spec.layers}, got {layers!r}")
        spec = replace(spec, layers=layers, dense_layers=min(spec.dense_layers, layers))
    if mode == "inference":
        from traces.synth.inference import InferencePlan, synthesize_inference

        df = synthesize_inference(spec, InferencePlan.from_options(options))
    elif mode == "training":
        from traces.synth.training import TrainingPlan, synthesize_training

        df = synthesize_training(spec, TrainingPlan.from_options(options))
    else:
        raise TraceError(f"unknown synthesis mode {mode!r} (use 'inference' or 'training')")
    if layers is not None:
        meta = df.attrs["collsim"]
        meta["notes"] = [*meta.get("notes", []), f"model truncated to its first {layers} of {get_model(model).layers} layers"]
        meta["parallelism"] = {**meta.get("parallelism", {}), "layers": layers}
    return df
