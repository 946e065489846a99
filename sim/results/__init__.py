"""sim.results: a run's tables and files: metrics (:mod:`sim.results.metrics`), incast events
(:mod:`sim.results.incast`), the :class:`~sim.results.result.Result` value and its files
(:mod:`sim.results.result`), plots and ``report.html`` (:mod:`sim.results.report`).

Import the modules themselves; the package exports nothing of its own.
"""

__all__: list[str] = []
