"""The compiled max-min kernel (sim.network.maxmin_numba) gives bit-identical rates to the numpy solver."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network import maxmin as network
from topologies.numba_cache import COMPILE_S

pytest.importorskip("numba")
from sim.network.maxmin_numba import max_min_kernel  # noqa: E402 - needs numba


@st.composite
def instances(draw):
    """CSR flows over links; sometimes a big fabric with few links in use (the kernel's compaction path),
    capacities with ties and zeros (exact ties are where float order matters)."""
    n_links = draw(st.sampled_from([3, 40, 5000]))
    n_flows = draw(st.integers(1, 60))
    degree = draw(st.lists(st.integers(1, 6), min_size=n_flows, max_size=n_flows))
    ptr = np.r_[0, np.cumsum(degree)].astype(np.int64)
    links = draw(st.lists(st.integers(0, n_links - 1), min_size=int(ptr[-1]), max_size=int(ptr[-1])))
    caps = draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, 100.0, 1e11 / 3]), min_size=n_links,
                         max_size=n_links))
    # integral weights (merged flows: the kernel subtracts frozen counts) and fractional ones (it recounts)
    weight = draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 3.0, 7.0, 0.5, 1.25]), min_size=n_flows,
                           max_size=n_flows))
    return ptr, np.array(links, dtype=np.int64), np.array(caps), np.array(weight)


@settings(max_examples=200, deadline=None)
@given(instances())
def test_kernel_matches_numpy_bit_for_bit(inst):
    ptr, links, caps, weight = inst
    for w in (np.ones(weight.size), weight):   # plain flows and weighted ones
        rates, iterations = max_min_kernel(ptr, links, caps, w)
        ref, ref_iterations = network.max_min_rates_numpy(ptr, links, caps, w)
        assert np.array_equal(rates, ref) and iterations == ref_iterations


def test_solver_switch(monkeypatch):
    ptr, links, caps = np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0])
    for solver in ("numpy", "jit", "auto"):
        monkeypatch.setattr(network, "SOLVER", solver)
        rates, _ = network.max_min_rates(ptr, links, caps)
        assert rates.tolist() == [0.5, 1.5, 0.5]


def test_auto_starts_on_numpy_and_loads_the_kernel_once_it_pays(monkeypatch):
    # a fresh process: nothing loaded, nothing spent; small solves stay on numpy until their estimated
    # extra cost reaches the load cost, a big one loads the kernel at once (rates identical either way)
    monkeypatch.setattr(network, "SOLVER", "auto")
    monkeypatch.setitem(network._SPENT, "numpy_excess_s", 0.0)
    monkeypatch.delitem(sys.modules, "numba", raising=False)   # as if numba were not loaded yet
    monkeypatch.setattr(network, "_KERNEL", {})
    monkeypatch.setattr(network, "kernels_cached_here", lambda: True)  # numba's cache holds the kernels
    calls = []
    monkeypatch.setattr(network, "_compiled_kernel", lambda: calls.append(1) or max_min_kernel)
    ptr, links, caps = np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0])
    assert not network.use_compiled(links.size)
    rates, iterations = network.max_min_rates(ptr, links, caps)
    assert rates.tolist() == [0.5, 1.5, 0.5] and not calls
    spent = network._SPENT["numpy_excess_s"]
    assert spent == pytest.approx(network.numpy_excess_s(links.size, iterations)) and spent > 0
    assert network.use_compiled(network.JIT_MIN_INCIDENCES) and calls      # big enough on its own
    calls.clear()
    monkeypatch.setitem(network._SPENT, "numpy_excess_s", network.JIT_LOAD_S)  # the small solves paid for it
    assert network.use_compiled(links.size) and calls
    monkeypatch.setattr(network, "SOLVER", "numpy")
    assert not network.use_compiled(10**9)


def test_without_cached_kernels_small_runs_stay_on_numpy_until_a_compile_pays(monkeypatch):
    # the first process after an install: loading the kernels means compiling them (tens of seconds), so
    # numba being loaded or a load's worth of numpy time is not enough; a compile's worth is, and so is a
    # problem big enough on its own; once loaded, the kernel is used for every solve of the process
    monkeypatch.setattr(network, "SOLVER", "auto")
    monkeypatch.setattr(network, "_KERNEL", {})
    monkeypatch.setattr(network, "kernels_cached_here", lambda: False)
    calls = []
    monkeypatch.setattr(network, "_compiled_kernel",
                        lambda: calls.append(1) or network._KERNEL.setdefault("kernel", max_min_kernel))
    monkeypatch.setitem(sys.modules, "numba", sys.modules.get("numba") or object())
    monkeypatch.setitem(network._SPENT, "numpy_excess_s", network.JIT_LOAD_S)
    assert not network.use_compiled(1000) and not calls
    monkeypatch.setitem(network._SPENT, "numpy_excess_s", COMPILE_S)
    assert network.use_compiled(1000) and calls
    monkeypatch.setitem(network._SPENT, "numpy_excess_s", 0.0)
    assert network.use_compiled(10)  # loaded now: no price left

