"""Memo records of isolated ops: what an op did when it ran alone, to replay it shifted in time.

Max-min fair rates split over groups of flows that share no link, so an op whose flows never share a link
with another op's flows runs exactly as it would alone. An op's *footprint* is the set of links its routes
use. The engine (:mod:`sim.engine.engine`) records an op that ran start to end with no other op in flight
on its footprint (:class:`Recording` while it runs, :class:`Record` when it ends) under its identity
(``Workload.op_key``), and replays a later op with the same key that starts with its footprint free.

Records cost memory (per-segment link bytes and the op's flows), so the engine records only ops whose key
occurs again later in the run (counted from the workload before it starts), and once the last op of a key
has started and its replays have ended, the record is cut down to what later readers need
(:meth:`Record.spent`: duration and footprint; the ideal reference reuses the durations of NVLink-only ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.engine.stats import MIN_SEGMENT_REL

__all__ = ["InFlight", "Record", "Recording", "footprints_overlap"]


@dataclass(frozen=True)
class Record:
    """A memoised op: duration, per-segment link bytes (CSR, times from the op's start), per-link
    aggregates, and its flows (sub-flow of the prepared op, bytes, start / sent / end relative to the op's
    start)."""

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
    footprint: np.ndarray | None = None

    @classmethod
    def slim(cls, duration_s: float, footprint: np.ndarray | None = None) -> Record:
        """A record with a duration (and footprint) only: no link statistics, no flows.

        Examples
        --------
        >>> r = Record.slim(2e-6, np.array([3, 4])); r.duration_s, len(r.seg_a), len(r.flows[0])
        (2e-06, 0, 0)
        """
        none, no_ids = np.zeros(0), np.zeros(0, dtype=np.int64)
        return cls(duration_s, none, none, np.zeros(1, dtype=np.int64), no_ids, none, no_ids, none, none, none,
                   (no_ids, none, none, none, none), footprint)

    def spent(self) -> Record:
        """This record without its link statistics and flows (no op of its key is left to replay it)."""
        return Record.slim(self.duration_s, self.footprint)

    @classmethod
    def build(cls, duration_s: float, segments: list, cap: np.ndarray, flows: tuple,
              footprint: np.ndarray | None = None) -> Record:
        """A record from a :class:`Recording`'s segments ``(a, b, link ids, bytes)`` (times from the op's
        start), the per-link capacity (for the 90 % threshold) and the flow columns."""
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
        sliver = dur <= MIN_SEGMENT_REL * np.repeat(np.abs(seg_b), np.diff(seg_ptr)) + 1e-15
        rate = np.divide(seg_vals, dur, out=np.zeros_like(seg_vals), where=~sliver)
        link_idx, inv = np.unique(seg_idx, return_inverse=True)
        link_bytes = np.bincount(inv, weights=seg_vals, minlength=len(link_idx))
        peak = np.zeros(len(link_idx))
        np.maximum.at(peak, inv, rate)
        hot = rate >= 0.9 * cap[seg_idx] * (1 - 1e-9)
        busy = np.bincount(inv[hot], weights=dur[hot], minlength=len(link_idx))
        return cls(duration_s, seg_a, seg_b, seg_ptr, seg_idx, seg_vals, link_idx, link_bytes, peak, busy, flows,
                   footprint)


@dataclass
class Recording:
    """An op being recorded: its start, the link-byte segments seen so far (times from its start) and the
    log rows of its flows; ``alive`` turns False when another op starts on its footprint."""

    t0: float
    segments: list = field(default_factory=list)
    flow_ids: list = field(default_factory=list)
    alive: bool = True


@dataclass
class InFlight:
    """An op in flight, as memoisation sees it: its footprint, whether it is replayed from a record
    (``virtual``; then ``t0`` and ``key`` say from when and which record), and its recording if any."""

    footprint: np.ndarray
    virtual: bool
    rec: Recording | None
    t0: float = 0.0
    key: object = None
    rows: np.ndarray | None = None   # flow-log rows of a replayed op's flows
    prep: object = None              # its PreparedOp


def footprints_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """True when two sorted link-id arrays share an element.

    Examples
    --------
    >>> footprints_overlap(np.array([1, 4, 7]), np.array([2, 7])), footprints_overlap(np.array([1]), np.array([2]))
    (True, False)
    """
    if len(a) == 0 or len(b) == 0:
        return False
    pos = np.searchsorted(a, b)
    pos[pos == len(a)] = len(a) - 1
    return bool((a[pos] == b).any())
