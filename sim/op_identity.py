"""What an op's traffic depends on: its identity (:func:`op_keys`: equal keys make the same transfers over
the same routes), its traffic class (:func:`op_classes`: the same plan), and the per-communicator ECMP hash
base (:func:`flow_key_base`) both tiers route with.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np

from sim.engine.workload import OpTable


def flow_key_base(comm: str) -> int:
    """A stable per-communicator hash (crc32 of the name, 30 bits): NCCL opens its own connections (source
    ports) per communicator, so ECMP hashes each communicator's flows apart. Both tiers route with it.

    Examples
    --------
    >>> flow_key_base("ep") == flow_key_base("ep") != flow_key_base("tp0")
    True
    """
    return zlib.crc32(comm.encode()) & 0x3FFFFFFF


def op_keys(ops: OpTable, algo: str) -> list:
    """Identity of each op's traffic: ops with equal keys make the same transfers over the same routes."""
    f = ops.frame
    keys = []
    for i, (kind, comm, op, nb, root, src, dst) in enumerate(zip(
            f["kind"], f["comm"], f["op"], f["rank_bytes"], f["root"], f["src"], f["dst"], strict=True)):
        split = ops.splits[i]
        sk = None if split is None else zlib.crc32(np.ascontiguousarray(split).tobytes()) ^ split.size
        keys.append((kind, comm, op, int(nb), int(root), int(src), int(dst), sk, algo))
    return keys


def op_classes(ops: OpTable, algo: str, meta: Mapping) -> list:
    """Traffic class of each op (:attr:`sim.engine.workload.Workload.op_class`): its :func:`op_keys` key with
    the communicator's name replaced by what the plan depends on, its members in order and its logged ring
    orders. Ops of one class make the same plan; their routes differ only through the communicator's ECMP
    hash (:func:`flow_key_base`), which the engine checks by comparing the prepared ops.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"kind": ["coll"] * 3, "comm": ["a", "b", "c"], "op": ["AllReduce"] * 3,
    ...                   "rank_bytes": [8] * 3, "root": [-1] * 3, "src": [-1] * 3, "dst": [-1] * 3,
    ...                   "members": [np.array([0, 1]), np.array([0, 1]), np.array([2, 3])]})
    >>> c = op_classes(OpTable(f, [None] * 3, {}), "auto", {})
    >>> c[0] == c[1] != c[2]
    True
    """
    rings = meta.get("rings") or {}
    out = []
    for key, comm, members in zip(op_keys(ops, algo), ops.frame["comm"], ops.frame["members"], strict=True):
        ring = rings.get(comm)
        ring_key = None if ring is None else repr(ring)
        out.append((key[0], tuple(np.asarray(members).tolist()), ring_key, *key[2:]))
    return out


__all__ = ["flow_key_base", "op_classes", "op_keys"]
