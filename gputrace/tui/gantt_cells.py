"""What one screen row of the Gantt draws: the cells of a `RowSpec` at a view, and the measuring
decorations (range shading, the time cursor, marks) over them.

Pure (numpy, no Textual): the Gantt (`gputrace.tui.gantt_display.GanttDisplay`) calls these from
``render_line`` on the UI thread and turns the cells into a `Strip` (`gputrace.tui.gantt_strip`);
tests call them directly. Times are relative nanoseconds (`gputrace.tui.layout`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gputrace.tui.index import IntervalIndex, TimelineIndex
from gputrace.tui.keys import BG, CURSOR, RANGE
from gputrace.tui.layout import View
from gputrace.tui.render import Cells, blank_cells, row_cells
from gputrace.tui.rows import DEVICE, GPU, LANE, RowSpec

#: Overlay marks of one drawn level: (intervals, glyph, colour key), see `gputrace.tui.overlays.marks_by_level`.
Marks = Sequence[tuple[IntervalIndex, str, int]]


@dataclass(frozen=True)
class RowState:
    """What, besides the row itself, changes its cells: the selected Timeline row (-1: none), the rows a
    search fades (bool per Timeline row, or None), the idle gaps per device group and the marks per
    drawn level ((lane, level) -> marks)."""

    selected: int = -1
    dim_rows: np.ndarray | None = None
    gaps: Mapping[tuple, IntervalIndex] | None = None
    marks: Mapping[tuple[int, int], Marks] | None = None


def spec_cells(index: TimelineIndex, spec: RowSpec, view: View, width: int, state: RowState) -> Cells:
    """The cells of screen row ``spec``: idle gaps on a device header, one level of a lane (or every level
    stacked, the deepest on top, in a compact row), the device-time intervals of a lane, blank otherwise."""
    if spec.kind == DEVICE:
        gaps = (state.gaps or {}).get(spec.group)
        if gaps is None:
            return blank_cells(width)
        labels = gaps.labels
        return row_cells(gaps, view, width, label_fn=lambda i: labels[i] if labels else "idle")
    if spec.kind == LANE:
        if spec.level >= 0:
            return _level_cells(index, spec.lane, spec.level, view, width, state)
        out: Cells | None = None  # compact: every level drawn over the one above it
        for j in range(len(index.lanes[spec.lane].levels)):
            c = _level_cells(index, spec.lane, j, view, width, state)
            if out is None:
                out = c
                continue
            fill = np.where((out.chars == " ") & (out.bg != BG), out.bg, BG)
            m = (c.bg != BG) | (c.chars != " ")
            out.chars[m], out.fg[m], out.bold[m] = c.chars[m], c.fg[m], c.bold[m]
            out.bg[m] = np.where(c.bg == BG, fill, c.bg)[m]  # a child's half-cell sits on its parent
        return out if out is not None else blank_cells(width)
    if spec.kind == GPU:
        gpu = index.lanes[spec.lane].gpu
        if gpu is None:
            return blank_cells(width)
        return row_cells(gpu, view, width, thin=True, selected_row=state.selected, dim_rows=state.dim_rows)
    return blank_cells(width)


def _level_cells(index: TimelineIndex, lane: int, level: int, view: View, width: int, state: RowState) -> Cells:
    lv = index.lanes[lane].levels[level]
    rows, tl = lv.index.row, index.timeline
    return row_cells(
        lv.index, view, width,
        label_fn=lambda i: tl.name_of(int(rows[i])),
        selected_row=state.selected, dim_rows=state.dim_rows,
        marks=(state.marks or {}).get((lane, level), ()),
    )


@dataclass(frozen=True)
class Measuring:
    """The measuring state drawn over every row: the time cursor, a first mark waiting for its second, and
    the measured range ``(t0, t1)`` with t0 <= t1 (each None when absent)."""

    cursor_t: float | None = None
    mark_a: float | None = None
    range: tuple[float, float] | None = None

    def key(self, view: View, width: int) -> tuple:
        """What these decorations add to a row's cache key at ``view``."""
        r = self.range
        return (col_of(view, width, self.cursor_t), col_of(view, width, self.mark_a),
                None if r is None else (view.cell_of(r[0]) // 1, view.cell_of(r[1]) // 1))

    def decorate(self, cells: Cells, view: View) -> Cells:
        """Range shading and cursor/mark lines, drawn on empty cells only (bars stay readable). Changes and
        returns ``cells``."""
        w = len(cells.chars)
        empty = (cells.chars == " ") & (cells.bg == BG)
        if self.range is not None:
            a = max(0, int(np.floor(view.cell_of(self.range[0]))))
            b = min(w, int(np.ceil(view.cell_of(self.range[1]))))
            if a < b:
                m = np.zeros(w, bool)
                m[a:b] = True
                cells.bg[m & empty] = RANGE
            for edge in self.range:
                c = col_of(view, w, edge)
                if c is not None and empty[c]:
                    cells.chars[c], cells.fg[c] = "│", CURSOR
        for t, glyph in ((self.mark_a, "│"), (self.cursor_t, "┊")):
            c = col_of(view, w, t)
            if c is not None and empty[c]:
                cells.chars[c], cells.fg[c] = glyph, CURSOR
        return cells


def col_of(view: View, width: int, t: float | None) -> int | None:
    """The cell that time ``t`` falls in, or None when ``t`` is None or off the ``width`` cells."""
    if t is None:
        return None
    c = int(np.floor((t - view.t0) / view.ns_per_cell))
    return c if 0 <= c < width else None
