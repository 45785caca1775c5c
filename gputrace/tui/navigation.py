"""Keyboard and mouse navigation of the Gantt: selection, zoom/pan, stepping between spans,
folding groups, wheel zoom, click to select and drag to pan.

A mixin of `gputrace.tui.gantt.Gantt` (kept apart so each module stays small); it uses the
widget's state (``view``, ``rows``, ``index``, ``selected``, ``cursor_row``...) and runs on
the UI thread only.
"""

from __future__ import annotations

import numpy as np
from textual import events

from gputrace.tui.layout import View
from gputrace.tui.rows import DEVICE, HOST

NAME_W = 24  # the name column; the timeline starts at this x


class GanttNavigation:
    """Actions bound in ``Gantt.BINDINGS`` and the mouse handlers."""

    # ---- selection --------------------------------------------------------------------
    def select_row(self, row: int, *, reveal: bool = True) -> None:
        """Select Timeline ``row`` (-1 clears), move the cursor to it and pan it into view."""
        self.selected = row
        if row >= 0 and self.index is not None:
            tl, o = self.index.timeline, self.index.origin
            s, e = int(tl.start[row]) - o, int(tl.end[row]) - o
            self.cursor_t = (s + e) / 2
            y = self._locate(row)
            if y >= 0:
                self.cursor_row = y
                self.scroll_to_region_row(y)
            if reveal:
                nv = self.view.ensure_visible(s, e, self.timeline_width)
                if nv != self.view:
                    self.view, self.auto_fit = nv, False
        self._changed()
        self.post_message(self.SpanSelected(self, row))

    def scroll_to_region_row(self, y: int) -> None:
        top = int(self.scroll_offset.y)
        h = self.size.height
        if y < top:
            self.scroll_to(y=y, animate=False)
        elif h and y >= top + h:
            self.scroll_to(y=y - h + 1, animate=False)

    # ---- actions ----------------------------------------------------------------------
    def set_view(self, view: View) -> None:
        self.view = view
        self.auto_fit = False
        self.refresh()
        self._post_view()

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
        tl, o = self.index.timeline, self.index.origin
        s, e = int(tl.start[self.selected]) - o, int(tl.end[self.selected]) - o
        ge = int(tl.gpu_end[self.selected])
        if ge >= 0:
            e = max(e, ge - o)
        self.set_view(View.fit(s, e, self.timeline_width, margin=0.05))

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
        hit = np.flatnonzero(ii.row == self.selected) if self.selected >= 0 else np.empty(0, np.int64)
        if len(hit):
            i = int(hit[0]) + delta
        else:
            t = self._anchor()
            i = int(np.searchsorted(ii.start, t, side="right")) - (1 if delta < 0 else 0)
        if 0 <= i < len(ii) and ii.row[i] >= 0:
            self.select_row(int(ii.row[i]))

    def action_same_phase(self, delta: int) -> None:
        """Select the next/previous span (in start time, over all lanes) of the selected phase."""
        if self.selected < 0 or self.index is None:
            return
        tl = self.index.timeline
        rows = np.flatnonzero(tl.phase == tl.phase[self.selected])  # O(n), ~2 ms at 1 M rows
        order = np.lexsort((rows, tl.start[rows]))  # time order, ties by row
        rows = rows[order]
        j = int(np.flatnonzero(rows == self.selected)[0]) + delta
        if 0 <= j < len(rows):
            self.select_row(int(rows[j]))
        else:
            self.app.bell()

    def action_toggle(self) -> None:
        """Fold or unfold the group of the cursor row (host or device header)."""
        if not self.rows:
            return
        spec = self.rows[self.cursor_row]
        key = spec.key if spec.kind in (HOST, DEVICE) else (DEVICE, *spec.group)
        if key in self.collapsed:
            self.collapsed.discard(key)
        else:
            self.collapsed.add(key)
        self._rebuild_rows()
        for i, r in enumerate(self.rows):
            if r.key == key:
                self.cursor_row = i
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

    # ---- mouse ------------------------------------------------------------------------
    def _time_at_x(self, x: int) -> float:
        return self.view.time_of(x - NAME_W + 0.5)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 0.8, 1)

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 1.25, -1)

    def _wheel(self, event, factor: float, direction: int) -> None:
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
            if spec.kind in (HOST, DEVICE):
                self.action_toggle()
            self.refresh()
            return
        t = self._time_at_x(x)
        self.cursor_t = t
        row = self._hit(spec, t, self.view.ns_per_cell)
        if row >= 0:
            self.select_row(row, reveal=False)
            return
        self.refresh()
