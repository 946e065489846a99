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

Public state and accessors (arrays indexed by link id or by flow id; do not write to them):

``link_bytes`` (float64 [links])
    cumulative bytes carried per link up to ``now_s``. Per-link statistics (peaks, time bins, time above
    90 %) are kept by whoever drives the network (:class:`sim.engine.stats.LinkStats`, the one owner),
    from the increments of ``link_bytes`` between events.
``capacity`` (float64 [links])
    current capacity; :meth:`FlowNetwork.set_capacity` changes it at ``now_s`` (0 = link down: flows
    crossing it stall at rate 0 until it comes back).
``finish_s``, ``start_s``, ``size_bytes`` (float64 [flows])
    per flow id; ``finish_s`` is NaN while the flow is in flight, else the time its last byte was sent.
``now_s``, ``num_flows``, ``num_active``, ``peak_active``, ``has_completions``
    current time, flows ever added, flows in flight, most flows in flight at once, completions not yet
    returned by :meth:`FlowNetwork.advance`.
``active_flows() -> (ids, rate_bytes_per_s)``, ``link_load_bytes_per_s()``, ``remaining_bytes(ids)``
    the current max-min rates, the per-link load (sum of rates), the bytes flows have left at ``now_s``.
``flow_links(flow_id)``
    the link ids of one flow's path.
``stats``
    counters for profiling: ``solves``, ``flows_solved`` (flows re-solved in total), ``iterations``
    (water-filling passes), ``steps`` (time advances).

Accuracy knob ``completion_quantile`` (q)
    ``q = 0`` (default) is exact: the network stops and re-solves at every completion (flows whose
    predicted finish times agree within a relative 1e-9 of the step are completed together). With
    ``0 < q < 1`` it jumps to the q-quantile of the predicted finish times of the flows in flight and
    re-solves there: flows finishing inside the jump keep their exact predicted ``finish_s``, but the
    bandwidth they free is handed out only at the end of the jump (reported then, or at any earlier
    ``advance``). Arrivals are never delayed. Figures and bounds: ``docs/network.md``.

Solver
    Re-solves are incremental and exact: when flows leave (or join), the water-filling below the level
    ``theta`` (the smallest rate of a leaving flow, and for joining flows a lower bound on their new rate,
    ``min capacity / flow count`` over their links) is unchanged, so flows with a rate below ``theta`` keep
    it and only the others are re-solved on the capacity left over. Each re-solve runs
    :func:`max_min_rates`, which freezes in one pass every link whose fair share is the smallest on all of
    its flows ("local bottlenecks"), so the passes number the depth of the bottleneck chain, not the links.
    It runs the compiled kernel of :mod:`sim.network.maxmin_numba` where numba loads
    (:data:`sim.network.maxmin.SOLVER`), else numpy; the rates are bit-identical.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError
from sim.network.arrays import GrowBuffer, check_flows, gather_ranges
from sim.network.constants import TIME_RTOL
from sim.network.maxmin import max_min_rates

__all__ = ["FlowNetwork", "max_min_rates"]


#: per-flow float arrays (indexed by flow id), grown together
_FLOW_FIELDS = ("_size", "_start", "_finish", "_rate", "_rem0", "_t0", "_pred")
_NO_IDS = np.zeros(0, dtype=np.int64)


class FlowNetwork:
    """Flows sharing directed links max-min fairly; advanced event by event (see the module docstring).

    Parameters
    ----------
    capacity_bytes_per_s : ndarray of float64, shape (links,)
        Capacity of each directed link, bytes per second, finite and > 0.
    completion_quantile : float, default 0.0
        0 re-solves at every completion (exact); q in (0, 1) jumps to the q-quantile of predicted finish
        times before re-solving (faster, slightly late finishes; see the module docstring).

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

    def __init__(self, capacity_bytes_per_s: np.ndarray, *, completion_quantile: float = 0.0):
        capacity = np.array(capacity_bytes_per_s, dtype=np.float64).reshape(-1)
        if capacity.size == 0 or not np.all(np.isfinite(capacity)) or np.any(capacity <= 0):
            raise SimError("capacity_bytes_per_s: every link capacity must be finite and > 0")
        if not 0.0 <= completion_quantile < 1.0:
            raise SimError(f"completion_quantile: {completion_quantile} is not in [0, 1)")
        self.capacity = capacity
        self.num_links = capacity.size
        self.completion_quantile = float(completion_quantile)
        self.now_s = 0.0
        self.link_bytes = np.zeros(self.num_links)
        self.peak_active = 0
        self.stats = {"solves": 0, "flows_solved": 0, "iterations": 0, "steps": 0}
        # per flow id: size, start, finish (NaN in flight), rate (inf: not solved yet), bytes left rem0 at
        # time t0, predicted finish pred at the current rate; links in CSR (_fptr, _flinks)
        self._num_flows = 0
        for name in _FLOW_FIELDS:
            setattr(self, name, np.zeros(0))
        self._fptr = np.zeros(1, dtype=np.int64)
        self._flinks = GrowBuffer(np.int64)
        # flows in flight and per-link state of them
        self._active = _NO_IDS
        # the links of the flows in flight, in the order of _active (CSR without the pointer: a step and
        # a re-solve select rows with one repeat of a mask instead of gathering ranges of _flinks)
        self._act_links = _NO_IDS
        self._act_deg = _NO_IDS
        self._count = np.zeros(self.num_links, dtype=np.int64)
        self._load = np.zeros(self.num_links)
        self._theta = math.inf                  # rates below this survive the next re-solve
        self._dirty = False
        self._next_s = math.inf
        self._pending: list[np.ndarray] = []

    # ----------------------------------------------------------------- accessors
    @property
    def num_flows(self) -> int:
        """Flows ever added."""
        return self._num_flows

    @property
    def num_active(self) -> int:
        """Flows in flight."""
        return int(self._active.size)

    @property
    def has_completions(self) -> bool:
        """True when finished flows wait to be returned by :meth:`advance`."""
        return bool(self._pending)

    @property
    def finish_s(self) -> np.ndarray:
        """Time the last byte of each flow was sent (NaN while in flight), indexed by flow id."""
        return self._finish[: self._num_flows]

    @property
    def start_s(self) -> np.ndarray:
        """Start time of each flow, indexed by flow id."""
        return self._start[: self._num_flows]

    @property
    def size_bytes(self) -> np.ndarray:
        """Size of each flow, indexed by flow id."""
        return self._size[: self._num_flows]

    def flow_links(self, flow_id: int) -> np.ndarray:
        """Link ids of one flow's path, in path order."""
        return self._flinks.data[self._fptr[flow_id]:self._fptr[flow_id + 1]].copy()

    def active_flows(self) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the flows in flight and their current max-min rates (bytes/s)."""
        self._solve_if_dirty()
        return self._active.copy(), self._rate[self._active]

    def link_load_bytes_per_s(self) -> np.ndarray:
        """Current load of each link: the sum of the rates of the flows crossing it."""
        self._solve_if_dirty()
        return self._load.copy()

    def remaining_bytes(self, flow_ids: np.ndarray) -> np.ndarray:
        """Bytes the flows ``flow_ids`` (in flight) have left to send at ``now_s``."""
        self._solve_if_dirty()
        ids = np.asarray(flow_ids, dtype=np.int64)
        rate = self._rate[ids]
        return self._rem0[ids] - np.where(rate < math.inf, rate, 0.0) * (self.now_s - self._t0[ids])

    def set_capacity(self, link_ids: np.ndarray, capacity_bytes_per_s: np.ndarray | float) -> None:
        """Change the capacity of links at ``now_s`` (advance first); every flow in flight is re-solved.

        A capacity of 0 takes a link down: the flows crossing it get rate 0 (they stall, keeping their
        bytes) until its capacity comes back; their ``finish_s`` stays NaN meanwhile.

        Raises
        ------
        SimError
            For an unknown link or a capacity that is negative or not finite.
        """
        ids = np.asarray(link_ids, dtype=np.int64).reshape(-1)
        cap = np.broadcast_to(np.asarray(capacity_bytes_per_s, dtype=np.float64), ids.shape)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_links):
            raise SimError(f"set_capacity: a link id is not in 0..{self.num_links - 1}")
        if not (np.isfinite(cap).all() and (cap >= 0).all()):
            raise SimError("set_capacity: capacities must be finite and >= 0")
        self._solve_if_dirty()   # the old rates hold up to now: fix every flow's bytes left at now
        self.capacity = self.capacity.copy()
        self.capacity[ids] = cap
        self._theta = 0.0        # no rate survives: a full re-solve
        self._dirty = True

    # ----------------------------------------------------------------- events
    def add_flows(self, now_s: float, link_ptr: np.ndarray, link_idx: np.ndarray,
                  size_bytes: np.ndarray) -> np.ndarray:
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

        Returns
        -------
        ndarray of int64, shape (n,)
            The new flow ids (consecutive).

        Raises
        ------
        SimError
            For time going backwards, malformed CSR, unknown links or bad sizes.
        """
        size = np.asarray(size_bytes, dtype=np.float64).reshape(-1)
        ptr = np.asarray(link_ptr, dtype=np.int64).reshape(-1)
        links = np.asarray(link_idx, dtype=np.int64).reshape(-1)
        deg = check_flows(self.num_links, self.now_s, now_s, ptr, links, size)
        if now_s > self.now_s:
            on_the_way = self.advance(now_s)   # (advance replaces self._pending: call it first)
            if on_the_way.size:
                self._pending.append(on_the_way)
        n = size.size
        first = self._num_flows
        self._reserve(n)
        end = first + n
        ids = np.arange(first, end, dtype=np.int64)
        new_links = links[ptr[0]:ptr[-1]]
        self._size[first:end] = size
        self._start[first:end] = now_s
        self._finish[first:end] = np.nan
        self._rate[first:end] = np.inf
        self._rem0[first:end] = size
        self._t0[first:end] = now_s
        self._pred[first:end] = np.inf
        self._fptr[first + 1:end + 1] = self._fptr[first] + (ptr[1:] - ptr[0])
        self._flinks.extend(new_links)
        self._num_flows = end
        instant = (size <= 0) | (deg == 0)
        if instant.any():
            self._finish[ids[instant]] = now_s
            self._pending.append(ids[instant])
            new = ids[~instant]
            if not new.size:
                return ids
            pos, lptr = gather_ranges(self._fptr, new)
            new_links = self._flinks.data[pos]
            deg = deg[~instant]
        else:
            new = ids
        count = self._count
        count += np.bincount(new_links, minlength=self.num_links)
        # Lower bound of a joining flow's rate: min over its links of capacity / flows on the link.
        bound = float((self.capacity[new_links] / count[new_links]).min())
        self._theta = min(self._theta, bound)
        self._active = np.concatenate([self._active, new])
        self._act_links = np.concatenate([self._act_links, new_links])
        self._act_deg = np.concatenate([self._act_deg, deg])
        self.peak_active = max(self.peak_active, self._active.size)
        self._dirty = True
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
            order; their exact times are ``finish_s[ids]``.

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
            if not self._active.size:
                if math.isfinite(t_s):
                    self.now_s = float(t_s)
                break
            target = min(self._next_s, t_s)
            finished = self._step(target)
            if finished.size:
                done.append(finished)
            if target >= t_s:
                break
        if not done:
            return _NO_IDS
        return done[0] if len(done) == 1 else np.concatenate(done)

    # ----------------------------------------------------------------- internals
    def _reserve(self, n: int) -> None:
        """Room for ``n`` more flows in the per-flow arrays (amortised doubling)."""
        need = self._num_flows + n
        have = self._size.size
        if need <= have:
            return
        grow = max(need, 2 * have, 256)
        for name in _FLOW_FIELDS:
            old = getattr(self, name)
            new = np.zeros(grow)
            new[: self._num_flows] = old[: self._num_flows]
            setattr(self, name, new)
        fptr = np.zeros(grow + 1, dtype=np.int64)
        fptr[: self._num_flows + 1] = self._fptr[: self._num_flows + 1]
        self._fptr = fptr

    def _solve_if_dirty(self) -> None:
        if self._dirty:
            self._solve()

    def _solve(self) -> None:
        """Re-solve the flows whose rate may change (rate >= theta, or new) on the capacity left over."""
        self._dirty = False
        act = self._active
        theta = self._theta
        self._theta = math.inf
        if not act.size:
            self._next_s = math.inf
            return
        if theta < math.inf:
            cand = self._rate[act] >= theta * (1.0 - 1e-9)
            if cand.all():
                self._resolve(None)
            elif cand.any():
                self._resolve(cand)
        else:
            self._resolve(None)
        pred = self._pred[act]
        k = int(self.completion_quantile * pred.size)
        self._next_s = float(np.partition(pred, k)[k]) if k else float(pred.min())

    def _resolve(self, mask: np.ndarray | None) -> None:
        """Max-min rates of the flows in flight selected by ``mask`` (None: all of them) on the capacity
        the other flows leave; update their state."""
        rate = self._rate
        everyone = mask is None
        if everyone:
            cand, links, deg = self._active, self._act_links, self._act_deg
        else:
            cand = self._active[mask]
            links = self._act_links[np.repeat(mask, self._act_deg)]
            deg = self._act_deg[mask]
        lptr = np.zeros(deg.size + 1, dtype=np.int64)
        np.cumsum(deg, out=lptr[1:])
        old = rate[cand]
        old_known = np.where(old < math.inf, old, 0.0)
        if everyone:   # a full solve also clears any drift of the incremental load
            residual = self.capacity
        else:
            old_load = np.bincount(links, weights=old_known.repeat(deg), minlength=self.num_links)
            residual = self.capacity - (self._load - old_load)
        new, iters = max_min_rates(lptr, links, residual)
        if not everyone and not (new > 0.0).all():
            # Only float rounding at an exact tie can starve a flow here; a full solve is always safe.
            self._resolve(None)
            return
        new_load = np.bincount(links, weights=new.repeat(deg), minlength=self.num_links)
        if everyone:
            self._load = new_load
        else:
            self._load += new_load - old_load
            self._load[self._count == 0] = 0.0   # no drift on idle links
        now = self.now_s
        rem = self._rem0[cand] - old_known * (now - self._t0[cand])
        self._rem0[cand] = rem
        self._t0[cand] = now
        rate[cand] = new
        with np.errstate(divide="ignore"):   # a flow over a link that is down: rate 0, never finishes
            self._pred[cand] = now + rem / new
        stats = self.stats
        stats["solves"] += 1
        stats["flows_solved"] += cand.size
        stats["iterations"] += iters

    def _step(self, target_s: float) -> np.ndarray:
        """Move to ``target_s`` at the current rates; complete the flows predicted to finish by then."""
        now = self.now_s
        dt = target_s - now
        self.stats["steps"] += 1
        act = self._active
        pred = self._pred[act]
        slack = max(TIME_RTOL * dt, 4.0 * math.ulp(target_s))
        fin_mask = pred <= target_s + slack
        load = self._load
        if dt > 0:
            self.link_bytes += load * dt
        self.now_s = float(target_s)
        if not fin_mask.any():
            return _NO_IDS
        fin = act[fin_mask]
        fin_pred = pred[fin_mask]
        inc_fin = np.repeat(fin_mask, self._act_deg)
        links = self._act_links[inc_fin]
        deg = self._act_deg[fin_mask]
        fin_rate = self._rate[fin]
        # Bytes left at target (negative for flows that finished inside the step): bytes conservation.
        left = self._rem0[fin] - fin_rate * (target_s - self._t0[fin])
        inc_left = left.repeat(deg)
        self.link_bytes += np.bincount(links, weights=inc_left, minlength=self.num_links)
        end = np.minimum(fin_pred, target_s)
        inc_rate = fin_rate.repeat(deg)
        self._finish[fin] = end
        count = self._count
        count -= np.bincount(links, minlength=self.num_links)
        load -= np.bincount(links, weights=inc_rate, minlength=self.num_links)
        load[count == 0] = 0.0
        self._theta = min(self._theta, float(fin_rate.min()))
        keep = ~fin_mask
        self._active = act[keep]
        self._act_links = self._act_links[~inc_fin]
        self._act_deg = self._act_deg[keep]
        self._dirty = True
        if fin.size > 1:
            fin = fin[np.argsort(end, kind="stable")]
        return fin
