"""KeyRoutes (one table over (flow key, pair)) gives PairRoutes' per-key numbers bit for bit, and its compiled
grouped loads equal the numpy ones."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.analytical.kernels import grouped_loads
from sim.analytical.key_routes import KeyRoutes, grouped_loads_numpy
from tests.sim.analytical.pair_routes_oracle import PairRoutes
from topologies import fat_tree
from topologies.routing import Router

_ROUTERS = {mode: Router(fat_tree(16, gpus_per_server=2), routing=mode, seed=3) for mode in ("ecmp", "spray")}


def _per_key(pr: PairRoutes, src, dst, nbytes, key):
    """The analytical tier's former loop: one PairRoutes call per key, ascending, loads summed."""
    load = np.zeros(pr.n_links)
    spb, lat = np.zeros(len(src)), np.zeros(len(src))
    for k in np.unique(key).tolist():
        m = key == k
        part, spb[m], lat[m] = pr.loads(src[m], dst[m], nbytes[m], k)
        load += part
    return load, spb, lat


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 6), spray=st.booleans())
def test_one_table_gives_the_per_key_tables_numbers(seed, n_ops, spray):
    rng = np.random.default_rng(seed)
    router = _ROUTERS["spray" if spray else "ecmp"]
    pr, kr = PairRoutes(router), KeyRoutes(router)
    for _ in range(n_ops):  # ops reuse keys and pairs (rows already routed) and bring new ones
        n = int(rng.integers(1, 120))
        src = rng.integers(0, 32, n)
        dst = (src + rng.integers(1, 32, n)) % 32
        key = 1000 + rng.integers(0, 5, n) * 64 + rng.integers(0, 2, n)
        nbytes = rng.random(n) * 1e6 * (rng.random(n) < 0.9)  # a few transfers without bytes
        expect = _per_key(pr, src, dst, nbytes, key)
        got = kr.loads(src, dst, nbytes, key)
        for x, y in zip(got, expect, strict=True):
            np.testing.assert_array_equal(x, y)  # the same additions in the same order: no tolerance
    assert kr.routed_pairs == pr.routed_pairs


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sprayed=st.booleans())
def test_grouped_loads_kernel_equals_numpy(seed, sprayed):
    rng = np.random.default_rng(seed)
    n_rows, n_links = int(rng.integers(1, 50)), 20
    per_row = rng.integers(0, 12, n_rows)
    row_ptr = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64)
    links = rng.integers(0, n_links, int(row_ptr[-1])).astype(np.int64)
    frac = rng.random(len(links)) if sprayed else np.zeros(0)
    m = int(rng.integers(1, 60))
    group = np.sort(rng.integers(0, 6, m)).astype(np.int64)
    rows = rng.integers(0, n_rows, m).astype(np.int64)
    order = np.lexsort((rows, group))
    group, rows = group[order], rows[order]
    row_bytes = rng.random(m) * 1e6
    got = grouped_loads(group, rows, row_bytes, row_ptr, links, frac, n_links)
    np.testing.assert_array_equal(got, grouped_loads_numpy(group, rows, row_bytes, row_ptr, links, frac, n_links))
    # against the definition: per group a bincount from zero, then the groups added in order
    expect = np.zeros(n_links)
    for g in np.unique(group):
        sel = group == g
        w = np.repeat(row_bytes[sel], per_row[rows[sel]])
        e = np.concatenate([np.arange(row_ptr[r], row_ptr[r + 1]) for r in rows[sel]]).astype(np.int64)
        expect += np.bincount(links[e], weights=w * frac[e] if sprayed else w, minlength=n_links)
    np.testing.assert_array_equal(got, expect)
