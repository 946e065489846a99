"""The analytical tier beside the flow tier: per-collective bounds from the same transfer plans, no event loop.

``simulate(trace, topo, model="analytical")`` (or ``simrun run --model analytical``) gives each collective's
time as the larger of its plan's critical path (alpha-beta along its longest chain) and its busiest link,
in the flow tier's Result shape; ``model="both"`` runs both tiers and adds ``Result.tiers``, one row per
collective with their disagreement. See ``docs/performance.md``.
"""

from __future__ import annotations

from sim.analytical.result import TIER_COLUMNS, compare_tiers
from sim.analytical.tier import simulate_analytical

__all__ = ["TIER_COLUMNS", "compare_tiers", "simulate_analytical"]
