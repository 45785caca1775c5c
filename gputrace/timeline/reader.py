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

The work is split over private modules: ``_lines`` (opening files, splitting lines),
``_loader`` (``TraceLoader``), ``_decode_errors`` (msgspec errors -> messages), ``_fast``
(raw-attribute parser), ``_columns`` (decoded spans -> columns). Import the public names from
here (or from ``gputrace.timeline``).
"""

from __future__ import annotations

import gzip
import os
from typing import Iterable, Sequence

from gputrace.timeline._decode_errors import describe_msgspec_error as _describe_msgspec_error  # noqa: F401 - re-export
from gputrace.timeline._lines import _CHUNK, _GZIP_MAGIC, PathLike, iter_lines, open_trace_file  # noqa: F401 - re-export
from gputrace.timeline._loader import BATCH_SPANS, FAST_GIVE_UP_LINES, FAST_GROUP_SPANS, TraceLoader  # noqa: F401 - re-export
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.model import Timeline
from gputrace.timeline.otlp_schema import request_decoder

__all__ = ["read_trace", "TraceLoader", "TraceFormatError", "LoadReport", "open_trace_file", "load_file_into", "iter_lines"]


def _as_paths(paths: PathLike | Iterable[PathLike]) -> list:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


def read_trace(paths: PathLike | Sequence[PathLike], lenient: bool = False, workers: int | None = None) -> Timeline:
    """Read one or more OTLP JSON Lines files (plain or gzip) into one Timeline.

    Raises ``TraceFormatError`` (file, line, field) for unreadable input unless ``lenient``, in
    which case bad lines/spans are skipped and counted in ``timeline.load_report``. Raises
    ``OSError`` (e.g. FileNotFoundError) for files that cannot be opened. Runs on the calling
    thread; see ``gputrace.timeline.incremental`` for progressive loading.

    ``workers``: plain files of at least ``parallel.MIN_PARALLEL_BYTES`` are split over this many
    worker processes (default: ``parallel.default_workers()``; ``1`` reads everything in-process).
    """
    from gputrace.timeline import parallel

    nworkers = parallel.default_workers() if workers is None else max(1, int(workers))
    loader = TraceLoader(lenient=lenient)
    parts: list[Timeline] = []
    order: list[str] = []
    for p in _as_paths(paths):
        order.append(str(p))
        if nworkers > 1 and _parallel_ok(p, parallel.MIN_PARALLEL_BYTES):
            parts.append(parallel.timeline_parallel(p, lenient, nworkers))
        else:
            load_file_into(loader, p)
    if not parts:
        return loader.timeline()
    if loader.report.files:
        parts.append(loader.timeline())
    tl = Timeline.concat(parts)
    report = LoadReport(files=order)
    for part in parts:
        r = part.load_report
        report.lines += r.lines
        report.spans += r.spans
        report.lines_skipped += r.lines_skipped
        report.spans_skipped += r.spans_skipped
        report.reasons.update(r.reasons)
        report.problems.extend(r.problems)
    tl.load_report = report
    return tl


def _parallel_ok(path: PathLike, min_bytes: int) -> bool:
    """A large, plain, JSON Lines file (not gzip, not binary, not one pretty-printed object)."""
    try:
        if os.path.getsize(path) < min_bytes:
            return False
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head[:2] != _GZIP_MAGIC and b"\x00" not in head and head.split(b"\n", 1)[0].strip() != b"{"


def load_file_into(loader: TraceLoader, path: PathLike) -> None:
    """Feed a whole file to ``loader``; handles empty files and single pretty-printed requests."""
    loader.report.files.append(str(path))
    try:
        f = open_trace_file(path)
    except TraceFormatError as e:
        if not loader.lenient:
            raise
        loader.report.add(e, line_skipped=False)
        return
    before = loader.report.lines
    problems_before = sum(loader.report.reasons.values())
    with f:
        try:
            for line_no, (line, terminated, _) in enumerate(iter_lines(f), 1):
                if line_no == 1 and line.strip() == b"{" and _try_whole_file(loader, path):
                    return  # one pretty-printed request, not JSON Lines
                loader.feed(path, line_no, line, terminated)
        except (EOFError, gzip.BadGzipFile, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            loader.resolve()  # problems of the lines before come first
            err = TraceFormatError(path, None, None, f"corrupt or truncated gzip stream ({e})", "bad gzip")
            if not loader.lenient:
                raise err from None
            loader.report.add(err, line_skipped=False)
    loader.resolve()  # this file's problems before the next file's
    if loader.report.lines == before and sum(loader.report.reasons.values()) == problems_before:
        err = TraceFormatError(path, None, None, "empty file (no trace data)", "empty file")
        if not loader.lenient:
            raise err
        loader.report.add(err, line_skipped=False)


def _try_whole_file(loader: TraceLoader, path) -> bool:
    """A file holding one pretty-printed request (not JSON Lines): accept it if it decodes."""
    try:
        with open_trace_file(path) as f:
            data = f.read(1 << 30)
        req = request_decoder.decode(data)
    except Exception:  # noqa: BLE001 - not a whole-file request either: report the line error
        return False
    loader.resolve()
    loader.report.lines += 1
    loader._add_request(path, 1, req)
    return True
