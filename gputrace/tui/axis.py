"""The time axis above the Gantt: tick labels relative to the trace start, adaptive units,
and a ``▼`` at the cursor time. UI thread only; fed by `Gantt.ViewChanged`."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gputrace.tui.layout import View, axis_ticks, format_duration


def axis_lines(view: View, width: int, name_w: int, cursor_t: float | None, zero: float = 0.0) -> tuple[str, str]:
    """Two text lines: labels and tick marks, the timeline part starting at ``name_w``.

    Labels are times since ``zero`` (the first span shown), so they read ``0ms``, ``20ms``...
    Pure; used by the widget and tested directly.
    """
    labels = [" "] * (name_w + width)
    marks = [" "] * name_w + ["─"] * width
    head = f"{format_duration(view.ns_per_cell, 2)}/cell"[: name_w - 1]
    labels[: len(head)] = list(head)
    last_end = name_w
    for col, text in axis_ticks(view, width, zero):
        x = name_w + col
        marks[x] = "┬"
        start = max(x, last_end)
        if start + len(text) <= name_w + width and start - x <= 1:
            labels[start : start + len(text)] = list(text)
            last_end = start + len(text) + 1
    if cursor_t is not None:
        c = int((cursor_t - view.t0) / view.ns_per_cell)
        if 0 <= c < width:
            marks[name_w + c] = "▼"
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

    def show(self, view: View, width: int, cursor_t: float | None, zero: float = 0.0) -> None:
        self.view, self.width_cells, self.cursor_t, self.zero = view, width, cursor_t, zero
        self.refresh()

    def render(self) -> Text:
        if self.view is None:
            return Text("")
        a, b = axis_lines(self.view, self.width_cells, self.name_w, self.cursor_t, self.zero)
        return Text(a + "\n" + b, no_wrap=True, overflow="crop")
