"""The timeline screen's commands in the command palette (``ctrl+p``), as a Textual command `Provider`.

Each command is also a key (named in its help text): the palette is for finding them. A command is an
action string run on the screen's `Gantt` or on the screen itself, so this module needs neither the
screen's class nor its internals. The screen lists this provider in ``TimelineScreen.COMMANDS``, so
the palette offers them only over the timeline (not over the help or error screens). Runs on the UI
thread (Textual calls ``discover``/``search`` there and runs the chosen command there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from gputrace.tui.gantt import Gantt

#: (title, help, where the action runs: "gantt" or "screen", action) of every command, in the palette's order.
COMMANDS = (
    ("Fit", "Zoom to fit everything (f)", "gantt", "fit"),
    ("Zoom to selection", "Zoom to the selected span (z)", "gantt", "zoom_selection"),
    ("Measure", "Measure the span or idle gap under the cursor (x)", "gantt", "measure"),
    ("Zoom to range", "Zoom to the measured range (r)", "gantt", "zoom_range"),
    ("Search", "Fade what does not match a query (/)", "screen", "query('search')"),
    ("Filter", "Show only spans matching a query (F)", "screen", "query('filter')"),
    ("Stalls", "The stalls panel, focused (3)", "screen", "panel('stalls')"),
    ("Summary", "Per-phase statistics (2)", "screen", "panel('summary')"),
    ("Details", "The selected span (1)", "screen", "panel('details')"),
    ("Range", "What ran in the measured range (4)", "screen", "panel('range')"),
    ("Legend", "The legend: every line, hidden, two lines (g)", "screen", "toggle_legend"),
    ("Compact", "One row per lane / depth rows (c)", "gantt", "compact"),
    ("Help", "Every key (?)", "screen", "app.help"),
)


class TimelineCommands(Provider):
    """Fit, zoom, measure, search, filter, the panels, the legend, compact rows and help."""

    def commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """(title, help, callback) of every command, bound to the calling screen and its Gantt."""
        gantt = self.screen.query_one(Gantt)
        return [(title, help_, partial((gantt if where == "gantt" else self.screen).run_action, action))
                for title, help_, where, action in COMMANDS]

    async def discover(self) -> Hits:
        """Every command, shown when the palette opens with nothing typed."""
        for title, help_, call in self.commands():
            yield DiscoveryHit(title, call, help=help_)

    async def search(self, query: str) -> Hits:
        """The commands whose title matches ``query`` (Textual's fuzzy matcher)."""
        matcher = self.matcher(query)
        for title, help_, call in self.commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), call, help=help_)
