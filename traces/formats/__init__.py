"""traces.formats."""
