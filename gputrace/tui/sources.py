"""Trace files as a stream of loader `Part`s: read once, or follow a file being written.

Drives the timeline reader's incremental `TraceLoader` (``gputrace.timeline.reader``):
lines are fed as they are read and a cheap progress `Part` is yielded every few
thousand lines / ``tick`` seconds, carrying ``loader.timeline`` as its snapshot, so the
consumer (`gputrace.tui.loader.batch_updates`) decides when to materialise the Timeline.

Lenient: lines that cannot be read are skipped and summarised in ``Part.note`` (the
reader's ``LoadReport.summary()``); a file where *nothing* can be read raises the
reader's first ``TraceFormatError`` (file:line: field: problem), and a missing/empty file
raises `LoadError`, so the TUI can show one clear line.

Runs on the loader's worker thread. ``follow=True`` never ends by itself: at end of file
it waits ``poll`` seconds and reads again (a partial last line waits for its newline),
yielding heartbeat Parts so the worker can be cancelled.
"""

from __future__ import annotations

import os
import time
from typing import Iterator, Sequence

from gputrace.tui.loader import LoadError, Part, check_paths


def trace_parts(
    paths: Sequence[str],
    *,
    follow: bool = False,
    tick: float = 0.05,
    poll: float = 0.2,
    wait_for_file: bool = False,
) -> Iterator[Part]:
    """Parts for ``paths`` (see the module docstring). ``wait_for_file`` (follow/listen):
    a file that does not exist yet is waited for instead of being an error."""
    from gputrace.timeline.reader import TraceLoader, iter_lines, open_trace_file

    paths = [os.fspath(p) for p in paths]
    if not (follow and wait_for_file):
        check_paths(paths)
    loader = TraceLoader(lenient=True)
    total = sum(os.path.getsize(p) for p in paths if os.path.exists(p))
    done = 0
    last = time.monotonic()

    def part() -> Part:
        return Part(done_bytes=done, total_bytes=max(total, done), note=loader.report.summary(),
                    snapshot=loader.timeline)

    if not follow:
        for p in paths:
            if os.path.getsize(p) == 0:
                raise LoadError(f"{p}: empty file (no trace data)")
            loader.report.files.append(p)
            base = done
            before = (loader.report.lines, loader.report.lines_skipped)
            with open_trace_file(p) as f:
                for line_no, (line, terminated, consumed) in enumerate(iter_lines(f), 1):
                    loader.feed(p, line_no, line, terminated)
                    done = base + consumed
                    if line_no % 64 == 0 and time.monotonic() - last >= tick:
                        last = time.monotonic()
                        yield part()
            _check_readable(loader, p, before)
        yield part()
        return

    # Follow: one file (the one being written). Partial lines wait for their newline.
    if len(paths) != 1:
        raise LoadError("--follow takes exactly one trace file")
    p = paths[0]
    while not os.path.exists(p):
        yield Part(note=f"waiting for {p}")
        time.sleep(poll)
    loader.report.files.append(p)
    line_no = 0
    buf = b""
    with open(p, "rb") as f:
        while True:
            data = f.read(1 << 22)
            if data:
                buf += data
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    line_no += 1
                    loader.feed(p, line_no, ln, True)
                done = f.tell() - len(buf)
                total = max(total, f.tell())
                if lines:
                    yield part()
                continue
            total = os.path.getsize(p)
            yield Part(done_bytes=done, total_bytes=total, note=loader.report.summary())
            time.sleep(poll)


def _check_readable(loader, path: str, before: tuple[int, int]) -> None:
    """Raise the first problem of ``path`` if not one of its lines could be read."""
    rep = loader.report
    lines, skipped = rep.lines - before[0], rep.lines_skipped - before[1]
    if lines == 0:
        raise LoadError(f"{path}: no trace data (blank file)")
    if skipped >= lines:
        first = next((e for e in rep.problems if e.path == path), None)
        raise LoadError(f"not an OTLP JSON Lines trace: {first if first else path}")
