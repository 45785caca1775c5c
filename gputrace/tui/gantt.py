"""The Gantt widget: a `ScrollView` drawn with Textual's Line API.

Vertical scrolling is the ScrollView's (one screen row per `RowSpec`); the horizontal
axis is a `View` (time at the left edge, ns per cell) that the widget owns, so zoom and
pan never re-layout anything: they change the view and every visible row is redrawn by
`render_line` from its `IntervalIndex` (vectorised, see `gputrace.tui.render`). Rendered
rows are kept in an LRU of `Strip`s keyed on (row, generation, view, width, selection,
cursor); ``generation`` is bumped whenever data, filters, search or collapse state change.

Threading: every method runs on the UI thread. New data arrives via `set_index` (built
off-thread by the loader). Messages posted: `SpanSelected`, `ViewChanged`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputrace.tui.index import IntervalIndex, TimelineIndex
from gputrace.tui.layout import View, elide_middle, format_duration
from gputrace.tui.measure import GanttMeasure
from gputrace.tui.navigation import NAME_W, GanttNavigation
from gputrace.tui.keys import BG, LAUNCH, MARK_LAUNCH, MARK_UNATTR, MARK_WAIT, UNATTR, WAIT
from gputrace.tui.overlays import Overlays
from gputrace.tui.palette import Palette
from gputrace.tui.render import blank_cells, cells_to_runs, row_cells
from gputrace.tui.rows import DEVICE, GPU, HOST, LANE, RowSpec, build_rows



class Gantt(GanttMeasure, GanttNavigation, ScrollView, can_focus=True):
    """Per-lane timeline of spans; see the module docstring for the drawing contract."""

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

    DEFAULT_CSS = """
    Gantt { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    """

    # The help screen and the footer are built from these (description: footer, tooltip: help).
    BINDINGS = [
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
        Binding("space", "toggle", "Fold", show=False, tooltip="fold / unfold the host or device group"),
        Binding("c", "compact", show=False, tooltip="compact: one row per lane, nested phases stacked"),
    ]

    @dataclass
    class SpanSelected(Message):
        """A span was selected (``row`` is a Timeline row, -1 for none). ``moved``: not a new choice, the
        same span under a new row number after the timeline was re-indexed (or -1: filtered out)."""

        gantt: "Gantt"
        row: int
        moved: bool = False

    @dataclass
    class RangeChanged(Message):
        """The measured range changed (``range`` relative ns, or None: cleared)."""

        gantt: "Gantt"
        range: tuple[float, float] | None

    @dataclass
    class ViewChanged(Message):
        gantt: "Gantt"
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
        self.selected = -1
        self.dim_rows: np.ndarray | None = None
        self.gaps: dict[tuple, IntervalIndex] = {}
        self.overlays: Overlays | None = None
        self._marks: dict[tuple[int, int], list] = {}
        self.generation = 0
        self.auto_fit = True  # refit on new data until the user navigates
        self._cache: LRUCache[tuple, Strip] = LRUCache(2048)
        self._palette: Palette | None = None
        self._style_cache: dict[tuple, tuple[Style, str]] = {}
        self._drag: tuple[int, View] | None = None
        self._dragged = False

    # ---- data -------------------------------------------------------------------------
    def set_index(self, index: TimelineIndex) -> None:
        """Show a new index (a new load batch, or a new filter). A selected span stays selected: rows are
        renumbered when spans arrive, so it is found again by span id and start."""
        old, row = self.index, self.selected
        self.index = index
        if row >= 0:
            self.selected = _same_span(old, index, row)
            if self.selected != row:
                self.post_message(self.SpanSelected(self, self.selected, moved=True))
        self._palette = None
        self._group_marks()
        self._rebuild_rows()
        if self.auto_fit:
            self.view = self._fit_view()
        self._changed()

    def set_overlays(self, overlays: Overlays) -> None:
        """Analysis results: idle gaps on the device header rows, waits and unattributed
        time as marks over the bars of the spans they belong to."""
        self.overlays = overlays
        self.gaps = overlays.gaps
        self._group_marks()
        self._changed()

    def _group_marks(self) -> None:
        """Split the overlay marks by the drawn level of their span (after each re-index)."""
        self._marks = {}
        ov, idx = self.overlays, self.index
        if ov is None or idx is None or not len(ov.marks_row):
            return
        ok = ov.marks_row < len(idx.row_level)
        rows = ov.marks_row[ok]
        lvl = idx.row_level[rows]
        keep = lvl >= 0
        lvl, rows = lvl[keep], rows[keep]
        s, e, kind = ov.marks_start[ok][keep] - idx.origin, ov.marks_end[ok][keep] - idx.origin, ov.marks_kind[ok][keep]
        for lv_id in np.unique(lvl).tolist():
            m = lvl == lv_id
            key = idx.level_ids[lv_id]
            for k, glyph, colour in ((MARK_UNATTR, "┄", UNATTR), (MARK_WAIT, "╍", WAIT), (MARK_LAUNCH, "╌", LAUNCH)):
                mk = m & (kind == k)
                if mk.any():
                    self._marks.setdefault(key, []).append((IntervalIndex.of(s[mk], e[mk], colour, rows[mk]), glyph, colour))

    def set_dim(self, dim_rows: np.ndarray | None) -> None:
        """Dim spans where ``dim_rows`` is true (search highlighting); None: no dimming."""
        self.dim_rows = dim_rows
        self._changed()

    @property
    def timeline_width(self) -> int:
        return max(1, self.size.width - NAME_W - (1 if self.show_vertical_scrollbar else 0))

    def _rebuild_rows(self) -> None:
        key = self.rows[self.cursor_row].key if 0 <= self.cursor_row < len(self.rows) else None
        self.rows = build_rows(self.index, self.collapsed, compact=self.compact) if self.index is not None else []
        if key is not None:
            for i, r in enumerate(self.rows):
                if r.key == key:
                    self.cursor_row = i
                    break
        self.cursor_row = min(self.cursor_row, max(0, len(self.rows) - 1))
        self.virtual_size = Size(self.size.width, len(self.rows))

    def _changed(self) -> None:
        self.generation += 1
        self._cache.clear()
        self.refresh()
        self._post_view()

    def _post_view(self) -> None:
        zero = float(self.index.t_min) if self.index is not None else 0.0
        self.post_message(self.ViewChanged(self, self.view, self.timeline_width, self._anchor(), zero))

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
        self._palette = None
        self._cache.clear()

    # ---- drawing ----------------------------------------------------------------------
    def _colours(self) -> Palette:
        if self._palette is None:
            def bg(name: str, default: str) -> str:
                st = self.get_component_rich_style(name, partial=True)
                c = st.bgcolor or st.color
                return c.get_truecolor().hex if c is not None else default

            def fg(name: str, default: str) -> str:
                st = self.get_component_rich_style(name, partial=True)
                return st.color.get_truecolor().hex if st.color is not None else default

            phases = self.index.timeline.phases if self.index is not None else []
            self._style_cache = {}
            self._palette = Palette(
                phases,
                background=bg("gantt--row", "#1e1e1e"),
                selected=bg("gantt--selected", "#ffffff"),
                idle=bg("gantt--idle", "#a33a3a"),
                unattributed=fg("gantt--unattributed", "#e0a030"),
                wait=fg("gantt--wait", "#ffe066"),
                launch=fg("gantt--launch", "#ff7f50"),
                pageable=fg("gantt--pageable", "#ff4d6d"),
                pinned=fg("gantt--pinned", "#2ec4b6"),
            )
        return self._palette

    def _name_styles(self, kind: str, cursor: bool, base: str) -> tuple[Style, str]:
        """(name column style, timeline background) for a row kind; cached per palette."""
        key = (kind, cursor)
        hit = self._style_cache.get(key)
        if hit is None:
            cls = "gantt--cursor" if cursor else {HOST: "gantt--host", DEVICE: "gantt--device"}.get(kind, "gantt--name")
            st = self.get_component_rich_style(cls)
            bg = base
            if kind in (HOST, DEVICE):
                hdr = self.get_component_rich_style("gantt--device" if kind == DEVICE else "gantt--host")
                if hdr.bgcolor is not None:
                    bg = hdr.bgcolor.get_truecolor().hex
            hit = self._style_cache[key] = (st, bg)
        return hit

    def render_line(self, y: int) -> Strip:
        ry = y + int(self.scroll_offset.y)
        width = self.size.width
        key = (ry, self.generation, self.view, width, self.selected, ry == self.cursor_row and self.has_focus,
               self.measure_key())
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(ry, width)
            self._cache[key] = strip
        return strip

    def _render_row(self, ry: int, width: int) -> Strip:
        pal = self._colours()
        base = pal.background
        if ry >= len(self.rows) or self.index is None:
            return Strip.blank(width, Style(bgcolor=base))
        spec = self.rows[ry]
        tw = self.timeline_width
        name_style, base = self._name_styles(spec.kind, ry == self.cursor_row and self.has_focus, base)
        # Elided in the middle (the distinguishing end stays), then cut to cells: wide names keep the grid.
        label = set_cell_size(elide_middle(spec.label, NAME_W - 1), NAME_W - 1)
        segs = [Segment(label, name_style), Segment("│", name_style)]
        cells = self.decorate(self._row_cells(spec, tw))
        for text, fg, bg, bold in cells_to_runs(cells):
            segs.append(Segment(text, pal.style(fg, bg, bold, base)))
        return Strip(segs, NAME_W + tw).extend_cell_length(width, Style(bgcolor=base))

    def _level_cells(self, lane: int, level: int, tw: int):
        lv = self.index.lanes[lane].levels[level]
        rows, tl = lv.index.row, self.index.timeline
        return row_cells(
            lv.index, self.view, tw,
            label_fn=lambda i: tl.name_of(int(rows[i])),
            selected_row=self.selected, dim_rows=self.dim_rows,
            marks=self._marks.get((lane, level), ()),
        )

    def _row_cells(self, spec: RowSpec, tw: int):
        idx = self.index
        tl = idx.timeline
        if spec.kind == DEVICE:
            gaps = self.gaps.get(spec.group)
            if gaps is None:
                return blank_cells(tw)
            return row_cells(gaps, self.view, tw, label_fn=lambda i: gaps.labels[i] if gaps.labels else "idle")
        if spec.kind == LANE:
            li = idx.lanes[spec.lane]
            if spec.level >= 0:
                return self._level_cells(spec.lane, spec.level, tw)
            out = None  # compact: every level drawn over the one above it
            for j in range(len(li.levels)):
                c = self._level_cells(spec.lane, j, tw)
                if out is None:
                    out = c
                    continue
                fill = np.where((out.chars == " ") & (out.bg != BG), out.bg, BG)
                m = (c.bg != BG) | (c.chars != " ")
                out.chars[m], out.fg[m], out.bold[m] = c.chars[m], c.fg[m], c.bold[m]
                out.bg[m] = np.where(c.bg == BG, fill, c.bg)[m]  # a child's half-cell sits on its parent
            return out if out is not None else blank_cells(tw)
        if spec.kind == GPU:
            gpu = idx.lanes[spec.lane].gpu
            return row_cells(gpu, self.view, tw, thin=True, selected_row=self.selected, dim_rows=self.dim_rows)
        return blank_cells(tw)

    # ---- geometry helpers -------------------------------------------------------------
    def _anchor(self) -> float:
        """Zoom anchor (relative ns): the cursor time if on screen, else the view centre."""
        tw = self.timeline_width
        if self.cursor_t is not None and self.view.t0 <= self.cursor_t <= self.view.t1(tw):
            return self.cursor_t
        return self.view.t0 + self.view.ns_per_cell * tw / 2

    def _index_of(self, spec: RowSpec) -> IntervalIndex | None:
        if self.index is None:
            return None
        if spec.kind == LANE:
            return self.index.lanes[spec.lane].levels[max(spec.level, 0)].index
        if spec.kind == GPU:
            return self.index.lanes[spec.lane].gpu
        if spec.kind == DEVICE:
            return self.gaps.get(spec.group)
        return None

    def _hit(self, spec: RowSpec, t: float, tol: float) -> int:
        """Timeline row of the span drawn at time ``t`` on ``spec`` (the deepest one in a
        compact row), else the nearest within ``tol`` ns, else -1."""
        if spec.kind == LANE and spec.level < 0 and self.index is not None:
            for lv in reversed(self.index.lanes[spec.lane].levels):
                i = lv.index.at(t)
                if i >= 0:
                    return int(lv.index.row[i])
        ii = self._index_of(spec)
        if ii is None:
            return -1
        i = ii.nearest(t, tol)
        return int(ii.row[i]) if i >= 0 and ii.row[i] >= 0 else -1

    def _locate(self, row: int) -> int:
        """Screen row that draws Timeline ``row`` (expanding its groups), or -1."""
        idx = self.index
        if idx is None or row < 0:
            return -1
        tl = idx.timeline
        lane = int(tl.lane[row])
        li = idx.lanes[lane]
        rel = int(tl.start[row]) - idx.origin
        for j, lv in enumerate(li.levels):
            ii = lv.index
            i = int(np.searchsorted(ii.start, rel, side="left"))
            while i < len(ii) and ii.start[i] == rel:
                if ii.row[i] == row:
                    ln = tl.lanes[lane]
                    opened = {("host", ln.host or "?"), ("device", ln.host or "?", ln.device_label)}
                    if self.collapsed & opened:
                        self.collapsed -= opened
                        self._rebuild_rows()
                        self.generation += 1
                    for y, spec in enumerate(self.rows):
                        if spec.kind == LANE and spec.lane == lane and spec.level in (j, -1):
                            return y
                    return -1
                i += 1
        return -1

    def show_time(self, t0: float, t1: float, device: int = -1) -> None:
        """Cursor on ``[t0, t1]`` (relative ns): the time cursor at its start, the row cursor on
        that GPU's header row (its idle gaps), the view panned to show it."""
        self.cursor_t = t0
        if device >= 0:
            for y, spec in enumerate(self.rows):
                if spec.kind == DEVICE and spec.group[1] == f"GPU {device}":
                    self.cursor_row = y
                    self.scroll_to_region_row(y)
                    break
        nv = self.view.ensure_visible(t0, t1, self.timeline_width)
        if nv != self.view:
            self.view, self.auto_fit = nv, False
        self.refresh()
        self._post_view()

    @property
    def zero(self) -> float:
        """Relative time of the first span shown: the axis and readouts count from it."""
        return float(self.index.t_min) if self.index is not None else 0.0

    # ---- for the axis and status bar --------------------------------------------------
    def describe_view(self) -> str:
        tw = self.timeline_width
        return f"{format_duration(self.view.ns_per_cell * tw)} shown · {format_duration(self.view.ns_per_cell)}/cell"


__all__ = ["Gantt", "NAME_W"]


def _same_span(old: TimelineIndex | None, new: TimelineIndex, row: int) -> int:
    """Row in ``new`` of ``old``'s span at ``row`` (same span id and start), or -1 if it is not there."""
    if old is None:
        return -1
    if old.timeline is new.timeline:
        return row
    a, b = old.timeline, new.timeline
    if row >= a.n:
        return -1
    hits = np.flatnonzero((b.span_id == a.span_id[row]) & (b.start == a.start[row]))
    return int(hits[0]) if hits.size else -1
