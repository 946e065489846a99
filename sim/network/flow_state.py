"""What a caller may read of a :class:`~sim.network.flow_network.FlowNetwork`: its state and queries.

:class:`FlowNetworkState` is a mixin of ``FlowNetwork``: the read-only accessors over the network's
links and flows (capacities, bytes carried, counts, per-flow times, rates, loads, bytes left). The events
that change the state (``add_flows``, ``advance``, ``set_capacity``) are in :mod:`sim.network.flow_network`.

Public state and accessors (arrays indexed by link id or by flow id; do not write to them):

``link_bytes`` (float64 [links])
    cumulative bytes carried per link up to ``now_s``. Per-link statistics (peaks, time bins, time above
    90 %) are kept by whoever drives the network (:class:`sim.engine.stats.LinkStats`, the one owner),
    from the increments of ``link_bytes`` between events.
``capacity`` (float64 [links])
    current capacity; :meth:`~sim.network.flow_network.FlowNetwork.set_capacity` changes it at ``now_s`` (0 = link down: flows
    crossing it stall at rate 0 until it comes back).
``finish_s``, ``start_s`` (float64 [flows])
    per flow id, the only per-flow record kept for the whole run (16 bytes a flow); ``finish_s`` is NaN
    while the flow is in flight, else the time its last byte was sent. With ``keep_flow_times=False``
    nothing per flow outlives the flow: these two raise, and ``last_finish_s`` (float64, aligned with the
    ids the last :meth:`~sim.network.flow_network.FlowNetwork.advance` returned) gives the finish times instead.
``now_s``, ``num_flows``, ``num_active``, ``peak_active``, ``has_completions``, ``slots_allocated``,
``stats``, ``active_flows()``, ``link_load_bytes_per_s()``, ``remaining_bytes(ids)``
    clock, counts, current rates, loads and bytes left: see each one's docstring.
"""

from __future__ import annotations

import numpy as np

from sim.errors import SimError
from sim.network.arrays import GrowBuffer

__all__ = ["FlowNetworkState"]


class FlowNetworkState:
    """The read-only accessors of :class:`~sim.network.flow_network.FlowNetwork` (a mixin, no state of its own).

    It reads the attributes ``FlowNetwork.__init__`` sets (``_cap``, ``_bytes``, ``_live``, ``_start``,
    ``_finish``, ``_pending``, ``num_links``) and re-solves through ``FlowNetwork._solve_if_dirty`` before
    reporting rates.

    Examples
    --------
    >>> from sim.network.flow_network import FlowNetwork
    >>> net = FlowNetwork(np.array([100.0, 50.0]))
    >>> ids = net.add_flows(0.0, np.array([0, 2]), np.array([0, 1]), np.array([80.0]))
    >>> net.num_active, net.link_load_bytes_per_s().tolist()
    (1, [50.0, 50.0])
    """

    @property
    def capacity(self) -> np.ndarray:
        """Current capacity of each (public) link."""
        return self._cap[: self.num_links]

    @property
    def link_bytes(self) -> np.ndarray:
        """Cumulative bytes carried per (public) link up to ``now_s``."""
        return self._bytes[: self.num_links]

    @property
    def num_flows(self) -> int:
        """Flows ever added."""
        return self._num_flows

    @property
    def num_active(self) -> int:
        """Flows in flight."""
        return self._live.n_flows

    @property
    def slots_allocated(self) -> int:
        """Rows of the slot arrays of the flows in flight (they grow with the flows alive at once)."""
        return self._live.alive.size

    @property
    def has_completions(self) -> bool:
        """True when finished flows wait to be returned by :meth:`advance`."""
        return bool(self._pending)

    @property
    def finish_s(self) -> np.ndarray:
        """Time the last byte of each flow was sent (NaN while in flight), indexed by flow id."""
        return self._kept(self._finish).view

    @property
    def start_s(self) -> np.ndarray:
        """Start time of each flow, indexed by flow id."""
        return self._kept(self._start).view

    @staticmethod
    def _kept(buffer: GrowBuffer | None) -> GrowBuffer:
        if buffer is None:
            raise SimError("FlowNetwork(keep_flow_times=False) keeps no per-flow times: use last_finish_s")
        return buffer

    def active_flows(self) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the flows in flight (increasing) and their current max-min rates (bytes/s)."""
        self._solve_if_dirty()
        return self._live.rates_by_id()

    def link_load_bytes_per_s(self) -> np.ndarray:
        """Current load of each link: the sum of the rates of the flows crossing it."""
        self._solve_if_dirty()
        return self._live.load[: self.num_links].copy()

    def remaining_bytes(self, flow_ids: np.ndarray) -> np.ndarray:
        """Bytes the flows ``flow_ids`` (in flight) have left to send at ``now_s``."""
        self._solve_if_dirty()
        return self._live.remaining_bytes(flow_ids, self.now_s)
