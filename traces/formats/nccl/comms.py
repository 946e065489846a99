"""Who is who in NCCL logs: comm pointers -> communicator instances -> communicators -> global ranks.

A ``comm %p`` pointer only means something inside one process, so a COLL line is keyed by
(host, pid, pointer). Init lines of every version (and the 2.20+ ``nRanks ... localRanks`` line) map
that key to (rank, nranks, commId, cudaDev); a pointer reused after a destroy gets a new instance, and
a COLL line belongs to the latest instance created before it. Instances become communicators by
commId (2.16+), else by size and free rank slot in order of appearance (2.4-2.15), else, without any
Init line, one communicator per pointer value with comm ranks in order of appearance. Global ranks come
from the largest communicator (its comm ranks are the global ranks); GPUs outside it are numbered after
it by host, pid and device. Every fallback taken is written to ``notes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traces.formats.nccl.infer import infer_groups

__all__ = ["POS_SHIFT", "Instance", "assign_global_ranks", "build_instances", "comm_members", "fix_hosts",
           "group_instances", "pos_key", "set_identities", "split_shared_identities"]

POS_SHIFT = 40  # position key = file index << POS_SHIFT | line number (orders lines across files)


def pos_key(file_idx: int, line: int) -> int:
    return (file_idx << POS_SHIFT) | line


@dataclass
class Instance:
    """One communicator as one process sees it (the life of one ``comm %p`` between init and reuse)."""

    key: tuple[str, int, str]  # (host, pid, pointer)
    rank: int | None
    nranks: int
    comm_id: str | None
    dev: int | None
    local_ranks: int | None
    start: int  # position key of its first record
    record_pos: list[int] = field(default_factory=list)
    comm: str = ""  # communicator name, set by group_instances
    comm_rank: int = -1
    identity: tuple[str, int, int] = ("", -1, -1)  # (host, pid, cudaDev): one GPU
    grank: int = -1  # RCCL ``globalrank`` when logged
    sequence: tuple = ()  # collectives (opCount, op, count, dt, root) of a pointer without Init line
    prefix_dev: int = -1  # the ``[dev]`` every COLL line of the instance shows (-1: none or several)
    inferred: bool = False  # member of a communicator inferred from COLL lines alone

    @property
    def host(self) -> str:
        return self.key[0]


def fix_hosts(pairs: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """Map (host, pid) pairs whose host has interleaved garbage glued before it to the clean host.

    ``"affinityljm"`` with pid 7 becomes ``"ljm"`` when ``("ljm", 7)`` is also seen.
    """
    by_pid: dict[int, set[str]] = {}
    for host, pid in pairs:
        by_pid.setdefault(pid, set()).add(host)
    fixed: dict[tuple[str, int], str] = {}
    for pid, hosts in by_pid.items():
        for host in hosts:
            shorter = [h for h in hosts if h and len(h) < len(host) and host.endswith(h)]
            if shorter:
                fixed[(host, pid)] = min(shorter, key=len)
    return fixed


def build_instances(inits: list[dict[str, Any]]) -> dict[tuple[str, int, str], list[Instance]]:
    """Merge Init/nRanks/Destroy records of each (host, pid, pointer) into instances, in line order."""
    out: dict[tuple[str, int, str], list[Instance]] = {}
    for rec in sorted(inits, key=lambda r: (r["host"], r["pid"], r["ptr"], r["pos"])):
        key = (rec["host"], rec["pid"], rec["ptr"])
        insts = out.setdefault(key, [])
        last = insts[-1] if insts else None
        same = (last is not None and last.rank == rec["rank"] and last.nranks == rec["nranks"]
                and (last.comm_id is None or rec["comm_id"] is None or last.comm_id == rec["comm_id"]))
        if same:
            last.comm_id = last.comm_id or rec["comm_id"]
            last.dev = last.dev if last.dev is not None else rec["dev"]
            if rec["local_ranks"] is not None:
                last.local_ranks = max(last.local_ranks or 0, rec["local_ranks"])
            last.record_pos.append(rec["pos"])
            continue
        insts.append(Instance(key=key, rank=rec["rank"], nranks=rec["nranks"], comm_id=rec["comm_id"],
                              dev=rec["dev"], local_ranks=rec["local_ranks"], start=rec["pos"],
                              record_pos=[rec["pos"]]))
    return out


def group_instances(instances: list[Instance], notes: list[str],
                    evidence: dict[str, dict[str, Any]] | None = None) -> dict[str, list[Instance]]:
    """Name communicators and set each instance's ``comm`` and ``comm_rank``.

    Pointers without any Init line are grouped by :func:`traces.formats.nccl.infer.infer_groups`; the
    evidence of each such communicator goes to ``evidence`` (name -> dict) when given.

    Returns
    -------
    dict
        Communicator name -> member instances (in order of appearance).
    """
    comms: dict[str, list[Instance]] = {}
    by_id = [i for i in instances if i.rank is not None and i.comm_id is not None]
    no_id = [i for i in instances if i.rank is not None and i.comm_id is None]
    bare = [i for i in instances if i.rank is None]
    for inst in sorted(by_id, key=lambda i: i.start):
        _place(comms, inst, inst.comm_id or "", inst.rank or 0)
    if no_id:
        # An instance known from the 2.20+ ``nRanks ... localRanks`` line alone (its ``Init COMPLETE`` line,
        # which has the commId, not in the log) is no sign of an old NCCL.
        why = ("NCCL < 2.16" if any(i.local_ranks is None for i in no_id)
               else "only the NCCL 2.20+ 'nRanks ... localRanks' line, no 'Init COMPLETE' line with the commId")
        notes.append(f"{len(no_id)} communicator member(s) have Init lines without commId ({why}): "
                     "grouped into communicators by size and free rank, in order of appearance")
        for inst in sorted(no_id, key=lambda i: i.start):
            _place(comms, inst, f"comm-{inst.key[2]}", inst.rank or 0, by_size=True)
    if bare:
        _place_inferred(comms, bare, notes, evidence)
    return comms


def _place_inferred(comms: dict[str, list[Instance]], bare: list[Instance], notes: list[str],
                    evidence: dict[str, dict[str, Any]] | None) -> None:
    """Communicators of pointers without Init lines, inferred from their COLL lines; comm ranks in the order
    host (first appearance), pid, prefix device, first line (NCCL does not print them)."""
    first_on_host: dict[str, int] = {}
    for inst in bare:
        first_on_host[inst.host] = min(first_on_host.get(inst.host, inst.start), inst.start)
    groups = infer_groups(bare, [i.sequence for i in bare],
                          lambda i: (first_on_host[i.host], i.key[1], i.prefix_dev, i.start))
    counts: dict[str, int] = {}
    for group in sorted(groups, key=lambda g: min(m.start for m in g.members)):
        name = f"comm-{group.members[0].key[2]}"
        name = _unique(comms, name) if name in comms else name
        comms[name] = group.members
        for k, inst in enumerate(group.members):
            inst.comm, inst.comm_rank, inst.inferred = name, k, True
            if group.confidence != "none":  # the inferred comm rank, so the group can be the world view
                inst.rank = k
        counts[group.confidence] = counts.get(group.confidence, 0) + 1
        if evidence is not None:
            evidence[name] = group.as_dict()
    notes.append(f"{len(bare)} comm pointer(s) have no Init line: {len(groups)} communicator(s) inferred from "
                 "their COLL lines (same [nranks=] and the same (op, count, datatype, root) sequence; confidence "
                 + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "; evidence in metadata "
                 "comm_inference); comm ranks in order of host, pid, device")


def _unique(comms: dict[str, list[Instance]], name: str) -> str:
    k = 2
    while f"{name}#{k}" in comms:
        k += 1
    return f"{name}#{k}"


def _place(comms: dict[str, list[Instance]], inst: Instance, name: str, rank: int, by_size: bool = False) -> None:
    """Put ``inst`` in the first communicator of its name (or, by_size, of its size) with ``rank`` free."""
    candidates = ([n for n, ms in comms.items() if ms[0].comm_id is None and ms[0].rank is not None
                   and ms[0].nranks == inst.nranks] if by_size
                  else [n for n in comms if n == name or n.startswith(name + "#")])
    for cand in candidates:
        members = comms[cand]
        if members[0].nranks == inst.nranks and all(m.comm_rank != rank for m in members):
            inst.comm, inst.comm_rank = cand, rank
            members.append(inst)
            return
    new = _unique(comms, name) if name in comms else name
    inst.comm, inst.comm_rank = new, rank
    comms[new] = [inst]


def assign_global_ranks(
    comms: dict[str, list[Instance]], host_order: dict[str, int], notes: list[str]
) -> tuple[dict[tuple[str, int, int], int], int, str | None]:
    """Give every GPU identity a global rank.

    Returns
    -------
    (identity -> global rank, world_size, name of the world communicator or None)
    """
    ranks: dict[tuple[str, int, int], int] = {}
    taken: set[int] = set()
    for members in comms.values():  # RCCL logs the global rank on every COLL line
        for m in members:
            if m.grank >= 0 and m.identity not in ranks and m.grank not in taken:
                ranks[m.identity] = m.grank
                taken.add(m.grank)
    known = {n: ms for n, ms in comms.items() if ms[0].rank is not None}
    identities = {m.identity for ms in comms.values() for m in ms}
    world, world_size = None, 0
    if known:
        world_size = max(ms[0].nranks for ms in known.values())
    if world_size < len(identities):  # the largest communicator cannot hold every GPU: no world view
        world_size = 0
    if world_size:
        for name, members in sorted(known.items(), key=lambda kv: min(m.start for m in kv[1])):
            if members[0].nranks != world_size:
                continue
            fresh = [m for m in members if m.identity not in ranks]
            if any(m.comm_rank in taken for m in fresh) or len({m.identity for m in fresh}) != len(fresh):
                continue  # inconsistent with ranks already given: not a world view
            for m in fresh:
                ranks[m.identity] = m.comm_rank
                taken.add(m.comm_rank)
            world = world or name
    rest = sorted(identities - set(ranks), key=lambda g: (host_order.get(g[0], 1 << 30), g[1], g[2]))
    nxt = max([world_size - 1, *taken], default=-1) + 1
    if rest and world is not None:
        notes.append(f"{len(rest)} GPU(s) are in no world-spanning communicator: global ranks {nxt}.. given "
                     "by host (first appearance), pid, device")
    elif rest:
        notes.append("no communicator spans every GPU seen: global ranks given by host (first appearance), "
                     "pid, device")
    for g in rest:
        ranks[g] = nxt
        nxt += 1
    world_size = max(world_size, nxt, max(taken, default=-1) + 1)
    return ranks, world_size, world


def comm_members(
    comms: dict[str, list[Instance]], ranks: dict[tuple[str, int, int], int], world: str | None,
    world_size: int, notes: list[str],
) -> dict[str, list[int]]:
    """``{comm: [global rank of each comm rank]}``; -1 marks a comm rank that no log line shows."""
    out: dict[str, list[int]] = {}
    partial = []
    for name, members in comms.items():
        n = members[0].nranks
        if name == world:
            out[name] = list(range(n))
            continue
        slots = [-1] * n
        for m in members:
            if 0 <= m.comm_rank < n:
                slots[m.comm_rank] = ranks[m.identity]
        if -1 in slots:
            partial.append(name)
        out[name] = slots
    if partial:
        notes.append(f"{len(partial)} communicator(s) have members no log line shows (-1 in metadata comms): "
                     + ", ".join(partial[:5]) + (" ..." if len(partial) > 5 else ""))
    return out


def set_identities(instances: list[Instance]) -> None:
    """Each instance's GPU (host, pid, device): the Init line's cudaDev, else the process's only Init
    cudaDev, else the ``[dev]`` all its COLL lines show (one process driving several GPUs), else -1."""
    devs: dict[tuple[str, int], set[int]] = {}
    for inst in instances:
        if inst.dev is not None:
            devs.setdefault(inst.key[:2], set()).add(inst.dev)
    for inst in instances:
        dev = inst.dev
        if dev is None:
            known = devs.get(inst.key[:2], set())
            dev = next(iter(known)) if len(known) == 1 else inst.prefix_dev
        inst.identity = (inst.key[0], inst.key[1], dev)


def split_shared_identities(comms: dict[str, list[Instance]], notes: list[str]) -> None:
    """Two members of one inferred communicator in one process are two GPUs, even when their lines show the
    same ``[dev]`` (it is the thread's current device): give the later ones GPUs of their own."""
    used = {i.identity for ms in comms.values() for i in ms}
    split = 0
    for members in comms.values():
        seen: set[tuple[str, int, int]] = set()
        for inst in members:
            if inst.inferred and inst.identity in seen:
                host, pid, _ = inst.identity
                k = -2
                while (host, pid, k) in used:
                    k -= 1
                inst.identity = (host, pid, k)  # device unknown (written as -1)
                used.add(inst.identity)
                split += 1
            seen.add(inst.identity)
    if split:
        notes.append(f"{split} GPU(s) told apart only because one process holds several members of one "
                     "inferred communicator (their [dev] prefixes do not differ): device -1")
