"""Synthetic traces in the §3 schema: model specs, inference and training generators, ``synthesize``.

``synthesize("deepseek-v3", engine="sglang", tp=8, dp=4, ep=32, requests=4, ...)`` returns a trace frame;
``mode="training"`` selects the Megatron-style training generator. See ``docs/synthesis.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from traces.atomic import short_repr
from traces.schema import TraceError
from traces.synth.models import MODELS, ModelSpec, get_model

__all__ = ["MODELS", "SIZE_LIMITS", "ModelSpec", "get_model", "synthesize"]

#: Upper bounds of the options that size a synthesized run (the trace itself is capped at
#: ``traces.synth.builder.MAX_SYNTH_ROWS`` rows).
SIZE_LIMITS: dict[str, int] = {"requests": 100_000, "steps": 10_000, "micro_batches": 100_000}


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
