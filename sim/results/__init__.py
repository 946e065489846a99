"""sim.results."""
