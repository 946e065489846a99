"""The compiled route walk (``topologies.routing_numba``) gives the numpy walk's routes, array for array."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from topologies import Router, TopologyError, fat_tree, routing


def both_walks(router, src, dst, key):
    """Routes of the same flows by the numpy walk and by the compiled walk."""
    saved = routing.WALK
    try:
        routing.WALK = "numpy"
        a = router.route(src, dst, key)
        routing.WALK = "jit"
        b = router.route(src, dst, key)
    finally:
        routing.WALK = saved
    return a, b


def assert_same(a, b):
    for field in ("sub_ptr", "fraction", "link_ptr", "link_idx"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype, field
        np.testing.assert_array_equal(x, y, err_msg=field)


def small(name, gpus_per_server):
    kw = {"servers_per_unit": 2} if name.startswith("rail") else {}
    return topologies.build(name, num_gpus=8 * gpus_per_server if name.startswith("rail") else 16,
                            gpus_per_server=gpus_per_server, **kw)


def cut(g, rng, k):
    """Remove up to ``k`` switch-switch cables (any: the network may even split)."""
    fabric = [e for e in g.edges if g.edges[e]["kind"] not in ("access", "nvlink")]
    for i in rng.choice(len(fabric), min(k, len(fabric)), replace=False):
        g.remove_edge(*fabric[i])
    return g


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(topologies.PRESETS)), gps=st.sampled_from([1, 2, 4]),
       mode=st.sampled_from(["ecmp", "single", "spray"]), pxn=st.booleans(), seed=st.integers(-3, 2**40),
       cuts=st.integers(0, 3), data=st.data())
def test_compiled_walk_gives_the_numpy_routes(name, gps, mode, pxn, seed, cuts, data):
    g = small(name, gps)
    rng = np.random.default_rng(abs(seed) % 1000)
    if cuts:
        g = cut(g, rng, cuts)
    router = Router(g, routing=mode, seed=seed, pxn=pxn)
    n = router.num_gpus
    flows = data.draw(st.integers(1, 300))
    src, dst = rng.integers(0, n, flows), rng.integers(0, n, flows)
    key = rng.integers(-(2**40), 2**40, flows)
    try:
        a, b = both_walks(router, src, dst, key)
    except TopologyError as err:  # a split network: both walks refuse, with the same message
        with pytest.raises(TopologyError, match=str(err).split(": ", 1)[1]):
            both_walks(router, src, dst, key)[1]
        return
    assert_same(a, b)


def test_compiled_walk_on_every_preset_all_pairs_and_a_missing_link(bridged_server):
    for name in sorted(topologies.PRESETS):
        g = small(name, 4)
        router = Router(g)
        s, d = np.divmod(np.arange(router.num_gpus ** 2), router.num_gpus)
        assert_same(*both_walks(router, s, d, 7))
    # an NVLink-only server (no network switch), two NVSwitches bridged by a GPU
    s, d = np.divmod(np.arange(9), 3)
    assert_same(*both_walks(Router(bridged_server), s, d, 0))
    g = fat_tree(4, gpus_per_server=1)
    g.remove_edge("gpu0", "leaf0")
    for walk in ("numpy", "jit"):
        routing.WALK = walk
        try:
            with pytest.raises(TopologyError, match="no path from gpu0 to gpu5"):
                Router(g).route([1, 0], [2, 5], 0)
        finally:
            routing.WALK = "auto"


@pytest.mark.slow
def test_small_batches_never_load_numba_and_a_large_one_does():
    """The size rule in a fresh process: small batches stay on numpy, a batch of WALK_MIN_FLOWS loads numba."""
    code = ("import sys, numpy as np; from topologies import Router, fat_tree, routing; r = Router(fat_tree(4)); "
            "[r.route(np.arange(100), np.arange(100)[::-1], k) for k in range(5)]; a = 'numba' in sys.modules; "
            "n = routing.WALK_MIN_FLOWS; r.route(np.arange(n) % 16, (np.arange(n) * 7 + 1) % 16, 0); "
            "print(a, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
