"""Counters reported at shutdown: ``SinkStats`` per sink and the ``RunSummary`` of a run."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class SinkStats:
    """Thread-safe span counters of one sink.

    exported: spans the destination accepted; retried: spans sent again after a failed or timed-out
    attempt (one count per span per retry); dropped: spans given up on (queue full, retries exhausted,
    write error, shutdown before they could be sent). ``errors`` keeps the last few error texts.
    """

    __slots__ = ("exported", "retried", "dropped", "errors", "_lock")

    def __init__(self) -> None:
        self.exported = 0
        self.retried = 0
        self.dropped = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def add(self, exported: int = 0, retried: int = 0, dropped: int = 0, error: str | None = None) -> None:
        with self._lock:
            self.exported += exported
            self.retried += retried
            self.dropped += dropped
            if error:
                self.errors.append(error)
                del self.errors[:-5]

    def snapshot(self, name: str) -> SinkSummary:
        with self._lock:
            return SinkSummary(name, self.exported, self.retried, self.dropped, tuple(self.errors))


@dataclass(frozen=True)
class SinkSummary:
    name: str
    exported: int
    retried: int
    dropped: int
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    """What a run recorded and what each sink did with it (returned by ``gputrace.shutdown()``).

    ``spans_recorded``: phases that ended and were handed to the sinks; ``spans_dropped``: phases
    that ended while their thread's buffer was full (never recorded); ``cuda_unresolved``: spans whose
    CUDA events could not be read (they keep host times only).
    """

    run_id: str
    spans_recorded: int
    spans_dropped: int
    sinks: tuple[SinkSummary, ...] = field(default_factory=tuple)
    cuda_unresolved: int = 0
    duration_s: float = 0.0

    def sink(self, name: str) -> SinkSummary:
        """The summary of the sink called ``name`` (KeyError if none)."""
        for s in self.sinks:
            if s.name == name:
                return s
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [
            f"gputrace run {self.run_id}: {self.spans_recorded} spans recorded, "
            f"{self.spans_dropped} dropped (buffer full) in {self.duration_s:.2f} s"
        ]
        if self.cuda_unresolved:
            lines.append(f"  {self.cuda_unresolved} spans without device times (CUDA events unreadable)")
        if self.sinks:
            w = max(len(s.name) for s in self.sinks)
            lines.append(f"  {'sink':<{w}}  {'exported':>9}  {'retried':>8}  {'dropped':>8}")
            for s in self.sinks:
                lines.append(f"  {s.name:<{w}}  {s.exported:>9}  {s.retried:>8}  {s.dropped:>8}")
                for e in s.errors[-2:]:
                    lines.append(f"  {'':<{w}}  last error: {e}")
        else:
            lines.append("  no sinks configured")
        return "\n".join(lines)
