"""Per-link statistics of a replay (the one owner): byte totals, time bins, peak rate, time above 90 %.

The network only moves bytes (``FlowNetwork.link_bytes``); whoever drives it hands each constant-rate
interval to a :class:`LinkStats`: the engine's network process (:mod:`sim.engine.netproc`) and the
flow-level runner (:mod:`sim.flows`). Rates and the 90 % threshold are relative to the nominal capacity
given here, also while a time-varying anomaly has changed a link's capacity.
"""

from __future__ import annotations

import math

import numpy as np

from sim.options import MAX_TIME_BINS, check_bin_count

__all__ = ["LinkStats", "MIN_SEGMENT_REL", "Meter", "add_rows_in_order"]

#: intervals shorter than this fraction of the clock are float-rounding slivers (no rate is taken from them)
MIN_SEGMENT_REL = 1e-9


class LinkStats:
    """Per-link byte totals, time bins, peak rate and time above 90 % from piecewise-constant segments.

    Between two network events every link's rate is constant, so a segment ``[a, b)`` with the bytes each
    link moved in it spreads exactly over time bins. Without a fixed ``bin_s`` the bin width starts at
    1 µs and doubles (merging pairs of bins, exact for sums) whenever the run outgrows ``max_bins``.

    Parameters
    ----------
    capacity_bytes_per_s : ndarray
        Nominal capacity of each link.
    bin_s : float, optional
        Fixed bin width; adaptive when omitted.
    max_bins : int
        Bins kept with an adaptive width.

    Examples
    --------
    >>> s = LinkStats(np.array([10.0]))
    >>> s.add(0.0, 2.0, np.array([0]), np.array([18.0]))
    >>> s.total.tolist(), s.peak_rate.tolist(), s.busy90_s.tolist()
    ([18.0], [9.0], [2.0])
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
        self._rate = np.zeros((self._seg_rows, n))   # scratch of flush: the rates of a block
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
        if b - a > MIN_SEGMENT_REL * abs(b):  # rates of float-rounding slivers mean nothing
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
        # the rows are scratch (every dense_row is written whole before it is read): clip them in place
        vals = np.maximum(self._seg_bytes[:k], 0.0, out=self._seg_bytes[:k])
        a, b = self._seg_ab[:k, 0], self._seg_ab[:k, 1]
        self._total += vals.sum(axis=0)
        dt = b - a
        real = dt > MIN_SEGMENT_REL * np.abs(b)   # rates of float-rounding slivers mean nothing
        if real.all():   # the usual case: no row gathered, the same quotients
            rate = np.divide(vals, dt[:, None], out=self._rate[:k])
            np.maximum(self._peak_rate, rate.max(axis=0), out=self._peak_rate)
            self._busy90_s += dt @ (rate >= self._hot_rate)
        elif real.any():
            rate = vals[real] / dt[real, None]
            np.maximum(self._peak_rate, rate.max(axis=0), out=self._peak_rate)
            self._busy90_s += dt[real] @ (rate >= self._hot_rate)
        self._grow_to(float(b.max()))
        w = self._width_s
        k0 = (a // w).astype(np.int64)
        k1 = np.minimum(np.ceil(b / w).astype(np.int64) - 1, len(self._bins) - 1)
        single = k1 <= k0
        if single.all():
            add_rows_in_order(self._bins, k0, vals)
        else:
            add_rows_in_order(self._bins, k0[single], vals[single])
            multi = np.flatnonzero(~single)
            self._spread(k0[multi], k1[multi], a[multi], b[multi], vals[multi])

    def _spread(self, k0: np.ndarray, k1: np.ndarray, a: np.ndarray, b: np.ndarray, vals: np.ndarray) -> None:
        """Segments ``[a, b)`` over bins ``k0 .. k1`` each, in proportion to their overlap (the bins of
        one segment are distinct; segments are added in order, as one segment at a time would)."""
        w = self._width_s
        cnt = k1 - k0 + 1
        # chunks of segments whose (segment, bin) x links temporaries stay near 2 M values
        per = max(1, (1 << 21) // max(vals.shape[1], 1))
        ends = np.cumsum(cnt)
        lo = 0
        while lo < len(cnt):
            hi = max(lo + 1, int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + per, side="right")))
            c = cnt[lo:hi]
            seg = np.repeat(np.arange(hi - lo), c)
            kk = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c) + k0[lo:hi][seg]
            overlap = np.minimum((kk + 1) * w, b[lo:hi][seg]) - np.maximum(kk * w, a[lo:hi][seg])
            frac = np.clip(overlap, 0.0, None) / (b[lo:hi] - a[lo:hi])[seg]
            add_rows_in_order(self._bins, kk, frac[:, None] * vals[lo:hi][seg])
            lo = hi

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

    def add_record(self, t: float, rec) -> None:
        """Add a recorded op's link statistics (a :class:`sim.engine.memo.Record`), shifted to start at ``t`` (vectorised over segments)."""
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
        if self.fixed and t > MAX_TIME_BINS * self._width_s * (1 + 1e-12):
            check_bin_count(self._width_s, t)  # refuses: bounded memory, one clear line
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


def add_rows_in_order(out: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> None:
    """``out[idx[i]] += rows[i]`` for every ``i`` in order (as ``np.add.at``, the same float sums bit for
    bit), with repeated indices *consecutive* in ``idx``. ``rows`` is used as scratch (overwritten).

    ``np.add.at`` over rows is slow; here each run of equal indices is summed onto its row in order
    (``np.add.accumulate`` is sequential), or, where the runs are short, the j-th members of all runs are
    added at once (distinct indices), for j = 0, 1, ...: at most ~sqrt(len(idx)) numpy calls.

    Examples
    --------
    >>> out = np.zeros((3, 2)); add_rows_in_order(out, np.array([0, 0, 2]), np.ones((3, 2))); out.tolist()
    [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    """
    m = len(idx)
    if m == 0:
        return
    if m == 1:
        out[idx[0]] += rows[0]
        return
    start = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    if len(start) == m:   # distinct indices: one buffered add
        out[idx] += rows
        return
    size = np.diff(np.r_[start, m])
    if len(start) <= int(size.max()):   # few long runs: one sequential sum per run
        for s0, n in zip(start.tolist(), size.tolist(), strict=True):
            k = idx[s0]
            if n == 1:
                out[k] += rows[s0]
            else:
                # ((out + r0) + r1) + ...: one in-place add per row, in order, as repeated += would
                # (np.add.accumulate along the rows gives the same sums, 3-7x slower on 256 x 600-2,500)
                acc = out[k] + rows[s0]
                for j in range(s0 + 1, s0 + n):
                    acc += rows[j]
                out[k] = acc
        return
    pos = np.arange(m) - np.repeat(start, size)
    for j in range(int(size.max())):
        sel = np.flatnonzero(pos == j)
        out[idx[sel]] += rows[sel]


class Meter:
    """Drive a :class:`~sim.network.flow_network.FlowNetwork` completion by completion, handing each
    constant-rate stretch to a :class:`LinkStats` (for callers without an engine, e.g. :mod:`sim.flows`).

    Parameters
    ----------
    network : FlowNetwork
    stats : LinkStats

    Examples
    --------
    >>> from sim.network.flow_network import FlowNetwork
    >>> net = FlowNetwork(np.array([100.0])); meter = Meter(net, LinkStats(net.capacity, bin_s=1.0))
    >>> _ = net.add_flows(0.0, np.array([0, 1, 2]), np.array([0, 0]), np.array([50.0, 150.0]))
    >>> meter.advance(np.inf).tolist(), meter.stats.peak_rate.tolist(), meter.stats.busy90_s.tolist()
    ([0, 1], [100.0], [2.0])
    """

    def __init__(self, network, stats: LinkStats) -> None:
        self.net = network
        self.stats = stats
        self.last_t = float(network.now_s)
        self.last_bytes = np.array(network.link_bytes, dtype=np.float64)

    def advance(self, t: float) -> np.ndarray:
        """Move the network to ``t`` (to its last completion when ``t`` is inf); the finished flow ids."""
        net, done = self.net, []
        while net.num_active or net.has_completions:
            t_next = net.next_completion_s()
            if t_next > t:
                break
            done.append(net.advance(t_next))
            self._account(t_next)
        if math.isfinite(t):
            done.append(net.advance(t))
            self._account(t)
        return np.concatenate(done).astype(np.int64) if done else np.zeros(0, dtype=np.int64)

    def _account(self, t: float) -> None:
        row = self.stats.dense_row(self.last_t, t)
        cur = self.net.link_bytes
        if row is not None:
            np.subtract(cur, self.last_bytes, out=row)
        np.copyto(self.last_bytes, cur)
        self.last_t = t
