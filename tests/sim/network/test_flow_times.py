"""Per-flow state sized to the flows in flight: ``FlowNetwork(keep_flow_times=False)``.

Without the per-flow-id record the network hands each completion's finish time out with ``advance``
(``last_finish_s``); hypothesis checks those are the times the recording network gives, and a long run of
short-lived flows checks that the slot arrays stay sized to the flows alive at once, not to the run.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import SimError
from sim.network.flow_network import FlowNetwork
from tests.sim.network.test_flow_network import csr, instances


def _drive(net, paths, sizes, starts):
    """Add each flow at its start, advancing on the way; return {flow id: finish time} from advance."""
    seen = {}

    def take(ids):
        for f, t in zip(ids.tolist(), net.last_finish_s.tolist(), strict=True):
            assert f not in seen
            seen[f] = t

    for i, t in enumerate(starts.tolist()):
        take(net.advance(t))
        ptr, idx = csr([paths[i]])
        net.add_flows(t, ptr, idx, sizes[i:i + 1])
    while net.num_active or net.has_completions:
        take(net.advance(net.next_completion_s()))
    return seen


@settings(max_examples=20, deadline=None)
@given(instances(), st.sampled_from([0.0, 0.3]))
def test_finish_times_handed_out_equal_the_recorded_ones(inst, q):
    paths, sizes, starts, capacity = inst
    kept = FlowNetwork(capacity, completion_quantile=q)
    lean = FlowNetwork(capacity, completion_quantile=q, keep_flow_times=False)
    from_kept = _drive(kept, paths, sizes, starts)
    from_lean = _drive(lean, paths, sizes, starts)
    assert from_lean == from_kept == dict(enumerate(kept.finish_s.tolist()))
    assert np.array_equal(lean.link_bytes, kept.link_bytes) and lean.num_flows == len(paths)


def test_slots_follow_the_flows_alive_not_the_flows_of_the_run():
    # 1,000 flows, at most 20 in flight at once: the slot arrays never grow past a few hundred
    net = FlowNetwork(np.array([100.0, 50.0]), keep_flow_times=False)
    rng = np.random.default_rng(0)
    total = 0
    for k in range(50):
        n = 20
        net.add_flows(100.0 * k, np.arange(n + 1), rng.integers(0, 2, n), rng.uniform(1.0, 10.0, n))
        total += n
        while net.num_active:
            net.advance(net.next_completion_s())
    assert net.num_flows == total == 1_000
    assert net.peak_active == 20 and net.slots_allocated <= 512
    with pytest.raises(SimError, match="keep_flow_times"):
        _ = net.finish_s
