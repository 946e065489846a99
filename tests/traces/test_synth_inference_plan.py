"""An inference plan checked against its model (traces.synth.inference_plan): a bad plan is one TraceError
naming what is wrong."""

from __future__ import annotations

import pytest

from traces.schema import TraceError
from traces.synth import synthesize


def test_bad_plans_raise_trace_error():
    with pytest.raises(TraceError, match="ep"):
        synthesize("deepseek-v3", engine="sglang", tp=2, dp=2, ep=3)
    with pytest.raises(TraceError, match="nodes"):
        synthesize("deepseek-v3", engine="reference", tp=16, nodes=3)
    with pytest.raises(TraceError, match="dense"):
        synthesize("llama3-8b", engine="vllm", tp=2, dp=2, ep=4)
    with pytest.raises(TraceError, match="unknown engine"):
        synthesize("deepseek-v3", engine="trt")
    with pytest.raises(TraceError, match="distribution"):
        synthesize("deepseek-v3", engine="vllm", tp=2, prompt_tokens="gauss:1")
