"""The event core of the replay: rank programs, collective synchronisation, memoised isolated ops.

:class:`Engine` takes a :class:`sim.engine.workload.Workload` (rank programs over op instances), one
:class:`sim.engine.prepared.PreparedOp` per op (its transfers and routes, planned outside) and a fresh
:class:`sim.network.flow_network.FlowNetwork`, and returns an :class:`EngineLog`. Time is a
:class:`sim.engine.clock.Clock` (a simpy environment): each rank program is a process, the network is a
process (:mod:`sim.engine.netproc`), anomalies and user processes are processes that change link
capacities; the transfers of running ops are :mod:`sim.engine.transfers`.

Semantics
---------
* Each program (one per rank) is a sequence of *steps*; a step is one op, or the ops of one rank with the
  same ``group`` id (issued in one ``ncclGroupStart/End``; they progress together). A rank issues step
  ``j + 1`` once step ``j`` is done on that rank (one stream per rank), so ops on one communicator run in
  order; ops of different communicators overlap across ranks and inside a group.
* Issue times (:meth:`Engine._issue_time`): ``timing="asap"``: as soon as the previous step is done.
  ``timing="gaps"`` (what-if replay): ``done_{j-1} + gap_j``, where ``gap_j`` is the recorded compute gap
  (``t_start_j`` minus the recorded end of step ``j - 1``); the first step at its ``t_start``.
  ``timing="trace"``: ``max(t_start_j, done_{j-1} + gap_j)`` (recorded issue times are a floor). A straggler's
  program then sleeps its delay (slow compute) before it issues the step.
* An op instance starts when all its member steps have been issued; its transfers then run as
  :mod:`sim.engine.transfers` says; the op ends when its last transfer is done.

Exact memoisation of isolated ops
---------------------------------
See :mod:`sim.engine.memo`. A recorded op (of the same key, or of another key of its traffic class whose
prepared op is equal array for array: the same transfers over the same links) is replayed from its record when it starts with its footprint
free: it ends at its start plus the recorded duration, its flows enter the log, its link statistics are
added when it ends. If another op starts on its footprint before then, the replay is *materialised* at
that moment (:mod:`sim.engine.materialise`): the op alone up to now is what its explicit run would have
been, so it is re-simulated alone from its start to now and continues explicitly from that state. The
figures are therefore those of an explicit run, to float rounding (with ``completion_quantile > 0`` the
network's batching, which looks at every flow in flight, is the one coupling a record does not reproduce).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from sim.engine.clock import START, Clock
from sim.engine.engine_memo import EngineMemo
from sim.engine.flowlog import FlowKeep, FlowLog, FlowSample
from sim.engine.log import EngineLog
from sim.engine.memo import Aliases, InFlight
from sim.engine.netproc import NetworkProcess
from sim.engine.paths import PathTable
from sim.engine.prepared import PreparedOp
from sim.engine.stats import LinkStats
from sim.engine.transfers import OpRunner
from sim.engine.workload import Workload
from sim.errors import SimError

__all__ = ["Engine", "EngineLog"]


def _op_label(op: int) -> str:
    return f"op {op}"


class Engine(EngineMemo):
    """Replay a :class:`Workload` over a network; see the module docstring for the semantics.

    Parameters
    ----------
    workload : Workload
    ops : sequence of PreparedOp
        One per op instance (ops with equal keys may share one object).
    network : FlowNetwork
        A fresh network; its capacities are the links' nominal ones.
    timing : {"gaps", "trace", "asap"}
    bin_s : float, optional
        Fixed width of the utilisation time bins; adaptive (~128-256 bins over the run) when omitted.
    memoize : bool
        Replay isolated ops from records (exact; see the module docstring).
    memo : dict, optional
        Records shared between runs (filled by this run).
    link_stats : bool
        Keep per-link statistics (off for the ideal reference, which only needs op times).
    progress : callable, optional
        ``progress(ops, t_s)``: called with the number of ops finished since the last call and the
        simulated time reached (seconds).
    label : callable, optional
        ``label(op) -> str``, a short name of an op for messages.
    processes : sequence of callables, optional
        ``fn(env, net)`` generators started with the run (``net``: the :class:`NetworkProcess`).
    link_names : sequence of (str, str), optional
        ``(src, dst)`` per link, for ``net.cable_links``.
    flows : {"keep", "sample", "none"}
        What the returned log holds of the flows: all of them, a bounded sample (``sample_limit``), or
        none (then memory grows with the flows in flight only, not with the run's flows).
    sinks : sequence
        More receivers of every finished flow (:mod:`sim.engine.flowlog`), e.g. the streaming incast
        detection or a Parquet writer; a sink with ``set_horizon`` learns how to ask for the earliest
        time a flow not handed out yet can start. ``sink_block`` flows are handed over at a time.
    """

    def __init__(self, workload: Workload, ops: Sequence[PreparedOp], network, *, timing: str = "asap",
                 bin_s: float | None = None, memoize: bool = True, memo: dict | None = None,
                 link_stats: bool = True, progress: Callable[[int, float], None] | None = None,
                 label: Callable[[int], str] | None = None, processes: Sequence[Callable] = (),
                 link_names=None, flows: str = "keep", sinks: Sequence = (), sample_limit: int = 1 << 15,
                 sink_block: int = 1 << 16) -> None:
        if timing not in ("gaps", "trace", "asap"):
            raise SimError(f"timing {timing!r} is not one of: gaps, trace, asap")
        w = workload
        self.w = workload
        self.ops = ops
        self.timing = timing
        self.memoize = memoize
        self.progress = progress
        self.label = label or _op_label
        self.processes = list(processes)
        cap = np.array(network.capacity, dtype=np.float64)
        self.clock = Clock()
        self.stats = LinkStats(cap, bin_s)
        self.keep_stats = link_stats
        # the engine's own table of the ops' paths (their latencies come with the prepared ops)
        self.paths = PathTable(cap * 8e-9, np.zeros(len(cap)))
        if flows not in ("keep", "sample", "none"):
            raise SimError(f"flows {flows!r} is not one of: keep, sample, none")
        self.kept = FlowKeep() if flows == "keep" else FlowSample(sample_limit) if flows == "sample" else None
        self.sinks = [*([self.kept] if self.kept is not None else []), *sinks]
        for sink in sinks:
            if hasattr(sink, "set_horizon"):
                sink.set_horizon(self._horizon)
        self.log = FlowLog(self.sinks, self.paths, block=sink_block)
        self.netproc = NetworkProcess(self.clock, network, self.stats, link_stats, self._network_done, link_names)
        self.runner = OpRunner(self.clock, self.netproc, self.paths, self.log, w.n_ops, self._finish)
        self.completion_quantile = float(getattr(network, "completion_quantile", 0.0))
        self.op_start = np.full(w.n_ops, np.nan)
        self.op_end = np.full(w.n_ops, np.nan)
        self.op_algo = [""] * w.n_ops
        self.op_wait = np.zeros(w.n_ops, dtype=np.int64)
        np.add.at(self.op_wait, w.step_op_idx, 1)
        steps_of = np.repeat(np.arange(w.n_steps, dtype=np.int64), np.diff(w.step_op_ptr))
        order = np.argsort(w.step_op_idx, kind="stable")
        self.op_step_idx = steps_of[order]
        self.step_issue = np.full(w.n_steps, np.nan)
        self.op_step_ptr = np.zeros(w.n_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(w.step_op_idx, minlength=w.n_ops), out=self.op_step_ptr[1:])
        self.step_left = np.diff(w.step_op_ptr).astype(np.int64)
        self.step_prog = np.repeat(np.arange(len(w.prog_ptr) - 1), np.diff(w.prog_ptr))
        self.gates: dict[int, object] = {}
        self.just_started: list[int] = []
        self._batch_at: float | None = None
        self.memo: dict = {} if memo is None else memo
        # ops of each key not started yet: an op is recorded only when a later one can replay it, and a
        # record is cut down (Record.spent) once no op of its key is left and its replays have ended
        # ops of one traffic class may share a record across keys (communicators over the same ranks):
        # only when their prepared ops are equal, i.e. the same transfers over the same links
        self.op_class = list(w.op_key) if w.op_class is None else list(w.op_class)
        self.key_class = {k: c for k, c in zip(w.op_key, self.op_class, strict=True) if k is not None}
        self.key_left = Counter(c for k, c in zip(w.op_key, self.op_class, strict=True) if k is not None)
        self.aliases = Aliases(Counter(self.key_class.values()))
        self.replaying: Counter = Counter()
        self.inflight: dict[int, InFlight] = {}
        self.link_users = np.zeros(len(cap), dtype=np.int64)
        self.link_owner = np.full(len(cap), -1, dtype=np.int64)  # a recording op's links
        self.recording = 0   # ops in flight whose link bytes are being recorded (link_owner >= 0)
        if memoize:
            self.netproc.on_segment = self._record_segment
            self.runner.on_flows = self._record_flows
        # per op, the links its flows move bytes on (shared per prepared op): what the results ask of the
        # delayed ops after the run, when the prepared ops are gone (preparing them again costs a plan and
        # a route each)
        self.op_used: list = [None] * w.n_ops
        self._used_of: dict[int, np.ndarray] = {}
        self.memo_hits = self.memo_records = self.materialised = 0
        self.ops_done = 0
        self._all_done = self.clock.event()

    # -- rank programs ------------------------------------------------------------------------------
    def _issue_time(self, step: int, prev_done: float | None) -> float:
        """When a rank issues ``step``, given when its previous step was done (None: the first step)."""
        if self.timing in ("trace", "gaps"):
            t0 = float(self.w.step_t_start_s[step])
            if prev_done is None:
                return t0
            # gaps: the recorded compute gap after the previous step, no absolute floor, so the network
            # moves everything after it (what-if replay); trace: recorded issue times are a floor
            after = prev_done + float(self.w.step_gap_s[step])
            return after if self.timing == "gaps" else max(t0, after)
        return 0.0 if prev_done is None else prev_done

    def _program(self, prog: int, first: int, end: int):
        """A rank's program as a process: wait for each step's issue time, (straggle,) issue it."""
        clock = self.clock
        delay = float(self.w.prog_delay_s[prog])
        gate = self.gates[prog] = clock.event()
        clock.trigger_at(gate, self._issue_time(first, None))
        for step in range(first, end):
            yield gate   # triggered at the issue time by the end of the previous step (_finish)
            if delay > 0:   # a straggler: slow compute before every step it issues
                yield clock.at(clock.now + delay)
            gate = self.gates[prog] = clock.event()
            self._issue(step, clock.now)

    def _issue(self, step: int, t: float) -> None:
        w = self.w
        self.step_issue[step] = t
        for op in w.step_op_idx[w.step_op_ptr[step]: w.step_op_ptr[step + 1]].tolist():
            self.op_wait[op] -= 1
            if self.op_wait[op] == 0:
                self.op_start[op] = t
                self.just_started.append(op)
                if self._batch_at != t:
                    self._batch_at = t
                    self.clock.call_at(t, START, self._start_batch)

    def _finish(self, op: int) -> None:
        t = float(self.clock.now)
        self.op_end[op] = t
        self.runner.runs.pop(op, None)
        self.ops_done += 1
        if self.progress is not None:
            self.progress(1, t)
        fl = self.inflight.get(op)
        if fl is not None and fl.rec is not None:
            if fl.rec.alive:
                self._store(op, fl.rec, t, fl.footprint)
            # the op's rows were held for the record: final now (released while the op still counts as
            # in flight, so the sinks' horizon still covers their start times)
            self.runner.set_hold(op, False)
            if fl.rec.flow_ids:
                self.log.release(np.concatenate(fl.rec.flow_ids))
        fl = self.inflight.pop(op, None)
        if fl is not None:
            self.link_users[fl.footprint] -= 1
            if fl.rec is not None:
                self.recording -= 1
                self.link_owner[fl.footprint] = -1
        for step in self.op_step_idx[self.op_step_ptr[op]: self.op_step_ptr[op + 1]].tolist():
            self.step_left[step] -= 1
            if self.step_left[step] == 0:
                prog = self.step_prog[step]
                nxt = step + 1
                if nxt < self.w.prog_ptr[prog + 1]:
                    self.clock.trigger_at(self.gates[prog], self._issue_time(nxt, t))
        if self.ops_done == self.w.n_ops:
            self._all_done.succeed()

    def _network_done(self, done: np.ndarray, sent: np.ndarray, t: float) -> None:
        self.runner.network_done(done, sent, t)

    # -- main loop ----------------------------------------------------------------------------------
    def run(self) -> EngineLog:
        """Run to the end; raises :class:`SimError` when ranks deadlock (an op never gets all members)."""
        w = self.w
        for p in range(len(w.prog_ptr) - 1):
            if w.prog_ptr[p + 1] > w.prog_ptr[p]:
                self.clock.process(self._program(p, int(w.prog_ptr[p]), int(w.prog_ptr[p + 1])))
        for fn in self.processes:
            gen = fn(self.clock, self.netproc)
            if not inspect.isgenerator(gen):
                raise SimError(f"processes: {getattr(fn, '__name__', fn)!r} must be a generator function "
                               "fn(env, net) (it yields simpy events, e.g. env.timeout(dt))")
            self.clock.process(gen)
        if w.n_ops:
            self.clock.run_until(self._all_done)
        self._check_complete()
        self.stats.flush()
        makespan = float(np.nanmax(self.op_end)) if w.n_ops and not np.all(np.isnan(self.op_end)) else 0.0
        self.log.close()
        cols = self.kept.columns() if self.kept is not None else FlowKeep().columns()
        incast = next((s.table for s in self.sinks if hasattr(s, "table")), None)
        return EngineLog(
            op_start_s=self.op_start, op_end_s=self.op_end, op_algo=self.op_algo, op_flows=self.runner.op_flows,
            flow_op=cols["op"], flow_path=cols["path"], flow_bytes=cols["bytes"], flow_start_s=cols["start"],
            flow_sent_s=cols["sent"], flow_end_s=cols["end"], paths=self.paths, link_stats=self.stats,
            makespan_s=makespan, memo_hits=self.memo_hits, memo_records=self.memo_records,
            network_events=self.netproc.events, memo_materialised=self.materialised,
            step_issue_s=self.step_issue, workload=self.w, n_flows=self.log.released,
            flow_stride=self.kept.stride if self.kept is not None else 0, incast=incast,
            prepare=getattr(self.ops, "preparer", None) or self.ops.__getitem__, peak_live_flows=self.log.peak_live,
            op_used_links=self.op_used)

    def _horizon(self) -> float:
        """No flow handed to the sinks from now on starts before this time: flows still to come belong
        to ops in flight (they start at or after their op) or to ops not started yet (at or after now)."""
        t = float(self.clock.now)
        if self.inflight:
            t = min(t, float(self.op_start[list(self.inflight)].min()))
        return t

    def _check_complete(self) -> None:
        missing = np.flatnonzero(np.isnan(self.op_end))
        if len(missing) == 0:
            return
        waiting = np.flatnonzero(np.isnan(self.op_start))
        op = int(waiting[0]) if len(waiting) else int(missing[0])
        why = ("waits for members that never issue it" if len(waiting) else
               "never ends (its flows stall on a link that stays down?)")
        raise SimError(f"replay deadlocked: {len(missing)} op(s) never finished; the first {why} "
                       f"({self.label(op)})")
