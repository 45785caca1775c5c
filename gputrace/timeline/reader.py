"""Read OTLP JSON Lines trace files into a ``Timeline``.

Reads files written by gputrace, by the official ``opentelemetry-exporter-otlp-json-file``
package and by the OpenTelemetry Collector's file exporter: one ``ExportTraceServiceRequest`` per
line, lines in any order, any number of resources per line and files per load, gzip-compressed
files (detected by their magic bytes, whatever the name), blank lines ignored.

Span -> row mapping: lane = (resource ``host.name``, ``process.pid``, ``gputrace.device``
(absent: -1), ``gputrace.lane`` (absent: ``thread:<thread.name or thread.id>``, else
``span:<service.name>``)); phase = span name; columns from ``gputrace.*`` attributes; everything
else in ``Timeline.attrs``. See docs/trace-format.md.

Errors: ``TraceFormatError`` naming file, line and field. ``lenient=True`` skips what cannot be
read and records it in ``Timeline.load_report`` (a ``LoadReport``). Nothing from a trace is ever
executed or unpickled: it is parsed as JSON only.

``TraceLoader`` is the incremental core shared with ``iter_load``/``follow``; it is not
thread-safe (feed it from one thread).

Fast path (``_fast``): lines are first decoded with their span attributes kept as raw JSON, and
the attributes of many lines are checked and parsed together with numpy. Lines are queued and
*resolved* in order before anything observable happens (a column batch, an error, the next
file), so results, errors and their order are those of the general path; a line whose attributes
the fast parser declines is decoded again with the general decoder.

The work is split over private modules: ``_lines`` (opening files, gzip, splitting lines),
``_loader`` (``TraceLoader``), ``_feed`` (whole files into a loader), ``_decode_errors`` (msgspec
errors -> messages), ``_fast`` (raw-attribute parser), ``_columns`` (decoded spans -> columns).
Which reader reads a path, in-process or in parallel, is decided in one place:
``gputrace.timeline.load`` (the entrance); this module keeps the OTLP reader's public names.
"""

from __future__ import annotations

from gputrace.timeline._decode_errors import describe_msgspec_error as _describe_msgspec_error  # noqa: F401 - re-export
from gputrace.timeline._feed import load_file_into, try_whole_file as _try_whole_file  # noqa: F401 - re-export
from gputrace.timeline._lines import _CHUNK, _GZIP_MAGIC, PathLike, iter_lines, open_trace_file  # noqa: F401 - re-export
from gputrace.timeline._loader import BATCH_SPANS, FAST_GIVE_UP_LINES, FAST_GROUP_SPANS, TraceLoader  # noqa: F401 - re-export
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.load import read_otlp as read_trace

__all__ = ["read_trace", "TraceLoader", "TraceFormatError", "LoadReport", "open_trace_file", "load_file_into",
           "iter_lines"]
