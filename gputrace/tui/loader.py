"""Loading traces for the TUI off the UI thread, in batches (toolong's pattern).

`batch_updates` consumes an iterable of `Part`s (Timelines read from a file a chunk at a
time), and yields an `Update` -- the merged Timeline so far plus its render index -- at most
every ``batch_time`` seconds (and less often when merging gets slower, so a big file costs
O(n log n) overall rather than once per batch). The first update comes after the first
part, so the first screen appears before the whole file is read.

`trace_parts` adapts the timeline reader (``gputrace.timeline.load``) to `Part`s.

Threading: both generators run on a worker thread (``App.run_worker(thread=True)``); the
worker posts each `Update` to the app as a message. ``cancelled()`` is polled between
parts. Errors propagate as `LoadError` with a one-line message fit for the screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from gputrace.timeline.model import Timeline
from gputrace.tui.index import TimelineIndex

#: Follow mode: the longest wait between updates while data keeps arriving (seconds), unless
#: one merge costs more than a quarter of it.
FOLLOW_MAX_INTERVAL = 1.0


class LoadError(Exception):
    """A trace could not be shown; ``str`` is one line naming the file (and line)."""


@dataclass
class Part:
    """Progress from a source: either a disjoint chunk of spans (``timeline``, merged with
    earlier chunks by ``Timeline.concat``) or, for sources that accumulate themselves, a
    ``snapshot`` callable returning everything read so far (called only when an update is
    due, so a cheap progress Part per few thousand lines costs nothing). Neither: progress
    only (also a heartbeat that lets a follow loop notice cancellation)."""

    timeline: Timeline | None = None
    done_bytes: int = 0
    total_bytes: int = 0
    note: str = ""  # e.g. a LoadReport summary of what a lenient read skipped
    snapshot: Callable[[], Timeline] | None = None
    idle: bool = False  # the source is quiet (a follow heartbeat): post whatever is pending now


@dataclass
class Update:
    """What the UI shows next: the whole data so far, indexed."""

    index: TimelineIndex
    spans: int
    done_bytes: int
    total_bytes: int
    final: bool
    note: str = ""
    build_s: float = 0.0
    parts: int = field(default=0)

    @property
    def fraction(self) -> float:
        return 1.0 if self.final or not self.total_bytes else min(1.0, self.done_bytes / self.total_bytes)


def batch_updates(
    parts: Iterable[Part],
    *,
    batch_time: float = 0.25,
    cancelled: Callable[[], bool] = lambda: False,
    origin: int | None = None,
    final: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Update]:
    """Merge parts and yield indexed updates (see module docstring).

    ``final=False`` (follow mode) never marks an update final, and the interval between
    updates stops growing at ``max(FOLLOW_MAX_INTERVAL, 4 x one merge)``. Parts with no spans
    only advance progress. An ``idle`` part (the source went quiet) posts what is pending as
    soon as ``max(batch_time, 2 x one merge)`` has passed since the last update, so a live
    view shows the end of a run within about a second of the writer stopping instead of
    waiting for data that never comes.
    """
    acc: list[Timeline] = []
    snap: Callable[[], Timeline] | None = None
    merged: Timeline | None = None
    last: TimelineIndex | None = None  # the index of the last update posted
    last_post = None
    interval = batch_time
    done = total = 0
    note = ""
    pending = False
    n_parts = 0
    upd_s = 0.0
    for part in parts:
        if cancelled():
            return
        n_parts += 1
        done, total = part.done_bytes, part.total_bytes
        note = part.note  # sources repeat the full note in every part
        if part.timeline is not None and part.timeline.n:
            acc.append(part.timeline)
            pending = True
        if part.snapshot is not None:
            snap, pending = part.snapshot, True
        now = clock()
        # Near the end of a finite read, wait for the final update instead of merging twice.
        nearly_done = final and total > 0 and done >= 0.85 * total and last_post is not None
        due = min(interval, max(batch_time, 2.0 * upd_s)) if part.idle else interval
        if pending and not nearly_done and (last_post is None or now - last_post >= due):
            if snap is not None:
                merged = None  # let the previous snapshot go before building the next
            merged, upd = _merge(merged, acc, origin, snap)
            acc = []
            if merged.n == 0:  # a snapshot with nothing in it yet
                pending = False
                continue
            if origin is None:
                origin = upd.origin
            upd_s = clock() - now
            # Back off: intervals grow geometrically and stay >= 4x the cost of one merge,
            # so re-merging costs a bounded fraction of the load (toolong posts every 0.25 s
            # because its batches are cheap; ours re-sort everything so far).
            interval = max(batch_time, 1.5 * interval, 4.0 * upd_s)
            if not final:  # live: keep the view current, however long the run
                interval = min(interval, max(FOLLOW_MAX_INTERVAL, 4.0 * upd_s))
            last_post = clock()
            pending = False
            last = upd
            yield Update(upd, merged.n, done, total, False, note, upd_s, n_parts)
    if cancelled():
        return
    if not pending and merged is not None and last is not None and final:
        # Nothing arrived since the last update (a source read whole, e.g. a cached trace, posts one part):
        # the final update is that index again, not a second merge and index of the same data.
        yield Update(last, merged.n, done, total, final, note, 0.0, n_parts)
    elif pending or merged is None or final:
        t = clock()
        if snap is not None:
            merged = None
        merged, upd = _merge(merged, acc, origin, snap)
        yield Update(upd, merged.n, done, total, final, note, clock() - t, n_parts)


def _merge(merged: Timeline | None, acc: list[Timeline], origin: int | None,
           snap: Callable[[], Timeline] | None) -> tuple[Timeline, TimelineIndex]:
    if snap is not None:
        tl = snap()
        if acc:
            tl = Timeline.concat([tl, *acc])
    else:
        parts = ([merged] if merged is not None else []) + acc
        tl = Timeline.concat(parts) if parts else Timeline.empty()
    return tl, TimelineIndex.build(tl, origin=origin if origin is not None else (tl.t0 if tl.n else 0))


def check_paths(paths: Sequence[str]) -> None:
    """Raise `LoadError` for a missing, unreadable or empty file (before any parsing); the checks
    are the entrance's (`gputrace.timeline.load.check_paths`)."""
    from gputrace.timeline.load import UnreadableTrace, check_paths as _check

    try:
        _check(paths)
    except UnreadableTrace as e:
        raise LoadError(str(e)) from None
