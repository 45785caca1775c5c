"""`TimelineScreen`: ``gputrace view``'s main screen; its keys, its actions and its messages to the app.

The layout, the view's state and what the app shows on it (``show_update``, ``show_analysis``,
``show_findings``) are the base class's, `gputrace.tui.timeline_display.TimelineDisplay`; this
subclass adds the screen's key bindings (search, filter, matches, panels, legend, help, quit) and
their actions, the help sections built from them, and the conversation with the app: it tells the app
when its widgets are there (`Mounted`: the app starts loading then) and asks it for a new analysis by
posting `AnalysisWanted` (the panel's by-device switch). Its palette commands are
`gputrace.tui.commands.TimelineCommands`.

Threading: Textual's event loop (the UI thread) only. Raises: nothing of its own; a bad query is a
notice; the panels' message handler wears `gputrace.tui.guard.while_mounted`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input, TabbedContent

from gputrace.tui.commands import TimelineCommands
from gputrace.tui.gantt import Gantt
from gputrace.tui.guard import while_mounted
from gputrace.tui.legend import Legend
from gputrace.tui.panels import DetailsPanel, RangePanel, StallsPanel, SummaryPanel
from gputrace.tui.timeline_display import TimelineDisplay
from gputrace.tui.widgets import QUERY_HELP, QUIT_BINDING

__all__ = ["TimelineDisplay", "TimelineScreen"]


class TimelineScreen(TimelineDisplay):
    """The timeline, its panels and bars, with the keys; see the module docstring."""

    COMMANDS: ClassVar = {TimelineCommands}

    # The help screen and the footer are built from these and the Gantt's and panels' bindings.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "app.help", "Help", tooltip="this help"),
        Binding("slash", "query('search')", "Search",
                tooltip="search: fade what does not match, select the first match"),
        Binding("F", "query('filter')", "Filter", tooltip="filter: show only matching spans"),
        Binding("m", "match(1)", show=False, tooltip="next search match"),
        Binding("M", "match(-1)", show=False, tooltip="previous search match"),
        Binding("escape", "clear", show=False,
                tooltip="back to the timeline, else clear the search, the filter, the range, the selection"),
        Binding("1", "panel('details')", show=False, tooltip="Details panel (the selected span)"),
        Binding("2", "panel('summary')", show=False, tooltip="Summary panel, focused (per-phase statistics)"),
        Binding("3", "panel('stalls')", "Stalls", tooltip="Stalls panel, focused: arrows walk it, Enter zooms"),
        Binding("4", "panel('range')", show=False, tooltip="Range panel (what ran in the measured range)"),
        Binding("p", "toggle_side", show=False, tooltip="show / hide the side panel"),
        Binding("g", "toggle_legend", show=False,
                tooltip="legend: every line (when it was cut: … +N more), then hide it, then two lines"),
        Binding("q", "app.quit", "Quit", tooltip="quit"),
    ]

    class Mounted(Message):
        """The screen's widgets are there: what the app loads can be shown from now on."""

    @dataclass
    class AnalysisWanted(Message):
        """The analysis should run again, split by device or not (the summary's ``d``)."""

        by_device: bool

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[BindingType]]]:
        """(title, bindings) of every key the screen answers, for the help screen."""
        return [("timeline", Gantt.BINDINGS), ("app", [*cls.BINDINGS, QUIT_BINDING]),
                ("summary (2)", SummaryPanel.BINDINGS), ("stalls (3)", StallsPanel.BINDINGS)]

    def on_mount(self) -> None:
        self.query_one(DetailsPanel).show(None, -1, 0)
        self.query_one(RangePanel).show(None)
        self._fit_layout(self.app.size.width)
        self.query_one(Gantt).focus()
        self._update_status()
        self.post_message(self.Mounted())

    # ---- the panels' messages ---------------------------------------------------------
    @while_mounted
    def on_summary_panel_by_device_toggled(self, msg: SummaryPanel.ByDeviceToggled) -> None:
        self.post_message(self.AnalysisWanted(msg.by_device))

    # ---- search and filter ------------------------------------------------------------
    def action_query(self, mode: str) -> None:
        self.query_mode = mode
        box = self.query_one("#query", Input)
        box.value = self.search_text if mode == "search" else self.filter_text
        box.placeholder = f"{mode}: {QUERY_HELP}"
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#query", Input).remove_class("shown")
        text = event.value.strip()
        if self.query_mode == "search":
            self._apply_search(text)
        else:
            self._apply_filter(text)
        self.query_one(Gantt).focus()

    def action_clear(self) -> None:
        """Esc, one step at a time: close the query box; leave a side panel for the timeline
        (hiding it where it overlays the timeline); clear the search, the filter, the
        measured range, the selection."""
        box = self.query_one("#query", Input)
        gantt = self.query_one(Gantt)
        if box.has_class("shown"):
            box.remove_class("shown")
            gantt.focus()
        elif self.focused is not None and self.focused is not gantt:
            gantt.focus()
            if self.has_class("narrow"):  # after the focus moved: hiding a focused widget drops focus
                self.call_after_refresh(self.query_one("#side").add_class, "hidden")
        elif self.search_text:
            self._apply_search("")
        elif self.filter_text:
            self._apply_filter("")
        elif not gantt.clear_range():
            gantt.select_row(-1)

    # ---- panels, legend, help ---------------------------------------------------------
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
        self.query_one(Legend).cycle()
