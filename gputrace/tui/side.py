"""The side panels' wiring: number keys that show a panel and focus its list, the timeline
following the stalls list, measuring from it, the Range panel, the narrow layout, the legend and
help toggles; and `_ui`, the guard every message handler of the app wears.

A mixin of `gputrace.tui.app.GputraceApp` (UI thread); it uses the app's ``index``.
"""

from __future__ import annotations

import functools

from textual.app import ScreenStackError
from textual.css.query import NoMatches
from textual.widgets import Static, TabbedContent
from rich.text import Text

from gputrace.textsafe import rich_text
from gputrace.tui.gantt import Gantt
from gputrace.tui.layout import View, format_duration
from gputrace.tui.panels import RangePanel, StallsPanel, SummaryPanel
from gputrace.tui.range_stats import range_summary
from gputrace.tui.widgets import HelpScreen, Legend


def _ui(handler):
    """Message handlers touch widgets that are gone while the app shuts down (a load or
    analysis message can arrive after the screen was removed): ignore those."""

    @functools.wraps(handler)
    def wrapped(self, *args, **kw):
        try:
            return handler(self, *args, **kw)
        except NoMatches:
            if self._exit or self._closing:
                return None
            try:  # the screen is torn down leaves first: any of these gone means shutting down
                alive = len(self.query("#body, #gantt, #side")) == 3
            except Exception:  # no screen at all: shutting down
                alive = False
            if alive:
                raise
            return None

    return wrapped


class SidePanels:
    """Panels, layout and help for the app (see the module docstring)."""

    #: Below this many columns the side panel is hidden until asked for, and then sits under the timeline.
    NARROW = 110

    @_ui
    def on_gantt_range_changed(self, msg: Gantt.RangeChanged) -> None:
        self._show_range()
        if msg.range is not None:
            side = self.query_one("#side", TabbedContent)
            if not (self.screen.has_class("narrow") and side.has_class("hidden")):
                if self._side_focused():  # the focused list is about to be hidden: the timeline takes focus
                    self.query_one(Gantt).focus()
                side.active = "range"
        self._update_status()

    def _show_range(self) -> None:
        gantt = self.query_one(Gantt)
        r = gantt.range
        if r is None or self.index is None:
            self.query_one(RangePanel).show(None)
            return
        self.query_one(RangePanel).show(range_summary(self.index.timeline, self.index.origin, r[0], r[1], gantt.gaps))

    def _side_focused(self) -> bool:
        try:
            f = self.focused
        except ScreenStackError:  # a message that arrives while the app shuts down
            return False
        return f is not None and any(n.id == "side" for n in f.ancestors_with_self)

    @_ui
    def on_stalls_panel_highlighted(self, msg: StallsPanel.Highlighted) -> None:
        it = msg.item
        detail = Text()
        if it is not None:  # Text, not markup: the item's text holds names from the trace
            detail.append(it.category, style="bold")
            detail.append(f" {format_duration(it.amount_ns)}\n")
            detail.append_text(rich_text(it.text))
            detail.append("\n")
            detail.append("Enter: zoom the timeline to it · x: measure it · Esc: to the timeline", style="dim")
        self.query_one("#stall-detail", Static).update(detail)
        if it is not None and self.index is not None and self.query_one(StallsPanel).has_focus:
            self._show_stall(it, zoom=False)  # the timeline follows the list

    @_ui
    def on_stalls_panel_chosen(self, msg: StallsPanel.Chosen) -> None:
        if self.index is not None:
            self._show_stall(msg.item, zoom=True)  # focus stays on the list

    @_ui
    def on_stalls_panel_measure(self, msg: StallsPanel.Measure) -> None:
        if self.index is not None:
            o = self.index.origin
            self.query_one(Gantt).set_range(msg.item.start - o, msg.item.end - o)

    def _show_stall(self, item, zoom: bool) -> None:
        """Put the timeline's cursor on a stall (its span selected, or its GPU row and start);
        ``zoom``: fit the view to it, else pan only as much as needed."""
        gantt = self.query_one(Gantt)
        o = self.index.origin
        s, e = item.start - o, item.end - o
        if item.row >= 0:
            gantt.select_row(item.row, reveal=not zoom)
        else:
            gantt.show_time(s, e, device=item.device)
        if zoom:
            gantt.set_view(View.fit(s, e, gantt.timeline_width, margin=0.25))

    def help_sections(self) -> list[tuple[str, list]]:
        return [("timeline", Gantt.BINDINGS), ("app", self.BINDINGS),
                ("summary (2)", SummaryPanel.BINDINGS), ("stalls (3)", StallsPanel.BINDINGS)]

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_sections()))

    def action_panel(self, name: str) -> None:
        """Show a side panel and focus what it holds (a list takes the arrows and Enter)."""
        side = self.query_one("#side", TabbedContent)
        side.remove_class("hidden")
        side.active = name
        target = {"summary": SummaryPanel, "stalls": StallsPanel}.get(name)
        if target is not None:
            self.query_one(target).focus()
        else:
            self.query_one(Gantt).focus()

    def action_toggle_side(self) -> None:
        side = self.query_one("#side")
        side.toggle_class("hidden")
        if side.has_class("hidden") and self._side_focused():
            self.query_one(Gantt).focus()

    def action_toggle_legend(self) -> None:
        self.query_one(Legend).toggle_class("hidden")

    def on_resize(self, event) -> None:
        self._fit_layout(event.size.width)

    def _fit_layout(self, width: int) -> None:
        """Narrow terminals (80 columns): the side panel starts hidden and, shown (1-4 or p), sits
        under the timeline, so the timeline keeps the width."""
        narrow = width < self.NARROW
        if narrow and not self.screen.has_class("narrow"):
            self.query_one("#side").add_class("hidden")
        self.screen.set_class(narrow, "narrow")
