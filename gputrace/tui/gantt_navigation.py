"""Where the Gantt's keys go: the span to step or jump to, the interval to measure, and the screen row
that shows a span's level, a fold group or a GPU.

Pure (numpy, no Textual): the `gputrace.tui.gantt.Gantt` widget asks, then selects, scrolls and
redraws. Times are relative nanoseconds (`gputrace.tui.layout`); a "row" is a Timeline row
(-1: none) unless it is called a screen row (an index into the widget's list of `RowSpec`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gputrace.timeline.model import Timeline
from gputrace.tui.index import IntervalIndex, TimelineIndex
from gputrace.tui.rows import DEVICE, HOST, LANE, PROCESS, RowSpec, device_key


def span_times(index: TimelineIndex, row: int) -> tuple[int, int]:
    """Host start and end of Timeline ``row``."""
    tl, o = index.timeline, index.origin
    return int(tl.start[row]) - o, int(tl.end[row]) - o


def span_reach(index: TimelineIndex, row: int) -> tuple[int, int]:
    """Host start of Timeline ``row`` to the later of its host end and its device end (when it has one)."""
    s, e = span_times(index, row)
    ge = int(index.timeline.gpu_end[row])
    if ge >= 0:
        e = max(e, ge - index.origin)
    return s, e


def step_target(ii: IntervalIndex, selected: int, t: float, delta: int) -> int:
    """The span ``delta`` places from the selected one on a row drawing ``ii`` (from time ``t`` when the
    row does not hold the selection), or -1 when there is none."""
    hits = np.flatnonzero(ii.row == selected) if selected >= 0 else np.empty(0, np.int64)
    if len(hits):
        i = int(hits[0]) + delta
    else:
        i = int(np.searchsorted(ii.start, t, side="right")) - (1 if delta < 0 else 0)
    if 0 <= i < len(ii) and ii.row[i] >= 0:
        return int(ii.row[i])
    return -1


def same_phase_target(tl: Timeline, selected: int, delta: int) -> int:
    """The span of the selected span's phase ``delta`` places from it in start time over all lanes (ties by
    row), or -1 past either end."""
    rows = np.flatnonzero(tl.phase == tl.phase[selected])  # O(n), ~2 ms at 1 M rows
    order = np.lexsort((rows, tl.start[rows]))  # time order, ties by row
    rows = rows[order]
    j = int(np.flatnonzero(rows == selected)[0]) + delta
    return int(rows[j]) if 0 <= j < len(rows) else -1


def measure_target(index: TimelineIndex, ii: IntervalIndex | None, selected: int,
                   t: float) -> tuple[float, float] | None:
    """The interval to measure: the one at time ``t`` on a row drawing ``ii`` (a span or an idle gap),
    else the selected span, else None."""
    if ii is not None and len(ii):
        i = ii.at(t)
        if i >= 0:
            return float(ii.start[i]), float(ii.end[i])
    if selected >= 0:
        s, e = span_times(index, selected)
        return float(s), float(e)
    return None


def fold_key(spec: RowSpec) -> tuple:
    """The key of the group that folding on ``spec`` folds: a header's own, else its device group's."""
    return spec.key if spec.kind in (HOST, PROCESS, DEVICE) else device_key(spec.group[0], spec.group[1], spec.proc)


def row_with_key(rows: Sequence[RowSpec], key: tuple) -> int:
    """The screen row whose key is ``key``, or -1."""
    for y, spec in enumerate(rows):
        if spec.key == key:
            return y
    return -1


def lane_row(rows: Sequence[RowSpec], lane: int, level: int) -> int:
    """The screen row that draws ``level`` of ``lane`` (its own row, or the lane's compact row), or -1."""
    for y, spec in enumerate(rows):
        if spec.kind == LANE and spec.lane == lane and spec.level in (level, -1):
            return y
    return -1


def device_row(rows: Sequence[RowSpec], device: int) -> int:
    """The header row of GPU ``device`` (where its idle gaps are drawn), or -1."""
    for y, spec in enumerate(rows):
        if spec.kind == DEVICE and spec.group[1] == f"GPU {device}":
            return y
    return -1


__all__ = ["device_row", "fold_key", "lane_row", "measure_target", "row_with_key", "same_phase_target",
           "span_reach", "span_times", "step_target"]
