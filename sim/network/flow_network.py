"""Flow-level network: max-min fair rates over directed link capacities (the simulator's hot loop).

A :class:`FlowNetwork` holds the flows in flight. Each flow crosses a list of directed links (a path, given
in CSR form) and has a size in bytes. At every moment the link capacities are shared max-min fairly
(progressive filling / water-filling): no link carries more than its capacity, and every flow is limited
by a saturated *bottleneck* link on which no other flow has a higher rate. Rates change only when flows
start or end, so between events every flow moves at a constant rate and the state advances in closed
form. The network only moves bytes: propagation latency is added by the caller.

Typical loop of a caller (the replay engine, :func:`sim.flows.simulate_flows`)::

    net = FlowNetwork(capacity_bytes_per_s)
    ids = net.add_flows(0.0, link_ptr, link_idx, size_bytes)      # several calls at one time: one solve
    while net.num_active or net.has_completions:
        t = min(net.next_completion_s(), next_engine_event_s)
        done = net.advance(t)                                    # ids whose last byte left by t
        ...  net.finish_s[done] are the exact times of the last byte  ...

Public state and accessors: :mod:`sim.network.flow_state` (``capacity``, ``link_bytes``,
``finish_s``, ``start_s``, counts, rates, loads, bytes left).

Rate ceilings (``add_flows(..., rate_cap=, cap_key=)``)
    the flows of one key share a private link of that capacity (:mod:`sim.network.ceilings`): max-min
    stays exact with no change to the solver; private links are internal.

State of the flows in flight (:mod:`sim.network.live`)
    columnar arrays of slots, one per flow in flight or per set of identical flows
    (:mod:`sim.network.merge`), compacted as flows finish, so memory follows the flows alive at once.
    An event (:mod:`sim.network.events`) selects the finishers or the flows to re-solve in one pass and
    touches only them and their links; compiled with numba (:mod:`sim.network.events_numba`, loaded at
    the first event) where :data:`sim.network.maxmin.SOLVER` allows, else numpy (same results).

Accuracy knob ``completion_quantile`` (q), bounded per group
    ``q = 0`` (default) is exact: the network stops and re-solves at every completion (flows whose
    predicted finish times agree within a relative 1e-9 of the step are completed together). With
    ``0 < q < 1`` it jumps to the end of a batch and re-solves there: the smallest, over the groups of
    flows in flight (``add_flows(..., group=)``: the engine passes the op; one group without it), of the
    q-quantile of the group's predicted finish times. So no group has more than ``floor(q * n_g)`` of its
    ``n_g`` flows in flight completed early by a jump, whatever else shares the fabric: a group of fewer than
    ``1 / q`` flows is solved exactly. Flows finishing inside the jump keep their exact predicted
    ``finish_s``, but the bandwidth they free is handed out only at the end of the jump (reported then, or
    at any earlier ``advance``). Arrivals are never delayed. Figures: ``docs/network.md``.

Solver
    Re-solves are incremental and exact: when flows leave (or join), the water-filling below the level
    ``theta`` (the smallest rate of a leaving flow, and for joining flows a lower bound on their new rate,
    ``min capacity / flow count`` over their links) is unchanged, so flows with a rate below ``theta`` keep
    it and only the others are re-solved on the capacity left over, by :func:`max_min_rates` (weighted).
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError
from sim.network.arrays import GrowBuffer, check_capacity_change, check_flows, dense_groups, padded_rows
from sim.network.ceilings import PrivateLinks, checked_caps
from sim.network.constants import TIME_RTOL
from sim.network.events import NUMPY_OPS, backend
from sim.network.flow_state import FlowNetworkState
from sim.network.live import LiveFlows
from sim.network.maxmin import max_min_rates
from sim.network.merge import weighted_slots

__all__ = ["FlowNetwork", "max_min_rates"]

_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_TIMES = np.zeros(0)


class FlowNetwork(FlowNetworkState):
    """Flows sharing directed links max-min fairly; advanced event by event (see the module docstring).

    Parameters
    ----------
    capacity_bytes_per_s : ndarray of float64, shape (links,)
        Capacity of each directed link, bytes per second, finite and > 0.
    completion_quantile : float, default 0.0
        0 re-solves at every completion (exact); q in (0, 1) jumps to the smallest per-group q-quantile of
        predicted finish times before re-solving (faster, slightly late finishes; see the module docstring).
    keep_flow_times : bool, default True
        Keep ``start_s`` and ``finish_s`` per flow id for the whole run; False keeps only the flows in
        flight (memory follows the flows alive at once) and hands finish times out with each
        :meth:`advance` (``last_finish_s``).

    Raises
    ------
    SimError
        For a bad capacity vector or quantile.

    Examples
    --------
    Two flows share a 100 B/s link; the short one leaves at 1 s, the long one then runs alone:

    >>> net = FlowNetwork(np.array([100.0]))
    >>> ids = net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 0]), np.array([50.0, 150.0]))
    >>> net.next_completion_s()
    1.0
    >>> net.advance(10.0).tolist(), net.finish_s.tolist()
    ([0, 1], [1.0, 2.0])
    """

    def __init__(self, capacity_bytes_per_s: np.ndarray, *, completion_quantile: float = 0.0,
                 keep_flow_times: bool = True):
        capacity = np.array(capacity_bytes_per_s, dtype=np.float64).reshape(-1)
        if capacity.size == 0 or not np.all(np.isfinite(capacity)) or np.any(capacity <= 0):
            raise SimError("capacity_bytes_per_s: every link capacity must be finite and > 0")
        if not 0.0 <= completion_quantile < 1.0:
            raise SimError(f"completion_quantile: {completion_quantile} is not in [0, 1)")
        self.num_links = capacity.size
        self._cap = capacity                    # public links, then private ones (rate ceilings)
        self.completion_quantile = float(completion_quantile)
        self.now_s = 0.0
        self._bytes = np.zeros(self.num_links)  # per link as _cap
        self._private = PrivateLinks(self.num_links)   # rate ceilings (sim.network.ceilings)
        self.peak_active = 0
        self.stats = {"solves": 0, "flows_solved": 0, "iterations": 0, "steps": 0, "merged": 0}
        self._num_flows = 0
        # per flow id, for the whole run (unless told not to)
        self._start = GrowBuffer(np.float64) if keep_flow_times else None
        self._finish = GrowBuffer(np.float64) if keep_flow_times else None
        self.last_finish_s = np.zeros(0)         # finish times of the ids the last advance returned
        self._live = LiveFlows(self.num_links)
        self._groups: dict = {}                 # group key -> dense index (None: flows without a group)
        self._ops = None                        # event operations, chosen at the first event
        self._theta = math.inf                  # rates below this survive the next re-solve
        self._dirty = False
        self._next_s = math.inf
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []   # (ids, finish times) not returned yet

    def set_capacity(self, link_ids: np.ndarray, capacity_bytes_per_s: np.ndarray | float) -> None:
        """Change the capacity of links at ``now_s`` (advance first); every flow in flight is re-solved.

        A capacity of 0 takes a link down: the flows crossing it get rate 0 (they stall, keeping their
        bytes) until its capacity comes back; their ``finish_s`` stays NaN meanwhile.

        Raises
        ------
        SimError
            For an unknown link or a capacity that is negative or not finite.
        """
        ids, cap = check_capacity_change(self.num_links, link_ids, capacity_bytes_per_s)
        self._solve_if_dirty()   # the old rates hold up to now: fix every flow's bytes left at now
        self._cap = self._cap.copy()
        self._cap[ids] = cap
        self._theta = 0.0        # no rate survives: a full re-solve
        self._dirty = True

    # ----------------------------------------------------------------- events
    def add_flows(self, now_s: float, link_ptr: np.ndarray, link_idx: np.ndarray,
                  size_bytes: np.ndarray, group: np.ndarray | int | None = None,
                  rate_cap: np.ndarray | None = None, cap_key: np.ndarray | None = None) -> np.ndarray:
        """Start flows at ``now_s``.

        Parameters
        ----------
        now_s : float
            Start time, ``>= now_s`` of the network. If later, the network first advances to it (the
            completions on the way are returned by the next :meth:`advance`).
        link_ptr : ndarray of int, shape (n + 1,)
            CSR pointers into ``link_idx``: flow ``i`` crosses ``link_idx[link_ptr[i]:link_ptr[i + 1]]``.
        link_idx : ndarray of int
            Link ids (``0 <= id < links``).
        size_bytes : ndarray, shape (n,)
            Bytes to send per flow, ``>= 0``. Zero-byte flows and flows with no link complete at once.
        group : int or ndarray of int, shape (n,), optional
            Batching group of each flow (the engine passes the op): completion batching is bounded per
            group (module docstring). Without it the flows join the one default group.
        rate_cap : ndarray, shape (n,), optional
            Most bytes/s of each flow (``inf``: none): the flows of one ``cap_key`` share one ceiling (the
            first one's), a private link of that capacity (module docstring).
        cap_key : ndarray of int, shape (n,), optional
            Which flows share a ceiling (default: each flow its own).

        Returns
        -------
        ndarray of int64, shape (n,)
            The new flow ids (consecutive).

        Raises
        ------
        SimError
            For time going backwards, malformed CSR, unknown links, bad sizes or groups.
        """
        size = np.asarray(size_bytes, dtype=np.float64).reshape(-1)
        ptr = np.asarray(link_ptr, dtype=np.int64).reshape(-1)
        links = np.asarray(link_idx, dtype=np.int64).reshape(-1)
        deg = check_flows(self.num_links, self.now_s, now_s, ptr, links, size)
        dense = self._dense_groups(group, size.size)
        if self._ops is None or self._ops is NUMPY_OPS:
            self._ops = backend(int(deg.sum()))
        if now_s > self.now_s:
            on_the_way = self.advance(now_s)   # (advance replaces self._pending: call it first)
            if on_the_way.size:
                self._pending.append((on_the_way, self.last_finish_s))
        n = size.size
        first = self.num_flows
        self._num_flows += n
        if self._start is not None:
            self._start.extend(np.full(n, float(now_s)))
            self._finish.extend(np.full(n, np.nan))
        ids = np.arange(first, first + n, dtype=np.int64)
        instant = (size <= 0) | (deg == 0)
        keep = ~instant
        if instant.any():
            if self._finish is not None:
                self._finish.data[ids[instant]] = now_s
            self._pending.append((ids[instant], np.full(int(instant.sum()), float(now_s))))
            if not keep.any():
                return ids
        d = deg[keep]
        rows = padded_rows(links, ptr[:-1][keep], d)
        if rate_cap is not None:
            rows, d, self._cap, self._bytes = self._private.attach(rows, d, checked_caps(rate_cap, cap_key, n, keep),
                                                                   self._cap, self._bytes, self._live)
        self._launch(rows, d, size[keep], ids[keep], dense[keep], float(now_s))
        return ids

    def next_completion_s(self) -> float:
        """Time of the next completion event: the earliest predicted finish (exact mode) or the end of the
        current batch (``completion_quantile > 0``); ``now_s`` when completions wait; inf when idle."""
        if self._pending:
            return self.now_s
        if self._dirty:
            self._solve()
        return self._next_s

    def advance(self, t_s: float) -> np.ndarray:
        """Move every flow in flight to time ``t_s`` (re-solving at each completion on the way).

        Parameters
        ----------
        t_s : float
            Target time, ``>= now_s``.

        Returns
        -------
        ndarray of int64
            Ids of the flows whose last byte was sent by ``t_s`` (and not returned before), in completion
            order; their exact times are ``finish_s[ids]``, also in ``last_finish_s`` (aligned with the ids).

        Raises
        ------
        SimError
            When ``t_s`` is before ``now_s`` or not a number.
        """
        if not t_s >= self.now_s:
            raise SimError(f"advance: time {t_s} is before the network's clock {self.now_s}")
        done = self._pending
        self._pending = []
        while True:
            if self._dirty:
                self._solve()
            if not self._live.n_slots:
                if math.isfinite(t_s):
                    self.now_s = float(t_s)
                break
            target = min(self._next_s, t_s)
            finished = self._step(target)
            if finished[0].size:
                done.append(finished)
            if target >= t_s:
                break
        if not done:
            self.last_finish_s = _NO_TIMES
            return _NO_IDS
        if len(done) == 1:
            self.last_finish_s = done[0][1]
            return done[0][0]
        self.last_finish_s = np.concatenate([t for _, t in done])
        return np.concatenate([i for i, _ in done])

    # ----------------------------------------------------------------- internals
    def _dense_groups(self, group, n: int) -> np.ndarray:
        """Dense group index of each of ``n`` new flows."""
        dense = dense_groups(self._groups, group, n)
        self._live.reserve_groups(len(self._groups))
        return dense

    def _launch(self, rows: np.ndarray, deg: np.ndarray, size: np.ndarray, ids: np.ndarray,
                group: np.ndarray, now_s: float) -> None:
        """Flows ``ids`` (links ``rows``, padded) enter the network: identical ones as one weighted slot."""
        live = self._live
        rows, deg, size, group, fid, weight, members = weighted_slots(rows, deg, size, ids, group)
        live.members.update(members)
        self.stats["merged"] += int(ids.size - fid.size)
        slots = live.append(rows, deg, size, now_s, weight, group, fid)
        count = live.count
        inc = rows[rows >= 0]
        # Lower bound of a joining flow's rate: min over its links of capacity / flows on the link.
        bound = float((self._cap[inc] / count[inc]).min())
        self._theta = min(self._theta, bound)
        self.peak_active = max(self.peak_active, live.n_flows)
        self._dirty = bool(slots.size) or self._dirty

    def _solve_if_dirty(self) -> None:
        if self._dirty:
            self._solve()

    def _solve(self) -> None:
        """Re-solve the flows whose rate may change (rate >= theta, or new) on the capacity left over."""
        self._dirty = False
        theta = self._theta
        self._theta = math.inf
        live = self._live
        if not live.n_slots:
            self._next_s = math.inf
            return
        if self._ops is None or self._ops is NUMPY_OPS:
            self._ops = backend(int(live.count.sum()))
        solved, iterations, self._next_s = self._ops.solve_next(live, 0.0 if theta == math.inf else theta,
                                                                self.now_s, self._cap,
                                                                self.completion_quantile)
        if solved:
            stats = self.stats
            stats["solves"] += 1
            stats["flows_solved"] += solved
            stats["iterations"] += iterations

    def _step(self, target_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Move to ``target_s`` at the current rates; complete the flows predicted to finish by then (their
        ids and finish times, in completion order)."""
        dt = target_s - self.now_s
        self.stats["steps"] += 1
        slack = max(TIME_RTOL * dt, 4.0 * math.ulp(target_s))
        live = self._live
        n, min_rate, flows = self._ops.step(live, target_s, slack, dt, self._bytes)
        self.now_s = float(target_s)
        if not n:
            return _NO_IDS, _NO_TIMES
        # the finished slots in finishing order (by end time, ties in slot order = flow id order)
        slots = live.slot_buf[:n]
        ids, end = live.finished_ids(slots, live.end_buf[:n].copy())
        if self._finish is not None:
            self._finish.data[ids] = end
        if self._cap.size > self.num_links:   # private links no flow crosses any more are free again
            self._private.release(live.links[slots], live.count)
        live.release(slots, flows)
        self._theta = min(self._theta, min_rate)
        self._dirty = True
        return ids, end
