"""collsim's exception root and the trace package's error type: a leaf module with no imports.

Every error collsim raises on bad input is a :class:`CollsimError`, itself a ``ValueError`` (SPEC §9), in
one of three families: :class:`TraceError` (here, re-exported by :mod:`traces.schema`),
:class:`topologies.errors.TopologyError` and :class:`sim.errors.SimError`. The CLI turns any of them
into one ``simrun: error: ...`` line and exit code 2.

The root lives in this leaf module because the three packages may not import each other (traces and
topologies never import sim, nor each other); the one documented exception is that any package may
import ``traces.errors``, which imports nothing (``docs/architecture.md``, ``tests/test_architecture.py``).

Examples
--------
>>> issubclass(TraceError, CollsimError) and issubclass(CollsimError, ValueError)
True
"""

__all__ = ["CollsimError", "TraceError"]


class CollsimError(ValueError):
    """Bad input to collsim (a file, line, field, parameter or option that cannot be used).

    The message names what was wrong and where; ``except CollsimError`` catches every family.
    """


class TraceError(CollsimError):
    """Bad trace input: a file, line or field that cannot be used. The message names it."""
