"""The sink interface. Every method runs on the recorder's exporter thread, never on a caller's thread.

A sink receives finished span records (``gputrace.otlp.ids.SpanDict`` dicts: int ids, epoch-ns times,
an ``attributes`` dict) in batches. ``export`` must return quickly: a sink whose destination may be slow
(network) queues the batch for its own worker thread, bounded, and counts what it drops. Sinks never raise
into the recorder; failures are counted in ``stats``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputrace.trace.summary import SinkStats, SinkSummary


class Sink:
    """Base class. Subclasses implement ``export`` and may override ``start``, ``flush``, ``close``."""

    #: Shown in the run summary; instances may override (e.g. ``file:run.jsonl``).
    name = "sink"
    #: True when the sink implements ``export_phases`` (the recorder then hands it finished phases
    #: instead of span records; see ``JsonlFileSink``).
    takes_phases = False

    def __init__(self) -> None:
        self.stats = SinkStats()
        self.resource: Mapping[str, Any] = {}

    def start(self, resource: Mapping[str, Any]) -> None:
        """Called once by ``configure()`` with the run's resource attributes, before any ``export``."""
        self.resource = dict(resource)

    def export(self, spans: list[dict]) -> None:
        """Take one batch of span records. The list is the sink's own; the dicts are shared with the
        other sinks and must not be modified."""
        raise NotImplementedError

    def export_phases(self, phases: list, ids: Any, epoch_offset_ns: int) -> None:
        """Take one batch as finished ``Phase`` objects (only called when ``takes_phases`` is true).

        ``ids``: the run's ``records.IdSource``. The sink must assign ids exactly as ``records.to_span``
        would, in list order (``gputrace.trace.sinks.phase_json`` does); other sinks of the run may have
        assigned them already."""
        raise NotImplementedError

    def update_resource(self, attrs: Mapping[str, Any]) -> None:
        """Add or replace resource attributes for what is exported from now on (the recorder's final counters,
        e.g. ``gputrace.cupti.dropped``). Sinks whose resource is fixed at ``start`` may ignore it."""
        self.resource = {**self.resource, **attrs}

    def flush(self) -> None:
        """Push buffered data to its destination (called after every drain)."""

    def close(self, timeout_s: float | None = None) -> None:
        """Flush and release resources; spans not delivered within ``timeout_s`` count as dropped.
        A second call does nothing."""

    def summary(self) -> SinkSummary:
        return self.stats.snapshot(self.name)
