"""The simulator package's error types, under collsim's root :class:`~traces.errors.CollsimError`."""

from traces.errors import CollsimError

__all__ = ["CollsimError", "OptionError", "SimError"]


class SimError(CollsimError):
    """Bad simulation input (trace and topology do not fit, unknown option). The message names it."""


class OptionError(SimError):
    """A simulator option with a wrong name, type or value (:class:`sim.options.SimOptions`)."""
