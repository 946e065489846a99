"""PlanOptions: one value for plan_collective's knobs (issue 9)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import SimError
from sim.planning.collectives import PlanOptions, plan_collective
from sim.planning.tuning import CostModel


@pytest.mark.parametrize(("field", "value", "match"), [
    ("algo", "sharp", "algo='sharp'"), ("proto", "LL64", "proto='LL64'"), ("nchannels", 0, "nchannels=0"),
    ("max_chunks", -1, "max_chunks=-1"), ("max_transfers", 0, "max_transfers=0"),
    ("max_pipeline_transfers", 1.5, "max_pipeline_transfers=1.5"), ("chunk_bytes", 0, "chunk_bytes=0"),
    ("model", "h100", "CostModel"),
])
def test_bad_values_name_the_option(field, value, match):
    with pytest.raises(SimError, match=match):
        PlanOptions(**{field: value})
    with pytest.raises(SimError, match=match):
        plan_collective("AllReduce", 1 << 20, range(4), **{field: value})


def test_unknown_option_lists_the_known_ones():
    with pytest.raises(SimError, match="unknown plan option 'chunks'.*max_chunks"):
        plan_collective("AllReduce", 1 << 20, range(4), chunks=2)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["AllReduce", "AllGather", "Broadcast"]), st.integers(1, 4), st.integers(1, 3),
       st.sampled_from(["LL", "LL128", "Simple"]), st.integers(1 << 10, 1 << 24))
def test_options_value_and_keywords_plan_the_same(op, nch, chunks, proto, nbytes):
    kw = dict(algo="ring", nchannels=nch, max_chunks=chunks, proto=proto, model=CostModel(protocol_overhead=True))
    kw["root"] = 0 if op == "Broadcast" else -1
    root = kw.pop("root")
    a = plan_collective(op, nbytes, range(6), server_of=[0, 0, 0, 1, 1, 1], root=root, **kw)
    b = plan_collective(op, nbytes, range(6), server_of=[0, 0, 0, 1, 1, 1], root=root, options=PlanOptions(**kw))
    c = plan_collective(op, nbytes, range(6), server_of=[0, 0, 0, 1, 1, 1], root=root, options=PlanOptions(),
                        **{**kw, "channels": nch, "nchannels": None})
    for p in (b, c):
        assert np.array_equal(a.src, p.src) and np.array_equal(a.bytes, p.bytes)
        assert np.array_equal(a.dep_idx, p.dep_idx) and a.proto == p.proto


def test_keywords_override_the_options_value():
    base = PlanOptions(algo="tree", nchannels=2)
    p = plan_collective("AllReduce", 1 << 20, range(8), server_of=np.arange(8) // 4, options=base, algo="ring")
    assert p.algo == "ring" and p.channel.max() + 1 == 2
