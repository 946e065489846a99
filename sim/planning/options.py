"""How to plan a collective: :class:`PlanOptions`, one value for the knobs of ``plan_collective``.

The collective itself (op, bytes, ranks, root, split, servers, logged rings, topology) stays in
``plan_collective``'s arguments; everything that says *how* NCCL would run it (algorithm, protocol,
channels, chunking, plan-size budgets, the machine the tuner sees) is a field here, checked once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.errors import SimError
from sim.planning import tuning

__all__ = ["PlanOptions"]

_ALIASES = {"channels": "nchannels"}


def _positive_int(name: str, value, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SimError(f"plan option {name}={value!r} must be an int >= 1")


@dataclass(frozen=True)
class PlanOptions:
    """Knobs of :func:`sim.planning.collectives.plan_collective`.

    Parameters
    ----------
    algo : str
        ``auto`` (NCCL's tuner), ``ring``, ``tree`` or ``direct``.
    proto : str, optional
        Force ``LL``, ``LL128`` or ``Simple`` (default: the tuner's choice).
    nchannels : int, optional
        Channels to use (default: NCCL's size rule up to ``max_channels``); for direct ops, the parts
        each pair's bytes are split into. ``channels`` is accepted as an alias.
    chunk_bytes : float, optional
        Pipelining grain (default: NCCL's chunk of the protocol).
    max_chunks : int, optional
        Most chunks per channel and step (default: rings ``DEFAULT_MAX_CHUNKS``; trees, chains, NVLS and
        PAT NCCL's chunk count).
    max_channels, max_transfers, max_pipeline_transfers : int
        Channel cap of NCCL's size rule; plan size budgets (``max_pipeline_transfers``: a pipelined plan
        with more chunk transfers than this is planned as three weighted pieces per edge, with the same
        critical path; see :func:`sim.planning.plan.assemble`).
    merge_nvlink_channels : bool
        Plan one channel for a communicator inside one server (same loads, fewer flows).
    model : sim.planning.tuning.CostModel, optional
        The machine the tuner sees (default: from the topology, else H100 defaults).
    pxn : bool, optional
        NCCL's PXN in the plan (:mod:`sim.planning.pxn`): ``None`` (NCCL's default,
        ``NCCL_P2P_PXN_LEVEL=2``) relays the sends of direct plans (AllToAll, Send/Recv, Gather/Scatter)
        whose peer has another local rank over NVLink to the server-mate with the peer's local rank, and
        a collective's sends where the fabric's rails require it (``rail_only``); ``True`` relays every
        plan's sends by the first rule; ``False`` never (``NCCL_PXN_DISABLE=1``). Needs the topology graph.

    Raises
    ------
    SimError
        A bad value, naming the option.

    Examples
    --------
    >>> PlanOptions(algo="ring", nchannels=2).replace(channels=4).nchannels
    4
    >>> PlanOptions(max_chunks=0)
    Traceback (most recent call last):
    ...
    sim.errors.SimError: plan option max_chunks=0 must be an int >= 1
    """

    algo: str = "auto"
    proto: str | None = None
    nchannels: int | None = None
    chunk_bytes: float | None = None
    max_chunks: int | None = None
    max_channels: int = tuning.DEFAULT_MAX_CHANNELS
    max_transfers: int = tuning.DEFAULT_MAX_TRANSFERS
    max_pipeline_transfers: int = tuning.DEFAULT_MAX_PIPELINE_TRANSFERS
    merge_nvlink_channels: bool = True
    model: tuning.CostModel | None = None
    pxn: bool | None = None

    def __post_init__(self) -> None:
        if self.algo not in ("auto", *tuning.ALGOS):
            raise SimError(f"plan option algo={self.algo!r} is not one of: auto, {', '.join(tuning.ALGOS)}")
        if self.proto is not None and self.proto not in tuning.PROTOS:
            raise SimError(f"plan option proto={self.proto!r} is not one of: {', '.join(tuning.PROTOS)}")
        _positive_int("nchannels", self.nchannels, True)
        _positive_int("max_chunks", self.max_chunks, True)
        for name in ("max_channels", "max_transfers", "max_pipeline_transfers"):
            _positive_int(name, getattr(self, name), False)
        if self.chunk_bytes is not None and not self.chunk_bytes > 0:
            raise SimError(f"plan option chunk_bytes={self.chunk_bytes!r} must be > 0")
        if self.pxn is not None and not isinstance(self.pxn, bool):
            raise SimError(f"plan option pxn={self.pxn!r} must be true, false or None (where rails require it)")
        if self.model is not None and not isinstance(self.model, tuning.CostModel):
            raise SimError("plan option model must be a sim.planning.tuning.CostModel")

    def replace(self, **changes: Any) -> PlanOptions:
        """A copy with some fields changed (``channels`` is ``nchannels``); unknown names are errors."""
        return PlanOptions.build(self, changes)

    @classmethod
    def build(cls, base: PlanOptions | None = None, changes: Mapping[str, Any] | None = None) -> PlanOptions:
        """``base`` (default: all defaults) with ``changes`` applied; ``None`` values leave a field as is
        unless the field itself defaults to ``None``.

        Raises
        ------
        SimError
            An unknown option name (listing the known ones) or a bad value.
        """
        base = base or cls()
        known = {f.name for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for key, value in (changes or {}).items():
            name = _ALIASES.get(key, key)
            if name not in known:
                raise SimError(f"unknown plan option {key!r} (known: {', '.join(sorted(known | set(_ALIASES)))})")
            if value is None and name in out:
                continue  # an alias given as None does not undo the name given
            out[name] = value
        return dataclasses.replace(base, **out) if out else base
