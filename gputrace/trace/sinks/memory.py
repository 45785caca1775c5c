"""``MemorySink``: keeps every span record in a list (for tests and for library users)."""

from __future__ import annotations

import threading

from gputrace.trace.sinks.base import Sink


class MemorySink(Sink):
    """Collects finished span records in memory, unbounded (use for tests and short runs).

    ``spans`` is a snapshot list of span dicts (``gputrace.otlp.ids.SpanDict`` keys: ``trace_id``,
    ``span_id``, ``parent_span_id``, ``name``, ``start_ns``, ``end_ns``, ``attributes``, and
    ``status_code``/``status_message`` on error). Safe to read from any thread while the run goes on.
    """

    name = "memory"

    def __init__(self) -> None:
        super().__init__()
        self._spans: list[dict] = []
        self._lock = threading.Lock()

    def export(self, spans: list[dict]) -> None:
        with self._lock:
            self._spans.extend(spans)
        self.stats.add(exported=len(spans))

    @property
    def spans(self) -> list[dict]:
        with self._lock:
            return list(self._spans)

    def by_name(self, name: str) -> list[dict]:
        """Spans called ``name``, in the order they were exported."""
        return [s for s in self.spans if s["name"] == name]

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()
