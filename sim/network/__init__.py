"""sim.network."""
