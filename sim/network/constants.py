"""The tolerances of the flow network, shared by the numpy solver, its compiled twin and the stepping.

Examples
--------
>>> SHARE_RTOL < TIME_RTOL
True
"""

from __future__ import annotations

__all__ = ["HEAP_MIN_INCIDENCES", "SHARE_RTOL", "THETA_RTOL", "TIME_RTOL"]

#: relative tolerance when comparing fair shares (ties of float rounding are ties)
SHARE_RTOL = 1e-12
#: completions within this fraction of a step (or a few ulps of the clock) are simultaneous
TIME_RTOL = 1e-9
#: a rate within this fraction below the re-solve level theta may still change (float rounding)
THETA_RTOL = 1e-9
#: solves of this many link incidences or more run the heap water-filling (:mod:`sim.network.maxmin_heap`):
#: at least ``sim.network.maxmin.JIT_MIN_INCIDENCES``, so such a solve always runs compiled where numba loads
HEAP_MIN_INCIDENCES = 250_000
