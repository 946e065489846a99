"""Time-varying link capacities (anomaly windows, user processes) against closed forms."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from sim.anomalies import LinkWindow, apply, parse_window, window_processes
from sim.engine.engine import Engine
from sim.engine.paths import path_latency_s
from sim.engine.prepared import PreparedOp
from sim.engine.workload import Workload
from sim.errors import SimError
from sim.network.flow_network import FlowNetwork
from topologies.builders.fat_tree import fat_tree
from topologies.builders.ideal import nonblocking
from topologies.routing import Router

MIB = 1 << 20


def _one_transfer(router: Router, src: int, dst: int, nbytes: float) -> PreparedOp:
    routes = router.route(np.array([src]), np.array([dst]), np.zeros(1, np.int64))
    lat = path_latency_s(routes.link_ptr, routes.link_idx, router.links["latency_us"].to_numpy())
    z = np.zeros(1, np.int64)
    return PreparedOp("direct", "Simple", np.zeros(1), z, np.zeros(2, np.int64), z[:0], np.array([0, 1]),
                      np.array([float(nbytes)]), lat, z, z + src, z + dst, np.asarray(routes.link_ptr, np.int64),
                      np.asarray(routes.link_idx, np.int64))


def _serial(n_ops: int) -> Workload:
    """Ranks 0 and 1 run ops 0..n-1 one after the other (asap)."""
    steps = n_ops * 2
    return Workload(n_ops, [None] * n_ops, np.array([0, n_ops, 2 * n_ops]), np.zeros(2),
                    np.arange(steps + 1), np.r_[np.arange(n_ops), np.arange(n_ops)].astype(np.int64),
                    np.zeros(steps), np.zeros(steps))


@pytest.fixture
def pair():
    graph = nonblocking(fat_tree(4, num_gpus=2, gpus_per_server=1))
    router = Router(graph, "ecmp", seed=0)
    cap = router.links["capacity_gbps"].to_numpy() * 1e9 / 8
    prep = _one_transfer(router, 0, 1, 64 * MIB)
    first = int(prep.sub_link_idx[0])   # gpu0's access link
    rate = float(cap[prep.sub_link_idx].min())
    return router, cap, prep, first, rate


def _run(cap, preps, processes, n_ops=1):
    return Engine(_serial(n_ops), preps, FlowNetwork(cap), processes=processes, memoize=False).run()


def _window(link, factor, t1, t2, period=None):
    def process(env, net):
        for a, b in LinkWindow((), factor, t1, t2, period).intervals():
            yield env.timeout(a - env.now)
            net.scale_links([link], factor)
            if b == math.inf:
                return
            yield env.timeout(b - env.now)
            net.scale_links([link], 1.0)
    return process


def test_half_capacity_for_a_window_lengthens_a_transfer_by_half_the_window(pair):
    router, cap, prep, link, rate = pair
    base = _run(cap, [prep], []).op_end_s[0]
    transfer = 64 * MIB / rate
    assert base == pytest.approx(transfer + prep.sub_latency_s[0], rel=1e-12)
    t1, t2 = 0.2 * transfer, 0.6 * transfer
    slow = _run(cap, [prep], [_window(link, 0.5, t1, t2)]).op_end_s[0]
    assert slow - base == pytest.approx(0.5 * (t2 - t1), rel=1e-9)


def test_a_failed_link_stalls_its_flows_until_it_recovers(pair):
    router, cap, prep, link, rate = pair
    base = _run(cap, [prep], []).op_end_s[0]
    t1, t2 = 1e-5, 3e-4
    log = _run(cap, [prep], [_window(link, 0.0, t1, t2)])
    assert log.op_end_s[0] - base == pytest.approx(t2 - t1, rel=1e-9)


def test_recovery_restores_the_full_rate(pair):
    router, cap, prep, link, rate = pair
    transfer = 64 * MIB / rate
    # the window ends during op 0; op 1 starts after it and runs at the full rate again
    log = _run(cap, [prep, prep], [_window(link, 0.25, 0.1 * transfer, 0.5 * transfer)], n_ops=2)
    assert log.op_end_s[1] - log.op_start_s[1] == pytest.approx(transfer + prep.sub_latency_s[0], rel=1e-12)


def test_a_flapping_port_is_periodic_and_costs_its_down_halves(pair):
    router, cap, prep, link, rate = pair
    transfer = 64 * MIB / rate
    period, t1 = transfer / 10, transfer / 20
    t2 = t1 + 4 * period
    seen = []

    def probe(env, net):   # sample the link's capacity a quarter and three quarters into each period
        for k in range(4):
            for frac in (0.25, 0.75):
                yield env.timeout(t1 + (k + frac) * period - env.now)
                seen.append(net.net.capacity[link] / cap[link])

    base = _run(cap, [prep], []).op_end_s[0]
    log = _run(cap, [prep], [_window(link, 0.0, t1, t2, period), probe])
    assert seen == [0.0, 1.0] * 4
    assert log.op_end_s[0] - base == pytest.approx(4 * period / 2, rel=1e-9)


def test_a_failure_that_never_ends_is_a_deadlock_error(pair):
    router, cap, prep, link, rate = pair
    with pytest.raises(SimError, match="never ends"):
        _run(cap, [prep], [_window(link, 0.0, 1e-6, math.inf)])


def test_windows_parse_and_become_processes_on_both_directions():
    assert parse_window("1ms-3ms/500us", "x") == (1e-3, 3e-3, 5e-4)
    assert parse_window("2e-3", "x") == (2e-3, math.inf, None)
    for bad in ("3ms-1ms", "1ms-2ms/0", "soon", "1ms/1ms"):
        with pytest.raises(SimError):
            parse_window(bad, "--fail-links")
    g = nx.Graph()
    g.add_nodes_from(["a", "b", "c"], kind="leaf")
    g.add_edge("a", "b", capacity_gbps=100.0)
    g.add_edge("b", "c", capacity_gbps=100.0)
    out, damage = apply(g, fail_links="a-b@1ms-2ms,b-c", degrade_links="a-b:0.5@0-1ms/100us")
    assert damage.failed == [("b", "c")] and out.has_edge("a", "b") and not out.has_edge("b", "c")
    assert [(w.factor, w.t1_s, w.t2_s, w.period_s) for w in damage.windows] == [(0.0, 1e-3, 2e-3, None),
                                                                               (0.5, 0.0, 1e-3, 1e-4)]
    import pandas as pd
    links = pd.DataFrame({"src": ["a", "b", "b", "c"], "dst": ["b", "a", "c", "b"]})
    assert len(window_processes(damage, links)) == 2
    assert "link_windows" in damage.describe()


def test_a_process_that_is_not_a_generator_is_a_clear_error(pair):
    router, cap, prep, link, rate = pair
    with pytest.raises(SimError, match="generator function"):
        _run(cap, [prep], [lambda env, net: net.scale_links([link], 0.5)])
