"""The analytical tier's compiled path reductions equal the numpy ones bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.analytical.kernels import link_loads, path_bounds
from sim.analytical.routes import path_bounds_numpy


@settings(max_examples=20, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=60), seed=st.integers(0, 2**32 - 1),
       sprayed=st.booleans())
def test_path_bounds_and_link_loads_equal_numpy(lengths, seed, sprayed):
    rng = np.random.default_rng(seed)
    n_links = 50
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    idx = rng.integers(0, n_links, int(ptr[-1]))
    cap = rng.random(n_links) * 1e10
    lat = rng.random(n_links) * 1e-5
    c1, l1 = path_bounds(ptr, idx, cap, lat)
    c2, l2 = path_bounds_numpy(ptr, idx, cap, lat)
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(l1, l2)  # the same additions in the same order: no tolerance
    row_bytes = rng.random(len(lengths)) * 1e6
    frac = rng.random(len(idx)) if sprayed else None
    weight = np.repeat(row_bytes, lengths) * (frac if sprayed else 1.0)
    expect = np.bincount(idx, weights=weight, minlength=n_links)
    got = link_loads(idx, frac if sprayed else np.zeros(0), ptr, row_bytes, n_links)
    np.testing.assert_array_equal(got, expect)


def test_dense_row_lookup_gives_the_binary_search_rows(monkeypatch):
    from tests.sim.analytical import pair_routes_oracle as routes
    from topologies import fat_tree
    from topologies.routing import Router

    router = Router(fat_tree(4, gpus_per_server=1))
    rng = np.random.default_rng(5)
    calls = [(rng.integers(0, 16, 40), rng.integers(0, 16, 40), rng.random(40) * 1e6) for _ in range(6)]
    results = {}
    for dense_min in (1, 10**9):
        monkeypatch.setattr(routes, "DENSE_MIN_ROWS", dense_min)
        pr = routes.PairRoutes(router)
        results[dense_min] = [pr.loads(s, d, b, 3) for s, d, b in calls]
        assert (pr.tables[3].dense is not None) == (dense_min == 1)
    for got, expect in zip(results[1], results[10**9], strict=True):
        for x, y in zip(got, expect, strict=True):
            np.testing.assert_array_equal(x, y)
