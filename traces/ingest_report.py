"""What an ingest read, kept and skipped: every reader fills one, so nothing is dropped silently."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from traces.schema import TraceError


@dataclass
class IngestReport:
    """Counts of one ingest.

    Attributes
    ----------
    files : list of str
        Files read.
    lines_read : int
        Lines (or JSON records) looked at.
    records : int
        Trace rows produced.
    skipped : collections.Counter
        Reason -> number of lines/records that looked like collective data but could not be used.
    examples : dict
        Reason -> first ``file:line`` where it happened (for the error message).
    notes : list of str
        Fallbacks taken (no init lines, ...); copied into the metadata ``notes``.
    """

    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    records: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def skip(self, reason: str, where: str | Path, n: int = 1) -> None:
        """Count ``n`` unusable lines for ``reason``; remember the first place it happened."""
        self.skipped[reason] += n
        self.examples.setdefault(reason, str(where))

    def merge(self, other: IngestReport) -> None:
        """Add another report's counts to this one."""
        self.files += other.files
        self.lines_read += other.lines_read
        self.records += other.records
        self.skipped.update(other.skipped)
        for reason, where in other.examples.items():
            self.examples.setdefault(reason, where)
        self.notes += [n for n in other.notes if n not in self.notes]

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def raise_if_strict(self, strict: bool) -> None:
        """With ``strict``, turn the first skipped reason into a :class:`TraceError` naming file and line."""
        if strict and self.skipped:
            reason, n = self.skipped.most_common(1)[0]
            raise TraceError(f"{self.examples[reason]}: {reason} ({n} line(s); --strict)")

    def as_dict(self) -> dict:
        """JSON-able form, stored in the trace metadata under ``ingest``."""
        return {
            "files": list(self.files),
            "lines_read": self.lines_read,
            "records": self.records,
            "skipped": dict(self.skipped),
            "examples": dict(self.examples),
        }

    def summary(self) -> str:
        """One or a few human lines: what was read and what was skipped, with the first place of each."""
        head = f"read {len(self.files)} file(s), {self.lines_read} line(s): {self.records} trace row(s)"
        if not self.skipped:
            return head + ", nothing skipped"
        parts = [f"{n} {reason} (first at {self.examples[reason]})" for reason, n in self.skipped.most_common()]
        return head + f", skipped {self.skipped_total}: " + "; ".join(parts)


__all__ = ["IngestReport"]
