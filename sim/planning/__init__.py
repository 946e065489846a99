"""sim.planning."""
