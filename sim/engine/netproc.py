"""The flow network as a simpy process: it sleeps until its next completion and is woken when flows start.

:class:`NetworkProcess` owns a :class:`sim.network.flow_network.FlowNetwork` on the replay's
:class:`sim.engine.clock.Clock`. Its process sleeps until the network's next completion (priority
``NETWORK``: bytes move before anything else happens at that time), advances the network there and hands
the finished flows to ``on_done``. Whoever starts flows (:meth:`NetworkProcess.add`) or changes a
capacity (:meth:`NetworkProcess.set_capacity`) first advances the network to now, then interrupts the
process so that it sleeps until the new next completion. Every advance hands the bytes each link moved
since the last one to the run's :class:`sim.engine.stats.LinkStats` (one dense row per interval, reduced
in blocks) and to an optional ``on_segment`` hook (the engine's recordings of memoised ops).

It is also the ``net`` a user process gets (``simulate(..., processes=[fn])``, ``fn(env, net)``): see
:meth:`scale_links`, :meth:`set_capacity`, :meth:`cable_links`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.clock import NETWORK, Clock
from sim.engine.stats import LinkStats

__all__ = ["NetworkProcess"]


class NetworkProcess:
    """A :class:`FlowNetwork` driven by a simpy process (see the module docstring).

    Parameters
    ----------
    clock : Clock
    network : sim.network.flow_network.FlowNetwork
        A fresh network (its clock at or before ``clock.now``).
    stats : LinkStats
        Receives the per-link bytes of every interval between advances.
    keep_stats : bool
        False: no statistics (the ideal reference).
    on_done : callable
        ``on_done(flow_ids, sent_s, t)``: flows whose last byte left at ``sent_s`` (``<= t``), found at ``t``.
    link_names : sequence of (str, str), optional
        ``(src, dst)`` of each directed link, for :meth:`cable_links`.
    """

    def __init__(self, clock: Clock, network, stats: LinkStats, keep_stats: bool,
                 on_done: Callable[[np.ndarray, np.ndarray, float], None], link_names=None) -> None:
        self.clock = clock
        self.net = network
        self.stats = stats
        self.keep_stats = keep_stats
        self.on_done = on_done
        self.on_segment: Callable[[float, float, np.ndarray], None] | None = None
        self.nominal_capacity = np.array(network.capacity, dtype=np.float64)
        self.link_names = link_names
        self.last_t = float(clock.now)
        self.last_bytes = np.array(network.link_bytes, dtype=np.float64)
        self.events = 0
        self._idle = clock.event()   # never triggered: the process waits on it (until interrupted) when idle
        self._proc = clock.process(self._run())

    # -- the process ----------------------------------------------------------------------------------
    def _run(self):
        clock, net = self.clock, self.net
        while True:
            t = net.next_completion_s() if (net.num_active or net.has_completions) else math.inf
            try:
                yield self._idle if t == math.inf else clock.at(t, NETWORK)
            except simpy.Interrupt:
                continue   # flows started or a capacity changed: look at the next completion again
            self.advance(t)

    def wake(self) -> None:
        """The next completion may have moved (flows added, capacity changed): re-plan the sleep."""
        if self._proc.is_alive and self._proc is not self.clock.active_process:
            self._proc.interrupt()

    # -- moving the network ---------------------------------------------------------------------------
    def busy(self) -> bool:
        """Flows in flight, or completions not handed out yet."""
        return bool(self.net.num_active or self.net.has_completions)

    def advance(self, t: float) -> None:
        """Move the network to ``t``; account the bytes moved and hand out the finished flows."""
        done = np.asarray(self.net.advance(t), dtype=np.int64)
        self.events += 1
        if self.keep_stats:
            self._account(t)
        self.last_t = t
        if len(done):
            # the exact time of the last byte (earlier than t only with completion batching)
            sent = np.minimum(np.asarray(self.net.last_finish_s, dtype=np.float64), t)
            self.on_done(done, sent, t)

    def catch_up(self, t: float) -> None:
        """Advance to ``t`` when flows are in flight (nothing moves while the network is idle)."""
        if self.busy():
            self.advance(t)
        else:
            self.last_t = t

    def add(self, t: float, link_ptr: np.ndarray, link_idx: np.ndarray, size_bytes: np.ndarray,
            group: np.ndarray | None = None, rate_cap: np.ndarray | None = None,
            cap_key: np.ndarray | None = None) -> np.ndarray:
        """Start flows at ``t`` (after moving the network to ``t``); return their network ids. ``group``:
        the op of each flow (completion batching is bounded per op); ``rate_cap`` / ``cap_key``: rate
        ceilings, shared by the flows of one key (``FlowNetwork.add_flows``)."""
        self.catch_up(t)
        extra = {} if rate_cap is None else {"rate_cap": rate_cap, "cap_key": cap_key}
        ids = np.asarray(self.net.add_flows(t, link_ptr, link_idx, size_bytes, group=group, **extra), dtype=np.int64)
        self.wake()
        return ids

    def _account(self, t: float) -> None:
        """Per-link bytes moved over ``[last_t, t)``: to the statistics and to the recording hook."""
        cur = self.net.link_bytes
        row = self.stats.dense_row(self.last_t, t)
        delta = cur - self.last_bytes if row is None else np.subtract(cur, self.last_bytes, out=row)
        if self.on_segment is not None:
            self.on_segment(self.last_t, t, delta)
        np.copyto(self.last_bytes, cur)

    # -- capacities (anomalies, user processes) -------------------------------------------------------
    def set_capacity(self, link_ids, capacity_bytes_per_s) -> None:
        """Set the capacity of directed links now (0 = down; flows on them stall until it comes back)."""
        self.catch_up(float(self.clock.now))
        self.net.set_capacity(link_ids, capacity_bytes_per_s)
        self.wake()

    def scale_links(self, link_ids, factor: float) -> None:
        """Set links to ``factor`` x their nominal capacity now (1 restores, 0 takes them down).

        Examples
        --------
        A user process that halves link 3 from 1 ms to 2 ms::

            def slow(env, net):
                yield env.timeout(1e-3)
                net.scale_links([3], 0.5)
                yield env.timeout(1e-3)
                net.scale_links([3], 1.0)
        """
        ids = np.asarray(link_ids, dtype=np.int64).reshape(-1)
        self.set_capacity(ids, self.nominal_capacity[ids] * float(factor))

    def cable_links(self, u: str, v: str) -> np.ndarray:
        """Ids of the directed links of cable ``u``-``v`` (both directions)."""
        if self.link_names is None:
            return np.zeros(0, dtype=np.int64)
        return np.array([i for i, (a, b) in enumerate(self.link_names) if {a, b} == {u, v}], dtype=np.int64)
