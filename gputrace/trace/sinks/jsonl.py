"""``JsonlFileSink``: OTLP JSON Lines file, one ``ExportTraceServiceRequest`` per line.

The OTel file-exporter format (hex ids, camelCase, integer enums, 64-bit integers as strings). The
recorder hands this sink finished phases (``export_phases``), which ``phase_json.encode_phases`` turns
straight into span text; ``export`` takes span records and encodes them with
``gputrace.otlp_json.encode_request``. Both write the same bytes for the same spans (tested). A
``JsonlFileSink`` subclass that overrides ``export`` gets span records. A batch becomes one line per
``max_spans_per_line`` spans so readers never meet a giant line. The file is flushed after every drain of the exporter (at
least once per second), so a viewer can follow a running file. Runs on the exporter thread only.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from gputrace.otlp_json import REQUEST_TAIL, encode_request, request_head
from gputrace.trace.sinks.base import Sink
from gputrace.trace.sinks.phase_json import encode_phases

_TAIL_NL = REQUEST_TAIL + "\n"


class JsonlFileSink(Sink):
    """Write spans to ``path`` (truncated at start unless ``append=True``).

    Raises OSError from the constructor if the file cannot be opened (bad directory, permissions).
    A write error later counts the batch as dropped and keeps the run going.
    """

    def __init__(self, path: str | os.PathLike, *, append: bool = False, max_spans_per_line: int = 2048) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.name = f"file:{self.path}"
        self.max_spans_per_line = max(1, int(max_spans_per_line))
        self._f = open(self.path, "ab" if append else "wb", buffering=1 << 20)
        self._closed = False
        self._head = request_head({})
        # The recorder's fast path (phases -> JSON text, no span dicts) applies unless a subclass
        # changed what export() writes.
        self.takes_phases = type(self).export is JsonlFileSink.export

    def start(self, resource: Mapping[str, Any]) -> None:
        super().start(resource)
        self._head = request_head(self.resource)

    def update_resource(self, attrs: Mapping[str, Any]) -> None:
        super().update_resource(attrs)
        self._head = request_head(self.resource)

    def export_phases(self, phases: list, ids: Any, epoch_offset_ns: int) -> None:
        """Write finished phases (the recorder's fast path; same bytes as ``export`` of their records)."""
        if self._closed or not phases:
            if phases:
                self.stats.add(dropped=len(phases), error="file sink already closed")
            return
        step = self.max_spans_per_line
        head = self._head
        for i in range(0, len(phases), step):
            chunk = phases[i : i + step]
            try:
                texts = encode_phases(chunk, ids, epoch_offset_ns)
                # One join and one encode: every concatenation of a ~1 MB line would be another
                # allocation and copy.
                texts[0] = head + texts[0]
                texts[-1] += _TAIL_NL
                self._f.write(",".join(texts).encode())
            except (OSError, ValueError, TypeError) as e:
                self.stats.add(dropped=len(chunk), error=f"{type(e).__name__}: {e}")
            else:
                self.stats.add(exported=len(chunk))

    def export(self, spans: list[dict]) -> None:
        if self._closed or not spans:
            if spans:
                self.stats.add(dropped=len(spans), error="file sink already closed")
            return
        step = self.max_spans_per_line
        for i in range(0, len(spans), step):
            chunk = spans[i : i + step]
            try:
                line = encode_request(self.resource, chunk)
                self._f.write(line)
                self._f.write(b"\n")
            except (OSError, ValueError, TypeError) as e:
                self.stats.add(dropped=len(chunk), error=f"{type(e).__name__}: {e}")
            else:
                self.stats.add(exported=len(chunk))

    def flush(self) -> None:
        if not self._closed:
            try:
                self._f.flush()
            except OSError as e:
                self.stats.add(error=f"flush: {e}")

    def close(self, timeout_s: float | None = None) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        try:
            self._f.close()
        except OSError as e:
            self.stats.add(error=f"close: {e}")
