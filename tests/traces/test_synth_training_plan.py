"""A training plan checked against its model (traces.synth.training_plan): a bad plan is one TraceError
naming what is wrong."""

from __future__ import annotations

import pytest

from traces.schema import TraceError
from traces.synth import synthesize


def test_training_plan_errors():
    with pytest.raises(TraceError, match="tp"):
        synthesize("llama3-70b", mode="training", tp=3)
    with pytest.raises(TraceError, match="MLA"):
        synthesize("deepseek-v3", mode="training", tp=8)
    with pytest.raises(TraceError, match="unknown training option"):
        synthesize("llama3-8b", mode="training", engine="vllm")
    with pytest.raises(TraceError, match="zero"):
        synthesize("llama3-8b", mode="training", zero=2)
