"""``sim.simulate(..., model=...)``: the flow tier, the analytical tier, or both side by side."""

from __future__ import annotations

from typing import Any

from sim.errors import SimError

__all__ = ["MODELS", "simulate_model"]

#: Values of ``model``.
MODELS = ("flow", "analytical", "both")


def simulate_model(model: str, trace_df, topology, algo: str, routing: str, seed: int, options: dict[str, Any]):
    """Run the analytical tier (``"analytical"``) or both tiers (``"both"``).

    With ``"both"`` the flow tier's Result is returned with ``tiers`` (one row per collective, the columns
    of :data:`sim.analytical.result.TIER_COLUMNS`) and summary keys ``analytical_makespan_s``,
    ``analytical_wall_s``, ``tier_disagreement_p50`` / ``_max`` (flow / analytical - 1 per collective).

    Raises
    ------
    SimError
        For an unknown model or option.
    """
    from sim.analytical.result import compare_tiers
    from sim.analytical.tier import simulate_analytical
    from sim.replay import OPTIONS, simulate

    if model not in MODELS:
        raise SimError(f"model {model!r} is not one of: {', '.join(MODELS)}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise SimError(f"unknown simulate option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
    if algo not in ("auto", "ring", "tree", "direct"):
        raise SimError(f"algo {algo!r} is not one of: auto, ring, tree, direct")
    if routing not in ("ecmp", "spray", "single"):
        raise SimError(f"routing {routing!r} is not one of: ecmp, spray, single")
    analytical = simulate_analytical(trace_df, topology, algo=algo, routing=routing, seed=seed, **options)
    if model == "analytical":
        return analytical
    flow = simulate(trace_df, topology, algo=algo, routing=routing, seed=seed, **options)
    tiers = compare_tiers(flow.collectives, analytical.collectives)
    flow.tiers = tiers
    dis = tiers["disagreement"].dropna()
    flow.summary.update(model="both", analytical_makespan_s=analytical.summary["makespan_s"],
                        analytical_ideal_makespan_s=analytical.summary["ideal_makespan_s"],
                        analytical_wall_s=analytical.summary["sim_wall_s"],
                        tier_disagreement_p50=float(dis.median()) if len(dis) else None,
                        tier_disagreement_max=float(dis.max()) if len(dis) else None)
    return flow
