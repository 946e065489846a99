"""The cases of the bad-input battery (issue 13), one module per area; ``CASES`` holds them all.

``benchmarks/bad_inputs.py`` runs them (fresh processes, memory-limited) and
``tests/test_hardening_battery.py`` runs each as a pytest test.
"""

from __future__ import annotations

from bad_inputs_cases import (
                              command_cases,
                              io_cases,
                              option_cases,
                              real_file_cases,
                              s24_cases,
                              topology_cases,
                              trace_cases,
                              unseen_cases,
)
from bad_inputs_cases.common import Case, Outcome

__all__ = ["CASES", "Case", "Outcome"]

#: Every case, by area: trace schema, topology, output safety, sizes and options, the newer commands, inputs
#: first seen in session 21, real files first read in session 22.
CASES: list[Case] = [*trace_cases.CASES, *topology_cases.CASES, *io_cases.CASES, *option_cases.CASES,
                     *command_cases.CASES, *unseen_cases.CASES, *real_file_cases.CASES,
                     *s24_cases.CASES]
