"""Trace files as a stream of loader `Part`s: read once, or follow a file being written.

A thin adapter: all reading (format sniffing, progressive slices, follow, parallel reads,
leniency) is the entrance's, `gputrace.timeline.load.load_steps`; this module turns its
``LoadStep``s into `Part`s and its ``UnreadableTrace`` into `LoadError` (one line for the screen).

Runs on the loader's worker thread; ``stop_event`` (the worker's ``cancelled_event``) ends
a follow promptly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from gputrace.tui.loader import LoadError, Part


def trace_parts(
    paths: Sequence[str],
    *,
    follow: bool = False,
    stop_event: threading.Event | None = None,
    interval: float = 0.05,
    parallel: bool = True,
) -> Iterator[Part]:
    """Parts for ``paths`` (see ``gputrace.timeline.load.load_steps``). Raises `LoadError` for a
    missing, empty or unreadable file, and the readers' format errors."""
    from gputrace.timeline.load import UnreadableTrace, load_steps

    try:
        for step in load_steps(paths, follow=follow, stop_event=stop_event, interval=interval, parallel=parallel):
            yield Part(done_bytes=step.done_bytes, total_bytes=step.total_bytes, note=step.note,
                       snapshot=step.snapshot, idle=step.idle)
    except UnreadableTrace as e:
        raise LoadError(str(e)) from None
