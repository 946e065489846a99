"""sim.engine: the event core that replays rank programs over the flow network (:mod:`sim.engine.core`).

Import the module itself; the package exports nothing of its own.
"""

__all__: list[str] = []
