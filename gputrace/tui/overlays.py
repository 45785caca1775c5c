"""Analysis results prepared for drawing: what `gputrace.analysis.report.analyse_timeline`
found, as interval indexes the Gantt can draw and rows the stalls panel can list.

Pure (no Textual); runs on a worker thread. A Timeline without GPUs just gives fewer overlays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import numpy as np

from gputrace.timeline.model import Timeline
from gputrace.tui.activity_rows import launch_gap_marks
from gputrace.tui.index import IntervalIndex, TimelineIndex
from gputrace.tui.keys import IDLE, LAUNCH, MARK_LAUNCH, MARK_UNATTR, MARK_WAIT, UNATTR, WAIT
from gputrace.tui.layout import format_duration

if TYPE_CHECKING:
    from gputrace.analysis.report import TimelineAnalysis


@dataclass
class StallItem:
    """One line of the stalls panel: ``amount_ns`` is the time lost (idle, waited, pin+unpin,
    unattributed); ``start``/``end`` (epoch ns) is what to zoom to; ``row`` a span or -1."""

    category: str  # "finding" (analysis/findings.py), "idle", "wait", "pin", "unattributed", "launch"
    text: str
    start: int
    end: int
    row: int = -1
    device: int = -1
    amount_ns: int = -1
    #: the top Python sites the host ran in it (``host_samples.SiteCount``: traces with stack samples), or ()
    samples: tuple = ()

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
    items: list[StallItem] = field(default_factory=list)  # the findings (category "finding") first, then stalls
    notes: list[str] = field(default_factory=list)  # what could not be computed, and why
    findings_pending: bool = False  # the findings are still being computed (`with_findings` adds them)
    marks_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    marks_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))


#: The note the stalls panel shows while the findings are computed.
FINDINGS_PENDING = "findings: computing the GPU-activity tables..."


def finding_items(tl: Timeline, analysis: TimelineAnalysis) -> list[StallItem]:
    """The report's ranked findings (`TimelineAnalysis.findings`, what ``report --json`` lists under
    "findings") as stalls-panel rows; Enter zooms to the whole run. Adds the GPU-activity tables the
    findings read to ``analysis`` when it lacks them (`TimelineAnalysis.add_gpu_activity`)."""
    analysis.add_gpu_activity(tl)
    return [StallItem("finding", f"{f.title} ({f.evidence})", tl.t0, tl.t1, -1, -1, f.saving_ns)
            for f in analysis.findings()]


def step_items(steps: dict) -> list[StallItem]:
    """The loop's steps (``analysis.steps``) as stalls-panel rows, after the findings: per process its slowest
    steady step against the median and why (Enter zooms to that step), and its warm-up (zooms to it)."""
    out = []
    for s in (steps or {}).get("series") or []:
        slow = s["slowest"]
        st = s["steps"][slow["index"]] if slow["index"] < len(s["steps"]) else None
        if st is not None:
            out.append(StallItem("step", f"{s['process']}: {s['count']} steps of {s['name']}, median "
                                 f"{format_duration(s['median_ns'], 3)}; slowest {slow['text']}", st["start_ns"],
                                 st["start_ns"] + st["wall_ns"], amount_ns=slow["wall_ns"] - slow["median_wall_ns"]))
        w = s.get("warmup")
        if w:
            out.append(StallItem("warm-up", f"{s['process']}: warm-up before the steady state ({w['steps']} slow "
                                 "step(s); the findings leave it out)", w["start_ns"], w["end_ns"], amount_ns=w["ns"]))
    return out


def with_findings(ov: Overlays, findings: Sequence[StallItem], notes: Sequence[str] = ()) -> None:
    """Put ``findings`` in place of ``ov``'s finding rows (above the stalls) and end its pending state:
    the pending note goes, ``notes`` (e.g. why the findings failed) come first."""
    ov.items = list(findings) + [it for it in ov.items if it.category != "finding"]
    ov.notes = list(notes) + [n for n in ov.notes if n != FINDINGS_PENDING]
    ov.findings_pending = False


#: How each mark kind is drawn over a bar: (kind, glyph, colour key).
MARK_GLYPHS = ((MARK_UNATTR, "┄", UNATTR), (MARK_WAIT, "╍", WAIT), (MARK_LAUNCH, "╌", LAUNCH))


def marks_by_level(ov: Overlays | None, idx: TimelineIndex | None) -> dict[tuple[int, int], list]:
    """The overlay marks split by the drawn level of their span: ``(lane, level) -> [(intervals (relative
    ns), glyph, colour key), ...]``, what `gputrace.tui.gantt_cells.RowState.marks` takes. Marks of rows
    that ``idx`` does not show (filtered out, or past its end) are left out; recomputed after each
    re-index."""
    out: dict[tuple[int, int], list] = {}
    if ov is None or idx is None or not len(ov.marks_row):
        return out
    ok = ov.marks_row < len(idx.row_level)
    rows = ov.marks_row[ok]
    lvl = idx.row_level[rows]
    keep = lvl >= 0
    lvl, rows = lvl[keep], rows[keep]
    s, e, kind = ov.marks_start[ok][keep] - idx.origin, ov.marks_end[ok][keep] - idx.origin, ov.marks_kind[ok][keep]
    for lv_id in np.unique(lvl).tolist():
        m = lvl == lv_id
        key = idx.level_ids[lv_id]
        for k, glyph, colour in MARK_GLYPHS:
            mk = m & (kind == k)
            if mk.any():
                out.setdefault(key, []).append((IntervalIndex.of(s[mk], e[mk], colour, rows[mk]), glyph, colour))
    return out


def compute_overlays(tl: Timeline, origin: int, analysis: TimelineAnalysis | None = None, *,
                     findings: bool = True) -> Overlays:
    """Overlays and stall rows from `gputrace.analysis.report.analyse_timeline` (computed here
    when ``analysis`` is None): the composition ``gputrace report`` prints, under its listing
    policy, so the panel lists the same rows as the report for one file.

    Every gap and mark is drawn (totals count every gap); ``items`` are the listed stalls,
    largest time lost first, and ``notes`` ends with the listing line (what was left out).
    ``findings``: list the analysis's findings above the stalls; False leaves them out and marks them
    pending (`FINDINGS_PENDING` note) for `with_findings` to add once computed."""
    out = Overlays()
    if tl.n == 0:
        return out
    if analysis is None:
        from gputrace.analysis.report import analyse_timeline

        analysis = analyse_timeline(tl, critical=False)
    _gaps(analysis.gaps, origin, out)
    marks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
    _wait_marks(tl, analysis.waits, marks)
    u = analysis.unattributed
    if len(u):
        marks.append((np.repeat(u.row, np.diff(u.piece_offsets)), u.piece_start, u.piece_end, MARK_UNATTR))
    if analysis.launch is not None and len(analysis.launch):
        launch_gap_marks(tl, analysis.launch, marks)
    # The report's Findings first (what to fix; zoom: the whole run), then the listed stalls.
    out.items = finding_items(tl, analysis) if findings else []
    out.findings_pending = not findings
    if not findings:
        out.notes.append(FINDINGS_PENDING)
    out.items += step_items(analysis.steps)
    out.items += [StallItem(s.category, s.text, s.start, s.end, s.row, s.device, s.lost_ns, s.samples)
                  for s in analysis.listed]
    if analysis.emulated:
        out.notes.append(analysis.emulated_note())
    if analysis.unfinished:
        out.notes.append(analysis.unfinished_note())
    out.notes.append(analysis.listing.describe())
    if marks:
        out.marks_row = np.concatenate([m[0] for m in marks]).astype(np.int64)
        out.marks_start = np.concatenate([m[1] for m in marks]).astype(np.int64)
        out.marks_end = np.concatenate([m[2] for m in marks]).astype(np.int64)
        out.marks_kind = np.concatenate([np.full(len(m[0]), m[3], np.int8) for m in marks])
    return out


class IdleLabels(Sequence[str]):
    """The label of each idle gap, ``idle <duration>``, formatted when asked for (a screen shows a handful of
    what can be 500 k gaps: formatting them all took a second). Equal item by item to the list
    ``[f"idle {format_duration(ns, 2)}" for ns in durations]``. Immutable; any thread."""

    __slots__ = ("_ns",)

    def __init__(self, durations: np.ndarray) -> None:
        self._ns = np.asarray(durations, np.int64)

    def __len__(self) -> int:
        return len(self._ns)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return f"idle {format_duration(int(self._ns[i]), 2)}"


def _gaps(g, origin: int, out: Overlays) -> None:
    if len(g) == 0:
        return
    hosts = np.array(g.hosts, dtype=object)[g.host]
    for (h, d) in sorted({(str(h), int(d)) for h, d in zip(hosts.tolist(), g.device.tolist(), strict=True)}):
        m = (hosts == h) & (g.device == d)
        s, e = g.start[m] - origin, g.end[m] - origin
        if len(s) > 1 and np.any(s[1:] < s[:-1]):  # in start order here, as IntervalIndex would sort them
            o = np.argsort(s, kind="stable")
            s, e = s[o], e[o]
        # rows.py names the host "" "?"
        out.gaps[(h or "?", f"GPU {d}")] = IntervalIndex.of(s, e, IDLE, labels=IdleLabels(e - s))


def _wait_marks(tl: Timeline, w, marks: list) -> None:
    from gputrace.analysis.waits import EXCESS

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
