"""topologies.builders: one module per fabric family (``fat_tree``, ``leaf_spine``, ``rails``), what they
share (``servers``) and the non-blocking reference (``ideal``). Use them through :mod:`topologies`.

Import the modules themselves; the package exports nothing of its own.
"""

__all__: list[str] = []
