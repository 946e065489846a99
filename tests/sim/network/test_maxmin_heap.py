"""The heap water-filling of big solves (sim.network.maxmin_heap): the max-min allocation, to float rounding.

Checked on random small problems against the progressive-filling solver (same rates within 1e-9, the
max-min conditions: no link over capacity, every flow has a saturated link on which no flow is faster),
and inside the network with the size rule lowered so every solve takes the heap: the finish times of the
naive event simulation, bytes conserved on every link.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network import constants
from sim.network import maxmin as network
from tests.sim.network.test_flow_network import instances as network_instances
from tests.sim.network.test_flow_network import reference_finish, run

pytest.importorskip("numba")
from sim.network.maxmin_heap import max_min_heap_kernel  # noqa: E402 - needs numba


@st.composite
def instances(draw):
    """CSR flows over a few links: capacities with ties and zeros (links down), weighted flows."""
    n_links = draw(st.integers(1, 12))
    n_flows = draw(st.integers(1, 40))
    degree = draw(st.lists(st.integers(1, 5), min_size=n_flows, max_size=n_flows))
    ptr = np.r_[0, np.cumsum(degree)].astype(np.int64)
    links = draw(st.lists(st.integers(0, n_links - 1), min_size=int(ptr[-1]), max_size=int(ptr[-1])))
    caps = draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 100.0, 1e11 / 3]), min_size=n_links,
                         max_size=n_links))
    weight = draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 3.0, 7.0]), min_size=n_flows, max_size=n_flows))
    return ptr, np.array(links, dtype=np.int64), np.array(caps), np.array(weight)


def _is_max_min(ptr, links, caps, w, rates) -> bool:
    load = np.bincount(links, weights=np.repeat(rates * w, np.diff(ptr)), minlength=caps.size)
    if not (load <= caps * (1 + 1e-9) + 1e-12).all():
        return False
    fastest = np.zeros(caps.size)
    np.maximum.at(fastest, links, np.repeat(rates, np.diff(ptr)))
    for f in range(ptr.size - 1):
        own = links[ptr[f]:ptr[f + 1]]
        ok = (load[own] >= caps[own] * (1 - 1e-9)) & (rates[f] >= fastest[own] * (1 - 1e-9))
        if not ok.any():
            return False
    return True


@settings(max_examples=25, deadline=None)
@given(instances())
def test_heap_kernel_gives_the_max_min_rates(inst):
    ptr, links, caps, weight = inst
    for w in (np.ones(weight.size), weight):
        rates, bottlenecks = max_min_heap_kernel(ptr, links, caps, w)
        ref, _ = network.max_min_rates_numpy(ptr, links, caps, w)
        np.testing.assert_allclose(rates, ref, rtol=1e-9, atol=1e-300)
        assert _is_max_min(ptr, links, caps, w, rates) and 1 <= bottlenecks <= ptr.size - 1


@settings(max_examples=20, deadline=None)
@given(inst=network_instances(max_links=6, max_flows=20))
def test_network_on_the_heap_matches_the_naive_event_simulation(inst, monkeypatch_heap):
    # every re-solve of the network takes the heap (the size rule set to 0): finish times of the naive
    # event simulation, and the bytes every link carried are the bytes of the flows crossing it
    paths, sizes, starts, capacity = inst
    net = run(paths, sizes, starts, capacity)
    np.testing.assert_allclose(net.finish_s, reference_finish(paths, sizes, starts, capacity), rtol=1e-7)
    want = np.zeros(capacity.size)
    for p, s in zip(paths, sizes, strict=True):
        want[p] += s
    np.testing.assert_allclose(net.link_bytes, want, rtol=1e-9)


def test_public_solver_takes_the_heap_for_big_solves(monkeypatch):
    ptr, links, caps = np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0])
    monkeypatch.setattr(network, "SOLVER", "jit")
    monkeypatch.setattr(constants, "HEAP_MIN_INCIDENCES", 1)
    rates, bottlenecks = network.max_min_rates(ptr, links, caps)
    assert rates.tolist() == [0.5, 1.5, 0.5] and bottlenecks == 2   # link 0, then link 1


@pytest.fixture(scope="module")
def monkeypatch_heap():
    mp = pytest.MonkeyPatch()
    mp.setattr(network, "SOLVER", "jit")               # the compiled events (they hold the size rule)
    mp.setattr(constants, "HEAP_MIN_INCIDENCES", 0)
    yield
    mp.undo()
