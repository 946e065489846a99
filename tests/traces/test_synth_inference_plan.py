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


@pytest.mark.parametrize("plan, words", [
    ({"arrival_rate": float("nan")}, "option 'arrival_rate' must be a finite number >= 0, got nan"),  # was empty
    ({"arrival_rate": float("inf")}, "option 'arrival_rate' must be a finite number >= 0"),
    ({"mfu": 2.0}, r"option 'mfu' must be a finite number in \(0, 1\]"),
    ({"mfu": "nan"}, "option 'mfu' must be a finite number"),  # text from --set: a TypeError deep in the model
    ({"seed": -1}, r"option 'seed' must be an integer from 0 to 2\*\*63-1"),  # a numpy ValueError before
    ({"seed": 1.5}, "option 'seed' must be an integer"),
])
def test_seed_and_number_options_are_checked_before_use(plan, words):
    with pytest.raises(TraceError, match=words):
        synthesize("deepseek-v3", **plan)
    if "arrival_rate" not in plan:  # training has no arrivals; the other options are checked alike
        with pytest.raises(TraceError, match=words):
            synthesize("llama3-8b", mode="training", tp=2, **plan)
