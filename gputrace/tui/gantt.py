"""The Gantt widget: `gputrace.tui.gantt_display.GanttDisplay` (the state and the drawing) with its
keys and mouse.

Keys and clicks move the row cursor and the time cursor, pan and zoom the view, select spans,
fold groups and measure; where they go (the span to step to, the interval to measure) is worked
out in `gputrace.tui.gantt_navigation`. Measuring: a time cursor moved by keys, two marks (``b``
``b``) or the span under the cursor (``x``) make the range ``self.range``.

Threading: every method runs on the UI thread. Messages posted: those of `GanttDisplay`
(`SpanSelected`, `RangeChanged`, `ViewChanged`), reached as ``Gantt.SpanSelected`` and so on.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType

from gputrace.tui.gantt_display import GanttDisplay
from gputrace.tui.gantt_navigation import (
    fold_key,
    measure_target,
    row_with_key,
    same_phase_target,
    span_reach,
    step_target,
)
from gputrace.tui.gantt_strip import NAME_W
from gputrace.tui.layout import View
from gputrace.tui.rows import DEVICE, HOST, PROCESS


class Gantt(GanttDisplay, can_focus=True):
    """The timeline with its keys and mouse; see the module docstring and `GanttDisplay`'s."""

    DEFAULT_CSS = """
    Gantt { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    """

    # The help screen and the footer are built from these (description: footer, tooltip: help).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h,a", "pan(-0.1)", "Pan", show=False, tooltip="pan a tenth of the view left"),
        Binding("right,l,d", "pan(0.1)", show=False, tooltip="pan a tenth of the view right"),
        Binding("shift+left,H", "pan(-0.5)", show=False, tooltip="pan half the view left"),
        Binding("shift+right,L", "pan(0.5)", show=False, tooltip="pan half the view right"),
        Binding("up,k", "cursor(-1)", "Up", show=False, tooltip="row cursor up"),
        Binding("down,j", "cursor(1)", "Down", show=False, tooltip="row cursor down"),
        Binding("pageup", "cursor(-10)", show=False, tooltip="row cursor ten rows up"),
        Binding("pagedown", "cursor(10)", show=False, tooltip="row cursor ten rows down"),
        Binding("plus,equals_sign,w", "zoom(2)", "Zoom +", tooltip="zoom in around the time cursor"),
        Binding("minus,underscore,s", "zoom(0.5)", "Zoom -", tooltip="zoom out around the time cursor"),
        Binding("f,0", "fit", "Fit", tooltip="zoom to fit everything"),
        Binding("home", "home", show=False, tooltip="go to the start of the trace (cursor on it)"),
        Binding("end", "end", show=False, tooltip="go to the end of the trace (cursor on it)"),
        Binding("comma", "cursor_time(-1)", show=False, tooltip="time cursor one cell left"),
        Binding("full_stop", "cursor_time(1)", show=False, tooltip="time cursor one cell right"),
        Binding("less_than_sign", "cursor_time(-10)", show=False, tooltip="time cursor ten cells left"),
        Binding("greater_than_sign", "cursor_time(10)", show=False, tooltip="time cursor ten cells right"),
        Binding("enter", "select_here", "Select", show=False, tooltip="select the span under the cursor on this row"),
        Binding("z", "zoom_selection", "Zoom sel", tooltip="zoom to the selected span (host and device time)"),
        Binding("left_square_bracket", "step(-1)", "Prev span", show=False, tooltip="previous span on this row"),
        Binding("right_square_bracket", "step(1)", "Next span", show=False, tooltip="next span on this row"),
        Binding("n", "same_phase(1)", "Next same", tooltip="next span of the selected phase (any lane)"),
        Binding("N", "same_phase(-1)", show=False, tooltip="previous span of the selected phase"),
        Binding("b", "mark", "Mark", tooltip="measure: mark A at the time cursor; again: mark B, the range A..B"),
        Binding("x", "measure", "Measure", tooltip="measure the span or idle gap under the cursor (range = it)"),
        Binding("r", "zoom_range", show=False, tooltip="zoom to the measured range"),
        Binding("space", "fold", "Fold", show=False, tooltip="fold / unfold the host, process or device group"),
        Binding("c", "compact", show=False, tooltip="compact: one row per lane, nested phases stacked"),
    ]

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._drag: tuple[int, View] | None = None
        self._dragged = False

    # ---- actions: view and cursor -----------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor_row = max(0, min(len(self.rows) - 1, self.cursor_row + delta))
        self.scroll_to_region_row(self.cursor_row)
        self.refresh()

    def action_pan(self, fraction: float) -> None:
        self.set_view(self.view.pan(fraction * self.timeline_width))

    def action_zoom(self, factor: float) -> None:
        self.set_view(self.view.zoom(factor, self._anchor()))

    def action_fit(self) -> None:
        self.view = self._fit_view()
        self.auto_fit = True
        self.refresh()
        self._post_view()

    def action_zoom_selection(self) -> None:
        if self.selected < 0 or self.index is None:
            return
        s, e = span_reach(self.index, self.selected)
        self.set_view(View.fit(s, e, self.timeline_width, margin=0.05))

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

    # ---- actions: spans and rows ------------------------------------------------------
    def action_select_here(self) -> None:
        """Select the span on the cursor row at the cursor time (or nearest to it)."""
        if not self.rows:
            return
        row = self._hit(self.rows[self.cursor_row], self._anchor(), self.view.ns_per_cell * self.timeline_width / 2)
        if row >= 0:
            self.select_row(row, reveal=False)

    def action_step(self, delta: int) -> None:
        """Select the previous/next span on the cursor row."""
        if not self.rows:
            return
        ii = self._index_of(self.rows[self.cursor_row])
        if ii is None or len(ii) == 0:
            return
        row = step_target(ii, self.selected, self._anchor(), delta)
        if row >= 0:
            self.select_row(row)

    def action_same_phase(self, delta: int) -> None:
        """Select the next/previous span (in start time, over all lanes) of the selected phase."""
        if self.selected < 0 or self.index is None:
            return
        row = same_phase_target(self.index.timeline, self.selected, delta)
        if row >= 0:
            self.select_row(row)
        else:
            self.app.bell()

    def action_fold(self) -> None:
        """Fold or unfold the group of the cursor row (host or device header)."""
        if not self.rows:
            return
        key = fold_key(self.rows[self.cursor_row])
        if key in self.collapsed:
            self.collapsed.discard(key)
        else:
            self.collapsed.add(key)
        self._rebuild_rows()
        y = row_with_key(self.rows, key)
        if y >= 0:
            self.cursor_row = y
        self._changed()

    def action_compact(self) -> None:
        """One row per lane with the depths stacked (deepest on top), or back to depth rows."""
        self.compact = not self.compact
        self._rebuild_rows()
        if self.selected >= 0:
            y = self._locate(self.selected)
            if y >= 0:
                self.cursor_row = y
        self._changed()

    # ---- actions: measuring -----------------------------------------------------------
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
        interval = measure_target(self.index, self._index_of(self.rows[self.cursor_row]), self.selected, self._anchor())
        if interval is None:
            self.app.bell()
            return
        self.set_range(*interval)

    def action_zoom_range(self) -> None:
        if self.range is None:
            self.app.bell()
            return
        self.set_view(View.fit(self.range[0], self.range[1], self.timeline_width, margin=0.05))

    # ---- mouse ------------------------------------------------------------------------
    def _time_at_x(self, x: int) -> float:
        return self.view.time_of(x - NAME_W + 0.5)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 0.8, 1)

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 1.25, -1)

    def _wheel(self, event: events.MouseEvent, factor: float, direction: int) -> None:
        if event.x >= NAME_W and not event.shift:
            event.prevent_default()
            event.stop()
            self.set_view(self.view.zoom(factor, self._time_at_x(event.x)))
        elif event.shift and event.x >= NAME_W:
            event.prevent_default()
            event.stop()
            self.action_pan(0.1 * direction)
        # else: default vertical scrolling of the ScrollView

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.button == 1 and event.x >= NAME_W:
            self._drag = (event.x, self.view)
            self._dragged = False
            self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._drag is not None:  # the mouse is captured between our mouse-down and mouse-up
            x0, v0 = self._drag
            if event.x != x0:
                self._dragged = True
                self.set_view(v0.pan(x0 - event.x))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag is not None:
            self.release_mouse()
            dragged = self._dragged
            self._drag = None
            if dragged:
                return
        self._click(event.x, event.y)

    def _click(self, x: int, y: int) -> None:
        ry = y + int(self.scroll_offset.y)
        if not (0 <= ry < len(self.rows)):
            return
        self.cursor_row = ry
        spec = self.rows[ry]
        if x < NAME_W:
            if spec.kind in (HOST, PROCESS, DEVICE):
                self.action_fold()
            self.refresh()
            return
        t = self._time_at_x(x)
        self.cursor_t = t
        row = self._hit(spec, t, self.view.ns_per_cell)
        if row >= 0:
            self.select_row(row, reveal=False)
            return
        self.refresh()


__all__ = ["Gantt", "NAME_W"]
