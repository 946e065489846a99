"""The topology package's error type (a :class:`traces.errors.CollsimError`).

``traces.errors`` is a leaf module that imports nothing: the one module of another package that
topologies may import (``docs/architecture.md``).
"""

from traces.errors import CollsimError

__all__ = ["TopologyError"]


class TopologyError(CollsimError):
    """Bad topology input: a parameter, YAML field or graph that cannot be used. The message names it."""
