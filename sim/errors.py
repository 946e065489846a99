"""The simulator package's error type."""


class SimError(ValueError):
    """Bad simulation input (trace and topology do not fit, unknown option). The message names it."""
