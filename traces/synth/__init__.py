"""Synthetic traces in the §3 schema: model specs, inference and training generators, ``synthesize``.

``synthesize("deepseek-v3", engine="sglang", tp=8, dp=4, ep=32, requests=4, ...)`` returns a trace frame;
``mode="training"`` selects the Megatron-style training generator. See ``docs/synthesis.md``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from traces.schema import TraceError
from traces.synth.models import MODELS, ModelSpec, get_model

__all__ = ["MODELS", "ModelSpec", "get_model", "synthesize"]


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
        Options of the chosen plan; ``None`` values take the plan's default.

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
    if mode == "inference":
        from traces.synth.inference import InferencePlan, synthesize_inference

        return synthesize_inference(spec, InferencePlan.from_options(options))
    if mode == "training":
        from traces.synth.training import TrainingPlan, synthesize_training

        return synthesize_training(spec, TrainingPlan.from_options(options))
    raise TraceError(f"unknown synthesis mode {mode!r} (use 'inference' or 'training')")
