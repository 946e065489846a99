"""sim.network: the max-min fair flow-level network (:mod:`sim.network.flow_network`) and its compiled
solver (:mod:`sim.network.maxmin_numba`).

Import the modules themselves; the package exports nothing of its own.
"""

__all__: list[str] = []
