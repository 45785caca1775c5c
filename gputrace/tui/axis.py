"""The time axis above the Gantt: tick labels relative to the trace start in units that fit
the zoom (offsets from a shown anchor when zoomed far in), the time cursor ``▼`` with its
readout, and the measured range. UI thread only; fed by `Gantt.ViewChanged`.

Mouse: a drag along the axis measures that range (`Gantt.set_range`).
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widget import Widget

from gputrace.tui.layout import View, axis_scale, format_anchor, format_duration, nice_step


def axis_lines(view: View, width: int, name_w: int, cursor_t: float | None, zero: float = 0.0,
               span: tuple[float, float] | None = None) -> tuple[str, str]:
    """Two text lines: labels and tick marks, the timeline part starting at ``name_w``.

    Labels are times since ``zero`` (the first span shown), so they read ``0ms``, ``20ms``...;
    zoomed far in, they are offsets (``+0 +20µs``) from an anchor written in the name column
    (``@ 1.49793 s``). The name column of the second line reads the cursor time (``▼ +12.35 ms``).
    ``span`` (the measured range) is drawn ``━`` on the tick line. Pure; tested directly.
    """
    labels = [" "] * (name_w + width)
    marks = [" "] * name_w + ["─"] * width
    anchor, ticks = axis_scale(view, width, zero)
    step = nice_step(view.ns_per_cell)
    head = f"@ {format_anchor(anchor, step)}" if anchor is not None else f"{format_duration(view.ns_per_cell, 2)}/cell"
    head = head[: name_w - 1]
    labels[: len(head)] = list(head)
    if span is not None:
        a = max(0, int((span[0] - view.t0) // view.ns_per_cell))
        b = min(width, int(-((view.t0 - span[1]) // view.ns_per_cell)))
        for x in range(a, b):
            marks[name_w + x] = "━"
    last_end = name_w
    for col, text in ticks:
        x = name_w + col
        marks[x] = "┿" if marks[x] == "━" else "┬"
        start = max(x, last_end)
        if start + len(text) <= name_w + width and start - x <= 1:
            labels[start : start + len(text)] = list(text)
            last_end = start + len(text) + 1
    if cursor_t is not None:
        c = int((cursor_t - view.t0) // view.ns_per_cell)
        if 0 <= c < width:
            marks[name_w + c] = "▼"
        readout = f"▼ +{format_anchor(cursor_t - zero, view.ns_per_cell / 10)}"[: name_w - 2]
        marks[: len(readout)] = list(readout)
    marks[name_w - 1] = "│" if name_w else marks[0]
    return "".join(labels), "".join(marks)


class TimeAxis(Widget):
    DEFAULT_CSS = "TimeAxis { height: 2; }"

    def __init__(self, name_w: int, **kw) -> None:
        super().__init__(**kw)
        self.name_w = name_w
        self.view: View | None = None
        self.width_cells = 0
        self.cursor_t: float | None = None
        self.zero = 0.0
        self.span: tuple[float, float] | None = None
        self._drag_t: float | None = None

    def show(self, view: View, width: int, cursor_t: float | None, zero: float = 0.0,
             span: tuple[float, float] | None = None) -> None:
        self.view, self.width_cells, self.cursor_t, self.zero, self.span = view, width, cursor_t, zero, span
        self.refresh()

    def render(self) -> Text:
        if self.view is None:
            return Text("")
        a, b = axis_lines(self.view, self.width_cells, self.name_w, self.cursor_t, self.zero, self.span)
        return Text(a + "\n" + b, no_wrap=True, overflow="crop")

    # ---- drag to measure --------------------------------------------------------------
    def _t(self, x: int) -> float | None:
        if self.view is None or x < self.name_w:
            return None
        return self.view.time_of(x - self.name_w + 0.5)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._drag_t = self._t(event.x)
        if self._drag_t is not None:
            self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        t = self._t(max(event.x, self.name_w))
        if self._drag_t is not None and t is not None:
            self._gantt().set_range(self._drag_t, t)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag_t is None:
            return
        self.release_mouse()
        t = self._t(max(event.x, self.name_w))
        t0, self._drag_t = self._drag_t, None
        if t is not None and self.view is not None and abs(t - t0) >= self.view.ns_per_cell:
            self._gantt().set_range(t0, t)

    def _gantt(self):
        from gputrace.tui.gantt import Gantt

        return self.screen.query_one(Gantt)
