"""collsim traces: the one Parquet trace schema (SPEC §3), readers of measured formats, synthesis, and
characterisation.

Public API (SPEC §9): :func:`read_trace`, :func:`write_trace`, :func:`ingest`, :func:`synthesize`.
Every error on bad input is a :class:`TraceError`, under collsim's root :class:`CollsimError` (a
``ValueError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from traces.errors import CollsimError, TraceError

if TYPE_CHECKING:
    import pandas as pd

# The schema and I/O (pandas, pyarrow) load on first use, so importing the leaf `traces.errors` (as every
# package does for collsim's error root) does not import pandas.
_LAZY = {"list_builtin": "traces.builtin", "read_trace": "traces.io", "resolve_trace_path": "traces.io",
         "write_trace": "traces.io", "OPS": "traces.schema", "empty_trace": "traces.schema",
         "new_metadata": "traces.schema", "validate": "traces.schema"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'traces' has no attribute {name!r}")


__all__ = [
    "OPS",
    "CollsimError",
    "TraceError",
    "empty_trace",
    "ingest",
    "list_builtin",
    "new_metadata",
    "read_trace",
    "resolve_trace_path",
    "synthesize",
    "validate",
    "write_trace",
]


def ingest(paths: str | Path | list[str | Path], format: str = "auto", **options: Any) -> pd.DataFrame:
    """Read measured traces (NCCL logs, Inspector, profiler, Kineto, PARAM) into one §3 frame.

    See :func:`traces.readers.ingest` for parameters; imported lazily so the CLI starts fast.
    """
    from traces.readers import ingest as _ingest

    return _ingest(paths, format=format, **options)


def synthesize(model: str, **plan: Any) -> pd.DataFrame:
    """Synthesize a §3 trace for a model and parallelism plan; see :func:`traces.synth.synthesize`."""
    from traces.synth import synthesize as _synthesize

    return _synthesize(model, **plan)
