"""The event core of the replay: rank programs, collective synchronisation, transfer dependencies.

A lean heap (``heapq``), not simpy: a replay of the main job handles ~10^4-10^5 event batches and every
decision in them is a counter decrement that numpy does for a whole batch at once, so a simpy process per
rank or per transfer would only add a generator switch per event (simpy was not profiled here; the
profiles of this loop are in docs/simulator.md). The interface stays small: :class:`Engine` takes a :class:`Workload` (rank
programs of op instances), a ``prepare(op_id) -> PreparedOp`` callable (the op's transfers, their
dependencies and their routes) and a network (``add_flows`` / ``next_completion_s`` / ``advance``), and
returns an :class:`EngineLog`.

Semantics
---------
* Each program (one per rank) is a sequence of *steps*; a step is one op, or the ops of one rank with the
  same ``group`` id (issued in one ``ncclGroupStart/End``; they progress together). A rank issues step
  ``j + 1`` once step ``j`` is done on that rank (one stream per rank), so ops on one communicator run in
  order; ops of different communicators overlap across ranks and inside a group.
* Issue times: ``timing="asap"``: as soon as the previous step is done. ``timing="gaps"`` (what-if
  replay): ``done_{j-1} + gap_j``, where ``gap_j`` is the recorded compute gap (``t_start_j`` minus the
  recorded end of step ``j - 1``); the first step at its ``t_start``. ``timing="trace"``:
  ``max(t_start_j, done_{j-1} + gap_j)`` (recorded issue times are a floor). A straggler's delay is added
  to every step it issues.
* An op instance (the rows of one ``(comm, seq)`` collective, or a matched Send/Recv pair) starts when all
  its member steps have been issued. Its transfers start when their dependencies are done plus their
  ``delay_s``; each becomes one network flow per route sub-flow; a transfer is done when every sub-flow's
  bytes are sent plus its path latency. The op ends when its last transfer is done.

Exact memoisation of isolated ops
---------------------------------
Max-min fair rates split over groups of flows that share no link, so an op whose flows never share a link
with another op's flows runs exactly as it would alone. An op's *footprint* is the set of links its routes
use. An op that ran start to end with no other op in flight on its footprint is recorded (duration, the
bytes every link of its footprint moved in every interval, its flow log) under its identity
(``Workload.op_key``: communicator, op, sizes, algorithm). A later op with the same key that starts with
its footprint free is replayed from the record, shifted in time. If another op later starts on the
footprint of a replayed op before it ends, the replay was not valid: the engine raises
:class:`MemoConflict`, and the caller reruns with that key excluded (:func:`run_with_memo`). The figures
are therefore those of an explicit run (to float rounding; with ``completion_quantile > 0`` the network's
batching, which looks at every flow in flight, is the one coupling the record does not reproduce).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sim.errors import SimError

_ISSUE, _START, _DONE, _FINISH = 0, 1, 2, 3
#: intervals shorter than this fraction of the clock are float-rounding slivers (no rate is taken from them)
_MIN_SEGMENT_REL = 1e-9


@dataclass(frozen=True)
class Workload:
    """Rank programs over op instances (built from a trace by :mod:`sim.replay`).

    Steps are stored program by program: program ``p`` owns steps ``prog_ptr[p]:prog_ptr[p + 1]``.

    Attributes
    ----------
    n_ops : int
        Number of op instances.
    op_key : sequence of hashable or None
        Identity of each op's traffic (same key -> same transfers and routes); ``None`` never memoises.
    prog_ptr : ndarray of int64
        Program -> step range.
    prog_delay_s : ndarray of float64
        Delay added to every step of the program (stragglers), seconds.
    step_op_ptr, step_op_idx : ndarray of int64
        CSR: the op instances of each step.
    step_t_start_s : ndarray of float64
        Recorded issue time of each step (NaN when unknown).
    step_gap_s : ndarray of float64
        Recorded compute gap before each step (``timing="trace"``).
    """

    n_ops: int
    op_key: Sequence[Hashable | None]
    prog_ptr: np.ndarray
    prog_delay_s: np.ndarray
    step_op_ptr: np.ndarray
    step_op_idx: np.ndarray
    step_t_start_s: np.ndarray
    step_gap_s: np.ndarray

    @property
    def n_steps(self) -> int:
        return int(self.prog_ptr[-1])


@dataclass(frozen=True)
class PreparedOp:
    """An op instance's transfers, dependencies and routes, ready for the event loop.

    Per transfer: ``delay_s``, ``dep_count`` (dependencies), ``rev_ptr`` / ``rev_idx`` (CSR of the
    transfers that depend on it), ``sub_ptr`` (its route sub-flows). Per sub-flow: ``sub_bytes``,
    ``sub_path`` (id in the engine's :class:`PathTable`), ``sub_latency_s``, ``sub_transfer``.
    ``footprint``: the sorted link ids of all its paths (computed by the engine when omitted).
    """

    algo: str
    proto: str
    delay_s: np.ndarray
    dep_count: np.ndarray
    rev_ptr: np.ndarray
    rev_idx: np.ndarray
    sub_ptr: np.ndarray
    sub_bytes: np.ndarray
    sub_path: np.ndarray
    sub_latency_s: np.ndarray
    sub_transfer: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    footprint: np.ndarray | None = None

    @property
    def n_transfers(self) -> int:
        return len(self.delay_s)


def reverse_csr(dep_ptr: np.ndarray, dep_idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Invert a dependency CSR (``i`` waits for ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``).

    Returns
    -------
    rev_ptr, rev_idx : ndarray of int64
        ``rev_idx[rev_ptr[j]:rev_ptr[j+1]]`` are the transfers that wait for ``j``.

    Examples
    --------
    >>> rp, ri = reverse_csr(np.array([0, 0, 1, 2]), np.array([0, 0]), 3)
    >>> rp.tolist(), ri.tolist()
    ([0, 2, 2, 2], [1, 2])
    """
    dep_ptr = np.asarray(dep_ptr, dtype=np.int64)
    dep_idx = np.asarray(dep_idx, dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_ptr))
    order = np.argsort(dep_idx, kind="stable")
    rev_idx = owner[order]
    rev_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dep_idx, minlength=n), out=rev_ptr[1:])
    return rev_ptr, rev_idx


def csr_take(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of a CSR matrix as a new CSR (``ptr``, ``idx``), vectorised.

    Examples
    --------
    >>> p, i = csr_take(np.array([0, 2, 3, 5]), np.array([7, 8, 9, 10, 11]), np.array([2, 0]))
    >>> p.tolist(), i.tolist()
    ([0, 2, 4], [10, 11, 7, 8])
    """
    rows = np.asarray(rows, dtype=np.int64)
    starts = ptr[rows]
    lengths = ptr[rows + 1] - starts
    new_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    offsets = np.arange(new_ptr[-1], dtype=np.int64) - np.repeat(new_ptr[:-1] - starts, lengths)
    return new_ptr, idx[offsets]


class PathTable:
    """Every distinct route sub-flow seen in a run: its links and latency.

    ``links[ptr[i]:ptr[i+1]]`` are path ``i``'s link ids, source first. Stored in arrays that grow by
    doubling, so reading ``ptr`` / ``links`` after each ``add`` costs nothing.
    """

    def __init__(self, capacity_gbps: np.ndarray, latency_us: np.ndarray) -> None:
        self.capacity_gbps = np.asarray(capacity_gbps, dtype=np.float64)
        self.latency_us = np.asarray(latency_us, dtype=np.float64)
        self._ptr = np.zeros(1024, dtype=np.int64)
        self._links = np.zeros(4096, dtype=np.int64)
        self._n_paths = 0
        self._n_links = 0

    def add(self, link_ptr: np.ndarray, link_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append paths (CSR); return their ids and one-way latencies in seconds."""
        link_ptr = np.asarray(link_ptr, dtype=np.int64)
        link_idx = np.asarray(link_idx[link_ptr[0]:link_ptr[-1]], dtype=np.int64)
        link_ptr = link_ptr - link_ptr[0]
        n = len(link_ptr) - 1
        ids = np.arange(self._n_paths, self._n_paths + n, dtype=np.int64)
        p_end, l_end = self._n_paths + n + 1, self._n_links + len(link_idx)
        if p_end > len(self._ptr):
            self._ptr = np.concatenate([self._ptr, np.zeros(max(p_end, len(self._ptr)), dtype=np.int64)])
        if l_end > len(self._links):
            self._links = np.concatenate([self._links, np.zeros(max(l_end, len(self._links)), dtype=np.int64)])
        self._ptr[self._n_paths + 1:p_end] = link_ptr[1:] + self._n_links
        self._links[self._n_links:l_end] = link_idx
        self._n_paths += n
        self._n_links = l_end
        cum = np.concatenate(([0.0], np.cumsum(self.latency_us[link_idx])))
        latency_s = (cum[link_ptr[1:]] - cum[link_ptr[:-1]]) * 1e-6
        return ids, latency_s

    @property
    def ptr(self) -> np.ndarray:
        return self._ptr[: self._n_paths + 1]

    @property
    def links(self) -> np.ndarray:
        return self._links[: self._n_links]

    def __len__(self) -> int:
        return self._n_paths


class _Grow:
    """A numpy array that grows by doubling (flow-indexed columns of the flow log)."""

    def __init__(self, dtype, fill) -> None:
        self.a = np.full(1024, fill, dtype=dtype)
        self.fill = fill

    def ensure(self, n: int) -> None:
        if n > len(self.a):
            new = np.full(max(n, 2 * len(self.a)), self.fill, dtype=self.a.dtype)
            new[: len(self.a)] = self.a
            self.a = new


class LinkStats:
    """Per-link byte totals, time bins, peak rate and time above 90 % from piecewise-constant segments.

    Between two network events every link's rate is constant, so a segment ``[a, b)`` with the bytes each
    link moved in it spreads exactly over time bins. Without a fixed ``bin_s`` the bin width starts at
    1 µs and doubles (merging pairs of bins, exact for sums) whenever the run outgrows ``max_bins``.
    """

    def __init__(self, capacity_bytes_per_s: np.ndarray, bin_s: float | None = None, max_bins: int = 256):
        self.cap = np.asarray(capacity_bytes_per_s, dtype=np.float64)
        n = len(self.cap)
        self._total = np.zeros(n)
        self._peak_rate = np.zeros(n)
        self._busy90_s = np.zeros(n)
        self.fixed = bin_s is not None
        self._width_s = float(bin_s) if bin_s is not None else 1e-6
        self.max_bins = max_bins
        self._bins = np.zeros((64 if self.fixed else max_bins, n))
        self._hot_rate = 0.9 * self.cap * (1 - 1e-9)
        # dense segments waiting to be reduced (``add_dense``): one row of per-link bytes per segment,
        # reduced a block at a time (bounded to ~16 MB on big fabrics)
        self._seg_rows = max(1, min(256, (1 << 21) // max(n, 1)))
        self._seg_bytes = np.zeros((self._seg_rows, n))
        self._seg_ab = np.zeros((self._seg_rows, 2))
        self._segs = 0

    # The public arrays reduce the waiting segments first, so readers never see a partial sum.
    @property
    def total(self) -> np.ndarray:
        self.flush()
        return self._total

    @property
    def peak_rate(self) -> np.ndarray:
        self.flush()
        return self._peak_rate

    @property
    def busy90_s(self) -> np.ndarray:
        self.flush()
        return self._busy90_s

    @property
    def bins(self) -> np.ndarray:
        self.flush()
        return self._bins

    @property
    def width_s(self) -> float:
        self.flush()
        return self._width_s

    def add(self, a: float, b: float, idx: np.ndarray, vals: np.ndarray) -> None:
        """Record that links ``idx`` (distinct) moved ``vals`` bytes at constant rates over ``[a, b)``."""
        if b <= a or len(idx) == 0:
            return
        self.flush()
        self._total[idx] += vals
        if b - a > _MIN_SEGMENT_REL * abs(b):  # rates of float-rounding slivers mean nothing
            rate = vals / (b - a)
            self._peak_rate[idx] = np.maximum(self._peak_rate[idx], rate)
            hot = rate >= self._hot_rate[idx]
            if hot.any():
                self._busy90_s[idx[hot]] += b - a
        self._bin(a, b, idx, vals)

    def dense_row(self, a: float, b: float) -> np.ndarray | None:
        """A row to write the per-link bytes of segment ``[a, b)`` into (every link; only the positive
        entries count, as in :meth:`add`); None for an empty interval. Reduced in blocks by :meth:`flush`:
        one set of numpy calls per block of segments instead of per network event."""
        if b <= a:
            return None
        if self._segs == self._seg_rows:
            self.flush()
        k = self._segs
        self._seg_ab[k, 0] = a
        self._seg_ab[k, 1] = b
        self._segs = k + 1
        return self._seg_bytes[k]

    def flush(self) -> None:
        """Reduce the waiting dense segments (same sums as :meth:`add` per segment, to float rounding)."""
        k = self._segs
        if not k:
            return
        self._segs = 0
        vals = np.maximum(self._seg_bytes[:k], 0.0)
        a, b = self._seg_ab[:k, 0], self._seg_ab[:k, 1]
        self._total += vals.sum(axis=0)
        dt = b - a
        real = dt > _MIN_SEGMENT_REL * np.abs(b)   # rates of float-rounding slivers mean nothing
        if real.any():
            rate = vals[real] / dt[real, None]
            np.maximum(self._peak_rate, rate.max(axis=0), out=self._peak_rate)
            self._busy90_s += dt[real] @ (rate >= self._hot_rate)
        self._grow_to(float(b.max()))
        w = self._width_s
        k0 = (a // w).astype(np.int64)
        k1 = np.minimum(np.ceil(b / w).astype(np.int64) - 1, len(self._bins) - 1)
        single = k1 <= k0
        np.add.at(self._bins, k0[single], vals[single])
        for i in np.flatnonzero(~single).tolist():
            edges = np.arange(k0[i], k1[i] + 2) * w
            overlap = np.minimum(edges[1:], b[i]) - np.maximum(edges[:-1], a[i])
            frac = np.clip(overlap, 0.0, None) / (b[i] - a[i])
            self._bins[k0[i]: k1[i] + 1] += frac[:, None] * vals[i][None, :]

    def _bin(self, a: float, b: float, idx: np.ndarray, vals: np.ndarray) -> None:
        self._grow_to(b)
        w = self._width_s
        k0 = int(a // w)
        k1 = min(int(math.ceil(b / w)) - 1, len(self._bins) - 1)
        if k1 <= k0:
            self._bins[k0, idx] += vals
            return
        edges = np.arange(k0, k1 + 2) * w
        overlap = np.minimum(edges[1:], b) - np.maximum(edges[:-1], a)
        frac = np.clip(overlap, 0.0, None) / (b - a)
        self._bins[k0 : k1 + 1, idx] += frac[:, None] * vals[None, :]

    def add_record(self, t: float, rec: Record) -> None:
        """Add a recorded op's link statistics, shifted to start at ``t`` (vectorised over segments)."""
        if len(rec.seg_a) == 0:
            return
        self.flush()
        self._total[rec.link_idx] += rec.link_bytes
        self._peak_rate[rec.link_idx] = np.maximum(self._peak_rate[rec.link_idx], rec.link_peak_rate)
        self._busy90_s[rec.link_idx] += rec.link_busy90_s
        a, b = rec.seg_a + t, rec.seg_b + t
        self._grow_to(float(b.max()))
        w = self._width_s
        k0 = (a // w).astype(np.int64)
        k1 = np.maximum(np.ceil(b / w).astype(np.int64) - 1, k0)
        single = k0 == k1
        lengths = np.diff(rec.seg_ptr)
        inc_single = np.repeat(single, lengths)
        np.add.at(self._bins, (np.repeat(k0, lengths)[inc_single], rec.seg_idx[inc_single]),
                  rec.seg_vals[inc_single])
        for i in np.flatnonzero(~single).tolist():
            lo, hi = rec.seg_ptr[i], rec.seg_ptr[i + 1]
            self._bin(float(a[i]), float(b[i]), rec.seg_idx[lo:hi], rec.seg_vals[lo:hi])

    def _grow_to(self, t: float) -> None:
        while t > len(self._bins) * self._width_s * (1 + 1e-12):
            if self.fixed:
                self._bins = np.concatenate([self._bins, np.zeros_like(self._bins)])
            else:  # double the width: merge pairs of bins (exact)
                half = self._bins.reshape(len(self._bins) // 2, 2, -1).sum(axis=1)
                self._bins = np.concatenate([half, np.zeros_like(half)])
                self._width_s *= 2

    def binned(self, end_s: float) -> tuple[float, np.ndarray]:
        """Bin width and the bins covering ``[0, end_s)`` (bytes per bin per link)."""
        self.flush()
        n = max(1, min(len(self._bins), int(math.ceil(end_s / self._width_s - 1e-9))))
        return self._width_s, self._bins[:n]


@dataclass
class EngineLog:
    """What one replay produced: per-op times, the flow log and the per-link statistics."""

    op_start_s: np.ndarray
    op_end_s: np.ndarray
    op_algo: list[str]
    op_flows: np.ndarray
    flow_op: np.ndarray
    flow_path: np.ndarray
    flow_bytes: np.ndarray
    flow_start_s: np.ndarray
    flow_sent_s: np.ndarray
    flow_end_s: np.ndarray
    paths: PathTable
    link_stats: LinkStats
    makespan_s: float
    memo_hits: int = 0
    memo_records: int = 0
    network_events: int = 0
    step_issue_s: np.ndarray | None = None   # when each step was issued (rank programs: ``workload``)
    workload: Workload | None = None


@dataclass
class _OpRun:
    prep: PreparedOp
    start_s: float
    deps_left: np.ndarray
    subs_left: np.ndarray
    transfers_left: int
    t_last: float = 0.0
    one_sub: bool = False   # every transfer is one sub-flow: a batch of distinct sub-flows ends distinct transfers


@dataclass(frozen=True)
class Record:
    """A memoised op: duration, per-segment link bytes (CSR, times from the op's start), per-link
    aggregates, and its flows (path, bytes, start / sent / end relative to the op's start)."""

    duration_s: float
    seg_a: np.ndarray
    seg_b: np.ndarray
    seg_ptr: np.ndarray
    seg_idx: np.ndarray
    seg_vals: np.ndarray
    link_idx: np.ndarray
    link_bytes: np.ndarray
    link_peak_rate: np.ndarray
    link_busy90_s: np.ndarray
    flows: tuple

    @classmethod
    def build(cls, duration_s: float, segments: list, cap: np.ndarray, flows: tuple) -> Record:
        if segments:
            seg_a = np.array([x[0] for x in segments])
            seg_b = np.array([x[1] for x in segments])
            seg_ptr = np.zeros(len(segments) + 1, dtype=np.int64)
            np.cumsum([len(x[2]) for x in segments], out=seg_ptr[1:])
            seg_idx = np.concatenate([x[2] for x in segments])
            seg_vals = np.concatenate([x[3] for x in segments])
        else:
            seg_a = seg_b = seg_vals = np.zeros(0)
            seg_ptr, seg_idx = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        dur = np.repeat(seg_b - seg_a, np.diff(seg_ptr))
        # relative to the op's start: a sliver of the live run can be a little longer here; both are
        # float rounding, far below any real interval
        sliver = dur <= _MIN_SEGMENT_REL * np.repeat(np.abs(seg_b), np.diff(seg_ptr)) + 1e-15
        rate = np.divide(seg_vals, dur, out=np.zeros_like(seg_vals), where=~sliver)
        link_idx, inv = np.unique(seg_idx, return_inverse=True)
        link_bytes = np.bincount(inv, weights=seg_vals, minlength=len(link_idx))
        peak = np.zeros(len(link_idx))
        np.maximum.at(peak, inv, rate)
        hot = rate >= 0.9 * cap[seg_idx] * (1 - 1e-9)
        busy = np.bincount(inv[hot], weights=dur[hot], minlength=len(link_idx))
        return cls(duration_s, seg_a, seg_b, seg_ptr, seg_idx, seg_vals, link_idx, link_bytes, peak, busy, flows)


@dataclass
class _Recording:
    t0: float
    segments: list = field(default_factory=list)
    flow_ids: list = field(default_factory=list)
    alive: bool = True


@dataclass
class _InFlight:
    footprint: np.ndarray
    virtual: bool
    rec: _Recording | None


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """True when two sorted link-id arrays share an element."""
    if len(a) == 0 or len(b) == 0:
        return False
    pos = np.searchsorted(a, b)
    pos[pos == len(a)] = len(a) - 1
    return bool((a[pos] == b).any())


class MemoConflict(Exception):
    """An op started on the footprint of an op replayed from a record (internal; see the module doc)."""

    def __init__(self, key) -> None:
        super().__init__(repr(key))
        self.key = key


class Engine:
    """Replay a :class:`Workload` over a network; see the module docstring for the semantics.

    Parameters
    ----------
    workload : Workload
    prepare : callable
        ``prepare(op_id) -> PreparedOp``; called once per started op (cache on the caller's side).
    network : object
        A fresh ``sim.network.flow_network.FlowNetwork`` (or anything with the same ``add_flows`` / ``advance`` /
        ``next_completion_s`` / ``link_bytes``).
    paths : PathTable
        The table the prepared ops' ``sub_path`` ids refer to.
    capacity_bytes_per_s : ndarray
        Per-link capacity (for the link statistics).
    timing : {"gaps", "trace", "asap"}
    bin_s : float, optional
        Fixed width of the utilisation time bins; adaptive (~128-256 bins over the run) when omitted.
    memoize : bool
        Replay isolated ops from records (exact; see the module docstring).
    memo, blocked : dict and set, optional
        Records shared between runs, and op keys never to replay (after a :class:`MemoConflict`).
    link_stats : bool
        Keep per-link statistics (off for the ideal reference, which only needs op times).
    progress : callable, optional
        Called with the number of ops finished since the last call.
    """

    def __init__(self, workload: Workload, prepare: Callable[[int], PreparedOp], network, paths: PathTable,
                 capacity_bytes_per_s: np.ndarray, timing: str = "asap", bin_s: float | None = None,
                 memoize: bool = True, progress: Callable[[int], None] | None = None,
                 memo: dict | None = None, blocked: set | None = None, link_stats: bool = True) -> None:
        if timing not in ("gaps", "trace", "asap"):
            raise SimError(f"timing {timing!r} is not one of: gaps, trace, asap")
        self.w = workload
        self.prepare = prepare
        self.net = network
        self.paths = paths
        self.timing = timing
        self.memoize = memoize
        self.progress = progress
        self.stats = LinkStats(capacity_bytes_per_s, bin_s)
        self.keep_stats = link_stats
        w = workload
        self.op_start = np.full(w.n_ops, np.nan)
        self.op_end = np.full(w.n_ops, np.nan)
        self.op_algo = [""] * w.n_ops
        self.op_flows = np.zeros(w.n_ops, dtype=np.int64)
        self.op_wait = np.zeros(w.n_ops, dtype=np.int64)
        np.add.at(self.op_wait, w.step_op_idx, 1)
        steps_of = np.repeat(np.arange(w.n_steps, dtype=np.int64), np.diff(w.step_op_ptr))
        order = np.argsort(w.step_op_idx, kind="stable")
        self.op_step_idx = steps_of[order]
        self.op_step_ptr = np.zeros(w.n_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(w.step_op_idx, minlength=w.n_ops), out=self.op_step_ptr[1:])
        self.step_left = np.diff(w.step_op_ptr).astype(np.int64)
        self.step_prog = np.repeat(np.arange(len(w.prog_ptr) - 1), np.diff(w.prog_ptr))
        self.step_issue = np.full(w.n_steps, np.nan)
        self.heap: list = []
        self._seq = 0
        self.runs: dict[int, _OpRun] = {}
        self.just_started: list[int] = []
        self.pending: list[tuple[int, np.ndarray]] = []
        self.n_flows = 0
        self.f_op = _Grow(np.int64, -1)
        self.f_sub = _Grow(np.int64, -1)
        self.f_path = _Grow(np.int64, -1)
        self.f_bytes = _Grow(np.float64, 0.0)
        self.f_start = _Grow(np.float64, np.nan)
        self.f_sent = _Grow(np.float64, np.nan)
        self.f_end = _Grow(np.float64, np.nan)
        self.f_lat = _Grow(np.float64, np.nan)   # path latency of each network flow (not in the log)
        # The log has a row per flow, network flows and flows of replayed (memoised) ops alike, so
        # network flow ids map to log rows rather than being rows themselves.
        self.net_row = _Grow(np.int64, -1)
        self.net_active = 0
        self.last_t = 0.0
        self.last_bytes = np.zeros(len(self.stats.cap))
        self.memo: dict = {} if memo is None else memo
        self.blocked: set = set() if blocked is None else blocked
        self.inflight: dict[int, _InFlight] = {}
        self.link_users = np.zeros(len(self.stats.cap), dtype=np.int64)
        self.link_owner = np.full(len(self.stats.cap), -1, dtype=np.int64)  # a recording op's links
        self.recording = 0   # ops in flight whose link bytes are being recorded (link_owner >= 0)
        self._footprints: dict[int, np.ndarray] = {}
        self.memo_hits = 0
        self.memo_records = 0
        self.network_events = 0
        self.ops_done = 0

    # -- scheduling helpers -------------------------------------------------------------------------
    def _push(self, t: float, kind: int, payload) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, self._seq, kind, payload))

    def _issue_time(self, step: int, prev_done: float | None) -> float:
        prog = self.step_prog[step]
        delay = float(self.w.prog_delay_s[prog])
        if self.timing in ("trace", "gaps"):
            t0 = float(self.w.step_t_start_s[step])
            if prev_done is None:
                return t0 + delay
            # gaps: the recorded compute gap after the previous step, no absolute floor, so the network
            # moves everything after it (what-if replay); trace: recorded issue times are a floor
            after = prev_done + float(self.w.step_gap_s[step])
            return (after if self.timing == "gaps" else max(t0, after)) + delay
        return (0.0 if prev_done is None else prev_done) + delay

    # -- event handlers -----------------------------------------------------------------------------
    def _issue(self, step: int, t: float) -> None:
        self.step_issue[step] = t
        w = self.w
        for op in w.step_op_idx[w.step_op_ptr[step]: w.step_op_ptr[step + 1]].tolist():
            self.op_wait[op] -= 1
            if self.op_wait[op] == 0:
                self.op_start[op] = t
                self.just_started.append(op)

    def _launch(self, op: int, t: float) -> None:
        prep = self.prepare(op)
        self.op_algo[op] = prep.algo
        n = prep.n_transfers
        subs_left = np.diff(prep.sub_ptr).astype(np.int64)
        run = _OpRun(prep, t, prep.dep_count.copy(), subs_left, n, t, bool((subs_left == 1).all()))
        if n == 0:
            self._push(t, _FINISH, op)
            return
        self.runs[op] = run
        roots = np.flatnonzero(run.deps_left == 0)
        self._schedule(op, roots, t + prep.delay_s[roots], t)

    def _schedule(self, op: int, tids: np.ndarray, times: np.ndarray, now: float) -> None:
        if len(tids) == 0:
            return
        if np.all(times == times[0]):
            if times[0] <= now:
                self.pending.append((op, tids))
            else:
                self._push(float(times[0]), _START, (op, tids))
            return
        uniq, inv = np.unique(times, return_inverse=True)
        for k, tk in enumerate(uniq.tolist()):
            sel = tids[inv == k]
            if tk <= now:
                self.pending.append((op, sel))
            else:
                self._push(tk, _START, (op, sel))

    def _flush(self, now: float) -> None:
        """Start every pending transfer at ``now``: one ``add_flows`` call for the batch."""
        if not self.pending:
            return
        pend, self.pending = self.pending, []
        ops, subs = [], []
        for op, tids in pend:
            prep = self.runs[op].prep
            lo, hi = prep.sub_ptr[tids], prep.sub_ptr[tids + 1]
            if np.all(hi - lo == 1):
                s = lo
            else:
                s = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])
            ops.append(np.full(len(s), op, dtype=np.int64))
            subs.append(s)
        op_arr = np.concatenate(ops)
        sub_arr = np.concatenate(subs)
        sizes = np.empty(len(sub_arr))
        path = np.empty(len(sub_arr), dtype=np.int64)
        lat = np.empty(len(sub_arr))
        pos = 0
        for (op, _), s in zip(pend, subs, strict=True):
            prep = self.runs[op].prep
            sizes[pos: pos + len(s)] = prep.sub_bytes[s]
            path[pos: pos + len(s)] = prep.sub_path[s]
            lat[pos: pos + len(s)] = prep.sub_latency_s[s]
            pos += len(s)
        empty = sizes <= 0
        if empty.any():  # nothing to send: done after the path latency
            self._completions(op_arr[empty], sub_arr[empty], now + lat[empty], now)
            keep = ~empty
            op_arr, sub_arr, sizes, path, lat = op_arr[keep], sub_arr[keep], sizes[keep], path[keep], lat[keep]
            if len(op_arr) == 0:
                return
        link_ptr, link_idx = csr_take(self.paths.ptr, self.paths.links, path)
        if self._net_busy():
            self._advance(now)  # bytes moved at the old rates up to now
        else:  # nothing moved while the network was idle
            self.last_t = now
        ids = np.asarray(self.net.add_flows(now, link_ptr, link_idx, sizes), dtype=np.int64)
        self.net_row.ensure(int(ids.max()) + 1)
        rows = np.arange(self.n_flows, self.n_flows + len(ids), dtype=np.int64)
        self.net_row.a[ids] = rows
        self.n_flows += len(ids)
        for g in (self.f_op, self.f_sub, self.f_path, self.f_bytes, self.f_start, self.f_sent, self.f_end,
                  self.f_lat):
            g.ensure(self.n_flows)
        self.f_op.a[rows] = op_arr
        self.f_lat.a[rows] = lat
        self.f_sub.a[rows] = sub_arr
        self.f_path.a[rows] = path
        self.f_bytes.a[rows] = sizes
        self.f_start.a[rows] = now
        self.net_active += len(ids)
        np.add.at(self.op_flows, op_arr, 1)
        for op in np.unique(op_arr).tolist():
            fl = self.inflight.get(op)
            if fl is not None and fl.rec is not None and fl.rec.alive:
                fl.rec.flow_ids.append(rows[op_arr == op])  # log rows of the recorded op's flows

    def _completions(self, ops: np.ndarray, subs: np.ndarray, t_done: np.ndarray, now: float) -> None:
        """Sub-flows of ``ops`` finish at ``t_done`` (bytes sent plus latency).

        Transfers that nothing waits for are settled at once (their op only needs the count and the
        latest time); the others are queued as events at their own times, in order.
        """
        if not (ops == ops[0]).all():
            for op in np.unique(ops).tolist():
                m = ops == op
                self._completions(ops[m], subs[m], t_done[m], now)
            return
        op = int(ops[0])
        run = self.runs[op]
        prep = run.prep
        tr = prep.sub_transfer[subs]
        waited = prep.rev_ptr[tr + 1] > prep.rev_ptr[tr]
        if not waited.all():
            leaf = ~waited
            self._settle(op, run, tr[leaf], float(t_done[leaf].max()))
            subs, t_done = subs[waited], t_done[waited]
            if len(subs) == 0:
                return
        if (t_done == t_done[0]).all():
            self._push(float(t_done[0]), _DONE, (op, subs))
            return
        order = np.argsort(t_done, kind="stable")
        subs, t_done = subs[order], t_done[order]
        cut = np.flatnonzero(t_done[1:] != t_done[:-1]) + 1
        bounds = [0, *cut.tolist(), len(subs)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            self._push(float(t_done[a]), _DONE, (op, subs[a:b]))

    def _settle(self, op: int, run: _OpRun, tr: np.ndarray, t_last: float) -> None:
        """Count transfers (sub-flows ``tr``) as done by ``t_last``; end the op when none is left."""
        if run.one_sub:   # the sub-flows of a batch are distinct, so are their transfers: all end here
            run.subs_left[tr] = 0
            finished = tr
        elif len(tr) == 1:
            run.subs_left[tr] -= 1
            finished = tr if run.subs_left[tr[0]] == 0 else tr[:0]
        else:
            np.subtract.at(run.subs_left, tr, 1)
            tr = np.unique(tr)
            finished = tr[run.subs_left[tr] == 0]
        run.t_last = max(run.t_last, t_last)
        run.transfers_left -= len(finished)
        if run.transfers_left == 0:
            self.runs.pop(op, None)
            self._push(run.t_last, _FINISH, op)

    def _done(self, op: int, subs: np.ndarray, t: float) -> None:
        run = self.runs[op]
        prep = run.prep
        tr = prep.sub_transfer[subs]
        if run.one_sub:   # distinct sub-flows of one-sub-flow transfers: each ends its transfer
            run.subs_left[tr] = 0
            finished = tr
        else:
            np.subtract.at(run.subs_left, tr, 1)
            tr = np.unique(tr)
            finished = tr[run.subs_left[tr] == 0]
        if len(finished) == 0:
            return
        run.transfers_left -= len(finished)
        run.t_last = max(run.t_last, t)
        dep_ptr, dep_idx = csr_take(prep.rev_ptr, prep.rev_idx, finished)
        if len(dep_idx):
            np.subtract.at(run.deps_left, dep_idx, 1)
            cand = np.unique(dep_idx)
            ready = cand[run.deps_left[cand] == 0]
            self._schedule(op, ready, t + prep.delay_s[ready], t)
        if run.transfers_left == 0:
            self.runs.pop(op, None)
            self._push(run.t_last, _FINISH, op)

    def _finish(self, op: int, t: float) -> None:
        self.op_end[op] = t
        self.runs.pop(op, None)
        self.ops_done += 1
        if self.progress is not None:
            self.progress(1)
        fl = self.inflight.pop(op, None)
        if fl is not None:
            self.link_users[fl.footprint] -= 1
            if fl.rec is not None:
                self.recording -= 1
                self.link_owner[fl.footprint] = -1
                if fl.rec.alive:
                    self._store(op, fl.rec, t)
        for step in self.op_step_idx[self.op_step_ptr[op]: self.op_step_ptr[op + 1]].tolist():
            self.step_left[step] -= 1
            if self.step_left[step] == 0:
                prog = self.step_prog[step]
                nxt = step + 1
                if nxt < self.w.prog_ptr[prog + 1]:
                    self._push(self._issue_time(nxt, t), _ISSUE, nxt)

    # -- network ------------------------------------------------------------------------------------
    def _net_busy(self) -> bool:
        return bool(self.net.num_active or self.net.has_completions)

    def _advance(self, t: float) -> None:
        done = np.asarray(self.net.advance(t), dtype=np.int64)
        self.network_events += 1
        if self.keep_stats:
            self._account(t)
        self.last_t = t
        if len(done):
            self.net_active -= len(done)
            # the exact time of the last byte (earlier than t only with completion batching)
            sent = np.minimum(np.asarray(self.net.finish_s)[done], t)
            rows = self.net_row.a[done]
            self.f_sent.a[rows] = sent
            ops = self.f_op.a[rows]
            subs = self.f_sub.a[rows]
            end = sent + self.f_lat.a[rows]
            self.f_end.a[rows] = end
            self._completions(ops, subs, np.maximum(end, t), t)

    def _account(self, t: float) -> None:
        """Per-link bytes moved over ``[last_t, t)``: to the statistics and to recording ops."""
        # The statistics take the dense per-link delta and reduce it in blocks of events (LinkStats.flush)
        cur = self.net.link_bytes
        row = self.stats.dense_row(self.last_t, t)
        if row is None:
            delta = cur - self.last_bytes
        else:
            delta = np.subtract(cur, self.last_bytes, out=row)
        if self.recording:
            owners = self.link_owner
            idx = np.flatnonzero((delta > 0) & (owners >= 0))
            if len(idx):
                vals = delta[idx]
                owners = owners[idx]
                a, b = self.last_t, t
                if (owners == owners[0]).all():
                    rec = self.inflight[int(owners[0])].rec
                    rec.segments.append((a - rec.t0, b - rec.t0, idx, vals))
                else:
                    for op in np.unique(owners).tolist():
                        rec = self.inflight[op].rec
                        m = owners == op
                        rec.segments.append((a - rec.t0, b - rec.t0, idx[m], vals[m]))
        np.copyto(self.last_bytes, cur)

    # -- memoisation --------------------------------------------------------------------------------
    def _footprint(self, prep: PreparedOp) -> np.ndarray:
        if prep.footprint is not None:
            return prep.footprint
        fp = self._footprints.get(id(prep))
        if fp is None:
            _, links = csr_take(self.paths.ptr, self.paths.links, prep.sub_path)
            fp = np.unique(links)
            self._footprints[id(prep)] = fp
        return fp

    def _start_batch(self, t: float) -> None:
        """Start the ops whose members have all issued them: replay isolated ones from records."""
        started, self.just_started = self.just_started, []
        preps = [self.prepare(op) for op in started]
        fps = [self._footprint(p) for p in preps]
        batch = np.bincount(np.concatenate(fps), minlength=len(self.link_users)) if len(fps) > 1 else None
        for op, prep, fp in zip(started, preps, fps, strict=True):
            self.op_algo[op] = prep.algo
            busy = bool(self.link_users[fp].any())
            if busy:  # other ops in flight on this footprint: they are no longer alone
                for other, fl in self.inflight.items():
                    if _overlap(fl.footprint, fp):
                        if fl.virtual:
                            raise MemoConflict(self.w.op_key[other])
                        if fl.rec is not None:
                            fl.rec.alive = False
            alone = not busy and (batch is None or not (batch[fp] > 1).any())
            key = self.w.op_key[op]
            memo_ok = self.memoize and key is not None and alone
            if memo_ok and key in self.memo and key not in self.blocked:
                self._replay(op, key, fp, t)
                continue
            rec = _Recording(t) if memo_ok and key not in self.memo else None
            self.inflight[op] = _InFlight(fp, False, rec)
            self.link_users[fp] += 1
            if rec is not None:
                self.recording += 1
                self.link_owner[fp] = op
            self._launch(op, t)

    def _replay(self, op: int, key, fp: np.ndarray, t: float) -> None:
        rec: Record = self.memo[key]
        self.memo_hits += 1
        self.inflight[op] = _InFlight(fp, True, None)
        self.link_users[fp] += 1
        if self.keep_stats:
            self.stats.add_record(t, rec)
        f_path, f_bytes, f_start, f_sent, f_end = rec.flows
        if len(f_path):
            n0 = self.n_flows
            n1 = n0 + len(f_path)
            for g in (self.f_op, self.f_sub, self.f_path, self.f_bytes, self.f_start, self.f_sent, self.f_end,
                      self.f_lat):
                g.ensure(n1)
            self.f_op.a[n0:n1] = op
            self.f_path.a[n0:n1] = f_path
            self.f_bytes.a[n0:n1] = f_bytes
            self.f_start.a[n0:n1] = t + f_start
            self.f_sent.a[n0:n1] = t + f_sent
            self.f_end.a[n0:n1] = t + f_end
            self.n_flows = n1
            self.op_flows[op] += len(f_path)
        self._push(t + rec.duration_s, _FINISH, op)

    def _store(self, op: int, rec: _Recording, t: float) -> None:
        ids = np.concatenate(rec.flow_ids) if rec.flow_ids else np.zeros(0, dtype=np.int64)
        t0 = rec.t0
        flows = (self.f_path.a[ids], self.f_bytes.a[ids], self.f_start.a[ids] - t0, self.f_sent.a[ids] - t0,
                 self.f_end.a[ids] - t0)
        self.memo[self.w.op_key[op]] = Record.build(t - t0, rec.segments, self.stats.cap, flows)
        self.memo_records += 1

    # -- main loop ----------------------------------------------------------------------------------
    def run(self) -> EngineLog:
        """Run to the end; raises :class:`SimError` when ranks deadlock (an op never gets all members)."""
        w = self.w
        for p in range(len(w.prog_ptr) - 1):
            if w.prog_ptr[p + 1] > w.prog_ptr[p]:
                s = int(w.prog_ptr[p])
                self._push(self._issue_time(s, None), _ISSUE, s)
        inf = math.inf
        while True:
            t_heap = self.heap[0][0] if self.heap else inf
            t_net = self.net.next_completion_s() if self._net_busy() else inf
            if t_net <= t_heap and t_net < inf:
                self._advance(t_net)
                continue
            if t_heap == inf:
                break
            t = t_heap
            # The network is advanced lazily: its rates change only at its own completions (handled
            # above) and when flows are added (``_flush`` advances first), so heap events that add no
            # flow (a transfer's latency tail ending, a rank issuing) leave it alone.
            while self.heap and self.heap[0][0] <= t:
                _, _, kind, payload = heapq.heappop(self.heap)
                if kind == _ISSUE:
                    self._issue(payload, t)
                elif kind == _START:
                    op, tids = payload
                    self.pending.append((op, tids))
                elif kind == _DONE:
                    op, subs = payload
                    self._done(op, subs, t)
                else:
                    self._finish(payload, t)
                if not self.heap or self.heap[0][0] > t:
                    if self.just_started:
                        self._start_batch(t)
            self._flush(t)
        self._check_complete()
        self.stats.flush()
        n = self.n_flows
        makespan = float(np.nanmax(self.op_end)) if w.n_ops and not np.all(np.isnan(self.op_end)) else 0.0
        return EngineLog(
            op_start_s=self.op_start, op_end_s=self.op_end, op_algo=self.op_algo, op_flows=self.op_flows,
            flow_op=self.f_op.a[:n].copy(), flow_path=self.f_path.a[:n].copy(),
            flow_bytes=self.f_bytes.a[:n].copy(), flow_start_s=self.f_start.a[:n].copy(),
            flow_sent_s=self.f_sent.a[:n].copy(), flow_end_s=self.f_end.a[:n].copy(), paths=self.paths,
            link_stats=self.stats, makespan_s=makespan, memo_hits=self.memo_hits,
            memo_records=self.memo_records, network_events=self.network_events,
            step_issue_s=self.step_issue, workload=self.w)

    def _check_complete(self) -> None:
        missing = np.flatnonzero(np.isnan(self.op_end))
        if len(missing) == 0:
            return
        waiting = np.flatnonzero(np.isnan(self.op_start))
        op = int(waiting[0]) if len(waiting) else int(missing[0])
        raise SimError(f"replay deadlocked: {len(missing)} op(s) never finished; the first waits for "
                       f"members that never issue it ({self.describe(op)})")

    def describe(self, op: int) -> str:
        """A short name of op ``op`` for messages (overridden by the replay layer's labels)."""
        return f"op {op}"
