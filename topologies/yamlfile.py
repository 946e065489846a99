"""Reading a topology YAML file safely: size limit, UTF-8, ``safe_load`` with alias expansion bounded.

PyYAML's ``safe_load`` builds only plain types, but an alias (``*name``) shares the anchored value, so a
few lines of nested aliases (the "billion laughs") describe a value of 10^9 items. Nothing is allocated
for them while loading; the first code that walks the value (a ``str()``, an error message, a merge key)
runs out of memory. :func:`load_yaml_text` counts the nodes the document would have with every alias
expanded and refuses it beyond :func:`alias_budget` before anything walks it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topologies.errors import TopologyError

if TYPE_CHECKING:  # annotations only: yaml is imported when a file is read
    import yaml

__all__ = ["MAX_FILE_BYTES", "alias_budget", "build_progress", "load_yaml_text", "read_yaml_file", "report_progress"]

#: Largest topology file read: libyaml parses ~0.4 MB per CPU second, so 8 MiB (an explicit graph of ~40k
#: GPUs with their links) takes ~20 s; larger fabrics are presets.
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Nodes an alias-expanded document may always have, on top of twice its length in characters.
ALIAS_BASE_NODES = 100_000
#: Where a long read or build reports how far it is (set by :func:`build_progress`; the CLI draws a bar).
_PROGRESS: ContextVar[Callable[[str, float, float | None], None] | None] = ContextVar("topology_progress",
                                                                                       default=None)


@contextmanager
def build_progress(callback: Callable[[str, float, float | None], None]) -> Iterator[None]:
    """Within the block, topology reads and builds call ``callback(stage, done, total)`` as they go.

    ``stage`` is a short text (``"parsing YAML"``, ``"adding links"``), ``done`` of ``total`` its units
    (characters, items; ``total`` None when unknown). The library never prints: the CLI draws a bar.

    Examples
    --------
    >>> seen = []
    >>> with build_progress(lambda stage, done, total: seen.append(stage)):
    ...     _ = load_yaml_text("a: 1", "t.yaml")
    >>> seen[0]
    'parsing YAML'
    """
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def report_progress(stage: str, done: float, total: float | None = None) -> None:
    """Tell the :func:`build_progress` callback, if any, that ``stage`` is at ``done`` of ``total``."""
    callback = _PROGRESS.get()
    if callback is not None:
        callback(stage, done, total)


class _CountingReader(io.StringIO):
    """The text of a YAML file, read by the parser in chunks: each chunk reports the characters read."""

    def read(self, size: int | None = -1) -> str:  # type: ignore[override]
        chunk = super().read(size)
        report_progress("parsing YAML", self.tell(), self._total)
        return chunk

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._total = len(text)


def alias_budget(text: str) -> int:
    """Most YAML nodes (scalars, lists, mappings) that ``text`` may expand to through its aliases.

    Examples
    --------
    >>> alias_budget("a: 1")
    100008
    """
    return ALIAS_BASE_NODES + 2 * len(text)


def read_yaml_file(path: Path) -> Any:
    """Parse the YAML file ``path``; every problem becomes one :class:`TopologyError` naming the file.

    Raises
    ------
    TopologyError
        Unreadable, larger than :data:`MAX_FILE_BYTES`, not UTF-8 (naming the byte offset), not valid YAML
        (naming the line), or aliases expanding beyond :func:`alias_budget`.
    """
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TopologyError(f"{path}: {size:,} bytes is larger than the {MAX_FILE_BYTES:,}-byte limit of a "
                                "topology file (docs/limits.md)")
        raw = path.read_bytes()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read topology file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise TopologyError(f"{path}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                            f"{exc.start})") from None
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, where: str) -> Any:
    """``yaml.safe_load(text)`` with alias expansion bounded by :func:`alias_budget`.

    Examples
    --------
    >>> load_yaml_text("a: &x [1, 2]\\nb: *x", "t.yaml")
    {'a': [1, 2], 'b': [1, 2]}
    >>> bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\\n" + "".join(
    ...     f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\\n" for i in range(8))
    >>> load_yaml_text(bomb, "t.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    topologies.errors.TopologyError: t.yaml: YAML aliases expand to more than ... nodes (an alias bomb?); ...
    """
    import yaml  # here, not at module level: a preset run never reads YAML (the import costs ~0.07 s)

    try:
        if "&" not in text or "*" not in text:  # no anchor and alias: nothing to expand, use the fast loader
            fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed
            return yaml.load(_CountingReader(text), Loader=fast)  # noqa: S506 - a safe loader
        loader = yaml.SafeLoader(_CountingReader(text))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node, alias_budget(text), where)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise TopologyError(f"{where}: {line}not valid YAML ({problem})") from None
    except RecursionError:
        raise TopologyError(f"{where}: YAML nested too deeply") from None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if node.id == "sequence":  # yaml.SequenceNode (yaml itself is imported only when a file is read)
        return list(node.value)
    if node.id == "mapping":  # yaml.MappingNode
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node, budget: int, where: str) -> None:
    """Refuse a node graph whose alias-expanded size exceeds ``budget``, or that refers to itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path from the root: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > budget:
                raise TopologyError(f"{where}: YAML aliases expand to more than {budget} nodes (an alias bomb?); "
                                    "write the values out")
            continue
        if key in sizes:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise TopologyError(f"{where}: a YAML alias refers to a value that contains it (recursive alias)")
            if id(child) not in sizes:
                stack.append((child, False))
