"""The text of the title bar and the status bar of the timeline screen.

Pure (no Textual): the screen passes what it shows and prints the result through
`gputrace.tui.widgets.TextLine` (which shows trace text literally). Times are relative nanoseconds
(`gputrace.tui.layout`); ``origin`` is the epoch nanosecond they count from.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import format_duration
from gputrace.tui.loader import Update


def title_line(trace_title: str, index: TimelineIndex) -> str:
    """``gputrace · FILE · N spans · H hosts · G GPUs · DURATION`` for the whole (unfiltered) index."""
    tl = index.timeline
    hosts = {ln.host for ln in tl.lanes}
    gpus = {(ln.host, ln.device) for ln in tl.lanes if ln.device >= 0}
    dur = format_duration(index.t_max - index.t_min)
    return (f"gputrace · {trace_title} · {tl.n:,} spans · {len(hosts)} host{'s' * (len(hosts) != 1)} · "
            f"{len(gpus)} GPU{'s' * (len(gpus) != 1)} · {dur}")


def waiting_line(follow: bool, paths: Sequence[str]) -> str:
    """The status bar before the first spans arrive."""
    return f"{'following' if follow else 'reading'} {', '.join(paths) or 'trace'} · waiting for spans…"


def status_line(u: Update, *, follow: bool, zero: float, view_text: str, range_: tuple[float, float] | None,
                mark_a: float | None, cursor_t: float | None, origin: int | None, filter_text: str,
                search_text: str, matches: int) -> str:
    """The status bar: the measured range (or a pending mark) first, load progress, the reader's note, the
    time cursor (with its wall-clock time when ``origin`` is known), what the view shows, the filter and
    the search. ``zero`` is the relative time readouts count from (the first span shown)."""
    parts = []
    if not u.final:
        if follow and u.total_bytes and u.done_bytes >= u.total_bytes:
            parts.append(f"following · {u.spans:,} spans")
        else:
            parts.append(f"loading {u.fraction:.0%} · {u.spans:,} spans")
    if u.note:
        parts.append(u.note)
    if range_ is not None:  # the measured range comes first: it is what the user asked for
        a, b = range_
        parts.insert(0, f"range {format_duration(b - a, 4)} (+{format_duration(a - zero, 5)} → "
                        f"+{format_duration(b - zero, 5)}; r zooms, Esc clears)")
    elif mark_a is not None:
        parts.insert(0, f"mark A +{format_duration(mark_a - zero, 5)}: b sets B")
    if cursor_t is not None and origin is not None:
        wall = (cursor_t + origin) / 1e9
        parts.append(f"cursor +{format_duration(cursor_t - zero, 5)} "
                     f"({time.strftime('%H:%M:%S', time.localtime(wall))}.{int(wall % 1 * 1e6):06d})")
    parts.append(view_text)
    if filter_text:
        parts.append(f"filter: {filter_text}")
    if search_text:
        parts.append(f"search: {search_text} ({matches:,} matches)")
    return " · ".join(parts)
