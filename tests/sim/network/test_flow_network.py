"""FlowNetwork: closed forms, max-min properties against a naive reference, batching error, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import SimError
from sim.network.flow_network import FlowNetwork, max_min_rates
from tests.sim.network.flow_reference import (
    check_max_min,
    csr,
    instances,
    leaf_spine_all_to_all,
    reference_finish,
    run,
)

__all__ = ["csr", "instances", "leaf_spine_all_to_all", "reference_finish", "run"]   # used by the other network tests


# ----------------------------------------------------------------------------- closed forms
def test_one_flow_takes_bytes_over_capacity():
    net = run([[0]], [3e9], [0.5], [1.5e9])
    assert net.finish_s[0] == pytest.approx(0.5 + 2.0, rel=1e-12)
    assert net.link_bytes[0] == pytest.approx(3e9, rel=1e-12)
    assert net.peak_utilization[0] == pytest.approx(1.0)
    assert net.busy_above_90_s[0] == pytest.approx(2.0)


def test_n_equal_flows_share_one_link():
    n, size, cap = 7, 1000.0, 250.0
    net = run([[0]] * n, [size] * n, [0.0] * n, [cap])
    np.testing.assert_allclose(net.finish_s, n * size / cap, rtol=1e-12)


def test_unequal_flows_on_one_link_follow_processor_sharing():
    sizes = np.array([1.0, 2.0, 4.0])
    net = run([[0]] * 3, sizes, [0.0] * 3, [1.0])
    # 3 share until the 1 B flow ends (t=3), 2 share until the 2 B flow ends (+2), the last runs alone (+2)
    np.testing.assert_allclose(net.finish_s, [3.0, 5.0, 7.0], rtol=1e-12)


def test_textbook_max_min_example_has_known_rates():
    # links a=10, b=4, c=6; flows: a+b, a+c, b, c, a. Water-filling: b full at 2, c at 3, then a at 5.
    paths = [[0, 1], [0, 2], [1], [2], [0]]
    capacity = np.array([10.0, 4.0, 6.0])
    ptr, idx = csr(paths)
    rates, iterations = max_min_rates(ptr, idx, capacity)
    np.testing.assert_allclose(rates, [2.0, 3.0, 2.0, 3.0, 5.0], rtol=1e-12)
    assert iterations == 2   # b and c are both local bottlenecks in the first pass; a in the second
    net = FlowNetwork(capacity)
    net.add_flows(0.0, ptr, idx, np.full(5, 100.0))
    ids, live = net.active_flows()
    np.testing.assert_allclose(live[np.argsort(ids)], [2.0, 3.0, 2.0, 3.0, 5.0], rtol=1e-12)
    np.testing.assert_allclose(net.link_load_bytes_per_s(), capacity, rtol=1e-12)


def test_single_link_all_to_all_meets_the_busiest_link_bound():
    # star: every host's up and down link carries hosts - 1 flows; bound = (hosts - 1) * size / capacity
    hosts, size, cap = 12, 2.0**20, 1e9
    paths = [[a, hosts + b] for a in range(hosts) for b in range(hosts) if a != b]
    net = run(paths, [size] * len(paths), [0.0] * len(paths), [cap] * 2 * hosts)
    assert np.nanmax(net.finish_s) == pytest.approx((hosts - 1) * size / cap, rel=1e-12)


def test_oversubscribed_all_to_all_finishes_at_the_busiest_link_bound():
    hosts, per_leaf, spines = 16, 4, 1     # 4 hosts share 1 uplink of the same rate: 4:1 oversubscribed
    paths, num_links = leaf_spine_all_to_all(hosts, per_leaf, spines, seed=0)
    size = np.full(len(paths), 1e6)
    capacity = np.full(num_links, 1e9)
    net = run(paths, size, np.zeros(len(paths)), capacity)
    ptr, idx = csr(paths)
    link_load_bytes = np.bincount(idx, weights=np.repeat(size, np.diff(ptr)), minlength=num_links)
    bound = np.max(link_load_bytes / capacity)
    assert np.nanmax(net.finish_s) == pytest.approx(bound, rel=1e-9)
    np.testing.assert_allclose(net.link_bytes, link_load_bytes, rtol=1e-9)


def test_busy_time_and_peak_follow_the_load():
    # link 0 (cap 1) carries f0 (held to 0.5 by link 1) and f1 (0.5): full until f1 ends at t=2, then 50 %.
    net = run([[0, 1], [0]], [2.0, 1.0], [0.0, 0.0], [1.0, 0.5])
    np.testing.assert_allclose(net.finish_s, [4.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(net.busy_above_90_s, [2.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(net.peak_utilization, [1.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(net.link_bytes, [3.0, 2.0], rtol=1e-12)


def test_bins_spread_a_constant_rate_over_the_bins_it_covers():
    net = run([[0]], [250.0], [0.05], [100.0], bin_s=1.0)   # sends from 0.05 s to 2.55 s at 100 B/s
    starts, per_bin = net.binned_link_bytes()
    np.testing.assert_allclose(starts, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(per_bin[:, 0], [95.0, 100.0, 55.0], rtol=1e-12)


def test_bins_skip_idle_time():
    net = run([[0], [0]], [10.0, 10.0], [0.0, 100.0], [100.0], bin_s=1.0)
    starts, per_bin = net.binned_link_bytes()
    np.testing.assert_allclose(starts, [0.0, 100.0])
    np.testing.assert_allclose(per_bin[:, 0], [10.0, 10.0], rtol=1e-12)


def test_zero_byte_and_linkless_flows_finish_at_once():
    net = FlowNetwork(np.array([1.0]))
    net.advance(2.0)
    ids = net.add_flows(2.0, np.array([0, 1, 1, 2]), np.array([0, 0]), np.array([0.0, 5.0, 3.0]))
    assert net.finish_s[ids[0]] == 2.0 and net.finish_s[ids[1]] == 2.0
    assert net.next_completion_s() == 2.0
    assert sorted(net.advance(2.0).tolist()) == [0, 1]
    assert net.num_active == 1
    assert net.advance(10.0).tolist() == [2]
    assert net.finish_s[2] == pytest.approx(5.0)


def test_completions_are_returned_once_in_time_order():
    net = FlowNetwork(np.array([1.0, 1.0]))
    net.add_flows(0.0, np.array([0, 1, 2, 3]), np.array([0, 1, 0]), np.array([4.0, 1.0, 1.0]))
    # link 0: flows 0 and 2 at 0.5 each -> flow 2 ends at 2; link 1: flow 1 alone ends at 1
    assert net.next_completion_s() == pytest.approx(1.0)
    assert net.advance(0.5).size == 0
    assert net.advance(3.0).tolist() == [1, 2]
    assert net.advance(3.0).size == 0
    assert np.isnan(net.finish_s[0]) and net.num_active == 1
    assert net.advance(10.0).tolist() == [0]
    assert net.finish_s[0] == pytest.approx(2.0 + 3.0)   # 1 B by t=2, then 3 B alone at 1 B/s


def test_adding_later_advances_first_and_offset_csr_is_accepted():
    net = FlowNetwork(np.array([1.0, 2.0]))
    link_idx = np.array([9, 9, 0, 1, 1])              # a larger array; flows use entries 2..4
    net.add_flows(0.0, np.array([2, 3]), link_idx, np.array([1.0]))          # link 0, ends at 1 s
    assert net.link_load_bytes_per_s().tolist() == [1.0, 0.0]
    ids = net.add_flows(3.0, np.array([3, 5]), link_idx, np.array([4.0]))    # links 1, 1: 4 B at 1 B/s
    assert ids.tolist() == [1] and net.link_load_bytes_per_s().tolist() == [0.0, 2.0]
    assert net.has_completions and net.next_completion_s() == 3.0
    assert net.advance(3.0).tolist() == [0] and net.finish_s[0] == pytest.approx(1.0)
    assert net.advance(math.inf).tolist() == [1] and net.finish_s[1] == pytest.approx(7.0)
    assert net.num_flows == 2 and net.num_active == 0 and net.peak_active == 1
    assert net.next_completion_s() == math.inf


# ----------------------------------------------------------------------------- properties
@given(instances(), st.sampled_from([0.0, 0.3]))
def test_property_rates_are_max_min_at_every_event(inst, q):
    # with batching too: every re-solve is exact for the flows then in flight
    paths, sizes, starts, capacity = inst
    net = run(paths, sizes, starts, capacity, q=q, checks=lambda n: check_max_min(n, paths))
    assert np.all(net.peak_utilization <= 1 + 1e-9)


@given(instances(), st.booleans())
def test_property_finish_times_match_the_naive_event_simulation(inst, advance_first):
    paths, sizes, starts, capacity = inst
    net = run(paths, sizes, starts, capacity, advance_first=advance_first)
    np.testing.assert_allclose(net.finish_s, reference_finish(paths, sizes, starts, capacity), rtol=1e-7)
    assert net.num_active == 0 and not net.has_completions


@settings(max_examples=15)
@given(instances(max_links=8, max_flows=30))
def test_property_larger_instances_match_the_naive_event_simulation(inst):
    # more flows than links: deep bottleneck chains, many partial (incremental) re-solves
    paths, sizes, starts, capacity = inst
    net = run(paths, sizes, starts, capacity, checks=lambda n: check_max_min(n, paths))
    np.testing.assert_allclose(net.finish_s, reference_finish(paths, sizes, starts, capacity), rtol=1e-7)


@given(instances(), st.sampled_from([0.0, 0.3]))
def test_property_bytes_are_conserved_on_every_link_and_bin(inst, q):
    paths, sizes, starts, capacity = inst
    net = run(paths, sizes, starts, capacity, q=q, bin_s=0.37)
    ptr, idx = csr(paths)
    expected = np.bincount(idx, weights=np.repeat(sizes, np.diff(ptr)), minlength=capacity.size)
    np.testing.assert_allclose(net.link_bytes, expected, rtol=1e-9, atol=1e-9)
    _, per_bin = net.binned_link_bytes()
    np.testing.assert_allclose(per_bin.sum(axis=0), expected, rtol=1e-9, atol=1e-9)
    assert np.all(per_bin >= -1e-9)
    assert np.all(per_bin <= capacity * 0.37 * (1 + 1e-9))   # no bin over capacity either
    assert np.all(net.finish_s >= starts + sizes / capacity.max() * (1 - 1e-12))
    assert np.all(net.busy_above_90_s <= np.nanmax(net.finish_s) + 1e-12)


@given(instances(), st.sampled_from([0.0, 0.3]))
def test_property_same_input_same_result(inst, q):
    paths, sizes, starts, capacity = inst
    a = run(paths, sizes, starts, capacity, q=q, bin_s=0.5)
    b = run(paths, sizes, starts, capacity, q=q, bin_s=0.5)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.link_bytes, b.link_bytes)
    np.testing.assert_array_equal(a.binned_link_bytes()[1], b.binned_link_bytes()[1])


# ----------------------------------------------------------------------------- accuracy knob
def test_completion_quantile_stays_within_documented_error_of_exact():
    hosts = 24
    paths, num_links = leaf_spine_all_to_all(hosts, per_leaf=4, spines=2, seed=3)
    rng = np.random.default_rng(7)
    sizes = rng.uniform(0.5, 1.5, len(paths)) * 2.0**20
    capacity = np.full(num_links, 12.5e9)
    exact = run(paths, sizes, np.zeros(len(paths)), capacity)
    fast = run(paths, sizes, np.zeros(len(paths)), capacity, q=0.01)
    makespan_error = np.nanmax(fast.finish_s) / np.nanmax(exact.finish_s) - 1
    assert 0.0 <= makespan_error <= 0.002
    assert fast.stats["solves"] < exact.stats["solves"]
    np.testing.assert_allclose(fast.link_bytes, exact.link_bytes, rtol=1e-9)


def test_batched_completions_hold_rates_until_the_batch_end():
    # ten flows of 1..10 B on one 1 B/s link, q = 0.5: the first jump goes to the 6th predicted finish (60 s)
    # at 0.1 B/s each, flows 1-5 ending inside it; then 4 flows at 0.25 B/s jump to the 3rd finish (72 s);
    # the last byte of flow 10 then goes alone at 1 B/s. Load is above 90 % only before the first early
    # finish of each jump. The statistics see each jump as one stretch at its mean rate: [0, 60) moves 45 B
    # (0.75 B/s), [60, 72) 9 B (0.75 B/s), [72, 73) 1 B: above 90 % for the last second only.
    sizes = np.arange(1.0, 11.0)
    net = run([[0]] * 10, sizes, np.zeros(10), [1.0], q=0.5, bin_s=5.0)
    np.testing.assert_allclose(net.finish_s, [10, 20, 30, 40, 50, 60, 64, 68, 72, 73], rtol=1e-12)
    assert net.busy_above_90_s[0] == pytest.approx(1.0, rel=1e-12)
    assert net.link_bytes[0] == pytest.approx(55.0, rel=1e-12)
    starts, per_bin = net.binned_link_bytes()
    np.testing.assert_allclose(per_bin[:12, 0], 3.75, rtol=1e-12)          # 0.75 B/s over [0, 60)
    np.testing.assert_allclose(per_bin[:, 0].sum(), 55.0, rtol=1e-12)
    exact = run([[0]] * 10, sizes, np.zeros(10), [1.0])
    assert np.nanmax(exact.finish_s) == pytest.approx(55.0) and exact.busy_above_90_s[0] == pytest.approx(55.0)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("capacity", [[], [1.0, 0.0], [np.inf], [-1.0]])
def test_bad_capacity_is_rejected(capacity):
    with pytest.raises(SimError, match="capacity"):
        FlowNetwork(np.array(capacity))


@pytest.mark.parametrize(("kwargs", "field"), [({"completion_quantile": 1.0}, "completion_quantile"),
                                               ({"completion_quantile": -0.1}, "completion_quantile")])
def test_bad_settings_are_rejected(kwargs, field):
    with pytest.raises(SimError, match=field):
        FlowNetwork(np.ones(2), **kwargs)


def test_bad_flows_are_rejected():
    net = FlowNetwork(np.ones(2))
    with pytest.raises(SimError, match="link id 5"):
        net.add_flows(0.0, np.array([0, 1]), np.array([5]), np.array([1.0]))
    with pytest.raises(SimError, match=r"size_bytes\[1\]"):
        net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 1]), np.array([1.0, -2.0]))
    with pytest.raises(SimError, match="link_ptr"):
        net.add_flows(0.0, np.array([0, 1]), np.array([0, 1]), np.array([1.0, 1.0]))
    net.advance(1.0)
    with pytest.raises(SimError, match="before"):
        net.add_flows(0.5, np.array([0, 1]), np.array([0]), np.array([1.0]))
    with pytest.raises(SimError, match="before"):
        net.advance(0.5)


def test_a_link_down_stalls_its_flows_and_they_resume_with_their_bytes():
    # 100 B over a 10 B/s link; down from 2 s to 5 s: 20 B sent, 80 B left, done at 5 + 8 s
    net = FlowNetwork(np.array([10.0, 10.0]))
    net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 1]), np.array([100.0, 30.0]))
    net.advance(2.0)
    net.set_capacity([0], 0.0)
    assert net.remaining_bytes(np.array([0])).tolist() == pytest.approx([80.0])
    assert net.next_completion_s() == pytest.approx(3.0)     # the other flow is not held up
    net.advance(5.0)
    assert math.isnan(net.finish_s[0]) and net.remaining_bytes(np.array([0]))[0] == pytest.approx(80.0)
    net.set_capacity([0], 10.0)
    net.advance(math.inf)
    assert net.finish_s.tolist() == pytest.approx([13.0, 3.0], rel=1e-12)
    with pytest.raises(SimError, match="set_capacity"):
        net.set_capacity([0], -1.0)
