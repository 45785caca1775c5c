"""Trace files as a stream of loader `Part`s: read once, or follow a file being written.

Built on the timeline engineer's progressive readers: `gputrace.timeline.incremental.iter_load`
(slices of ~``interval`` s of reading, a cumulative Timeline built only when asked) and
``follow`` (tails a growing file, restarts on truncation/rotation), plus
`gputrace.timeline.parallel.timeline_parallel` for big plain files. Chrome/Perfetto JSON and
Nsight Systems SQLite files (recognised by `gputrace.interop.formats.sniff`) are read whole by
`gputrace.interop.formats.read_any` and shown when read.

Big plain files (>= ``MIN_PARALLEL_BYTES``, ``PARALLEL_MIN_CPUS`` CPUs or more): the first slice is read in
this process and shown at once (the first screen), then the whole file is read by worker
processes (JSON decoding holds the GIL, so threads would not help) and shown when done.
Everything else: every slice is a `Part` whose ``snapshot`` is the cumulative Timeline
(previous files plus the current one), built only when `batch_updates` decides to post.

Lenient: unreadable lines are skipped and summarised in ``Part.note``; a file where nothing
could be read raises `LoadError` with the reader's first problem (``file:line: ...``), a
missing or empty file raises `LoadError`; a binary file raises the reader's TraceFormatError.

Runs on the loader's worker thread; ``stop_event`` (the worker's ``cancelled_event``) ends
a follow promptly.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Callable, Iterator, Sequence

from gputrace.timeline.model import Timeline
from gputrace.tui.loader import LoadError, Part, check_paths


#: Read big files with worker processes only from this many CPUs up: on our 2-CPU CI box a
#: 1 M-span file took 12.3 s with 2 worker processes and 10.0 s in-process (spawn, import
#: and pickling costs eat the gain), so two CPUs read in-process.
PARALLEL_MIN_CPUS = 4


def trace_parts(
    paths: Sequence[str],
    *,
    follow: bool = False,
    stop_event: threading.Event | None = None,
    interval: float = 0.05,
    parallel: bool = True,
) -> Iterator[Part]:
    """Parts for ``paths`` (see the module docstring)."""
    from gputrace.timeline.incremental import iter_load

    paths = [os.fspath(p) for p in paths]
    if follow:
        yield from _follow(paths, stop_event or threading.Event(), interval)
        return
    check_paths(paths)
    total = sum(os.path.getsize(p) for p in paths)
    finished: list[Timeline] = []
    base = 0
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            raise LoadError(f"{p}: empty file (no trace data)")
        kind = _sniff(p)
        if kind != "otlp":  # Chrome/Perfetto JSON or an Nsight Systems SQLite export: read whole
            from gputrace.interop.formats import read_any

            yield Part(done_bytes=base, total_bytes=total, note=f"reading {os.path.basename(p)} ({kind})…")
            tl = read_any([p])
            finished.append(tl)
            base += size
            yield Part(done_bytes=base, total_bytes=total, note=_notes(finished),
                       snapshot=_cumulative(finished[:-1], lambda tl=tl: tl))
            continue
        use_par = parallel and size >= _min_parallel() and _workers() >= PARALLEL_MIN_CPUS and not _is_gzip(p)
        last = None
        gen = iter_load(p, interval=interval, lenient=True, stop_event=stop_event)
        try:
            for prog in gen:
                last = prog
                yield Part(done_bytes=base + prog.bytes_read, total_bytes=total, note=prog.report.summary(),
                           snapshot=_cumulative(finished, prog.loader.timeline))
                if use_par and not prog.done:
                    break  # the first screen is out: read the rest with all CPUs
        finally:
            gen.close()
        if last is None:  # stopped
            return
        if use_par and not last.done:
            yield Part(done_bytes=base + last.bytes_read, total_bytes=total,
                       note=f"reading {os.path.basename(p)} with {_workers()} processes…")
            from gputrace.timeline.parallel import timeline_parallel

            _ensure_resource_tracker()
            tl = timeline_parallel(p, lenient=True)
            report = tl.load_report
        else:
            tl = last.timeline
            report = last.report
        _check_readable(report, p)
        finished.append(tl)
        base += size
        yield Part(done_bytes=base, total_bytes=total, note=_notes(finished),
                   snapshot=_cumulative(finished[:-1], lambda tl=tl: tl))


def _follow(paths: list[str], stop_event: threading.Event, interval: float) -> Iterator[Part]:
    from gputrace.timeline.incremental import follow

    if len(paths) != 1:
        raise LoadError("--follow takes exactly one trace file")
    p = paths[0]
    if not os.path.exists(p):
        yield Part(note=f"waiting for {p}")
    for prog in follow(p, stop_event, interval=interval, lenient=True):
        if prog.idle:  # the writer is quiet: lets the loader post what it holds
            yield Part(done_bytes=prog.bytes_read, total_bytes=prog.bytes_total, note=prog.report.summary(), idle=True)
            continue
        yield Part(done_bytes=prog.bytes_read, total_bytes=prog.bytes_total, note=prog.report.summary(),
                   snapshot=prog.loader.timeline)


def _cumulative(finished: list[Timeline], current: Callable[[], Timeline]) -> Callable[[], Timeline]:
    done = list(finished)

    def snap() -> Timeline:
        return Timeline.concat([*done, current()]) if done else current()

    return snap


def _notes(finished: list[Timeline]) -> str:
    notes = [getattr(t, "load_report", None) for t in finished]
    return "; ".join(r.summary() for r in notes if r is not None and r.summary())


def _check_readable(report, path: str) -> None:
    """Raise the first problem of ``path`` if not one of its lines could be read."""
    if report is None:
        return
    if report.lines == 0:
        raise LoadError(f"{path}: empty file (no trace data)")
    if report.lines_skipped >= report.lines and report.spans == 0:
        first = next((e for e in report.problems if e.path == path), None)
        raise LoadError(f"not an OTLP JSON Lines trace: {first if first else path}")


def _ensure_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with the real stderr.

    Textual replaces ``sys.stderr`` with a capture object whose ``fileno()`` is -1; the
    tracker passes ``sys.stderr.fileno()`` to its process and spawning fails with "bad
    value(s) in fds_to_keep". Started once here, later spawns reuse it.
    """
    from multiprocessing import resource_tracker

    saved = sys.stderr
    try:
        if sys.__stderr__ is not None:
            sys.stderr = sys.__stderr__
        resource_tracker.ensure_running()
    finally:
        sys.stderr = saved


def _sniff(path: str) -> str:
    """'otlp', 'chrome' or 'nsys' by the file's first bytes (the interop engineer's sniffer)."""
    from gputrace.interop.formats import sniff

    return sniff(path)


def _min_parallel() -> int:
    from gputrace.timeline.parallel import MIN_PARALLEL_BYTES

    return MIN_PARALLEL_BYTES


def _workers() -> int:
    from gputrace.timeline.parallel import default_workers

    return default_workers()


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"
