"""Measuring on the Gantt: a time cursor moved by keys, two marks (or a drag) that make a
range, measuring the span or gap under the cursor, zoom-to-range, Home/End.

A mixin of `gputrace.tui.gantt.Gantt` (its state: ``view``, ``cursor_t``, ``rows``, ``index``);
UI thread only. Times are relative nanoseconds (see `gputrace.tui.layout`). The range is
``self.range`` (``(t0, t1)``, t0 <= t1, or None) and every change posts `Gantt.RangeChanged`;
``self.mark_a`` is a first mark waiting for its second.
"""

from __future__ import annotations

import numpy as np

from gputrace.tui.layout import View
from gputrace.tui.keys import BG, CURSOR, RANGE
from gputrace.tui.render import Cells


class GanttMeasure:
    """Actions bound in ``Gantt.BINDINGS`` for the cursor and the range, and their drawing."""

    mark_a: float | None = None
    range: tuple[float, float] | None = None

    # ---- the time cursor --------------------------------------------------------------
    def action_cursor_time(self, cells: float) -> None:
        """Move the time cursor ``cells`` columns (from the view centre if it is off screen),
        panning when it leaves the view."""
        tw = self.timeline_width
        t = self._anchor() + cells * self.view.ns_per_cell
        self.cursor_t = t
        if not (self.view.t0 <= t < self.view.t1(tw)):
            self.view, self.auto_fit = self.view.pan(cells), False
        self.refresh()
        self._post_view()

    def action_home(self) -> None:
        """The view to the start of the trace (same zoom), the cursor on the first span."""
        if self.index is None:
            return
        t = float(self.index.t_min)
        self.cursor_t = t
        self.set_view(View(t - 2 * self.view.ns_per_cell, self.view.ns_per_cell))

    def action_end(self) -> None:
        if self.index is None:
            return
        t = float(self.index.t_max)
        self.cursor_t = t
        self.set_view(View(t - (self.timeline_width - 3) * self.view.ns_per_cell, self.view.ns_per_cell))

    # ---- the range --------------------------------------------------------------------
    def set_range(self, t0: float | None, t1: float | None = None) -> None:
        """Set the range (any order), or clear it with ``set_range(None)``."""
        self.mark_a = None
        self.range = None if t0 is None or t1 is None else (min(t0, t1), max(t0, t1))
        self.refresh()
        self._post_view()
        self.post_message(self.RangeChanged(self, self.range))

    def action_mark(self) -> None:
        """First press: mark A at the cursor; second: mark B, the range is A..B; third: a new A."""
        t = self._anchor()
        if self.mark_a is None:
            self.range = None
            self.mark_a = t
            self.refresh()
            self._post_view()
            self.post_message(self.RangeChanged(self, None))
            self.app.notify("mark A set: move the cursor (, . < > or click) and press b again", timeout=3)
        else:
            self.set_range(self.mark_a, t)

    def action_measure(self) -> None:
        """Range = the span (or idle gap) under the cursor on the cursor row, else the selected span."""
        if self.index is None or not self.rows:
            return
        t = self._anchor()
        ii = self._index_of(self.rows[self.cursor_row])
        if ii is not None and len(ii):
            i = ii.at(t)
            if i >= 0:
                self.set_range(float(ii.start[i]), float(ii.end[i]))
                return
        if self.selected >= 0:
            tl, o = self.index.timeline, self.index.origin
            self.set_range(float(tl.start[self.selected] - o), float(tl.end[self.selected] - o))
            return
        self.app.bell()

    def action_zoom_range(self) -> None:
        if self.range is None:
            self.app.bell()
            return
        self.set_view(View.fit(self.range[0], self.range[1], self.timeline_width, margin=0.05))

    def clear_range(self) -> bool:
        """Clear the range or a pending mark; False if there was neither."""
        if self.range is None and self.mark_a is None:
            return False
        self.set_range(None)
        return True

    # ---- drawing ----------------------------------------------------------------------
    def _col(self, t: float | None) -> int | None:
        if t is None:
            return None
        c = int(np.floor((t - self.view.t0) / self.view.ns_per_cell))
        return c if 0 <= c < self.timeline_width else None

    def measure_key(self) -> tuple:
        """What the measuring decorations add to a row's cache key."""
        r = self.range
        return (self._col(self.cursor_t), self._col(self.mark_a),
                None if r is None else (self.view.cell_of(r[0]) // 1, self.view.cell_of(r[1]) // 1))

    def decorate(self, cells: Cells) -> Cells:
        """Range shading and cursor/mark lines, drawn on empty cells only (bars stay readable)."""
        w = len(cells.chars)
        empty = (cells.chars == " ") & (cells.bg == BG)
        if self.range is not None:
            a = max(0, int(np.floor(self.view.cell_of(self.range[0]))))
            b = min(w, int(np.ceil(self.view.cell_of(self.range[1]))))
            if a < b:
                m = np.zeros(w, bool)
                m[a:b] = True
                cells.bg[m & empty] = RANGE
            for t in self.range:
                c = self._col(t)
                if c is not None and empty[c]:
                    cells.chars[c], cells.fg[c] = "│", CURSOR
        for t, glyph in ((self.mark_a, "│"), (self.cursor_t, "┊")):
            c = self._col(t)
            if c is not None and empty[c]:
                cells.chars[c], cells.fg[c] = glyph, CURSOR
        return cells
