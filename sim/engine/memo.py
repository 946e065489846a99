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

Across keys (communicators): ops with different keys may make exactly the same traffic, e.g. two
communicators over the same GPUs in the same order, or decode iterations whose ops land on another
communicator of the same ranks. Their *traffic class* (``Workload.op_class``: the key with the
communicator's members and ring order in place of its name) is equal. The rule is exactness, not
similarity: a record of one key replays an op of another key only when the two prepared ops are equal
array for array (:func:`same_prepared`: the same transfers, dependencies, delays, bytes, latencies and
links, so the same max-min problem over the same links) and the op starts with its footprint free, as for
its own key. Traffic that is equal up to a relabelling of GPUs or links (another TP group's servers,
another ECMP choice) uses other links: it is a different problem on a different part of the fabric, and
it is not reused (:class:`Aliases`).
"""

from __future__ import annotations

import hashlib
import weakref
from collections import Counter
from dataclasses import dataclass, field, fields

import numpy as np

from sim.engine.stats import MIN_SEGMENT_REL

__all__ = ["Aliases", "InFlight", "Record", "Recording", "footprints_overlap", "prepared_digest", "same_prepared"]


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


def prepared_digest(prep) -> bytes:
    """A 128-bit digest of a prepared op's arrays and names (equal prepared ops have equal digests)."""
    h = hashlib.blake2b(digest_size=16)
    for f in fields(prep):
        v = getattr(prep, f.name)
        if v is None:
            h.update(b"none")
        elif isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode() + str(v.shape).encode())
            h.update(np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())
        h.update(b"|")
    return h.digest()


def same_prepared(a, b) -> bool:
    """True when two prepared ops are equal field for field (arrays element for element).

    Examples
    --------
    >>> from sim.engine.prepared import PreparedOp
    >>> z = np.zeros(1, np.int64)
    >>> def op(link):
    ...     return PreparedOp("direct", "Simple", np.zeros(1), z, np.zeros(2, np.int64), z[:0], np.array([0, 1]),
    ...                       np.array([8.0]), np.zeros(1), z, z, z + 1, np.array([0, 1]), np.array([link]))
    >>> same_prepared(op(3), op(3)), same_prepared(op(3), op(4))
    (True, False)
    """
    if a is b:
        return True
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if x is None or y is None or x.dtype != y.dtype or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


class Aliases:
    """Records a key's op can be replayed from when it is another key of the same traffic class.

    Only classes with more than one key are tracked (``keys_per_class``); a record is found by its prepared
    op's digest and accepted only after :func:`same_prepared` confirms it, so a digest collision can never
    replay the wrong traffic.

    Parameters
    ----------
    keys_per_class : Counter
        Distinct op keys of each class in the workload.

    Examples
    --------
    >>> from sim.engine.prepared import PreparedOp
    >>> z = np.zeros(1, np.int64)
    >>> p = PreparedOp("direct", "Simple", np.zeros(1), z, np.zeros(2, np.int64), z[:0], np.array([0, 1]),
    ...                np.array([8.0]), np.zeros(1), z, z, z + 1, np.array([0, 1]), np.array([3]))
    >>> a = Aliases(Counter({"c": 2})); a.add("c", "tp_a", p); a.find("c", p)
    'tp_a'
    >>> a.drop("tp_a"); a.find("c", p) is None
    True
    """

    def __init__(self, keys_per_class: Counter) -> None:
        self.multi = {c for c, n in keys_per_class.items() if n > 1}
        self._by_digest: dict = {}       # (class, digest) -> (record key, its prepared op)
        self._of_key: dict = {}          # record key -> its (class, digest)
        self._digests: dict[int, bytes] = {}   # id(prepared op) -> digest, while the object lives

    def _digest(self, prep) -> bytes:
        d = self._digests.get(id(prep))
        if d is None:
            d = self._digests[id(prep)] = prepared_digest(prep)
            weakref.finalize(prep, self._digests.pop, id(prep), None)
        return d

    def add(self, cls, key, prep) -> None:
        """``key``'s record was made from ``prep``."""
        if cls not in self.multi or prep is None:
            return
        entry = (cls, self._digest(prep))
        self._by_digest.setdefault(entry, (key, prep))
        self._of_key[key] = entry

    def find(self, cls, prep):
        """The key of a record whose prepared op equals ``prep`` (None when there is none)."""
        if cls not in self.multi or not self._by_digest:
            return None
        hit = self._by_digest.get((cls, self._digest(prep)))
        if hit is None or not same_prepared(hit[1], prep):
            return None
        return hit[0]

    def drop(self, key) -> None:
        """``key``'s record is spent: it replays nothing more (its prepared op is released)."""
        entry = self._of_key.pop(key, None)
        if entry is not None and self._by_digest.get(entry, (None,))[0] == key:
            del self._by_digest[entry]
