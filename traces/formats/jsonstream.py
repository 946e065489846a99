"""JSON objects as people have them: one per line, pretty-printed over many lines, inside an array, with
a truncated tail, elision lines (``...``) or stray characters between them.

:func:`iter_objects` walks the text once and yields every top-level JSON object it can read, with its line
number, and every stretch it cannot (as a :class:`Bad` item with a reason), so a reader keeps what is
valid and counts the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Bad", "iter_objects"]

_DECODER = json.JSONDecoder()
_SEPARATORS = " \t\r\n,[]"


@dataclass
class Bad:
    """Text that is no JSON object: ``reason`` is ``truncated`` (the text ends inside an object),
    ``malformed`` (an object that does not parse) or ``stray`` (text outside any object)."""

    line: int
    reason: str
    text: str


def iter_objects(text: str, repair: Callable[[str], str] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, object)`` for each top-level JSON object of ``text``, ``(line, Bad)`` for the rest.

    Parameters
    ----------
    text : str
        The file's text.
    repair : callable, optional
        Tried on the rest of a line whose object does not parse (e.g. quoting bare words), before giving up.

    Examples
    --------
    >>> [(n, o) for n, o in iter_objects('[{"a": 1},\\n ...\\n{"b":\\n 2},\\n{"c": ')]
    [(1, {'a': 1}), (2, Bad(line=2, reason='stray', text='...')), (3, {'b': 2}), (5, Bad(line=5, reason='truncated', text='{"c":'))]
    """
    pos, n, line, counted = 0, len(text), 1, 0

    def line_at(p: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, p)
        counted = p
        return line

    while pos < n:
        while pos < n and text[pos] in _SEPARATORS:
            pos += 1
        if pos >= n:
            return
        eol = text.find("\n", pos)
        eol = n if eol < 0 else eol
        if text[pos] != "{":
            yield line_at(pos), Bad(line_at(pos), "stray", text[pos:eol].strip())
            pos = eol
            continue
        here = line_at(pos)
        try:
            obj, end = _DECODER.raw_decode(text, pos)
            yield here, obj
            pos = end
            continue
        except json.JSONDecodeError as exc:
            error = exc
        except RecursionError:  # nested deeper than the parser's stack: a malformed record, not a crash
            error = json.JSONDecodeError("nested too deeply", text, pos)
        if repair is not None:
            try:
                obj, end = _DECODER.raw_decode(repair(text[pos:eol]))
                yield here, obj
                pos = eol
                continue
            except (json.JSONDecodeError, RecursionError):
                pass
        rest = text[pos:].rstrip()
        nxt = _next_object(text, eol, pos - (text.rfind("\n", 0, pos) + 1))
        # The text ends inside this object (the writer was stopped): no object after it, and no closing brace.
        if error.pos >= len(text.rstrip()) or (nxt >= n and not rest.rstrip(",] \n").endswith("}")):
            yield here, Bad(here, "truncated", rest[:200])
            return
        yield here, Bad(here, "malformed", text[pos:eol].strip()[:200])
        pos = nxt


def _next_object(text: str, start: int, indent: int) -> int:
    """Offset of the next line, after ``start``, that opens an object at most ``indent`` deep (or the end)."""
    pos = start
    while pos < len(text):
        nl = text.find("\n", pos)
        if nl < 0:
            return len(text)
        pos = nl + 1
        body = text[pos:].lstrip(" \t")
        depth = len(text) - pos - len(body)
        if body.startswith("{") and depth <= indent:
            return pos + depth
    return len(text)
