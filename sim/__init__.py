"""collsim simulator: NCCL-style collectives replayed as flows over a topology (SPEC §5, §6, §9)."""

from __future__ import annotations

from sim.errors import SimError

__all__ = ["SimError"]
