"""relay_plan's per-communicator relay table (sim.planning.pxn) against a brute-force per-pair PXN rule."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.planning import pxn
from sim.planning.plan import TransferPlan


@cache
def graph(topo: str, gpus: int, gps: int):
    return topologies.build(topo, num_gpus=gpus, gpus_per_server=gps)


def brute_relay(a: int, b: int, server: dict, g, use_p2p: bool) -> int:
    """NCCL's rule for one send ``a -> b``, pair by pair (the module docstring of sim.planning.pxn)."""
    rail, dom = pxn.network_rails(g), pxn.nvlink_domains(g)
    local = {r: int(g.nodes[f"gpu{r}"].get("local_rank", 0)) for r in server}

    def rule(key, need_domain):
        if a not in server or b not in server or server[a] == server[b]:
            return -1
        if a not in key or b not in key or key[a] == key[b]:
            return -1
        # the lowest server-mate of the sender with the receiver's key and a NIC
        mates = [r for r in sorted(server) if r in key and r in rail and server[r] == server[a] and key[r] == key[b]]
        if not mates or mates[0] == a:
            return -1
        r = mates[0]
        if b in rail and rail[r] != rail[b]:
            return -1
        if need_domain and dom.get(r, -1) != dom.get(a, -2):
            return -1
        return r

    p2p = rule(local, True) if use_p2p else -1
    return p2p if p2p >= 0 else rule(rail, False)


def plan_of(pairs, algo: str) -> TransferPlan:
    k = len(pairs)
    src = np.array([p[0] for p in pairs], np.int32)
    dst = np.array([p[1] for p in pairs], np.int32)
    return TransferPlan(src=src, dst=dst, bytes=np.arange(1.0, k + 1), channel=np.zeros(k, np.int32),
                        delay_s=np.full(k, 1e-6), dep_ptr=np.zeros(k + 1, np.int64), dep_idx=np.zeros(0, np.int64),
                        algo=algo, proto="Simple")


def assert_same_plan(a: TransferPlan, b: TransferPlan) -> None:
    for f in dataclasses.fields(TransferPlan):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert x is not None and y is not None and x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["rail_only", "rail_optimized", "leaf_spine", "fat_tree"]), st.sampled_from([2, 4, 8]),
       st.integers(2, 4), st.data(), st.sampled_from(["direct", "ring"]), st.sampled_from([None, True]))
def test_relay_table_matches_the_per_pair_rule(topo, gps, servers, data, algo, mode):
    n_gpus = gps * servers
    g = graph(topo, n_gpus, gps)
    comm = data.draw(st.lists(st.integers(0, n_gpus - 1), min_size=2, max_size=n_gpus, unique=True))
    server = {r: int(g.nodes[f"gpu{r}"]["server"]) for r in comm}
    # transfers between any GPUs (ranks outside the communicator get no relay), first fewer than the
    # communicator's pairs (per-op path), then as many (the table), then the first plan again (table hit)
    few = data.draw(st.lists(st.tuples(st.integers(0, n_gpus - 1), st.integers(0, n_gpus - 1)), min_size=1,
                             max_size=len(comm) ** 2 - 1))
    many = [(a, b) for a in comm for b in comm] + few
    for pairs in (few, many, few):
        plan = plan_of(pairs, algo)
        got = pxn.relay_plan(plan, server, g, mode)
        use_p2p = bool(mode or algo == "direct")
        relay = np.array([brute_relay(a, b, server, g, use_p2p) for a, b in pairs], np.int64)
        if len(set(server.values())) < 2:
            relay[:] = -1
        assert_same_plan(got, pxn.apply_pxn(plan, relay, pipelined=algo == "direct"))


def test_relay_tables_stay_within_their_budget(monkeypatch):
    g = graph("rail_optimized", 32, 8)
    monkeypatch.setattr(pxn, "_TABLE_BUDGET_BYTES", 2 * 17 * 17 * 4)   # two 16-rank tables
    monkeypatch.setattr(pxn, "_TABLES", type(pxn._TABLES)())
    comms = [list(range(k, k + 16)) for k in (0, 8, 16)]
    for comm in comms + comms:
        server = {r: r // 8 for r in comm}
        pairs = [(a, b) for a in comm for b in comm]
        got = pxn.relay_plan(plan_of(pairs, "direct"), server, g, None)
        relay = np.array([brute_relay(a, b, server, g, True) for a, b in pairs], np.int64)
        assert_same_plan(got, pxn.apply_pxn(plan_of(pairs, "direct"), relay, pipelined=True))
        tables = [v for v in pxn._TABLES[g].values() if v]
        assert 1 <= len(tables) <= 2
        assert sum(v[1].nbytes for v in tables) <= 2 * 17 * 17 * 4
