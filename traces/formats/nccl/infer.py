"""Communicators from COLL lines alone, for comm pointers no Init line describes.

A ``comm %p`` value means something inside one process only, so pointers of different processes are never
joined because they are equal. NCCL's semantics give the evidence instead: every member of a communicator
calls the same collectives in the same order, with the same ``count``, ``datatype`` and ``root``, and
prints the same ``[nranks=]``; when the comm has proxy state its ``opCount`` also moves in step on every
member. Two instances (one pointer of one process each) are taken as members of one communicator when

- their ``nranks`` agree, and
- their opCounts move (strictly increase along each instance) and every opCount both show carries the same
  (op, count, datatype, root) on both, at least one being shared (logs cut at different places overlap);
- or, when opCounts do not move (intra-node comms can log ``opCount 0`` forever), one sequence of
  (opCount, op, count, datatype, root) is the other or a prefix of it.

Send/Recv lines are left out of the sequences (peers differ between members). A group with more members
than ``nranks`` cannot be told apart (data-parallel replicas of one tensor-parallel layout run identical
sequences): it is split by host when every host then holds at most ``nranks`` of them, else every member
stays its own communicator. Members not seen are kept as declared gaps. Each group carries its evidence
and a confidence (``high``: identical sequences of at least two collectives; ``medium``: agreement on an
overlap or a prefix, or a single collective; ``low``: split by host; ``none``: no collective to compare).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Evidence", "align_on_opcount", "compatible", "infer_groups"]

#: One collective as the members of a communicator all print it: (opCount, op, count, datatype, root).
Op = tuple[int, str, int, int, int]


@dataclass
class Evidence:
    """Why a group of instances is taken as one communicator."""

    members: list[Any]
    nranks: int
    confidence: str  # "high" | "medium" | "low" | "none"
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return {"members_seen": len(self.members), "nranks": self.nranks, "confidence": self.confidence,
                "evidence": self.evidence}


def _moving(seq: Sequence[Op]) -> bool:
    return len(seq) > 0 and all(b[0] > a[0] for a, b in zip(seq, seq[1:], strict=False))


def compatible(a: Sequence[Op], b: Sequence[Op]) -> int:
    """How many collectives two sequences of one communicator's members agree on; 0 when they cannot be
    members of one communicator (or share nothing to compare).

    Examples
    --------
    >>> x = [(13, "AllGather", 8, 7, 0), (14, "ReduceScatter", 8, 7, 0)]
    >>> y = [(14, "ReduceScatter", 8, 7, 0), (15, "AllReduce", 1, 7, 0)]
    >>> compatible(x, y), compatible(x, [(14, "AllReduce", 8, 7, 0)])
    (1, 0)
    >>> compatible([(0, "AllReduce", 4, 7, 0)] * 3, [(0, "AllReduce", 4, 7, 0)] * 2)
    2
    """
    if not a or not b:
        return 0
    if _moving(a) and _moving(b):
        by_opc = {op[0]: op[1:] for op in a}
        shared = [op for op in b if op[0] in by_opc]
        if not shared or any(by_opc[op[0]] != op[1:] for op in shared):
            return 0
        return len(shared)
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) if tuple(long_[: len(short)]) == tuple(short) else 0


def _components(seqs: list[tuple[Op, ...]]) -> tuple[list[list[int]], dict[int, int]]:
    """Union of mutually compatible distinct sequences; returns components (indices into ``seqs``) and,
    per index, the fewest collectives any link of its component agreed on."""
    parent = list(range(len(seqs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    weakest: dict[int, int] = {}
    for i in range(len(seqs)):
        for j in range(i + 1, len(seqs)):
            n = compatible(seqs[i], seqs[j])
            if n:
                weakest[i] = min(weakest.get(i, n), n)
                weakest[j] = min(weakest.get(j, n), n)
                parent[find(i)] = find(j)
    out: dict[int, list[int]] = {}
    for i in range(len(seqs)):
        out.setdefault(find(i), []).append(i)
    return list(out.values()), weakest


def infer_groups(instances: list[Any], sequences: list[tuple[Op, ...]], order_key) -> list[Evidence]:
    """Group instances (no Init line) into communicators from their collective sequences.

    Parameters
    ----------
    instances : list
        Objects with ``nranks`` and ``key`` (host, pid, pointer).
    sequences : list of tuple of Op
        Each instance's collectives (Send/Recv left out), in issue order.
    order_key : callable
        Sort key of an instance: members of a group are listed (and given comm ranks) in this order.

    Returns
    -------
    list of Evidence
        Every instance in exactly one group.

    Examples
    --------
    >>> class I:
    ...     def __init__(self, host, pid, n): self.key, self.nranks = (host, pid, "0x1"), n
    >>> a, b, c = I("h", 1, 2), I("h", 2, 2), I("h", 3, 2)
    >>> s = ((0, "AllReduce", 4, 7, 0), (0, "AllReduce", 8, 7, 0))
    >>> [(len(g.members), g.confidence) for g in infer_groups([a, b, c], [s, s, ()], lambda i: i.key)]
    [(1, 'none'), (2, 'high')]
    """
    out: list[Evidence] = []
    by_n: dict[int, list[int]] = {}
    for k, inst in enumerate(instances):
        if sequences[k]:
            by_n.setdefault(int(inst.nranks), []).append(k)
        else:
            out.append(Evidence([inst], int(inst.nranks), "none", "no collective line to compare (Send/Recv only)"))
    for nranks, idx in by_n.items():
        distinct = list(dict.fromkeys(sequences[k] for k in idx))
        comps, weakest = _components(distinct)
        for comp in comps:
            wanted = {distinct[d] for d in comp}
            members = sorted((instances[k] for k in idx if sequences[k] in wanted), key=order_key)
            n_ops = min(len(distinct[d]) for d in comp)
            if len(comp) == 1:
                confidence = "high" if n_ops >= 2 and len(members) > 1 else "medium"
                why = (f"{len(members)} process-pointer(s) with [nranks={nranks}] and the same sequence of "
                       f"{n_ops} (op, count, datatype, root)")
            else:
                agree = min(weakest.get(d, n_ops) for d in comp)
                confidence = "medium"
                why = (f"{len(members)} process-pointer(s) with [nranks={nranks}] whose logs overlap: they agree on "
                       f"(op, count, datatype, root) of at least {agree} collective(s) and differ on none")
            if len(members) == 1 and nranks == 1:
                confidence, why = "high", "a communicator of one rank ([nranks=1])"
            elif len(members) == 1:
                confidence = "none"
                why = f"no other process shows the same collectives ({n_ops} collective(s), [nranks={nranks}])"
            out += _fit(members, nranks, confidence, why)
    return out


def _fit(members: list[Any], nranks: int, confidence: str, why: str) -> list[Evidence]:
    """One group, or (more members than nranks) a split by host, or every member alone."""
    if len(members) <= nranks:
        return [Evidence(members, nranks, confidence, why)]
    hosts: dict[str, list[Any]] = {}
    for m in members:
        hosts.setdefault(m.key[0], []).append(m)
    if len(hosts) > 1 and all(len(ms) <= nranks for ms in hosts.values()):
        return [Evidence(ms, nranks, "low", f"{why}; {len(members)} of them for [nranks={nranks}]: split by host")
                for ms in hosts.values()]
    return [Evidence([m], nranks, "none", f"{why}; {len(members)} of them for [nranks={nranks}] and no way to "
                     "tell the groups apart: each kept alone") for m in members]


def align_on_opcount(comm: np.ndarray, rank: np.ndarray, pos: np.ndarray, opc: np.ndarray, is_coll: np.ndarray,
                     seq: np.ndarray, comms: set[int]) -> tuple[np.ndarray, list[int]]:
    """``seq`` of the collectives of cut logs, aligned on opCount.

    Logs cut at different places start a member's numbering at different collectives; when a
    communicator's opCounts move on every member (strictly increasing along each rank), the k-th distinct
    opCount of the communicator is its collective k on every member, which is what ``seq`` must say.

    Parameters
    ----------
    comm, rank, pos, opc : numpy.ndarray
        Per row: communicator code, global rank, line position, opCount (int64 bits).
    is_coll : numpy.ndarray of bool
        Rows numbered per (comm, rank) (not Send/Recv).
    seq : numpy.ndarray
        The rows' ``seq`` as numbered per rank.
    comms : set of int
        Codes of the communicators to align (the inferred ones).

    Returns
    -------
    (numpy.ndarray, list of int)
        The new ``seq`` and the codes of the communicators realigned.

    Examples
    --------
    >>> one = np.zeros(5, dtype=np.int64)
    >>> s, done = align_on_opcount(one, np.array([0, 0, 1, 1, 1]), np.arange(5), np.array([14, 15, 13, 14, 15]),
    ...                            np.ones(5, bool), np.array([0, 1, 0, 1, 2]), {0})
    >>> s.tolist(), done
    ([1, 2, 0, 1, 2], [0])
    """
    out = seq.copy()
    done = []
    for code in sorted(comms):
        rows = np.flatnonzero((comm == code) & is_coll)
        if not len(rows):
            continue
        order = rows[np.lexsort((pos[rows], rank[rows]))]
        r, o = rank[order], opc[order]
        same_rank = r[1:] == r[:-1]
        if (o[1:][same_rank] <= o[:-1][same_rank]).any():
            continue  # opCount does not move on some member: positions are all there is
        uniq = np.unique(o)
        new = np.searchsorted(uniq, opc[rows])
        if (new != seq[rows]).any():
            out[rows] = new
            done.append(code)
    return out, done
