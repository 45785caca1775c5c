"""The one entrance: trace file paths -> ``Timeline``. Nothing outside ``gputrace.timeline`` opens
trace files; the CLI, the TUI and the analysis call this module.

What it owns:

* **Formats**: which format a file is (``sniff``, by content, never by name; gzip is looked through) and
  which functions read and write it come from the table in ``gputrace.timeline.formats`` (``FORMATS``):
  Nsight Systems SQLite exports, Chrome/Perfetto Trace Event JSON, Jaeger JSON (write only) and OTLP JSON
  Lines (ours, the OTel file exporter's, the Collector's file exporter's; the fallback). ``read_as``,
  ``write_as`` and ``convert`` (``gputrace import``) take a format name.
* **Parallelism** (``parallel_workers``, from the OTLP reader): the one decision whether a file is read by
  worker processes (big, plain, enough CPUs).
* **Leniency**: ``lenient=True`` skips what cannot be read and records it in
  ``Timeline.load_report``; every complete line before a damaged gzip stream is kept.
* **Segment folders** (``gputrace record``'s ``<trace>.d/`` before it joined them, or after it was killed:
  ``formats.otlp_jsonl.segments``): a folder path, or a trace path that is missing while its folder exists,
  reads as the segments joined; a segment's cut last line is left out and reported in ``load_report``.
* **Whole reads** (``read_any``, ``read_otlp``), **progressive reads and follow** (``load_steps``:
  what the TUI shows while loading) and **run splitting** (``load_runs``).

Errors: ``TraceFormatError``/``NsysFormatError``/``ChromeFormatError`` (ValueErrors naming file,
line and field), ``UnreadableTrace`` (a ValueError: missing, empty, a directory, nothing
readable), ``OSError`` from the file system. Everything runs on the caller's thread;
``load_steps`` is a generator meant for a worker thread.

Module map (the reasons are in docs/architecture.md): ``formats/`` one folder per format and the table,
``_lines`` bytes and lines (gzip), ``cache`` the columnar cache, ``runs`` run splitting.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from gputrace.timeline._lines import PathLike
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.formats import FORMATS, NATIVE, Format, sniff
from gputrace.timeline.formats.otlp_jsonl.read import as_paths, parallel_workers, read_otlp
from gputrace.timeline.model import Timeline
from gputrace.timeline.runs import split_runs

if TYPE_CHECKING:
    from gputrace.timeline.formats.otlp_jsonl.convert import Converted

__all__ = ["sniff", "read_any", "read_otlp", "load_runs", "load_steps", "LoadStep", "UnreadableTrace",
           "parallel_workers", "check_paths", "read_as", "write_as", "convert", "concat_reports", "FORMATS",
           "TraceFormatError"]


class UnreadableTrace(ValueError):
    """A path that holds no trace to read: missing, a directory, empty, or not one line readable.
    ``str`` is one line naming the file (and the first problem)."""


# ---- whole reads -----------------------------------------------------------------------
def read_any(paths: PathLike | Sequence[PathLike], lenient: bool = False, workers: int | None = None) -> Timeline:
    """Read trace files of any supported format (by content) into one Timeline.

    A trace of at least ``cache.min_bytes()`` is loaded from the columnar cache when it has a valid
    entry, and stored there after it is read (``gputrace.timeline.cache``). The load reports of the
    files are merged into ``timeline.load_report``.

    Errors are the format readers' own (``TraceFormatError``, ``NsysFormatError``,
    ``ChromeFormatError``; all ValueErrors naming the file) and OSError for unreadable paths.
    """
    from gputrace.timeline import cache

    parts = []
    together: dict[str, list] = {}  # files of a read_many format, read into one Timeline after the others
    files, _, cut = _segments_joined(as_paths(paths))
    for p in files:
        if cache.wanted(p):
            tl = cache.load(p, lenient)
            if tl is None:
                key = cache.source_key(p)
                tl = _read_one(p, sniff(p), lenient, workers)
                cache.store(p, tl, key)
            parts.append(tl)
            continue
        kind = sniff(p)
        if FORMATS[kind].read_many:
            together.setdefault(kind, []).append(p)
        else:
            parts.append(_read_one(p, kind, lenient, workers))
    for kind, group in together.items():
        parts.append(_read(FORMATS[kind], group, lenient=lenient, workers=workers))
    tl = concat_reports(parts)
    if cut is not None:
        if isinstance(tl.load_report, LoadReport):
            cut.absorb(tl.load_report)
        tl.load_report = cut
    return tl


def _segments_joined(paths: list) -> tuple[list, list[str], LoadReport | None]:
    """``paths`` with each segment folder (see the module doc) replaced by its joined copy; the one-line
    notes saying so; a ``LoadReport`` of the cut last lines left out (None when none). Raises
    ``UnreadableTrace`` for a folder without one whole line, OSError."""
    from gputrace.timeline.formats.otlp_jsonl import segments

    out, notes, report = [], [], None
    for p in paths:
        folder = segments.segment_folder(p)
        if folder is None:
            out.append(p)
            continue
        path, segs = segments.joined(folder)
        if not any(s.lines for s in segs):
            raise UnreadableTrace(f"{folder}: no whole line in its {len(segs)} segment(s) yet")
        out.append(path)
        notes.append(segments.describe(folder, segs))
        cut = segments.cut_report(folder, segs)
        if cut is not None:
            report = report or LoadReport()
            report.absorb(cut)
    return out, notes, report


def _format(kind: str, role: str) -> Format:
    fmt = FORMATS.get(kind)
    if fmt is None or not fmt.has(role):
        known = ", ".join(f.name for f in FORMATS.values() if f.has(role))
        raise ValueError(f"unknown trace format {kind!r} (known: {known})")
    return fmt


def _options(allowed: tuple[str, ...], options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in allowed}


def _read(fmt: Format, paths: list[PathLike], **options: Any) -> Timeline:
    """``fmt``'s read of ``paths`` (one path unless ``fmt.read_many``) with the options it takes."""
    read = fmt.function("read")
    opts = _options(fmt.read_options, options)
    if fmt.read_many:
        return read(paths, **opts)
    (path,) = paths
    return read(os.fspath(path), **opts)


def _read_one(p: PathLike, kind: str, lenient: bool, workers: int | None) -> Timeline:
    return _read(FORMATS[kind], [p], lenient=lenient, workers=workers)


def read_as(path: PathLike, kind: str, **options: Any) -> Timeline:
    """Read one file as ``kind`` (a name in ``FORMATS`` with a reader: ``'nsys'``, ``'chrome'`` or ``'otlp'``)
    whatever its content says, with that reader's options (nsys: ``host``, ``runtime``,
    ``correlation_ids``; chrome: ``host``; otlp: ``lenient``, ``workers``; others are refused by the reader).
    Raises ValueError for an unknown kind, and the reader's errors."""
    fmt = _format(kind, "read")
    read = fmt.function("read")
    return read([path] if fmt.read_many else os.fspath(path), **options)


def write_as(tl: Timeline, path: PathLike, kind: str, **options: Any) -> str:
    """Write ``tl`` to ``path`` as ``kind`` (a name in ``FORMATS`` with a writer), passing the options that
    format's writer takes (chrome: ``flows``) and dropping the others; returns what was written, in words
    (``'12 events'``). Raises ValueError for an unknown kind, OSError (a failed write leaves no file)."""
    fmt = _format(kind, "write")
    n = fmt.function("write")(tl, path, **_options(fmt.write_options, options))
    return fmt.written.format(n=n, spans=tl.n)


def convert(path: PathLike, kind: str, out: PathLike, **options: Any) -> Converted:
    """``gputrace import``: read ``path`` as ``kind`` (with the options its reader takes, the others dropped)
    and write it to ``out`` in the native format, with its cache entry; returns the native format's
    ``Converted`` (spans, lanes, gpus, lines). Errors: ``read_as``'s and the writer's (OSError)."""
    fmt = _format(kind, "read")
    write = FORMATS[NATIVE].function("convert")
    return write(partial(read_as, path, kind, **_options(fmt.read_options, options)), out, os.fspath(path))


def concat_reports(parts: list[Timeline]) -> Timeline:
    """``Timeline.concat`` that keeps the parts' load reports (merged, in file order)."""
    if len(parts) == 1:
        return parts[0]
    tl = Timeline.concat(parts)
    reports = [p.load_report for p in parts if isinstance(p.load_report, LoadReport)]
    if reports:
        report = LoadReport()
        for r in reports:
            report.absorb(r)
        tl.load_report = report
    return tl


def load_runs(paths: Sequence[PathLike], lenient: bool = False) -> tuple[list[Timeline], list[str]]:
    """(Timelines, labels): one per run; a file holding several runs is split by run id
    (``runs.split_runs``); runs without spans are dropped. Errors as ``read_any``."""
    from pathlib import Path

    tls, labels = [], []
    for p in as_paths(paths):
        parts = split_runs(read_any([p], lenient=lenient))
        for i, t in enumerate(parts):
            if t.n == 0:
                continue
            tls.append(t)
            labels.append(Path(p).name if len(parts) == 1 else f"{Path(p).name}#{i}")
    return tls, labels


# ---- progressive reads (viewers) -------------------------------------------------------
@dataclass
class LoadStep:
    """One step of ``load_steps``: progress, and (when something new was read) ``snapshot``, a
    callable building everything read so far (called only when a viewer is ready to draw, so a
    step costs nothing until then). ``note``: what a lenient read skipped so far, one line."""

    done_bytes: int = 0
    total_bytes: int = 0
    note: str = ""
    snapshot: Callable[[], Timeline] | None = None
    idle: bool = False  # follow: a heartbeat while the file is quiet (nothing new; a viewer may post what it holds)


def check_paths(paths: Sequence[PathLike]) -> None:
    """Raise ``UnreadableTrace`` for a missing, unreadable or directory path, or no path at all."""
    if not paths:
        raise UnreadableTrace("no trace file given")
    from gputrace.timeline.formats.otlp_jsonl.segments import segment_folder

    for p in paths:
        if segment_folder(p) is not None:
            continue
        if not os.path.exists(p):
            raise UnreadableTrace(f"{p}: no such file")
        if os.path.isdir(p):
            raise UnreadableTrace(f"{p}: is a directory, not a trace file")
        if not os.access(p, os.R_OK):
            raise UnreadableTrace(f"{p}: permission denied")


def load_steps(
    paths: Sequence[PathLike],
    *,
    follow: bool = False,
    stop_event: threading.Event | None = None,
    interval: float = 0.05,
    parallel: bool = True,
) -> Iterator[LoadStep]:
    """Read ``paths`` leniently, yielding a ``LoadStep`` about every ``interval`` s of reading
    (the first screen appears before the whole file is read).

    OTLP files are read in slices (``incremental.iter_load``); a big plain file (see
    ``parallel_workers``) shows its first slice, then is read whole by worker processes. A big Chrome
    JSON file shows its first events (``read_chrome_head``), then is read whole; Nsight SQLite files
    are read whole. ``follow``: one file, tailed while a writer
    appends (``incremental.follow``) until ``stop_event`` is set. A big trace with a valid entry in
    the columnar cache (``gputrace.timeline.cache``) is shown from it at once; one read here is
    stored there by a background thread. A segment folder (module doc) is read joined, its note leading
    every step's. Raises ``UnreadableTrace`` for
    a missing or empty file or one where nothing could be read, and the format readers' errors.
    """
    files = [os.fspath(p) for p in paths]
    stop = stop_event or threading.Event()
    if follow:
        yield from _follow_steps(files, stop, interval)
        return
    check_paths(files)
    files, notes, cut = _segments_joined(files)
    if notes:
        extra = "; ".join([*notes, *([cut.summary()] if cut is not None else [])])
        for step in _steps(files, stop, interval, parallel):
            step.note = f"{extra}; {step.note}" if step.note else extra
            yield step
        return
    yield from _steps(files, stop, interval, parallel)


def _steps(files: list[str], stop: threading.Event, interval: float, parallel: bool) -> Iterator[LoadStep]:
    """``load_steps`` of plain files (checked)."""
    from gputrace.timeline import cache

    total = sum(os.path.getsize(p) for p in files)
    finished: list[Timeline] = []
    base = 0
    for p in files:
        size = os.path.getsize(p)
        if size == 0:
            raise UnreadableTrace(f"{p}: empty file (no trace data)")
        cached = None
        key = None  # decided once, before the read: a file that grows past the threshold meanwhile is not stored
        if cache.wanted(p):
            key = cache.source_key(p)
            cached = cache.load(p, lenient=True)
        if cached is not None:
            tl = cached
            if tl.n > 2 * PREVIEW_SPANS:  # indexing 10 M spans takes seconds: draw the earliest ones first
                yield LoadStep(base + size * PREVIEW_SPANS // tl.n, total, "",
                               _cumulative(finished, partial(_preview, tl)))
        else:
            fmt = FORMATS[sniff(p)]
            if not fmt.has("read_steps"):
                yield LoadStep(base, total, f"reading {os.path.basename(p)} ({fmt.name})…")
                if fmt.has("read_head") and size >= CHROME_HEAD_BYTES:
                    yield from _head_step(fmt, p, base, total, finished)
                tl = _read_one(p, fmt.name, True, None)
            else:
                tl = yield from _progressive_steps(fmt, p, base, total, finished, stop, interval, parallel)
                if tl is None:  # stopped
                    return
            if key is not None:  # stored off this thread: the final screen does not wait for it
                threading.Thread(target=cache.store, args=(p, tl, key), name="gputrace-cache", daemon=True).start()
        finished.append(tl)
        base += size
        yield LoadStep(base, total, _notes(finished), _cumulative(finished[:-1], partial(_itself, tl)))


#: A cached trace with more than twice this many spans is shown first by its earliest ``PREVIEW_SPANS`` spans (see
#: ``_preview``). Not below: a preview of most of a trace costs its copy and its index (0.6 s at 1 M spans) and
#: shows nothing sooner than indexing the whole of it.
PREVIEW_SPANS = 1_000_000
#: A trace of a format with a head reader (Chrome JSON) of this size or more is shown first by its first
#: ``CHROME_HEAD_EVENTS`` events (read apart, ~0.3 s) while the whole file is read (a 1 M-event PyTorch trace
#: takes ~5 s).
CHROME_HEAD_BYTES = 32 << 20
CHROME_HEAD_EVENTS = 50_000


def _head_step(fmt: Format, p: str, base: int, total: int, finished: list[Timeline]) -> Iterator[LoadStep]:
    head_tl = fmt.function("read_head")(p, CHROME_HEAD_EVENTS)
    if head_tl is not None and head_tl.n:
        yield LoadStep(base, total, f"reading {os.path.basename(p)} ({fmt.name}): its first {head_tl.n:,} spans "
                       "shown…", _cumulative(finished, partial(_itself, head_tl)))


def _itself(tl: Timeline) -> Timeline:
    return tl


def _preview(tl: Timeline) -> Timeline:
    """The ``PREVIEW_SPANS`` earliest-starting spans of ``tl`` (ties may add a few), parents re-linked."""
    start = tl.cols["start"]
    thr = np.partition(start, PREVIEW_SPANS)[PREVIEW_SPANS]
    return tl.select(start < thr)


def _progressive_steps(fmt: Format, p: str, base: int, total: int, finished: list[Timeline],
                       stop: threading.Event, interval: float, parallel: bool):
    """Steps of a format read progressively (OTLP JSON Lines); a big plain file is read by worker
    processes once its first slice is shown (``parallel_workers``)."""
    nworkers = parallel_workers(p) if parallel else 1
    last = None
    gen = fmt.function("read_steps")(p, interval=interval, lenient=True, stop_event=stop)
    try:
        for prog in gen:
            last = prog
            # What is read so far is moved out of the cyclic collector's sight (it holds no cycles): its full
            # passes over the growing attribute dicts cost ~a third of a big read. Not gc.disable(): the UI
            # thread keeps running; unfrozen below, so nothing stays exempt once the file is read.
            gc.freeze()
            yield LoadStep(base + prog.bytes_read, total, prog.report.summary(),
                           _cumulative(finished, prog.loader.timeline))
            if nworkers > 1 and not prog.done:
                break  # the first screen is out: read the rest with all CPUs
    finally:
        gen.close()
        gc.unfreeze()
    if last is None:
        return None
    if nworkers > 1 and not last.done:
        from gputrace.timeline.formats.otlp_jsonl.parallel import timeline_parallel

        yield LoadStep(base + last.bytes_read, total, f"reading {os.path.basename(p)} with {nworkers} processes…")
        tl = timeline_parallel(p, lenient=True, workers=nworkers)
    else:
        tl = last.timeline
    _check_readable(tl.load_report, p)
    return tl


def _follow_steps(paths: list[str], stop: threading.Event, interval: float) -> Iterator[LoadStep]:
    from gputrace.timeline.formats.otlp_jsonl.incremental import follow

    if len(paths) != 1:
        raise UnreadableTrace("--follow takes exactly one trace file")
    p = paths[0]
    if not os.path.exists(p):
        yield LoadStep(note=f"waiting for {p}")
    for prog in follow(p, stop, interval=interval, lenient=True):
        if prog.idle:
            yield LoadStep(prog.bytes_read, prog.bytes_total, prog.report.summary(), idle=True)
            continue
        yield LoadStep(prog.bytes_read, prog.bytes_total, prog.report.summary(), prog.loader.timeline)


def _cumulative(finished: list[Timeline], current: Callable[[], Timeline]) -> Callable[[], Timeline]:
    done = list(finished)

    def snap() -> Timeline:
        return Timeline.concat([*done, current()]) if done else current()

    return snap


def _notes(finished: list[Timeline]) -> str:
    notes = [getattr(t, "load_report", None) for t in finished]
    return "; ".join(r.summary() for r in notes if r is not None and r.summary())


def _check_readable(report: LoadReport | None, path: str) -> None:
    """Raise the first problem of ``path`` if not one of its lines could be read."""
    if report is None:
        return
    if report.lines == 0 and report.spans == 0:
        first = next((e for e in report.problems if e.path == path), None)
        raise UnreadableTrace(str(first) if first is not None and first.reason != "empty file"
                              else f"{path}: empty file (no trace data)")
    if report.lines_skipped >= report.lines and report.spans == 0:
        first = next((e for e in report.problems if e.path == path), None)
        raise UnreadableTrace(f"not an OTLP JSON Lines trace: {first if first else path}")

