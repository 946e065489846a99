"""FlowNetwork rate ceilings (``add_flows(rate_cap=, cap_key=)``): closed forms, and the same finish times as
the network where each ceiling is an explicit public link (hypothesis), private links reused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import SimError
from sim.network.flow_network import FlowNetwork


def _run(net: FlowNetwork, batches) -> dict[int, float]:
    """Add each (time, ptr, idx, sizes, kwargs) batch at its time; return finish time per flow id."""
    out: dict[int, float] = {}
    for t, ptr, idx, size, kw in batches:
        done = net.advance(t)
        out.update(zip(done.tolist(), net.last_finish_s.tolist(), strict=True))
        net.add_flows(t, ptr, idx, size, **kw)
    done = net.advance(np.inf)
    out.update(zip(done.tolist(), net.last_finish_s.tolist(), strict=True))
    return out


def test_capped_flow_leaves_the_rest_to_the_other():
    # two flows on one 10 B/s link, one capped at 2: rates 2 and 8 (max-min with the ceiling), then 10
    net = FlowNetwork(np.array([10.0]), keep_flow_times=True)
    net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 0]), np.array([20.0, 80.0]),
                  rate_cap=np.array([2.0, np.inf]))
    assert net.active_flows()[1].tolist() == [2.0, 8.0]
    net.advance(np.inf)
    assert net.finish_s.tolist() == [10.0, 10.0]
    assert net.link_bytes.tolist() == [100.0] and net.capacity.shape == (1,)


def test_flows_of_one_key_share_the_ceiling():
    # two sub-flows of one connection on disjoint links share 3 B/s: 1.5 each; their private link is
    # free again afterwards and the next ceiling reuses it (no growth)
    net = FlowNetwork(np.array([10.0, 10.0]))
    net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 1]), np.array([30.0, 30.0]),
                  rate_cap=np.array([3.0, 3.0]), cap_key=np.array([7, 7]))
    assert net.active_flows()[1].tolist() == [1.5, 1.5]
    net.advance(np.inf)
    assert net.last_finish_s.tolist() == [20.0, 20.0]
    links = net._cap.size
    net.add_flows(net.now_s, np.array([0, 1]), np.array([0]), np.array([30.0]), rate_cap=np.array([6.0]))
    assert net.active_flows()[1].tolist() == [6.0] and net._cap.size == links
    assert net.link_load_bytes_per_s().tolist() == [6.0, 0.0]


def test_bad_ceilings_are_refused():
    net = FlowNetwork(np.array([10.0]))
    with pytest.raises(SimError, match="rate_cap must be > 0"):
        net.add_flows(0.0, np.array([0, 1]), np.array([0]), np.array([1.0]), rate_cap=np.array([0.0]))
    with pytest.raises(SimError, match="one value per flow"):
        net.add_flows(0.0, np.array([0, 1]), np.array([0]), np.array([1.0]), rate_cap=np.array([1.0, 2.0]))


@st.composite
def capped_instances(draw):
    n_links = draw(st.integers(1, 4))
    cap = np.array(draw(st.lists(st.sampled_from([5.0, 10.0, 40.0]), min_size=n_links, max_size=n_links)))
    batches = []
    for t in sorted(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=3))):
        n = draw(st.integers(1, 5))
        paths = [draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True)) for _ in range(n)]
        sizes = draw(st.lists(st.sampled_from([1.0, 7.0, 30.0]), min_size=n, max_size=n))
        ceil = draw(st.lists(st.sampled_from([np.inf, 1.0, 4.0, 25.0]), min_size=n, max_size=n))
        key = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
        batches.append((t, paths, sizes, ceil, key))
    return cap, batches


@given(capped_instances())
@settings(max_examples=15, deadline=None)
def test_ceilings_equal_explicit_links(instance):
    """A ceiling is exactly an extra link of that capacity crossed by the key's flows (max-min is generic)."""
    cap, batches = instance
    extra: list[float] = []
    mine, explicit = [], []
    for t, paths, sizes, ceil, key in batches:
        ptr = np.r_[0, np.cumsum([len(p) for p in paths])]
        mine.append((t, ptr, np.concatenate([np.array(p) for p in paths]), np.array(sizes),
                     {"rate_cap": np.array(ceil), "cap_key": np.array(key)}))
        link_of: dict[int, int] = {}
        xpaths = []
        for p, c, k in zip(paths, ceil, key, strict=True):
            if np.isfinite(c):
                if k not in link_of:   # the first flow of a key sets its ceiling
                    link_of[k] = len(cap) + len(extra)
                    extra.append(c)
                p = [*p, link_of[k]]
            xpaths.append(p)
        xptr = np.r_[0, np.cumsum([len(p) for p in xpaths])]
        explicit.append((t, xptr, np.concatenate([np.array(p) for p in xpaths]), np.array(sizes), {}))
    got = _run(FlowNetwork(cap), mine)
    want = _run(FlowNetwork(np.r_[cap, extra]), explicit)
    assert sorted(got) == sorted(want)
    np.testing.assert_allclose([got[i] for i in sorted(got)], [want[i] for i in sorted(want)], rtol=1e-9)


def test_private_links_module_shares_one_link_per_key_and_frees_it_with_its_last_flow():
    # sim.network.ceilings alone (split out of flow_network): keys 5, 5, 9 -> two private links after the
    # 2 public ones; a link is free again only when no flow crosses it
    from sim.network.ceilings import PrivateLinks, checked_caps
    from sim.network.live import LiveFlows

    live, priv = LiveFlows(2), PrivateLinks(2)
    caps = checked_caps(np.array([4.0, 4.0, 6.0]), np.array([5, 5, 9]), 3, np.ones(3, dtype=bool))
    rows, deg, cap, link_bytes = priv.attach(np.array([[0], [1], [0]]), np.array([1, 1, 1]), caps,
                                             np.array([10.0, 10.0]), np.zeros(2), live)
    assert deg.tolist() == [2, 2, 2] and rows[0, 1] == rows[1, 1] != rows[2, 1]
    assert cap[rows[:, 1]].tolist() == [4.0, 4.0, 6.0] and cap.size == link_bytes.size == live.num_links
    count = np.zeros(cap.size, dtype=np.int64)
    count[rows[1, 1]] = 1                       # flow 1 still crosses the shared link
    free_before = len(priv.free)
    priv.release(rows[[0, 2]], count)
    assert len(priv.free) == free_before + 1 and priv.free[-1] == rows[2, 1]
    with pytest.raises(SimError, match="rate_cap"):
        checked_caps(np.array([0.0]), None, 1, np.ones(1, dtype=bool))
