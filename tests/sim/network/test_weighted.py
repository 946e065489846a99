"""Identical flows solved as one weighted flow, and the compiled events against their numpy twin.

Flows added together over the same links with the same size get the same max-min rate at every solve,
so the network solves them as one weighted flow. Hypothesis checks that this changes neither rates nor
finish times (against the same network with merging off), and that the compiled event kernels give the
numpy version's results bit for bit.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network import maxmin, merge
from sim.network.flow_network import FlowNetwork


@st.composite
def instances_with_twins(draw):
    """Flows in a few start batches; each flow has 1-4 identical twins in its batch (same links, size)."""
    num_links = draw(st.integers(1, 6))
    capacity = np.array(draw(st.lists(st.sampled_from([1.0, 2.5, 4.0, 10.0]), min_size=num_links,
                                      max_size=num_links)))
    batches = []
    for t in sorted(set(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=1, max_size=3)))):
        kinds = draw(st.integers(1, 5))
        flows = []
        for _ in range(kinds):
            path = draw(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=min(num_links, 4),
                                 unique=True))
            size = draw(st.sampled_from([0.5, 1.0, 3.0, 7.5]))
            flows += [(path, size)] * draw(st.integers(1, 4))
        order = draw(st.permutations(range(len(flows))))
        batches.append((t, [flows[i] for i in order]))
    group = draw(st.booleans())
    return capacity, batches, group


def drive(capacity, batches, group, q=0.0):
    """Run the batches through a network; return finish times and the (ids, rates) seen at each event."""
    net = FlowNetwork(capacity, completion_quantile=q)
    seen = []
    for t, flows in batches:
        net.advance(t)
        ptr = np.r_[0, np.cumsum([len(p) for p, _ in flows])]
        idx = np.array([x for p, _ in flows for x in p], dtype=np.int64)
        sizes = np.array([s for _, s in flows])
        groups = np.arange(len(flows)) % 2 if group else None
        net.add_flows(t, ptr, idx, sizes, group=groups)
        seen.append(net.active_flows())
    while net.num_active or net.has_completions:
        net.advance(net.next_completion_s())
        seen.append(net.active_flows())
    return net.finish_s.copy(), seen, net.stats


@contextmanager
def setting(module, name, value):
    """``module.name = value`` inside the block."""
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


@settings(max_examples=150, deadline=None)
@given(instances_with_twins(), st.sampled_from([0.0, 0.3]))
def test_weighted_flows_give_the_unweighted_rates_and_finish_times(inst, q):
    capacity, batches, group = inst
    with setting(merge, "MIN_FLOWS", 2):
        merged = drive(capacity, batches, group, q)
    with setting(merge, "MIN_FLOWS", 10**9):
        plain = drive(capacity, batches, group, q)
    np.testing.assert_allclose(merged[0], plain[0], rtol=1e-12)
    assert len(merged[1]) == len(plain[1])
    for (ids_a, rates_a), (ids_b, rates_b) in zip(merged[1], plain[1], strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
        np.testing.assert_allclose(rates_a, rates_b, rtol=1e-12)
    if any(len(f) > 1 for _, f in batches):
        assert merged[2]["flows_solved"] <= plain[2]["flows_solved"]


def test_twins_are_merged_and_expanded():
    # 6 flows: 3 identical on link 0, 2 identical on links 0+1, one alone; 2 slots of weight > 1
    ptr = np.array([0, 1, 2, 4, 5, 7, 8])
    idx = np.array([0, 0, 0, 1, 0, 0, 1, 1])
    sizes = np.array([3.0, 3.0, 3.0, 3.0, 3.0, 3.0])
    with setting(merge, "MIN_FLOWS", 2):
        net = FlowNetwork(np.array([6.0, 6.0]))
        net.add_flows(0.0, ptr, idx, sizes)
    assert net.stats["merged"] == 3 and net.num_active == 6
    ids, rates = net.active_flows()
    # link 0 carries 5 flows: 1.2 each; flow 5 alone on link 1 takes the rest, 6 - 2 x 1.2
    np.testing.assert_allclose(rates, [1.2, 1.2, 1.2, 1.2, 1.2, 3.6], rtol=1e-12)
    assert ids.tolist() == list(range(6))
    np.testing.assert_allclose(net.remaining_bytes(np.array([4, 0])), [3.0, 3.0])
    done = net.advance(np.inf)
    assert sorted(done.tolist()) == list(range(6))
    np.testing.assert_allclose(net.finish_s, [2.5, 2.5, 2.5, 2.5, 2.5, 3 / 3.6], rtol=1e-12)
    assert net.num_active == 0


@st.composite
def plain_instances(draw):
    num_links = draw(st.sampled_from([2, 5, 40]))
    capacity = np.array(draw(st.lists(st.sampled_from([1.0, 3.0, 1e11 / 3]), min_size=num_links,
                                      max_size=num_links)))
    batches = []
    for t in sorted(set(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0]), min_size=1, max_size=3)))):
        n = draw(st.integers(1, 12))
        flows = [(draw(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=4)),
                  draw(st.sampled_from([0.0, 1.0, 2.0, 1e9 / 7]))) for _ in range(n)]
        batches.append((t, flows))
    return capacity, batches, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(plain_instances(), st.sampled_from([0.0, 0.25]))
def test_compiled_events_match_numpy_bit_for_bit(inst, q):
    pytest.importorskip("numba")
    capacity, batches, group = inst
    with setting(maxmin, "SOLVER", "numpy"):
        ref = drive(capacity, batches, group, q)
    with setting(maxmin, "SOLVER", "jit"):
        got = drive(capacity, batches, group, q)
    np.testing.assert_array_equal(got[0], ref[0])
    for (ids_a, rates_a), (ids_b, rates_b) in zip(got[1], ref[1], strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
        np.testing.assert_array_equal(rates_a, rates_b)
    assert got[2] == ref[2]
