"""What one replay produced (:class:`EngineLog`): per-op times, the flows, the per-link statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.engine.csr import csr_take
from sim.engine.paths import PathTable
from sim.engine.prepared import PreparedOp
from sim.engine.stats import LinkStats
from sim.engine.workload import Workload

__all__ = ["EngineLog"]


@dataclass
class EngineLog:
    """What one replay produced: per-op times, the flows and the per-link statistics.

    ``flow_*`` hold every flow (``flow_stride`` 1) or, when the engine streamed its flows to sinks, every
    ``flow_stride``-th flow in release order; ``n_flows`` counts them all. ``incast`` is the streamed
    incast table when the run computed one. ``prepare(op)`` gives an op's prepared op again.
    """

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
    memo_materialised: int = 0
    step_issue_s: np.ndarray | None = None   # when each step was issued (rank programs: ``workload``)
    workload: Workload | None = None
    n_flows: int = -1
    flow_stride: int = 1
    incast: object = None
    prepare: Callable[[int], PreparedOp] | None = None
    peak_live_flows: int = 0   # the most flow-log rows in use at once
    op_used_links: list | None = None   # per op started, :meth:`used_links` as the engine saw it (None: ask)

    def __post_init__(self) -> None:
        if self.n_flows < 0:
            self.n_flows = len(self.flow_path)

    def used_links(self, op: int) -> np.ndarray:
        """Sorted link ids that carried op ``op``'s flows (the links of its sub-flows that move bytes)."""
        if self.prepare is None or self.flow_stride == 1:   # every flow is in the log
            _, links = csr_take(self.paths.ptr, self.paths.links, np.unique(self.flow_path[self.flow_op == op]))
        elif self.op_used_links is not None and self.op_used_links[op] is not None:
            return self.op_used_links[op]   # the same links, kept by the engine (no second plan and route)
        else:
            prep = self.prepare(op)
            _, links = csr_take(prep.sub_link_ptr, prep.sub_link_idx, np.flatnonzero(prep.sub_bytes > 0))
        return np.unique(links).astype(np.int64)
