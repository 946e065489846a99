"""A module imported on first use: ``pd = lazy_module("pandas")`` in a module that needs pandas only in some
functions.

``simrun ingest`` of an NCCL log must not pay for importing pandas (~0.5 s of CPU per new process); the
modules it loads (the schema, the checks, the format registry and every format's detector) use pandas only
for the frames of the Python API. Such a module binds ``pd`` to a :class:`LazyModule`; the first attribute
read (``pd.DataFrame``) imports pandas, so the code reads as with a plain import.

A leaf module (standard library only).

Examples
--------
>>> json = lazy_module("json")
>>> json.dumps([1])
'[1]'
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "lazy_module"]


class LazyModule:
    """Stands for the module ``name`` and imports it when an attribute is first read."""

    def __init__(self, name: str):
        self._lazy_name = name
        self._lazy_module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_lazy_"):  # not set yet (copy, pickle): never import for these
            raise AttributeError(attr)
        module = self._lazy_module
        if module is None:
            module = self._lazy_module = importlib.import_module(self._lazy_name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"


def lazy_module(name: str) -> LazyModule:
    """A stand-in for ``import name`` that imports it on first attribute access."""
    return LazyModule(name)
