"""A memo conflict handled where it arises: turn an op replayed from a record into an explicit run, now.

An op V replayed from a record since ``t0`` was alone on its footprint up to now (any op starting on it
is exactly the conflict that brings us here), and max-min rates split over link-disjoint groups of flows,
so V's explicit run up to now equals V run alone from ``t0`` to now. :func:`materialise` re-simulates V
alone in a scratch clock and network (its link bytes go straight to the run's statistics), stops just
before the current instant's start batch (priority 2.5: after the instant's network wake-ups and events,
before ops start and flows enter the network), moves the scratch network to now, and hands its state
over to the live run: the flows in flight re-enter the live network with the bytes they have left, the
op's transfer counters, pending transfers and future events move over, and the rows the replay put in
the flow log are replaced by the scratch run's. V then continues as an explicit run. Cost: one
re-simulation of one op, instead of rerunning the world.
"""

from __future__ import annotations

import numpy as np

from sim.engine.clock import Clock
from sim.engine.csr import csr_take
from sim.engine.flowlog import FlowLog
from sim.engine.memo import InFlight
from sim.engine.netproc import NetworkProcess
from sim.engine.transfers import OpRunner
from sim.network.flow_network import FlowNetwork

__all__ = ["materialise"]

#: the scratch run stops after the instant's events (priorities 0, 1), before its start batch (2)
_BEFORE_START = 1.5

_LOG_COLUMNS = ("op", "sub", "path", "bytes", "start", "sent", "end", "lat")


def materialise(engine, op: int, fl: InFlight, now: float) -> None:
    """Make op ``op`` (replayed from a record since ``fl.t0``) an explicit run from ``now`` on.

    Parameters
    ----------
    engine : sim.engine.engine.Engine
        The live run (at its start batch of time ``now``).
    op : int
    fl : InFlight
        The op's entry (``virtual``); turned explicit.
    now : float
    """
    prep = fl.prep
    clock = Clock(initial_time=fl.t0)
    scratch_log = FlowLog()
    net = FlowNetwork(engine.netproc.net.capacity, completion_quantile=engine.completion_quantile,
                      keep_flow_times=False)   # the engine reads last_finish_s: nothing per flow outlives it
    runner = OpRunner(clock, None, engine.paths, scratch_log, engine.w.n_ops, _ignore, track=True)
    runner.adopt_paths(engine.runner)
    netproc = NetworkProcess(clock, net, engine.stats, engine.keep_stats, runner.network_done)
    runner.netproc = netproc
    runner.launch(op, prep, fl.t0)
    clock.run_until(clock.at(now, _BEFORE_START))
    netproc.catch_up(now)   # the live run's flush would move the network to now: bytes up to now

    # the replay's rows leave the log; the scratch run's rows take their place
    live = engine.runner
    engine.log.kill(fl.rows)
    live.op_flows[op] += runner.op_flows[op] - len(fl.rows)
    n = scratch_log.n
    rows = engine.log.append(n)
    for name in _LOG_COLUMNS:
        getattr(engine.log, name).a[rows] = getattr(scratch_log, name).a[:n]

    # flows in flight re-enter the live network with the bytes they have left
    ids, _ = net.active_flows()
    final = np.ones(n, dtype=bool)
    if len(ids):
        left = net.remaining_bytes(ids)
        srow = runner.net_row.get(ids)
        final[srow] = False
        link_ptr, link_idx = csr_take(engine.paths.ptr, engine.paths.links, scratch_log.path.a[srow])
        cap = key = None
        if prep.sub_cap_bytes_per_s is not None:   # the flows keep their rate ceilings (sim.planning.p2p)
            subs = scratch_log.sub.a[srow].astype(np.int64)
            cap, key = prep.sub_cap_bytes_per_s[subs], prep.sub_transfer[subs]
        live_ids = engine.netproc.add(now, link_ptr, link_idx, left, rate_cap=cap, cap_key=key)
        live.map_flows(live_ids, rows[srow])
    engine.log.release(rows[final])   # the flows that finished alone are final; the others finish live

    # transfer counters, pending transfers and future events move over
    if op in runner.runs:
        live.runs[op] = runner.runs[op]
    for pend_op, tids in runner.pending:
        live.pend(pend_op, tids, now)
    for _, (t, kind, args) in sorted(runner.future.items()):
        live.schedule(t, kind, *args)
    engine.netproc.events += netproc.events
    fl.virtual = False


def _ignore(op: int) -> None:
    """The scratch run's op end: handed over as a future event instead."""
