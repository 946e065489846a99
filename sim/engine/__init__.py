"""sim.engine."""
