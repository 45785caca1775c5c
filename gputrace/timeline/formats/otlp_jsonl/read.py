"""Whole reads of OTLP JSON Lines files: ``read_otlp`` (paths -> one Timeline) and ``parallel_workers``, the one
decision whether a file is read by worker processes.

Reads files written by gputrace, by the official ``opentelemetry-exporter-otlp-json-file`` package and by the
OpenTelemetry Collector's file exporter: one ``ExportTraceServiceRequest`` per line, lines in any order, any
number of resources per line and files per load, gzip-compressed files (detected by their magic bytes), blank
lines ignored. The span -> row mapping is in docs/trace-format.md.

Errors: ``TraceFormatError`` naming file, line and field (``lenient=True`` skips what cannot be read and
records it in ``Timeline.load_report``), OSError from the file system. Runs on the caller's thread (worker
processes for a big plain file).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from gputrace.timeline._gc import collector_paused
from gputrace.timeline._lines import PathLike, head, is_gzip
from gputrace.timeline.errors import LoadReport
from gputrace.timeline.formats.otlp_jsonl._feed import load_file_into
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.timeline.model import Timeline

__all__ = ["read_otlp", "parallel_workers"]


def as_paths(paths: PathLike | Iterable[PathLike]) -> list:
    """One path or several, as a list."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


def parallel_workers(path: PathLike, workers: int | None = None) -> int:
    """Worker processes to read ``path`` with; 1 means in-process.

    More than one only for a plain (not gzip, not binary, not one pretty-printed object) OTLP file
    of at least ``parallel.MIN_PARALLEL_BYTES``, with ``workers`` (default
    ``parallel.default_workers()``, which is 1 below ``parallel.MIN_PARALLEL_CPUS`` CPUs) above 1.
    """
    from gputrace.timeline.formats.otlp_jsonl import parallel

    n = parallel.default_workers() if workers is None else max(1, int(workers))
    if n <= 1:
        return 1
    try:
        if os.path.getsize(path) < parallel.MIN_PARALLEL_BYTES:
            return 1
        h = head(path)
    except OSError:
        return 1
    if is_gzip(h) or b"\x00" in h or h.split(b"\n", 1)[0].strip() == b"{":
        return 1
    return n


def read_otlp(paths: PathLike | Sequence[PathLike], lenient: bool = False, workers: int | None = None) -> Timeline:
    """Read one or more OTLP JSON Lines files (plain or gzip) into one Timeline.

    Raises ``TraceFormatError`` (file, line, field) for unreadable input unless ``lenient``, in
    which case bad lines/spans are skipped and counted in ``timeline.load_report``. Raises
    ``OSError`` (e.g. FileNotFoundError) for files that cannot be opened. ``workers``: see
    ``parallel_workers`` (``1`` reads everything in-process).

    The cyclic garbage collector is paused while reading (process-wide; re-enabled afterwards if it
    was on), as ``read_chrome`` and ``read_nsys`` do: a read makes millions of objects and no cycles,
    and the collector's passes over the attribute dicts already read grow with the trace.
    """
    with collector_paused():
        return _read_otlp(paths, lenient, workers)


def _read_otlp(paths, lenient: bool, workers: int | None) -> Timeline:
    from gputrace.timeline.formats.otlp_jsonl import parallel

    loader = TraceLoader(lenient=lenient)
    parts: list[Timeline] = []
    order: list[str] = []
    for p in as_paths(paths):
        order.append(str(p))
        n = parallel_workers(p, workers)
        if n > 1:
            parts.append(parallel.timeline_parallel(p, lenient, n))
        else:
            load_file_into(loader, p)
    if not parts:
        return loader.timeline(release=True)
    if loader.report.files:
        parts.append(loader.timeline(release=True))
    tl = Timeline.concat(parts)
    report = LoadReport(files=order)
    for part in parts:
        if part.load_report is not None:  # every reader sets one
            report.absorb(part.load_report, files=False)
    tl.load_report = report
    return tl
