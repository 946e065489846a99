"""The event core of the replay, on simpy: one module per concept.

``clock`` (the simpy environment, priorities of an instant), ``log`` (what a replay produced), ``workload`` (rank programs over op
instances, built from a trace), ``prepared`` (an op's transfers and routes, the engine's input),
``csr`` (CSR helpers), ``paths`` (the engine's path table), ``stats`` (per-link statistics, their one
owner), ``memo`` (records of isolated ops), ``materialise`` (a replayed op turned explicit on a conflict),
``flowlog`` (the flows in flight, handed to sinks when final), ``netproc`` (the network as a process), ``transfers`` (transfers of
running ops), ``engine`` (rank programs, op starts, memoisation: :class:`~sim.engine.engine.Engine`).
"""

__all__: list[str] = []
