"""Analysis results prepared for drawing: what `gputrace.analysis` found, as interval
indexes the Gantt can draw and rows the stalls panel can list.

Pure (no Textual); runs on a worker thread. Only calls the analysis engineer's public
functions; each part is optional so a Timeline without GPUs (or an analysis function
that is not there) just gives fewer overlays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gputrace.timeline.model import Timeline
from gputrace.tui.index import IntervalIndex
from gputrace.tui.layout import format_duration
from gputrace.tui.render import IDLE


@dataclass
class StallItem:
    """One line of the stalls panel: ``amount_ns`` is the time lost (idle, waited, pin+unpin,
    unattributed); ``start``/``end`` (epoch ns) is what to zoom to; ``row`` a span or -1."""

    category: str  # "idle", "wait", "pin", "unattributed", "launch"
    text: str
    start: int
    end: int
    row: int = -1
    device: int = -1
    amount_ns: int = -1

    def __post_init__(self) -> None:
        if self.amount_ns < 0:
            self.amount_ns = self.end - self.start


@dataclass
class Overlays:
    """Everything drawn or listed from the analysis.

    ``gaps``: idle-gap intervals per (host, "GPU n"), relative ns, drawn on device headers.
    ``marks_row``/``marks_start``/``marks_end``/``marks_kind``: intervals (epoch ns) drawn over
    the bar of Timeline row ``marks_row`` -- MARK_WAIT (host time past the device time of a
    span) or MARK_UNATTR (a parent's time that no child covers).
    """

    gaps: dict[tuple, IntervalIndex] = field(default_factory=dict)
    items: list[StallItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be computed, and why
    marks_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))


MARK_WAIT, MARK_UNATTR = 0, 1


def compute_overlays(tl: Timeline, origin: int, *, max_items: int = 12, min_gap_ns: int = 0) -> Overlays:
    """Idle gaps, host waits, pinning and unattributed time from `gputrace.analysis`.

    Every gap and mark is drawn; the list keeps the ``max_items`` largest of each category
    (idle, wait, unattributed) plus every pinning report, largest time lost first."""
    out = Overlays()
    if tl.n == 0:
        return out
    _gaps(tl, origin, out, max_items, min_gap_ns)
    marks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
    _waits(tl, out, max_items, marks)
    _pinning(tl, out)
    _unattributed(tl, out, max_items, marks)
    _launch_gaps(tl, out, max_items, marks)
    out.items.sort(key=lambda it: -it.amount_ns)  # the biggest loss first, whatever its kind
    if marks:
        out.marks_row = np.concatenate([m[0] for m in marks]).astype(np.int64)
        out.marks_start = np.concatenate([m[1] for m in marks]).astype(np.int64)
        out.marks_end = np.concatenate([m[2] for m in marks]).astype(np.int64)
        out.marks_kind = np.concatenate([np.full(len(m[0]), m[3], np.int8) for m in marks])
    return out


def _gaps(tl: Timeline, origin: int, out: Overlays, max_items: int, min_gap_ns: int) -> None:
    from gputrace.analysis import gpu_idle_gaps

    g = gpu_idle_gaps(tl, min_gap_ns=min_gap_ns)
    if len(g) == 0:
        return
    hosts = np.array(g.hosts, dtype=object)[g.host]
    for (h, d) in sorted({(str(h), int(d)) for h, d in zip(hosts.tolist(), g.device.tolist())}):
        m = (hosts == h) & (g.device == d)
        s, e = g.start[m] - origin, g.end[m] - origin
        labels = [f"idle {format_duration(x, 2)}" for x in (e - s).tolist()]
        out.gaps[(h or "?", f"GPU {d}")] = IntervalIndex.of(s, e, IDLE, labels=labels)  # rows.py names "" "?"
    for gap in g.largest(max_items):
        out.items.append(StallItem("idle", gap.describe(), gap.start, gap.end, device=gap.device))


def _waits(tl: Timeline, out: Overlays, max_items: int, marks: list) -> None:
    from gputrace.analysis import host_waits
    from gputrace.analysis.waits import EXCESS, WAIT_KIND_NAMES

    w = host_waits(tl)
    if len(w) == 0:
        return
    c = tl.cols
    ex = w.kind == EXCESS
    if ex.any():
        # Host time after the device finished (or beyond the device duration): the wait.
        rows = w.row[ex]
        g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
        s = np.clip(c["start"][rows] + (g1 - g0), c["start"][rows], c["end"][rows])
        marks.append((rows, s, c["end"][rows], MARK_WAIT))
    top = np.argsort(-w.wait_ns, kind="stable")[:max_items]
    for i in top.tolist():
        r = int(w.row[i])
        dev = int(w.device[i])
        where = tl.lanes[int(c["lane"][r])].name + ("" if dev < 0 else f" GPU {dev}")
        what = WAIT_KIND_NAMES[int(w.kind[i])]
        text = (f"{w.phases[int(w.phase[i])]} on {where}: host waited {format_duration(int(w.wait_ns[i]))}"
                + (" beyond its device time" if what != "sync" else ""))
        out.items.append(StallItem("wait", text, int(w.start[i]), int(w.end[i]), r, dev, int(w.wait_ns[i])))


def _pinning(tl: Timeline, out: Overlays) -> None:
    from gputrace.analysis import pinning_economics

    c = tl.cols
    pin_like = np.isin(c["phase"], [tl.phase_id(p) for p in ("pin", "unpin", "h2d") if tl.phase_id(p) >= 0])
    for rep in pinning_economics(tl):
        m = pin_like if rep.device is None else pin_like & (np.where(c["device"] < 0, -1, c["device"]) == rep.device)
        if not m.any():
            m = pin_like
        lo = int(c["start"][m].min()) if m.any() else tl.t0
        hi = int(c["end"][m].max()) if m.any() else tl.t1
        out.items.append(StallItem("pin", rep.describe(), lo, hi, device=-1 if rep.device is None else rep.device,
                                   amount_ns=int(rep.overhead_ns)))


def _unattributed(tl: Timeline, out: Overlays, max_items: int, marks: list) -> None:
    from gputrace.analysis import unattributed_time

    u = unattributed_time(tl)
    if len(u) == 0:
        return
    counts = np.diff(u.piece_offsets)
    marks.append((np.repeat(u.row, counts), u.piece_start, u.piece_end, MARK_UNATTR))
    for i in range(min(len(u), max_items)):
        r = int(u.row[i])
        out.items.append(StallItem("unattributed", u.describe(i, tl), int(tl.start[r]), int(tl.end[r]), r,
                                   int(u.device[i]), int(u.unattributed_ns[i])))


def _launch_gaps(tl: Timeline, out: Overlays, max_items: int, marks: list) -> None:
    from gputrace.tui.activity_rows import launch_gap_overlays

    launch_gap_overlays(tl, max_items, out.items, marks, StallItem)
