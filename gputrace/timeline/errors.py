"""Errors and load reports of the trace readers.

``TraceFormatError`` names the file, the 1-based line and the JSON field of a problem; its ``str``
is one line such as::

    run.jsonl:17: field resourceSpans[0].scopeSpans[0].spans[3].startTimeUnixNano: expected integer string, got 'abc'

``LoadReport`` is what a lenient load skipped and why; the TUI and CLI show ``report.summary()``
(e.g. ``2 lines skipped, 1 span skipped: truncated line x1 (run.jsonl:120), ...``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["TraceFormatError", "LoadReport", "CUT_REASON"]

#: ``LoadReport`` reason of a ``record`` segment's unterminated last line (its writer died while writing it):
#: left out of a strict read too (``formats.otlp_jsonl.segments``).
CUT_REASON = "cut last line"

#: How many individual problems a report keeps (counts keep going past this).
MAX_PROBLEMS = 1000


class TraceFormatError(ValueError):
    """A trace file that cannot be read as OTLP JSON Lines.

    ``path``: the file as given; ``line``: 1-based line number or None (whole-file problems);
    ``field``: JSON path inside the line (``resourceSpans[0].scopeSpans[0].spans[3].spanId``) or
    None; ``message``: what is wrong; ``reason``: a short category used to group problems in
    ``LoadReport`` (e.g. ``truncated line``, ``not JSON``, ``bad field``).
    """

    def __init__(self, path, line: int | None, field: str | None, message: str, reason: str = "bad field") -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.field:
            return f"{where}: field {self.field}: {self.message}"
        return f"{where}: {self.message}"

    def __reduce__(self):
        return (TraceFormatError, (self.path, self.line, self.field, self.message, self.reason))


@dataclass
class LoadReport:
    """What a load read and skipped. ``problems`` keeps the first ``MAX_PROBLEMS`` errors."""

    files: list[str] = field(default_factory=list)
    lines: int = 0  # non-blank lines seen
    spans: int = 0  # spans loaded
    lines_skipped: int = 0
    spans_skipped: int = 0  # spans dropped from lines that were otherwise loaded
    problems: list[TraceFormatError] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)

    def add(self, err: TraceFormatError, *, line_skipped: bool, spans: int = 0) -> None:
        if line_skipped:
            self.lines_skipped += 1
        self.spans_skipped += spans
        self.reasons[err.reason] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(err)

    def absorb(self, other: LoadReport, *, files: bool = True) -> None:
        """Add ``other``'s counts, reasons and problems (still at most ``MAX_PROBLEMS``); its file
        names too unless ``files`` is False (the caller already listed them)."""
        if files:
            self.files.extend(other.files)
        self.lines += other.lines
        self.spans += other.spans
        self.lines_skipped += other.lines_skipped
        self.spans_skipped += other.spans_skipped
        self.reasons.update(other.reasons)
        self.problems.extend(other.problems[:max(0, MAX_PROBLEMS - len(self.problems))])

    def sorted_problems(self) -> list[TraceFormatError]:
        """Problems in file order, then line order (batch checks report after later lines)."""
        order = {f: i for i, f in enumerate(self.files)}
        return sorted(self.problems, key=lambda p: (order.get(p.path, len(order)), p.line or 0))

    @property
    def ok(self) -> bool:
        return not self.lines_skipped and not self.spans_skipped and not self.reasons

    def summary(self) -> str:
        """One line for a status bar: '' when nothing was skipped."""
        if self.ok:
            return ""
        parts = []
        if self.lines_skipped:
            parts.append(f"{self.lines_skipped} line{'s' * (self.lines_skipped != 1)} skipped")
        if self.spans_skipped:
            parts.append(f"{self.spans_skipped} span{'s' * (self.spans_skipped != 1)} skipped")
        first: dict[str, TraceFormatError] = {}
        for p in self.sorted_problems():
            first.setdefault(p.reason, p)
        why = []
        for reason, n in self.reasons.most_common():
            e = first.get(reason)
            loc = f" (first: {e.path}:{e.line})" if e is not None and e.line is not None else ""
            why.append(f"{reason} x{n}{loc}")
        return (", ".join(parts) or "problems") + ": " + "; ".join(why)

    def details(self, limit: int = 20) -> list[str]:
        """The first ``limit`` problems, one line each (for ``--lenient`` output)."""
        return [str(p) for p in self.sorted_problems()[:limit]]
