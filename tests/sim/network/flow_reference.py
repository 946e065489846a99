"""Independent references and drivers of the FlowNetwork tests (shared by the network test files).

``naive_max_min`` and ``reference_finish`` are textbook progressive filling and a naive event
simulation in plain Python; ``run`` drives a :class:`~sim.network.flow_network.FlowNetwork` through an
instance with per-link statistics (``Metered``); ``instances`` is the hypothesis strategy of small
instances and ``check_max_min`` the max-min optimality check; ``leaf_spine_all_to_all`` a two-tier
fabric's paths. ``tests/sim/network/test_flow_network.py`` re-exports them for the other test files.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from sim.engine.stats import LinkStats
from sim.network.flow_network import FlowNetwork

__all__ = ["Metered", "check_max_min", "csr", "instances", "leaf_spine_all_to_all", "naive_max_min",
           "reference_finish", "run"]


def naive_max_min(paths: list[list[int]], capacity: np.ndarray) -> np.ndarray:
    """Textbook progressive filling, one level at a time, in plain Python (the independent reference)."""
    rates = [0.0] * len(paths)
    rising = set(range(len(paths)))
    residual = [float(c) for c in capacity]
    while rising:
        counts = [0] * len(residual)
        for f in rising:
            for link in paths[f]:
                counts[link] += 1
        step = min(residual[link] / counts[link] for link in range(len(residual)) if counts[link])
        for f in rising:
            rates[f] += step
        for link in range(len(residual)):
            residual[link] -= step * counts[link]
        full = {link for link in range(len(residual)) if counts[link] and residual[link] <= 1e-12 * capacity[link]}
        rising = {f for f in rising if not full.intersection(paths[f])}
    return np.array(rates)


def reference_finish(paths, sizes, starts, capacity) -> np.ndarray:
    """Event-driven simulation with a full naive re-solve at every start and end (plain Python)."""
    n = len(paths)
    finish = np.full(n, np.nan)
    remaining = np.array(sizes, dtype=float)
    pending = sorted(range(n), key=lambda i: starts[i])
    active: list[int] = []
    now = 0.0
    while pending or active:
        while pending and starts[pending[0]] <= now:
            f = pending.pop(0)
            if remaining[f] <= 0 or not paths[f]:
                finish[f] = now
            else:
                active.append(f)
        if not active:
            if pending:
                now = starts[pending[0]]
            continue
        rates = naive_max_min([paths[f] for f in active], capacity)
        t_end = min(now + remaining[f] / r for f, r in zip(active, rates, strict=True))
        t_next = min(t_end, starts[pending[0]]) if pending else t_end
        for f, r in zip(active, rates, strict=True):
            remaining[f] -= r * (t_next - now)
        now = t_next
        for f in [f for f in active if remaining[f] <= 1e-9 * sizes[f]]:
            finish[f] = now
            active.remove(f)
    return finish


def csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    idx = np.array([link for p in paths for link in p], dtype=np.int64)
    return ptr, idx


class Metered:
    """A FlowNetwork and the LinkStats its driver keeps (the statistics' one owner), read as one object."""

    def __init__(self, net: FlowNetwork, stats: LinkStats) -> None:
        self.net, self.link_stats = net, stats

    def __getattr__(self, name):
        return getattr(self.net, name)

    @property
    def peak_utilization(self) -> np.ndarray:
        return self.link_stats.peak_rate / self.net.capacity

    @property
    def busy_above_90_s(self) -> np.ndarray:
        return self.link_stats.busy90_s

    def binned_link_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """The bins that saw traffic: their starts and bytes."""
        width, bins = self.link_stats.binned(float(np.nanmax(self.net.finish_s)) if self.net.num_flows else 0.0)
        used = np.flatnonzero(bins.any(axis=1))
        return used * width, bins[used]


def run(paths, sizes, starts, capacity, *, q=0.0, bin_s=None, checks=None, advance_first=True) -> Metered:
    """Drive a FlowNetwork through the flows (grouped by start time), calling ``checks(net)`` at events.

    ``advance_first=False`` adds flows without advancing to their start first (the network does it).
    Link statistics are kept by a :class:`LinkStats` from each stretch between events.
    """
    net = FlowNetwork(np.asarray(capacity, dtype=float), completion_quantile=q)
    stats = LinkStats(net.capacity, bin_s)
    last = {"t": 0.0, "bytes": net.link_bytes.copy()}

    def account(t):
        row = stats.dense_row(last["t"], t)
        if row is not None:
            np.subtract(net.link_bytes, last["bytes"], out=row)
        last["t"], last["bytes"] = t, net.link_bytes.copy()

    starts = np.asarray(starts, dtype=float)
    returned = []
    for s in np.unique(starts):
        if advance_first:
            while (net.num_active or net.has_completions) and net.next_completion_s() <= s:
                t = net.next_completion_s()
                returned += net.advance(t).tolist()
                account(t)
            returned += net.advance(s).tolist()
            account(s)
        sel = np.flatnonzero(starts == s)
        ptr, idx = csr([paths[i] for i in sel])
        ids = net.add_flows(s, ptr, idx, np.asarray(sizes, dtype=float)[sel])
        assert ids.tolist() == sel.tolist()  # flows added in id order here
        if checks:
            checks(net)
    while net.num_active or net.has_completions:
        t = net.next_completion_s()
        done = net.advance(t)
        account(t)
        assert np.all(net.finish_s[done] <= t)          # reported no earlier than the last byte
        returned += done.tolist()
        if checks:
            checks(net)
    returned += net.advance(math.inf).tolist()
    assert sorted(returned) == list(range(len(starts)))   # every flow reported exactly once
    return Metered(net, stats)


def leaf_spine_all_to_all(hosts: int, per_leaf: int, spines: int, seed: int):
    """Directed links of a two-tier leaf-spine and one random-spine (ECMP-like) path per ordered host pair.

    Link ids: host up (h), host down (hosts + h), leaf->spine and spine->leaf after that.
    """
    leaves = hosts // per_leaf
    rng = np.random.default_rng(seed)
    up = lambda leaf, s: 2 * hosts + leaf * spines + s  # noqa: E731
    down = lambda s, leaf: 2 * hosts + leaves * spines + s * leaves + leaf  # noqa: E731
    paths = []
    for a in range(hosts):
        for b in range(hosts):
            if a == b:
                continue
            la, lb = a // per_leaf, b // per_leaf
            if la == lb:
                paths.append([a, hosts + b])
            else:
                s = int(rng.integers(spines))
                paths.append([a, up(la, s), down(s, lb), hosts + b])
    num_links = 2 * hosts + 2 * leaves * spines
    return paths, num_links


@st.composite
def instances(draw, max_links=5, max_flows=8):
    num_links = draw(st.integers(1, max_links))
    capacity = draw(st.lists(st.floats(1.0, 10.0), min_size=num_links, max_size=num_links))
    n = draw(st.integers(1, max_flows))
    paths = [draw(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=min(num_links, 5), unique=True))
             for _ in range(n)]
    sizes = draw(st.lists(st.floats(0.5, 20.0), min_size=n, max_size=n))
    # sorted, so that flow ids (given in order of addition) equal the list positions
    starts = sorted(draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 1.7, 3.0]), min_size=n, max_size=n)))
    return paths, np.array(sizes), np.array(starts), np.array(capacity)


def check_max_min(net: FlowNetwork, paths) -> None:
    """No link over capacity; every active flow has a saturated link where its rate is the largest."""
    ids, rates = net.active_flows()
    load = net.link_load_bytes_per_s()
    assert np.all(load <= net.capacity * (1 + 1e-9))
    np.testing.assert_allclose(rates, naive_max_min([paths[i] for i in ids], net.capacity), rtol=1e-9)
    for f, r in zip(ids, rates, strict=True):
        assert any(
            load[link] >= net.capacity[link] * (1 - 1e-9)
            and all(r >= r2 * (1 - 1e-9) for g, r2 in zip(ids, rates, strict=True) if link in paths[g])
            for link in paths[f])
