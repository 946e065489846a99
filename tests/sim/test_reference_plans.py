"""`sim.replay.reference_durations` plans point-to-point ops without relays first: the same bounds and the
same plans kept for the replay as the order it replaced (an oracle below), with fewer plans made."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim.prepare as prepare_mod
from sim.prepare import KEEP_PLAN_TRANSFERS, Preparer
from sim.replay import _plans_relay, reference_durations, resolve_options
from sim.setup import setup_replay
from topologies.routing import Router
from traces.schema import new_metadata, validate

OPS = [("AllToAll", 1 << 20), ("AllReduce", 1 << 22), ("AllToAll", 1 << 16), ("AllGather", 1 << 18),
       ("AllToAll", 1 << 20)]


def _trace(world: int) -> pd.DataFrame:
    """Every rank issues OPS on one communicator of all ranks, then a Send/Recv pair 0 -> 9."""
    rows = [dict(rank=r, comm="world", seq=k, op=op, count=nbytes, dtype="uint8", bytes=nbytes, root=-1,
                 nranks=world, t_start_s=np.nan, duration_s=np.nan, host="", device=-1, context="", algo="",
                 proto="") for r in range(world) for k, (op, nbytes) in enumerate(OPS)]
    for rank, op, peer in ((0, "Send", 9), (9, "Recv", 0)):   # a Send/Recv's root is its peer
        rows.append(dict(rank=rank, comm="world", seq=len(OPS), op=op, count=4096, dtype="uint8", bytes=4096,
                         root=peer, nranks=world, t_start_s=np.nan, duration_s=np.nan, host="", device=-1,
                         context="", algo="", proto=""))
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"world": list(range(world))}, "test", gpus_per_node=8)
    return validate(df)


def _old_durations(setup, preparer) -> np.ndarray:
    """The loop this change replaced: the relayed plan first wherever the fabric needs no relays."""
    from sim.reference import ReferenceModel, plan_bound_s
    from topologies.builders.ideal import reference_ports

    model = ReferenceModel(reference_ports(setup.graph, preparer.router.num_gpus))
    out, done, relays = np.zeros(len(preparer.keys)), {}, _plans_relay(preparer)
    for op, key in enumerate(preparer.keys):
        if key not in done:
            plan = preparer.plan(op, pxn=False) if relays else preparer.plan(op)
            if not relays and plan.algo == "direct" and preparer.plan_options.get("pxn") is not False:
                plan = preparer.plan(op, pxn=False)
            done[key] = plan_bound_s(plan, model)
            if len(plan.src) > KEEP_PLAN_TRANSFERS:
                preparer.plans.pop(key, None)
        out[op] = done[key]
    return out


def _run(fn, topo: str, world: int, plan_options: dict, monkeypatch):
    """``fn(setup, preparer)``, its plans kept afterwards, the plans it made ((op name, pxn option), as
    the preparer asks for them), and the replay's plans of every op asked for afterwards."""
    made = []
    real_op, real_p2p = prepare_mod.plan_op, prepare_mod.plan_p2p

    def counted(rec, split, algo, graph, meta, options):
        made.append((rec["op"], options.get("pxn")))
        return real_op(rec, split, algo, graph, meta, options)

    def counted_p2p(rec, algo, graph, options, comm_nranks=None):
        made.append(("Send", options.get("pxn")))
        return real_p2p(rec, algo, graph, options, comm_nranks)

    monkeypatch.setattr(prepare_mod, "plan_op", counted)
    monkeypatch.setattr(prepare_mod, "plan_p2p", counted_p2p)
    setup = setup_replay(_trace(world), topo, resolve_options(None, "auto", "ecmp", 0, {}))
    prep = Preparer(setup.ops, Router(setup.damaged), "auto", setup.damaged, setup.meta, plan_options)
    out = fn(setup, prep)
    bound_made = list(made)   # a copy: the bound's plans only (the replay's look-ups below come after)
    kept = {k: (np.asarray(p.src).tolist(), np.asarray(p.dst).tolist(), np.asarray(p.bytes).tolist())
            for k, p in prep.plans.items()}
    # the replay's own plans, asked for after the bound: the same whichever order made them
    replay = [np.asarray(prep.plan(op).bytes).tolist() for op in range(len(prep.keys))]
    return out, kept, bound_made, replay


@pytest.mark.parametrize("topo", ["fat_tree", "rail_optimized"])
@pytest.mark.parametrize("pxn", [None, False, True])
def test_bounds_and_plans_are_the_old_order(topo, pxn, monkeypatch):
    opts = {} if pxn is None else {"pxn": pxn}
    new, new_kept, new_made, new_replay = _run(reference_durations, topo, 16, opts, monkeypatch)
    old, old_kept, old_made, old_replay = _run(_old_durations, topo, 16, opts, monkeypatch)
    assert np.array_equal(new, old)   # the same bound bit for bit
    assert new_replay == old_replay
    # plans kept for the replay: never more than before, and each one the same plan
    assert set(new_kept) <= set(old_kept)
    assert all(new_kept[k] == old_kept[k] for k in new_kept)
    assert len(new_made) <= len(old_made)
    # the order does not depend on the trace's sizes: every distinct key bounded once
    assert len(new) == len(old)


def test_direct_plans_made_once_each_before_the_replay(monkeypatch):
    """On fat_tree (no relays needed) an AllToAll or Send/Recv is planned once for the bound, without
    relays; the old order also planned it with NCCL's p2p PXN, only to learn that it is direct."""
    _, _, new_made, _ = _run(reference_durations, "fat_tree", 16, {}, monkeypatch)
    _, _, old_made, _ = _run(_old_durations, "fat_tree", 16, {}, monkeypatch)
    direct_new = [m for m in new_made if m[0] in ("AllToAll", "Send")]
    assert direct_new and all(p is False for _, p in direct_new)
    assert len(old_made) - len(new_made) == len(direct_new)   # one relayed plan fewer per direct key
    assert [m for m in new_made if m[0] not in ("AllToAll", "Send")] == \
        [m for m in old_made if m[0] not in ("AllToAll", "Send")]
