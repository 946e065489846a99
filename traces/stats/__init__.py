"""Characterisation tables of a trace (SPEC §7): op counts, transfer sizes, request sizes, bandwidth.

Pure functions on a §3 DataFrame, the tables of a measurement study of collective traffic: which operations a
workload issues and how often, how large they are, and how bursty the bytes it issues are over time. Every
table can be split per communicator (``by_comm=True`` puts a ``comm`` column first).

Definitions (SPEC §7):

``calls``
    Collective operations. A collective is one call per (``comm``, ``seq``) group, however many ranks logged
    it. A Send/Recv is one call per matched pair (the k-th Send a→b on a comm with the k-th Recv b←a); the
    pair is counted on the ``Send`` row and on the ``Recv`` row, so each of those rows reads as "point-to-point
    operations". A Send or Recv whose partner is absent still counts as one call, and is also counted in
    ``partial_calls`` (so are collectives that fewer than ``nranks`` ranks logged).
``rank_calls``
    Rows of the trace (one per op per rank).
``bytes_total``
    Sum of ``bytes`` over rows: the payload the ranks handed to NCCL, not bytes on the wire.

Modules: :mod:`~traces.stats.counts` (op counts, Send/Recv pairs), :mod:`~traces.stats.sizes` (sizes and
request-size bins), :mod:`~traces.stats.bandwidth` (bytes over time, burstiness), :mod:`~traces.stats.comms`
(per communicator), :mod:`~traces.stats.tables` (what they share). Everything is importable from here.
"""

from traces.stats.bandwidth import (
                                    MAX_WINDOWS,
                                    MIN_AUTO_WINDOW_S,
                                    TARGET_WINDOWS,
                                    Bandwidth,
                                    bandwidth_by_comm,
                                    bandwidth_over_time,
                                    nice_window_s,
)
from traces.stats.comms import comm_summary
from traces.stats.counts import op_counts, p2p_pairs
from traces.stats.sizes import size_bins, size_histogram, size_stats

__all__ = [
    "MAX_WINDOWS",
    "MIN_AUTO_WINDOW_S",
    "TARGET_WINDOWS",
    "Bandwidth",
    "bandwidth_by_comm",
    "bandwidth_over_time",
    "comm_summary",
    "nice_window_s",
    "op_counts",
    "p2p_pairs",
    "size_bins",
    "size_histogram",
    "size_stats",
]
