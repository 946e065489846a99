"""Torn lines: when several processes write into one file, one process's line can be cut by another's.

The layout recovered here is the common one: process A writes the head of a line, process B writes one or
more complete lines, then A writes the rest (the tail). The file then shows

    <A prefix><A head><B prefix><B line 1>          (one line: two ``NCCL INFO`` prefixes)
    <B line 2> ...
    <A tail>                                        (a line that does not start with a prefix)

A line with two or more ``" NCCL INFO "`` prefixes is split at each prefix; every segment but the last is
a head. A head whose body could start a COLL line is completed by the first later line (within
``TAIL_WINDOW`` lines of the same chunk) that does not start with a prefix and makes it one whole COLL
body; that line is then consumed (not read again). Interleaving can glue the head's last characters to
the next prefix's host name (``count 12`` + ``h:7:7 [0]`` reads as host ``12h``): every split of that
token is tried, a host seen at a line start first. A head that cannot be completed (its tail is in the next
chunk, or too far) is counted as skipped, with its reason, when it holds the op name and the start of
``": opCount "``; a shorter head leaves the whole mark in its tail, which is read (or counted) as a line
without prefix, so each torn line is counted once. A cut inside the prefix itself leaves no head to see,
and the tail holds the whole COLL body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from traces.formats.nccl import layout as L

__all__ = ["AMBIGUOUS", "INFO", "TAIL_WINDOW", "TORN_REASON", "Head", "complete", "could_start_coll", "counts_as_coll",
           "heads_of", "recover", "starts_with_prefix"]

INFO = " NCCL INFO "
#: How many lines after a head its tail may be (the other process's lines written in between).
TAIL_WINDOW = 16
TORN_REASON = "torn COLL line (cut by another process's write; its rest was not found)"

_PREFIX_AT_START = re.compile(r"\s*(?:\S+ )?[^\s:]*:\d+:\d+ \[-?\d+\] NCCL ")
_OP_HEADS = tuple(f"{op}{L.COLL_MARK}" for op in L.NCCL_OPS)


@dataclass
class Head:
    """The start of a torn line: its prefix text and the candidate bodies, one per split of a host token
    that swallowed the head's last characters: ``known`` leave a host seen at a line start, ``other`` do not."""

    prefix: str
    known: list[str]
    other: list[str]

    @property
    def bodies(self) -> list[str]:
        return self.known + self.other


def could_start_coll(body: str) -> bool:
    """True when ``body`` (text after ``NCCL INFO``) could be the start of a COLL body.

    Examples
    --------
    >>> could_start_coll("AllRe"), could_start_coll("AllReduce: opCount 1 sendbuff"), could_start_coll("Boot")
    (True, True, False)
    """
    if not body:
        return False
    if L.COLL_MARK in body:
        return True
    return any(h.startswith(body) for h in _OP_HEADS)


def counts_as_coll(body: str) -> bool:
    """True when a head that found no tail must be counted as a lost COLL line: it holds the op name and the
    start of ``": opCount "`` (so its tail does not hold the whole mark and is not read on its own).
    A shorter head (``"AllRe"``, ``"B"``) leaves the whole mark in its tail, which is read (or counted) as a
    line without prefix: counting the head too would count one line twice.

    Examples
    --------
    >>> counts_as_coll("AllReduce: opCount 1 sendbuff"), counts_as_coll("AllReduce: o"), counts_as_coll("AllRe")
    (True, True, False)
    """
    name, colon, rest = body.partition(":")
    if not colon or name not in L.NCCL_OPS:
        return False
    return rest.startswith(L.COLL_MARK[1:]) or L.COLL_MARK[1:].startswith(rest)


def heads_of(text: str, known_hosts: Iterable[str] = ()) -> tuple[list[Head], int]:
    """Split a line holding several prefixes into heads and the start of its last segment.

    Returns
    -------
    (list of Head, int)
        The heads (every segment before the last prefix) and the offset where the last segment starts
        (0 when the line holds fewer than two prefixes).

    Examples
    --------
    >>> heads, rest = heads_of("a:1:1 [0] NCCL INFO AllRe" + "b:2:2 [1] NCCL INFO Bootstrap : eth0", ["b"])
    >>> heads[0].bodies[0], rest
    ('AllRe', 25)
    """
    if text.count(INFO) < 2:
        return [], 0
    matches = list(L.PREFIX_RE.finditer(text))
    if len(matches) < 2:
        return [], 0
    known = set(known_hosts)
    heads = []
    rest = matches[-1].start()
    for m, nxt in zip(matches, matches[1:], strict=False):
        body = text[m.end(): nxt.start()]
        host = nxt["host"]
        # The next host token may hold the head's last characters: try each split, known hosts first,
        # then the longest head (a host name rarely starts with the characters a body ends with).
        splits = [j for j in range(len(host) + 1) if j < len(host) or not host]
        heads.append(Head(text[m.start(): m.end()], [body + host[:j] for j in splits if host[j:] in known],
                          [body + host[:j] for j in splits if host[j:] not in known]))
        if nxt is matches[-1]:
            best = next((j for j in splits if host[j:] in known), None)
            if best is not None:
                rest = nxt.start() + best
    return heads, rest


def starts_with_prefix(text: str) -> bool:
    """Whether a line starts with a ``host:pid:tid [dev] NCCL`` prefix (outer tag allowed): not a tail."""
    return _PREFIX_AT_START.match(text) is not None


#: What :func:`complete` returns when several splits of a glued host make different valid lines.
AMBIGUOUS = "ambiguous"


def complete(head: Head, line: int, text_of: Callable[[int], str | None], consumed: set[int]
             ) -> tuple[L.CollLine | str, int] | None:
    """Find the tail of ``head`` (on line ``line``) among the next lines: ``(record, tail line)``, None when no
    line completes it, or ``(AMBIGUOUS, tail line)`` when a tail completes it in several different ways (a
    host name that starts with the characters the head ends with: no way to tell where the cut was)."""
    for k in range(line + 1, line + 1 + TAIL_WINDOW):
        if k in consumed:
            continue
        tail = text_of(k)
        if tail is None:
            return None
        if not tail.strip() or starts_with_prefix(tail):
            continue
        for bodies in (head.known, head.other):
            found = {}
            for body in bodies:
                rec = _whole(head.prefix + body + tail)
                if rec is not None:
                    found.setdefault((rec.op, rec.opc, rec.count, rec.dt, rec.root, rec.comm, rec.nranks), rec)
            if len(found) == 1:
                return next(iter(found.values())), k
            if len(found) > 1:
                return AMBIGUOUS, k
    return None


def _whole(text: str) -> L.CollLine | None:
    """The one COLL record of a joined line, when it is whole and its fields are possible."""
    recs = L.parse_coll_lines(text)
    if len(recs) != 1 or recs[0].op not in L.NCCL_OPS or not _ends_at_line_end(text):
        return None
    rec = recs[0]
    rooted = rec.op in ("Broadcast", "Reduce", "Gather", "Scatter", "Send", "Recv")
    if rec.nranks < 1 or not 0 <= rec.dt <= 11 or (rooted and not 0 <= rec.root < rec.nranks):
        return None
    return rec


def _ends_at_line_end(whole: str) -> bool:
    """A completed body must run to the end of the joined text (nothing of another line left after it)."""
    m = L.COLL_RE.search(whole)
    return m is not None and not whole[m.end():].strip()


def recover(lines: Iterable[int], text_of: Callable[[int], str | None], known_hosts: Iterable[str],
            on_record: Callable[[L.CollLine, int], None], on_torn: Callable[[int], None]
            ) -> tuple[set[int], dict[int, int]]:
    """Complete the heads of the interleaved ``lines`` (chunk line indices, ascending).

    Parameters
    ----------
    lines : iterable of int
        Lines holding two or more prefixes.
    text_of : callable
        Line index -> text (None past the chunk).
    known_hosts : iterable of str
        Hosts seen in clean prefixes (to split a host token glued to a head).
    on_record : callable
        Called with each completed record and the line of its head.
    on_torn : callable
        Called with the line of each head that could start a COLL line but has no tail.

    Returns
    -------
    (set of int, dict of int to int)
        Tail lines consumed (not to be read again) and, per interleaved line, where its last segment starts.
    """
    consumed: set[int] = set()
    rest: dict[int, int] = {}
    known = set(known_hosts)
    for i in lines:
        if i in consumed:
            continue
        text = text_of(i)
        heads, start = heads_of(text or "", known)
        rest[i] = start
        for head in heads:
            if not any(map(could_start_coll, head.bodies)):
                continue  # the head of some other line (Init, transport, ...): not collective data
            found = complete(head, i, text_of, consumed)
            if found is not None:
                consumed.add(found[1])  # an ambiguous tail is not read alone either: the line counts once
                if isinstance(found[0], str):  # AMBIGUOUS
                    on_torn(i)
                else:
                    on_record(found[0], i)
            elif any(map(counts_as_coll, head.bodies)):
                on_torn(i)
    return consumed, rest
