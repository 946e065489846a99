"""Memoisation across communicators (traffic classes), the live id map and the lazy split table.

Memo on and memo off must give the same replay: op times to 1e-12, link statistics to 1e-9, and the same
bytes on the wire (bytes conserved); a record of one communicator replays another's op only when their
prepared ops are equal (the same transfers over the same links).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.idmap import LiveIdMap
from sim.engine.memo import same_prepared
from sim.engine.workload import SplitTable

MIB = 1 << 20


def _trace(program, comms, gpus=8, gpn=4):
    """``program``: (comm, op, bytes, t_start_s) in issue order; every member of the comm issues it."""
    from traces.schema import new_metadata, normalize

    rows, seq = [], {}
    for comm, op, nbytes, t0 in program:
        s = seq[comm] = seq.get(comm, -1) + 1
        for r in comms[comm]:
            rows.append({"rank": r, "comm": comm, "seq": s, "op": op, "count": nbytes, "dtype": "uint8",
                         "bytes": nbytes, "root": -1, "nranks": len(comms[comm]), "t_start_s": t0,
                         "duration_s": np.nan, "host": "", "device": -1, "context": "", "algo": "", "proto": ""})
    return normalize(pd.DataFrame(rows), new_metadata(gpus, comms, "memo-classes", gpus_per_node=gpn))


def _run(df, memoize, topo="fat_tree"):
    from sim import simulate

    return simulate(df, topo, memoize=memoize, ideal=False, completion_quantile=0.0)


def _same(on, off):
    a, b = on.collectives, off.collectives
    np.testing.assert_allclose(a["start_s"], b["start_s"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a["duration_s"], b["duration_s"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(on.links["bytes"], off.links["bytes"], rtol=1e-9, atol=1e-6)
    # bytes conserved: every flow's bytes on every link of its path, memoised or not
    assert on.summary["bytes_on_wire"] == pytest.approx(off.summary["bytes_on_wire"], rel=1e-12)
    assert on.summary["flows"] == off.summary["flows"]
    assert on.summary["makespan_s"] == pytest.approx(off.summary["makespan_s"], rel=1e-12)


def test_communicators_over_the_same_gpus_share_records():
    # "a" and "b" span the same four GPUs of one server (NVLink only: the same links whatever the name),
    # "c" the other server; each op runs alone on its links
    comms = {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3], "c": [4, 5, 6, 7]}
    prog = [(c, "AllReduce", 4 * MIB, i * 1e-3) for i, c in enumerate(["a", "b", "a", "b", "c", "c"])]
    df = _trace(prog, comms)
    on, off = _run(df, True), _run(df, False)
    _same(on, off)
    # one record of the (a, b) class serves b's first op too (keyed by communicator: 3 records, 3 hits)
    assert on.summary["memo_records"] == 2 and on.summary["memo_hits"] == 4


def test_replays_across_communicators_only_from_equal_prepared_ops():
    # two servers: "x" and "y" are the same pair of GPUs across the fabric; their ECMP hashes may pick
    # other spines, and then the record of one must not replay the other
    from sim.options import SimOptions
    from sim.prepare import Preparer
    from sim.setup import setup_replay
    from topologies.routing import Router

    comms = {"x": [0, 4], "y": [0, 4], "z": [1, 5]}
    prog = [(c, "AllReduce", 2 * MIB, i * 1e-3) for i, c in enumerate(["x", "y", "z", "x", "y", "z"])]
    df = _trace(prog, comms)
    setup = setup_replay(df, "fat_tree", SimOptions())
    prep = Preparer(setup.ops, Router(setup.damaged), "auto", setup.damaged, setup.meta)
    equal = same_prepared(prep(0), prep(1))   # op 0 on x, op 1 on y
    assert setup.workload.op_class[0] == setup.workload.op_class[1] != setup.workload.op_class[2]
    on, off = _run(df, True), _run(df, False)
    _same(on, off)
    # x, y and z each repeat once: 3 hits; y's first op is one more when its links are x's
    assert on.summary["memo_hits"] == (4 if equal else 3)


_COMMS = {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3], "c": [2, 3, 4, 5], "d": [0, 4], "e": [0, 4], "w": list(range(8))}


_PROGRAMS = st.lists(st.tuples(st.sampled_from(sorted(_COMMS)), st.sampled_from(["AllReduce", "AllGather"]),
                               st.sampled_from([MIB, 4 * MIB]), st.integers(0, 6)), min_size=2, max_size=6)


def _memo_on_equals_memo_off(items):
    # random programs: overlapping ops (conflicts, materialised replays) and classes with several keys
    prog = [(c, op, nb, t * 2e-4) for c, op, nb, t in sorted(items, key=lambda x: x[3])]
    df = _trace(prog, _COMMS)
    _same(_run(df, True), _run(df, False))


@settings(max_examples=2, deadline=None, database=None)
@given(_PROGRAMS)
def test_memo_on_equals_memo_off(items):
    _memo_on_equals_memo_off(items)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(_PROGRAMS)
def test_memo_on_equals_memo_off_many(items):
    _memo_on_equals_memo_off(items)


# -- the live id map ---------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.randoms(use_true_random=False),
                          st.sampled_from([0, 0, 0, 3, 500])),
                min_size=1, max_size=15))
def test_live_id_map_matches_a_dict_and_stays_small(steps):
    # ids come consecutively (the network's), sometimes after a jump; long-lived ids become stragglers
    m, ref, next_id, peak = LiveIdMap(min_dead=4), {}, 0, 0
    for add, drop, rnd, jump in steps:
        next_id += jump
        ids = np.arange(next_id, next_id + add)
        rows = np.array([rnd.randrange(10**6) for _ in range(add)], dtype=np.int64)
        next_id += add
        m.put(ids, rows)
        ref.update(zip(ids.tolist(), rows.tolist(), strict=True))
        peak = max(peak, len(ref))
        gone = rnd.sample(sorted(ref), min(drop, len(ref)))
        probe = np.array(gone + [next_id + 5], dtype=np.int64)   # an unknown id reads -1
        assert m.get(probe).tolist() == [ref[i] for i in gone] + [-1]
        assert m.pop(np.array(gone, dtype=np.int64)).tolist() == [ref.pop(i) for i in gone]
        assert len(m) == len(ref)
        live = np.array(sorted(ref), dtype=np.int64)
        assert m.get(live).tolist() == [ref[i] for i in live.tolist()]
    # its arrays follow the most ids live at once, not every id ever added
    assert m.capacity <= 8 * (peak + 40) + 16


def test_live_id_map_takes_ids_out_of_order():
    m = LiveIdMap()
    m.put(np.array([10, 11]), np.array([1, 2]))
    m.put(np.array([5, 3]), np.array([7, 8]))
    m.put(np.array([40, 12, 13]), np.array([4, 5, 6]))   # in the window's gaps and past it
    assert m.get(np.array([3, 5, 10, 11, 12, 13, 40])).tolist() == [8, 7, 1, 2, 5, 6, 4]
    assert m.pop(np.array([40, 3])).tolist() == [4, 8] and len(m) == 5


# -- the lazy split table ------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(0, 9), st.data())
def test_split_table_builds_the_dense_matrix(n, fill, data):
    given_rows = data.draw(st.lists(st.integers(0, n - 1), unique=True))
    rows = [(i, tuple(data.draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)))) for i in given_rows]
    t = SplitTable()
    t.add(n, fill, rows)
    t.append(None)
    dense = np.full((n, n), fill, dtype=np.int64)
    for i, v in rows:
        dense[i] = v
    np.testing.assert_array_equal(t[0], dense)
    assert t[0].dtype == np.int64 and t[1] is None and len(t) == 2
    assert [x is None for x in t] == [False, True]


# -- plans dropped after the reference bound -------------------------------------------------------------


def test_plans_made_again_after_the_bound_give_the_same_replay(monkeypatch):
    import sim.replay as replay

    comms = {"w": list(range(8)), "a": [0, 1, 2, 3]}
    df = _trace([("w", "AllToAll", MIB, 0.0), ("a", "AllReduce", MIB, 0.0), ("w", "AllReduce", MIB, 1e-3)], comms)
    from sim import simulate

    kept = simulate(df, "fat_tree")
    monkeypatch.setattr(replay, "KEEP_PLAN_TRANSFERS", 0)   # every plan made again when its op starts
    again = simulate(df, "fat_tree")
    pd.testing.assert_frame_equal(kept.collectives, again.collectives)
    pd.testing.assert_frame_equal(kept.links, again.links)
