"""``sim.simulate(..., model="both")``: the flow tier's Result with the analytical tier beside it."""

from __future__ import annotations

from sim.options import MODELS

__all__ = ["MODELS", "with_tiers"]


def with_tiers(flow, analytical):
    """The flow tier's Result with the analytical tier beside it (``model="both"``).

    Adds ``tiers`` (one row per collective, the columns of :data:`sim.analytical.result.TIER_COLUMNS`) and
    the summary keys ``analytical_makespan_s``, ``analytical_ideal_makespan_s``, ``analytical_wall_s``,
    ``tier_disagreement_p50`` / ``_max`` (flow / analytical - 1 per collective).

    Parameters
    ----------
    flow, analytical : sim.results.result.Result
        The same trace, topology and options replayed by each tier.

    Returns
    -------
    sim.results.result.Result
        ``flow``, annotated.
    """
    from sim.analytical.result import compare_tiers

    tiers = compare_tiers(flow.collectives, analytical.collectives)
    flow.tiers = tiers
    dis = tiers["disagreement"].dropna()
    flow.summary.update(model="both", analytical_makespan_s=analytical.summary["makespan_s"],
                        analytical_ideal_makespan_s=analytical.summary["ideal_makespan_s"],
                        analytical_wall_s=analytical.summary["sim_wall_s"],
                        tier_disagreement_p50=float(dis.median()) if len(dis) else None,
                        tier_disagreement_max=float(dis.max()) if len(dis) else None)
    return flow
