"""Compatibility names of the former one-file engine (``sim.engine.core``); the owners are the modules
named in :mod:`sim.engine`."""

from __future__ import annotations

from sim.engine.csr import csr_take, reverse_csr
from sim.engine.engine import Engine, EngineLog
from sim.engine.memo import Record
from sim.engine.paths import PathTable
from sim.engine.prepared import PreparedOp
from sim.engine.stats import LinkStats
from sim.engine.workload import Workload

__all__ = ["Engine", "EngineLog", "LinkStats", "PathTable", "PreparedOp", "Record", "Workload", "csr_take",
           "reverse_csr"]
