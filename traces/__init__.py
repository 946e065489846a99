"""collsim traces: the one Parquet trace schema (SPEC §3), readers of measured formats, synthesis, and
characterisation.

Public API (SPEC §9): :func:`read_trace`, :func:`write_trace`, :func:`ingest`, :func:`synthesize`.
Every error on bad input is a :class:`TraceError` (a ``ValueError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from traces.io import list_builtin, read_trace, resolve_trace_path, write_trace
from traces.schema import OPS, TraceError, empty_trace, new_metadata, validate

__all__ = [
    "OPS",
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
