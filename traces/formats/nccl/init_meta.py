"""What the Init side of the logs gives the trace's metadata: the host order, each instance's host and
device, the GPUs per server, and the rings printed at init tied to their communicators.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traces.formats.nccl import comms as C
from traces.formats.nccl.scan import FileScan


def host_dev(instances: list[C.Instance]) -> tuple[np.ndarray, np.ndarray]:
    """Host and device of each instance code (the instance key holds the row's host)."""
    host = np.array([i.key[0] for i in instances], dtype=object)
    return host, np.array([max(i.identity[2], -1) for i in instances], dtype=np.int64)


def order_hosts(host_first: dict[str, int], inits: list[dict[str, Any]]) -> dict[str, int]:
    """Host -> its place in the order of first appearance (a COLL line or an Init line, by position).

    Examples
    --------
    >>> order_hosts({"b": 5, "a": 9}, [{"host": "a", "pos": 1}])
    {'a': 0, 'b': 1}
    """
    first = dict(host_first)
    for r in inits:
        first[r["host"]] = min(first.get(r["host"], r["pos"]), r["pos"])
    return {h: k for k, h in enumerate(sorted(first, key=first.__getitem__))}


def gpus_per_node(instances: list[C.Instance]) -> int:
    """GPUs per server: the most distinct instance identities (beyond the host) seen on one host, or the
    largest local rank count an Init line printed, whichever is larger; at least 1."""
    per_host: dict[str, set[tuple[int, int]]] = {}
    local = 0
    for inst in instances:
        if inst.host:
            per_host.setdefault(inst.host, set()).add(inst.identity[1:])
        local = max(local, inst.local_ranks or 0)
    return max([local, 1, *(len(v) for v in per_host.values())])


def ring_metadata(scans: list[FileScan], instances: list[C.Instance], members: dict[str, list[int]],
                  notes: list[str]) -> tuple[dict[str, list[list[int]]], dict[str, list[int]]]:
    """Attach ring lines (printed by comm rank 0 during init) to the nearest rank-0 instance of the process."""
    found: dict[str, dict[int, tuple[list[int], bool]]] = {}
    lost = 0
    for f, s in enumerate(scans):
        for r in s.rings:
            pos = C.pos_key(f, r["line"])
            top = max(r["ranks"], default=-1)
            cands = [i for i in instances if i.key[:2] == (r["host"], r["pid"]) and i.rank == 0
                     and i.nranks > top and i.record_pos]
            if not cands:
                lost += 1
                continue
            inst = min(cands, key=lambda i: min(abs(p - pos) for p in i.record_pos))
            glob = members[inst.comm]
            ring = [glob[x] for x in r["ranks"]]
            partial = r["more"] or len(r["ranks"]) < inst.nranks
            found.setdefault(inst.comm, {}).setdefault(r["channel"], (ring, partial))
    if lost:
        notes.append(f"{lost} ring line(s) could not be tied to a communicator (no rank-0 Init line nearby)")
    rings = {comm: [chs[k][0] for k in sorted(chs)] for comm, chs in found.items()}
    partial = {comm: [j for j, k in enumerate(sorted(chs)) if chs[k][1]] for comm, chs in found.items()}
    if any(partial.values()):
        notes.append("some ring lines are cut (20-rank limit up to NCCL 2.22, '...' from 2.23): "
                     "metadata rings_partial lists them; no rank was invented")
    return rings, {k: v for k, v in partial.items() if v}


__all__ = ["gpus_per_node", "host_dev", "order_hosts", "ring_metadata"]
