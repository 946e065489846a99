"""One replay of a workload on the engine (:func:`run_engine`): the ops prepared as they start
(:class:`LazyOps` over a :class:`sim.prepare.Preparer`), the flow network and the engine built and run;
and the records of NVLink-only ops the ideal run reuses (:func:`nvlink_records`).
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from typing import Protocol

import networkx as nx
import numpy as np

from sim.engine.memo import Record
from sim.engine.prepared import PreparedOp


class OpSource(Protocol):
    """What a run needs of a :class:`sim.prepare.Preparer`: each op prepared when first asked, the prepared
    ops kept by key, and the graph the routes were made on."""

    graph: nx.Graph
    cache: Mapping

    def take(self, op: int) -> PreparedOp:
        """The prepared op ``op``."""
        ...


class LazyOps(Sequence):
    """The prepared ops of a run, prepared when the engine first asks (:meth:`Preparer.take`).

    Parameters
    ----------
    preparer : OpSource
        A :class:`sim.prepare.Preparer`.
    n_ops : int
    """

    def __init__(self, preparer: OpSource, n_ops: int) -> None:
        self.preparer = preparer
        self.n_ops = n_ops

    def __len__(self) -> int:
        return self.n_ops

    def __getitem__(self, op):
        if isinstance(op, slice):
            return [self[i] for i in range(*op.indices(self.n_ops))]
        return self.preparer.take(int(op))


def nvlink_records(records: Mapping, preparer: OpSource, router) -> dict:
    """Records of ops that used NVLink only, for the ideal run (durations only).

    The non-blocking reference keeps every NVLink cable as it is, and plans are shared, so an op that
    crosses no network link runs the same on both fabrics: its isolated duration carries over exactly.
    The ideal run keeps no link statistics or flow log, so only the duration is kept.
    """
    kinds = router.links["kind"].to_numpy()
    out = {}
    for key, rec in records.items():
        fp = rec.footprint
        if fp is None:   # a record made without its footprint: the prepared op has it
            prep = preparer.cache.get(key)
            fp = None if prep is None else prep.footprint
        if fp is None or len(fp) == 0:
            continue
        if (kinds[fp] == "nvlink").all():
            out[key] = Record.slim(rec.duration_s, fp)
    return out


def run_engine(workload, preparer: OpSource, router, *, timing: str, completion_quantile: float,
               bin_s: float | None, memoize: bool, progress=None, label=None, link_stats: bool = True,
               memo: dict | None = None, processes=(), flows: str | None = None, sinks=()):
    """One replay of ``workload`` over the routes of ``router``: ops prepared as they start, the engine run.

    Flows are streamed, not kept: with ``link_stats`` (the real fabric) incast is detected as flows
    finish (:class:`sim.results.incast_stream.IncastStream`, the log's ``incast``) and the log keeps a
    bounded sample of the flows (for ``timeline.json``); the ideal reference keeps none. ``flows``
    (``keep`` / ``sample`` / ``none``) overrides that; ``sinks`` receive every finished flow too.

    Returns
    -------
    sim.engine.engine.EngineLog
    """
    from sim.engine.engine import Engine
    from sim.network.flow_network import FlowNetwork
    from sim.results.incast_stream import IncastStream

    cap = router.links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
    prepared = LazyOps(preparer, workload.n_ops)   # prepared as ops start, dropped after their key's last
    names = list(zip(router.links["src"].astype(str), router.links["dst"].astype(str), strict=True))
    # the engine reads each advance's last_finish_s: no per-flow times kept over the whole run
    net = FlowNetwork(cap, completion_quantile=completion_quantile, keep_flow_times=False)
    engine = Engine(workload, prepared, net, timing=timing,
                    bin_s=bin_s, memoize=memoize, memo=memo, link_stats=link_stats, progress=progress,
                    label=label, processes=processes, link_names=names,
                    flows=flows or ("sample" if link_stats else "none"),
                    sinks=[*([IncastStream(router.links, preparer.graph)] if link_stats else []), *sinks])
    log = engine.run()
    # the engine, its network and clock point at each other (callbacks): collect them now, before the
    # next run allocates its own, so two runs' per-flow arrays never coexist
    del engine
    gc.collect()
    return log


__all__ = ["LazyOps", "OpSource", "nvlink_records", "run_engine"]
