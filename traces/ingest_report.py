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
    disagreeing : int or None
        Collectives (comm, seq) whose members differ on op, count or dtype (None: not checked yet).
    disagreeing_example : str
        The first of them, with each member's fields.
    """

    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    records: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    disagreeing: int | None = None
    disagreeing_example: str = ""

    def check_agreement(self, df) -> None:
        """Count the collectives of ``df`` whose members disagree (op, count, dtype, root); add a note."""
        from traces.formats.agreement import disagreeing_collectives

        self.set_agreement(*disagreeing_collectives(df))

    def set_agreement(self, n: int, example: str) -> None:
        """Record ``n`` disagreeing collectives (first: ``example``) and add the note."""
        self.disagreeing, self.disagreeing_example = n, example
        if self.disagreeing:
            note = (f"{self.disagreeing} collective(s) whose members disagree on op, count or dtype "
                    f"(first: {self.disagreeing_example})")
            if note not in self.notes:
                self.notes.append(note)

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
            "disagreeing_collectives": int(self.disagreeing or 0),
            "disagreeing_example": self.disagreeing_example,
        }

    @classmethod
    def from_dict(cls, stored: dict) -> IngestReport:
        """Rebuild a report from :meth:`as_dict` (as stored in the trace metadata under ``ingest``)."""
        return cls(files=list(stored.get("files", [])), lines_read=int(stored.get("lines_read", 0)),
                   records=int(stored.get("records", 0)), skipped=Counter(stored.get("skipped", {})),
                   examples=dict(stored.get("examples", {})),
                   disagreeing=int(stored.get("disagreeing_collectives", 0)),
                   disagreeing_example=str(stored.get("disagreeing_example", "")))

    def summary(self) -> str:
        """One or a few human lines: what was read and what was skipped, with the first place of each."""
        head = f"read {len(self.files)} file(s), {self.lines_read} line(s): {self.records} trace row(s)"
        tail = ""
        if self.disagreeing:
            tail = f"; {self.disagreeing} collective(s) whose members disagree (first: {self.disagreeing_example})"
        if not self.skipped:
            return head + ", nothing skipped" + tail
        parts = [f"{n} {reason} (first at {self.examples[reason]})" for reason, n in self.skipped.most_common()]
        return head + f", skipped {self.skipped_total}: " + "; ".join(parts) + tail


__all__ = ["IngestReport"]
