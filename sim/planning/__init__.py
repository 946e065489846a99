"""sim.planning: what each collective sends (pure functions, no network): logical rings and trees
(:mod:`sim.planning.logical`), NCCL's cost model (:mod:`sim.planning.tuning`) and the transfer plans
(:mod:`sim.planning.collectives`).

Import the modules themselves; the package exports nothing of its own.
"""

__all__: list[str] = []
