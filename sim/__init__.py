"""collsim simulator: NCCL-style collectives replayed as flows over a topology (SPEC §5, §6, §9).

Public API: :func:`simulate` (a trace over a topology -> :class:`Result`), :func:`simulate_flows` (raw flows,
SPEC §5), :class:`Result`, :class:`SimOptions` (every option of ``simulate``, checked), and the errors
:class:`SimError`, :class:`OptionError` under collsim's root :class:`CollsimError`. The heavy modules load on first use, so ``import sim`` (and
the CLI) stays quick.
"""

from __future__ import annotations

from typing import Any

from sim.errors import CollsimError, OptionError, SimError
from sim.options import SimOptions

__all__ = ["CollsimError", "OptionError", "Result", "SimError", "SimOptions", "simulate", "simulate_flows"]

_LAZY = {"simulate": ("sim.replay", "simulate"), "simulate_flows": ("sim.flows", "simulate_flows"),
         "Result": ("sim.results.result", "Result")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
