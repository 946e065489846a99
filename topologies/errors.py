"""The topology package's error type."""


class TopologyError(ValueError):
    """Bad topology input: a parameter, YAML field or graph that cannot be used. The message names it."""
