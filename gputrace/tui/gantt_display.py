"""The Gantt's display: a `ScrollView` drawn with Textual's Line API, and what it is shown.

`GanttDisplay` holds the state (the index, the screen rows and their folding, the time view, the
row and time cursors, the selection, the measured range, search dimming and analysis overlays),
draws it and is driven by method calls (`set_index`, `select_row`, `show_time`, `set_view`,
`set_range`); the keys and the mouse are the subclass's, `gputrace.tui.gantt.Gantt`.

Vertical scrolling is the ScrollView's (one screen row per `RowSpec`); the horizontal
axis is a `View` (time at the left edge, ns per cell) that the widget owns, so zoom and
pan never re-layout anything: they change the view and every visible row is redrawn by
`render_line` from its `IntervalIndex` (the cells: `gputrace.tui.gantt_cells`, vectorised; the
`Strip`: `gputrace.tui.gantt_strip`). Rendered rows are kept in an LRU of `Strip`s keyed on (row,
generation, view, width, selection, cursor, measuring); ``generation`` is bumped whenever data,
filters, search or collapse state change.

Measuring: ``self.range`` is the measured range (``(t0, t1)``, t0 <= t1, relative ns, or None);
every change posts `RangeChanged`; ``self.mark_a`` is a first mark waiting for its second.

Threading: every method runs on the UI thread. New data arrives via `set_index` (built
off-thread by the loader). Messages posted: `SpanSelected`, `RangeChanged`, `ViewChanged`
(handled as ``on_gantt_span_selected`` and so on: their namespace is ``gantt``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputrace.tui.gantt_cells import Measuring, RowState, spec_cells
from gputrace.tui.gantt_navigation import device_row, lane_row, row_with_key, span_times
from gputrace.tui.gantt_strip import NAME_W, RowPainter
from gputrace.tui.index import IntervalIndex, TimelineIndex, same_span
from gputrace.tui.layout import View, format_duration
from gputrace.tui.overlays import Overlays, marks_by_level
from gputrace.tui.render import Cells
from gputrace.tui.rows import RowSpec, build_rows, groups_of, hit, index_of, level_of


class GanttDisplay(ScrollView):
    """Per-lane timeline of spans, drawn and driven by calls; see the module docstring."""

    COMPONENT_CLASSES = {
        "gantt--row",
        "gantt--name",
        "gantt--host",
        "gantt--device",
        "gantt--cursor",
        "gantt--selected",
        "gantt--idle",
        "gantt--unattributed",
        "gantt--wait",
        "gantt--launch",
        "gantt--pageable",
        "gantt--pinned",
    }

    @dataclass
    class SpanSelected(Message, namespace="gantt"):
        """A span was selected (``row`` is a Timeline row, -1 for none). ``moved``: not a new choice, the
        same span under a new row number after the timeline was re-indexed (or -1: filtered out)."""

        gantt: GanttDisplay
        row: int
        moved: bool = False

    @dataclass
    class RangeChanged(Message, namespace="gantt"):
        """The measured range changed (``range`` relative ns, or None: cleared)."""

        gantt: GanttDisplay
        range: tuple[float, float] | None

    @dataclass
    class ViewChanged(Message, namespace="gantt"):
        gantt: GanttDisplay
        view: View
        width: int  # timeline cells
        cursor_t: float
        zero: float  # relative time of the first span shown (the axis counts from it)

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.index: TimelineIndex | None = None
        self.rows: list[RowSpec] = []
        self.collapsed: set[tuple] = set()
        self.compact = False  # one row per lane, depths stacked (key c)
        self.view = View(0.0, 1e6)
        self.cursor_row = 0
        self.cursor_t: float | None = None
        self.mark_a: float | None = None
        self.range: tuple[float, float] | None = None
        self.selected = -1
        self.dim_rows: np.ndarray | None = None
        self.gaps: dict[tuple, IntervalIndex] = {}
        self.overlays: Overlays | None = None
        self._marks: dict[tuple[int, int], list] = {}
        self.generation = 0
        self.auto_fit = True  # refit on new data until the user navigates
        self._cache: LRUCache[tuple, Strip] = LRUCache(2048)
        self._painter = RowPainter(self.get_component_rich_style)

    # ---- data -------------------------------------------------------------------------
    def set_index(self, index: TimelineIndex) -> None:
        """Show a new index (a new load batch, or a new filter). A selected span stays selected: rows are
        renumbered when spans arrive, so it is found again by span id and start."""
        old, row = self.index, self.selected
        self.index = index
        if row >= 0:
            self.selected = same_span(old, index, row)
            if self.selected != row:
                self.post_message(self.SpanSelected(self, self.selected, moved=True))
        self._painter.reset()
        self._marks = marks_by_level(self.overlays, self.index)
        self._rebuild_rows()
        if self.auto_fit:
            self.view = self._fit_view()
        self._changed()

    def set_overlays(self, overlays: Overlays) -> None:
        """Analysis results: idle gaps on the device header rows, waits and unattributed
        time as marks over the bars of the spans they belong to."""
        self.overlays = overlays
        self.gaps = overlays.gaps
        self._marks = marks_by_level(overlays, self.index)
        self._changed()

    def set_dim(self, dim_rows: np.ndarray | None) -> None:
        """Dim spans where ``dim_rows`` is true (search highlighting); None: no dimming."""
        self.dim_rows = dim_rows
        self._changed()

    @property
    def timeline_width(self) -> int:
        return max(1, self.size.width - NAME_W - (1 if self.show_vertical_scrollbar else 0))

    @property
    def zero(self) -> float:
        """Relative time of the first span shown: the axis and readouts count from it."""
        return float(self.index.t_min) if self.index is not None else 0.0

    def _rebuild_rows(self) -> None:
        key = self.rows[self.cursor_row].key if 0 <= self.cursor_row < len(self.rows) else None
        self.rows = build_rows(self.index, self.collapsed, compact=self.compact) if self.index is not None else []
        if key is not None:
            y = row_with_key(self.rows, key)
            if y >= 0:
                self.cursor_row = y
        self.cursor_row = min(self.cursor_row, max(0, len(self.rows) - 1))
        self.virtual_size = Size(self.size.width, len(self.rows))

    def _changed(self) -> None:
        self.generation += 1
        self._cache.clear()
        self.refresh()
        self._post_view()

    def _post_view(self) -> None:
        self.post_message(self.ViewChanged(self, self.view, self.timeline_width, self._anchor(), self.zero))

    def _fit_view(self) -> View:
        if self.index is None:
            return self.view
        return View.fit(self.index.t_min, self.index.t_max, self.timeline_width)

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        if self.auto_fit:
            self.view = self._fit_view()
        self._cache.clear()
        self._post_view()

    def on_focus(self) -> None:
        self.refresh()  # the cursor row is highlighted only while the timeline has focus

    def on_blur(self) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._painter.reset()
        self._cache.clear()

    # ---- drawing ----------------------------------------------------------------------
    @property
    def measuring(self) -> Measuring:
        """The time cursor, the pending mark and the range, as drawn over every row."""
        return Measuring(self.cursor_t, self.mark_a, self.range)

    def render_line(self, y: int) -> Strip:
        ry = y + int(self.scroll_offset.y)
        width = self.size.width
        key = (ry, self.generation, self.view, width, self.selected, ry == self.cursor_row and self.has_focus,
               self.measuring.key(self.view, self.timeline_width))
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(ry, width)
            self._cache[key] = strip
        return strip

    def _render_row(self, ry: int, width: int) -> Strip:
        pal = self._painter.palette(self.index.timeline.phases if self.index is not None else [])
        if ry >= len(self.rows) or self.index is None:
            return Strip.blank(width, Style(bgcolor=pal.background))
        spec = self.rows[ry]
        tw = self.timeline_width
        cells = self.measuring.decorate(self._row_cells(spec, tw), self.view)
        cursor = ry == self.cursor_row and self.has_focus
        return self._painter.paint(pal, spec, cells, cursor=cursor, width=width, tw=tw)

    def _row_cells(self, spec: RowSpec, tw: int) -> Cells:
        assert self.index is not None
        state = RowState(self.selected, self.dim_rows, self.gaps, self._marks)
        return spec_cells(self.index, spec, self.view, tw, state)

    # ---- geometry ---------------------------------------------------------------------
    def _anchor(self) -> float:
        """Zoom anchor (relative ns): the cursor time if on screen, else the view centre."""
        tw = self.timeline_width
        if self.cursor_t is not None and self.view.t0 <= self.cursor_t <= self.view.t1(tw):
            return self.cursor_t
        return self.view.t0 + self.view.ns_per_cell * tw / 2

    def _index_of(self, spec: RowSpec) -> IntervalIndex | None:
        return index_of(self.index, spec, self.gaps) if self.index is not None else None

    def _hit(self, spec: RowSpec, t: float, tol: float) -> int:
        return hit(self.index, spec, self.gaps, t, tol) if self.index is not None else -1

    def _locate(self, row: int) -> int:
        """Screen row that draws Timeline ``row`` (unfolding its groups), or -1."""
        where = level_of(self.index, row) if self.index is not None and row >= 0 else None
        if where is None or self.index is None:
            return -1
        lane, level = where
        opened = groups_of(self.index.timeline, lane)
        if self.collapsed & opened:
            self.collapsed -= opened
            self._rebuild_rows()
            self.generation += 1
        return lane_row(self.rows, lane, level)

    def describe_view(self) -> str:
        """The status bar's "what is shown": the width of the view in time and per cell."""
        tw = self.timeline_width
        return f"{format_duration(self.view.ns_per_cell * tw)} shown · {format_duration(self.view.ns_per_cell)}/cell"

    def scroll_to_region_row(self, y: int) -> None:
        top = int(self.scroll_offset.y)
        h = self.size.height
        if y < top:
            self.scroll_to(y=y, animate=False)
        elif h and y >= top + h:
            self.scroll_to(y=y - h + 1, animate=False)

    # ---- selection and showing --------------------------------------------------------
    def select_row(self, row: int, *, reveal: bool = True) -> None:
        """Select Timeline ``row`` (-1 clears), move the cursor to it and pan it into view."""
        self.selected = row
        if row >= 0 and self.index is not None:
            s, e = span_times(self.index, row)
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

    def show_time(self, t0: float, t1: float, device: int = -1) -> None:
        """Cursor on ``[t0, t1]`` (relative ns): the time cursor at its start, the row cursor on
        that GPU's header row (its idle gaps), the view panned to show it."""
        self.cursor_t = t0
        y = device_row(self.rows, device) if device >= 0 else -1
        if y >= 0:
            self.cursor_row = y
            self.scroll_to_region_row(y)
        nv = self.view.ensure_visible(t0, t1, self.timeline_width)
        if nv != self.view:
            self.view, self.auto_fit = nv, False
        self.refresh()
        self._post_view()

    def set_view(self, view: View) -> None:
        self.view = view
        self.auto_fit = False
        self.refresh()
        self._post_view()

    # ---- measuring ----------------------------------------------------------------------
    def set_range(self, t0: float | None, t1: float | None = None) -> None:
        """Set the range (any order), or clear it with ``set_range(None)``."""
        self.mark_a = None
        self.range = None if t0 is None or t1 is None else (min(t0, t1), max(t0, t1))
        self.refresh()
        self._post_view()
        self.post_message(self.RangeChanged(self, self.range))

    def clear_range(self) -> bool:
        """Clear the range or a pending mark; False if there was neither."""
        if self.range is None and self.mark_a is None:
            return False
        self.set_range(None)
        return True


__all__ = ["GanttDisplay"]
