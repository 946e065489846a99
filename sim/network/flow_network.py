"""Flow-level network: max-min fair rates over directed link capacities (the simulator's hot loop).

A :class:`FlowNetwork` holds the flows in flight. Each flow crosses a list of directed links (a path, given
in CSR form) and has a size in bytes. At every moment the link capacities are shared max-min fairly
(progressive filling / water-filling): no link carries more than its capacity, and every flow is limited
by a saturated *bottleneck* link on which no other flow has a higher rate. Rates change only when flows
start or end, so between events every flow moves at a constant rate and the state advances in closed
form. The network only moves bytes: propagation latency is added by the caller.

Typical loop of a caller (the replay engine, :func:`sim.flows.simulate_flows`)::

    net = FlowNetwork(capacity_bytes_per_s, bin_s=1e-4)
    ids = net.add_flows(0.0, link_ptr, link_idx, size_bytes)      # several calls at one time: one solve
    while net.num_active or net.has_completions:
        t = min(net.next_completion_s(), next_engine_event_s)
        done = net.advance(t)                                    # ids whose last byte left by t
        ...  net.finish_s[done] are the exact times of the last byte  ...

Public state and accessors (arrays indexed by link id or by flow id; do not write to them):

``link_bytes`` (float64 [links])
    cumulative bytes carried per link up to ``now_s``.
``peak_utilization`` (float64 [links])
    highest load / capacity seen on each link (1.0 = saturated).
``busy_above_90_s`` (float64 [links])
    time each link spent with load above 90 % of its capacity.
``finish_s``, ``start_s``, ``size_bytes`` (float64 [flows])
    per flow id; ``finish_s`` is NaN while the flow is in flight, else the time its last byte was sent.
``now_s``, ``num_flows``, ``num_active``, ``peak_active``, ``has_completions``
    current time, flows ever added, flows in flight, most flows in flight at once, completions not yet
    returned by :meth:`FlowNetwork.advance`.
``active_flows() -> (ids, rate_bytes_per_s)``, ``link_load_bytes_per_s()``
    the current max-min rates and the per-link load (sum of rates).
``flow_links(flow_id)``
    the link ids of one flow's path.
``binned_link_bytes() -> (bin_start_s [bins], bytes [bins x links])``
    with ``bin_s`` set: the exact bytes each link carried in each time bin (a constant-rate stretch is
    spread over the bins it covers in proportion to the overlap). Only bins that saw traffic are kept, in
    time order; memory is ``8 x bins x links`` bytes. Utilisation of a bin = bytes / (capacity x bin_s).
``stats``
    counters for profiling: ``solves``, ``flows_solved`` (flows re-solved in total), ``iterations``
    (water-filling passes), ``steps`` (time advances).

Accuracy knob ``completion_quantile`` (q)
    ``q = 0`` (default) is exact: the network stops and re-solves at every completion (flows whose
    predicted finish times agree within a relative 1e-9 of the step are completed together). With
    ``0 < q < 1`` it jumps straight to the q-quantile of the predicted finish times of the flows in flight
    and re-solves there: the flows that finish inside the jump still finish at their exact predicted
    times (their ``finish_s`` is exact for the rates they had), but the bandwidth they free is handed to
    the others only at the end of the jump, so later flows finish slightly late. Completions inside a jump
    are reported by ``advance`` at the end of the jump (or earlier, at any ``advance(t)`` the caller makes
    meanwhile). On a 64-GPU all-to-all of uneven sizes q = 0.01 makes 9.5x fewer solves and moves the
    makespan by +0.06 % (bound 0.2 %, tested). Arrivals are never delayed: flows added at ``now_s`` start
    then. Figures and the reasoning: ``docs/network.md``.

Solver
    Re-solves are incremental and exact: when flows leave (or join), the water-filling below the level
    ``theta`` (the smallest rate of a leaving flow, and for joining flows a lower bound on their new rate,
    ``min capacity / flow count`` over their links) is unchanged, so flows with a rate below ``theta`` keep
    it and only the others are re-solved on the capacity left over. Each re-solve runs
    :func:`max_min_rates`, which freezes in one pass every link whose fair share is the smallest on all of
    its flows ("local bottlenecks"), so the passes number the depth of the bottleneck chain, not the links.
    It runs the compiled kernel of :mod:`sim.network.maxmin_numba` where numba loads (``SOLVER``), else numpy; the
    rates are bit-identical.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.errors import SimError

__all__ = ["FlowNetwork", "max_min_rates"]

#: relative tolerance when comparing fair shares (ties of float rounding are ties)
_SHARE_RTOL = 1e-12
#: completions within this fraction of a step (or a few ulps of the clock) are simultaneous
_TIME_RTOL = 1e-9
#: links above this fraction of capacity count as busy
_BUSY_FRACTION = 0.9


def max_min_rates(flow_ptr: np.ndarray, link_idx: np.ndarray, capacity: np.ndarray) -> tuple[np.ndarray, int]:
    """Max-min fair rates of flows over links (progressive filling, local bottlenecks frozen per pass).

    Parameters
    ----------
    flow_ptr : ndarray of int, shape (n + 1,)
        CSR pointers: flow ``i`` crosses ``link_idx[flow_ptr[i]:flow_ptr[i + 1]]``; every flow crosses at
        least one link.
    link_idx : ndarray of int
        Link ids, ``0 <= id < len(capacity)``.
    capacity : ndarray of float64
        Capacity of each link (bytes/s, or any unit: rates come back in the same unit), ``>= 0``.

    Returns
    -------
    rates : ndarray of float64, shape (n,)
        The max-min fair rate of each flow.
    iterations : int
        Water-filling passes (each freezes every link that is a local bottleneck).

    Examples
    --------
    >>> rates, _ = max_min_rates(np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0]))
    >>> rates.round(3).tolist()
    [0.5, 1.5, 0.5]
    """
    flow_ptr = np.ascontiguousarray(flow_ptr, dtype=np.int64)
    link_idx = np.ascontiguousarray(link_idx, dtype=np.int64)
    kernel = _compiled_kernel()
    if kernel is not None:
        rates, iterations = kernel(flow_ptr, link_idx, np.ascontiguousarray(capacity, dtype=np.float64))
        return rates, int(iterations)
    return max_min_rates_numpy(flow_ptr, link_idx, capacity)


#: Max-min solver: "auto" (the compiled kernel of :mod:`sim.network.maxmin_numba` when numba loads, else numpy),
#: "jit" or "numpy". Both give bit-identical rates (tested).
SOLVER = "auto"
_KERNEL: dict[str, Any] = {}


def _compiled_kernel() -> Any:
    if SOLVER == "numpy":
        return None
    if "kernel" not in _KERNEL:
        try:
            from sim.network.maxmin_numba import max_min_kernel
        except Exception:  # noqa: BLE001 - no numba (or it cannot compile here): the numpy solver
            if SOLVER == "jit":
                raise
            max_min_kernel = None
        _KERNEL["kernel"] = max_min_kernel
    return _KERNEL["kernel"]


def max_min_rates_numpy(flow_ptr: np.ndarray, link_idx: np.ndarray, capacity: np.ndarray
                        ) -> tuple[np.ndarray, int]:
    """:func:`max_min_rates` in numpy (the fallback, and the reference the compiled kernel is tested on)."""
    flow_ptr = np.asarray(flow_ptr, dtype=np.int64)
    link_idx = np.asarray(link_idx, dtype=np.int64)
    if capacity.size > 4096 and 4 * link_idx.size < capacity.size:
        # a big fabric and few links in use: number them 0..m-1 so that per-link arrays stay small (on
        # small fabrics the sort costs more than it saves)
        used, lk = np.unique(link_idx, return_inverse=True)
        cap = np.asarray(capacity, dtype=np.float64)[used]
    else:
        lk = link_idx.copy()
        cap = np.asarray(capacity, dtype=np.float64)
    # Frozen flows are not compacted away (a handful of flows per solve: the per-call overhead of
    # rebuilding the CSR outweighs the work it saves); their incidences move to a sentinel link ``m``
    # of infinite capacity that always counts as blocked, so they never freeze twice.
    m = cap.size
    residual = np.empty(m + 1)
    residual[:m] = cap
    residual[m] = np.inf
    n = flow_ptr.size - 1
    starts = flow_ptr[:-1] - flow_ptr[0]
    inc_flow = np.repeat(np.arange(n), flow_ptr[1:] - flow_ptr[:-1])
    rates = np.empty(n)
    sentinel_blocked = np.zeros(m + 1, dtype=bool)
    sentinel_blocked[m] = True
    left = n
    iterations = 0
    up = 1.0 + _SHARE_RTOL
    with np.errstate(divide="ignore", invalid="ignore"):   # links no flow uses: 0 / 0, never read
        while True:
            iterations += 1
            inc_share = (residual / np.bincount(lk, minlength=m + 1))[lk]
            flow_min = np.minimum.reduceat(inc_share, starts)     # each flow's tightest link
            # A link is a local bottleneck when its share is the smallest on every flow crossing it; then
            # all those flows saturate it together at that share (the global minimum always qualifies).
            blocked = sentinel_blocked.copy()
            blocked[lk[(flow_min * up)[inc_flow] < inc_share]] = True
            frozen = ~np.logical_and.reduceat(blocked[lk], starts)   # crosses a local bottleneck
            # A frozen flow gets its own minimum (<= every share on its path), so no link overflows even
            # when several near-equal bottlenecks freeze in the same pass.
            given = flow_min[frozen]
            rates[frozen] = given
            left -= given.size
            if not left:
                break
            residual -= np.bincount(lk, weights=np.where(frozen, flow_min, 0.0)[inc_flow], minlength=m + 1)
            np.maximum(residual, 0.0, out=residual)
            lk[frozen[inc_flow]] = m
    return rates, iterations


def _gather_ranges(ptr: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the CSR entries of rows ``ids`` (in order), and the row pointer of that selection."""
    begin = ptr[ids]
    deg = ptr[ids + 1] - begin
    local_ptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(deg, out=local_ptr[1:])
    pos = np.arange(local_ptr[-1], dtype=np.int64) + np.repeat(begin - local_ptr[:-1], deg)
    return pos, local_ptr


class _Buffer:
    """A growing 1-D array (amortised doubling) exposing its filled prefix as ``view``."""

    def __init__(self, dtype):
        self.data = np.zeros(256, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > self.data.size:
            grown = np.zeros(max(end, 2 * self.data.size), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:end] = values
        self.size = end

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


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
    bin_s : float or None
        Width of the time bins of :meth:`binned_link_bytes`; None keeps no time series.
    link_stats : bool
        Keep the per-link ``peak_utilization`` and ``busy_above_90_s`` (exact time above 90 % load). A
        caller that keeps its own link statistics (the replay engine) passes False and saves that work in
        every solve and step; both arrays then stay zero.

    Raises
    ------
    SimError
        For a bad capacity vector, quantile or bin width.

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
                 bin_s: float | None = None, link_stats: bool = True):
        capacity = np.array(capacity_bytes_per_s, dtype=np.float64).reshape(-1)
        if capacity.size == 0 or not np.all(np.isfinite(capacity)) or np.any(capacity <= 0):
            raise SimError("capacity_bytes_per_s: every link capacity must be finite and > 0")
        if not 0.0 <= completion_quantile < 1.0:
            raise SimError(f"completion_quantile: {completion_quantile} is not in [0, 1)")
        if bin_s is not None and not (math.isfinite(bin_s) and bin_s > 0):
            raise SimError(f"bin_s: {bin_s} is not a positive number of seconds")
        self.capacity = capacity
        self.num_links = capacity.size
        self.completion_quantile = float(completion_quantile)
        self.bin_s = None if bin_s is None else float(bin_s)
        self.link_stats = bool(link_stats)
        self.now_s = 0.0
        self.link_bytes = np.zeros(self.num_links)
        self.peak_utilization = np.zeros(self.num_links)
        self.busy_above_90_s = np.zeros(self.num_links)
        self.peak_active = 0
        self.stats = {"solves": 0, "flows_solved": 0, "iterations": 0, "steps": 0}
        self._busy_threshold = _BUSY_FRACTION * capacity
        # per flow id: size, start, finish (NaN in flight), rate (inf: not solved yet), bytes left rem0 at
        # time t0, predicted finish pred at the current rate; links in CSR (_fptr, _flinks)
        self._num_flows = 0
        for name in _FLOW_FIELDS:
            setattr(self, name, np.zeros(0))
        self._fptr = np.zeros(1, dtype=np.int64)
        self._flinks = _Buffer(np.int64)
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
        # time series
        self._bin_index = _Buffer(np.int64)
        self._bin_bytes = np.zeros((0, self.num_links))

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

    def binned_link_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes per (time bin, link) for the bins that saw traffic.

        Returns
        -------
        bin_start_s : ndarray of float64, shape (bins,)
            Start of each bin, increasing (bins without traffic are absent).
        bytes : ndarray of float64, shape (bins, links)
            Bytes each link carried within each bin.

        Raises
        ------
        SimError
            When the network was built without ``bin_s``.
        """
        if self.bin_s is None:
            raise SimError("binned_link_bytes: the FlowNetwork was built without bin_s")
        rows = self._bin_index.size
        return self._bin_index.view * self.bin_s, self._bin_bytes[:rows].copy()

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
        deg = self._check_flows(now_s, ptr, links, size)
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
            pos, lptr = _gather_ranges(self._fptr, new)
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

    def _check_flows(self, now_s, ptr, links, size) -> np.ndarray:
        """Validate one ``add_flows`` call; return the number of links of each flow."""
        if not (math.isfinite(now_s) and now_s >= self.now_s):
            raise SimError(f"add_flows: start time {now_s} is before the network's clock {self.now_s}")
        if ptr.size != size.size + 1:
            raise SimError(f"add_flows: link_ptr has {ptr.size} entries for {size.size} flows (want n + 1)")
        deg = ptr[1:] - ptr[:-1]
        if size.size and ((deg < 0).any() or ptr[0] < 0 or ptr[-1] > links.size):
            raise SimError("add_flows: link_ptr is not a non-decreasing index into link_idx")
        used = links[ptr[0]:ptr[-1]]
        if used.size and (used.min() < 0 or used.max() >= self.num_links):
            bad = int(used[(used < 0) | (used >= self.num_links)][0])
            raise SimError(f"add_flows: link id {bad} is not in 0..{self.num_links - 1}")
        if not (size >= 0).all() or not np.isfinite(size).all():   # NaN fails the first test
            row = int(np.flatnonzero(~np.isfinite(size) | (size < 0))[0])
            raise SimError(f"add_flows: size_bytes[{row}] = {size[row]} is not a finite size >= 0")
        return deg

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
        if self.link_stats:
            np.maximum(self.peak_utilization, self._load / self.capacity, out=self.peak_utilization)
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
        slack = max(_TIME_RTOL * dt, 4.0 * math.ulp(target_s))
        fin_mask = pred <= target_s + slack
        load = self._load
        if dt > 0:
            self.link_bytes += load * dt
            if self.bin_s is not None:
                self._bin_constant(now, target_s, load)
        self.now_s = float(target_s)
        if not fin_mask.any():
            if dt > 0 and self.link_stats:
                self.busy_above_90_s[load > self._busy_threshold] += dt
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
        if self.bin_s is not None or (dt > 0 and self.link_stats):
            inc_end = end.repeat(deg)
            if self.bin_s is not None:
                self._bin_amounts(target_s, links, inc_end, inc_left)
            if dt > 0 and self.link_stats:
                self._busy(now, target_s, links, inc_end, inc_rate, slack)
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

    def _busy(self, t0: float, t1: float, links, end_s, rate, slack: float) -> None:
        """Add the time each link stayed above 90 % within [t0, t1]; loads drop at ``end_s`` by ``rate``
        (drops within ``slack`` of t1 are completions at t1)."""
        threshold = self._busy_threshold
        hot = self._load > threshold
        sel = hot[links] & (end_s < t1 - slack)
        if not sel.any():
            self.busy_above_90_s[hot] += t1 - t0
            return
        until = np.full(self.num_links, t1)
        lk, te, dr = links[sel], end_s[sel], rate[sel]
        order = np.lexsort((te, lk))
        lk, te, dr = lk[order], te[order], dr[order]
        # per link (a run of lk), the load after each drop, and the first time it is at or below 90 %
        starts = np.flatnonzero(np.r_[True, lk[1:] != lk[:-1]])
        csum = np.cumsum(dr)
        before = np.repeat(csum[starts] - dr[starts], np.diff(np.r_[starts, lk.size]))
        below = self._load[lk] - (csum - before) <= threshold[lk]
        until[lk[starts]] = np.minimum.reduceat(np.where(below, te, t1), starts)
        self.busy_above_90_s[hot] += until[hot] - t0

    def _bin_rows(self, k0: int, k1: int) -> int:
        """Row of bin ``k0`` in the time series, creating rows for bins k0..k1 (time only moves forward)."""
        index = self._bin_index
        last = int(index.data[index.size - 1]) if index.size else -1
        first_new = max(k0, last + 1)
        if k1 >= first_new:
            need = index.size + (k1 - first_new + 1)
            if need > self._bin_bytes.shape[0]:
                grown = np.zeros((max(need, 2 * self._bin_bytes.shape[0], 16), self.num_links))
                grown[: index.size] = self._bin_bytes[: index.size]
                self._bin_bytes = grown
            index.extend(np.arange(first_new, k1 + 1, dtype=np.int64))
        return index.size - 1 - (k1 - k0)

    def _bin_span(self, t0: float, t1: float) -> tuple[int, int]:
        k0 = int(math.floor(t0 / self.bin_s))
        k1 = max(k0, int(math.ceil(t1 / self.bin_s)) - 1)
        return k0, k1

    def _bin_constant(self, t0: float, t1: float, load: np.ndarray) -> None:
        k0, k1 = self._bin_span(t0, t1)
        row = self._bin_rows(k0, k1)
        if k0 == k1:   # the common case: the step lies inside one bin
            self._bin_bytes[row] += (t1 - t0) * load
            return
        edges = np.clip(np.arange(k0, k1 + 2) * self.bin_s, t0, t1)
        overlap = np.diff(edges)
        self._bin_bytes[row:row + overlap.size] += overlap[:, None] * load[None, :]

    def _bin_amounts(self, t1: float, links, start_s, amount) -> None:
        """Spread ``amount`` bytes per incidence uniformly over [start_s, t1] (at t1 when empty)."""
        k0, k1 = self._bin_span(float(start_s.min()), t1)
        row = self._bin_rows(k0, k1)
        if k0 == k1:
            self._bin_bytes[row] += np.bincount(links, weights=amount, minlength=self.num_links)
            return
        width = t1 - start_s
        point = width <= 0.0
        if point.any():
            self._bin_bytes[row + (k1 - k0)] += np.bincount(links[point], weights=amount[point],
                                                            minlength=self.num_links)
        links, start_s, amount, width = links[~point], start_s[~point], amount[~point], width[~point]
        for k in range(k0, k1 + 1):
            lo = np.maximum(start_s, k * self.bin_s)
            hi = min(t1, (k + 1) * self.bin_s)
            share = np.clip(hi - lo, 0.0, None) / width
            if share.any():
                self._bin_bytes[row + (k - k0)] += np.bincount(links, weights=amount * share,
                                                               minlength=self.num_links)
