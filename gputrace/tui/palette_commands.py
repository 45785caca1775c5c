"""The app's command palette (``ctrl+p``) and its SVG screenshots.

A mixin of `gputrace.tui.app.GputraceApp` (UI thread): the main commands as palette entries
(each also has a key, named in its help), and a Screenshot entry that replaces Textual's, which
writes to ``~/Downloads`` and fails where that folder is missing. Every SVG the app exports is
marked ``xml:space="preserve"`` (`preserve_space`).
"""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import SystemCommand

from gputrace.atomic_write import write_atomic
from gputrace.textsafe import visible
from gputrace.tui.gantt import Gantt


def preserve_space(svg: str) -> str:
    """Mark an SVG screenshot ``xml:space="preserve"``: Textual's SVGs rely on browsers keeping
    runs of spaces, other renderers (rsvg, Inkscape) collapse them and shift every column."""
    if 'xml:space="preserve"' in svg[:400]:
        return svg
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


class PaletteCommands:
    """Needs the app's actions (``action_query``, ``action_panel``, ...) and ``trace_title``."""

    def get_system_commands(self, screen):
        for cmd in super().get_system_commands(screen):
            if cmd.title != "Screenshot":  # replaced: Textual's writes to ~/Downloads, failing where it is missing
                yield cmd
        yield SystemCommand("Screenshot", "Save an SVG of the screen (to ~/Downloads if it exists, else here)",
                            self.action_save_svg)
        gantt = self.query_one(Gantt)
        for title, help_, call in (
            ("Fit", "Zoom to fit everything (f)", gantt.action_fit),
            ("Zoom to selection", "Zoom to the selected span (z)", gantt.action_zoom_selection),
            ("Measure", "Measure the span or idle gap under the cursor (x)", gantt.action_measure),
            ("Zoom to range", "Zoom to the measured range (r)", gantt.action_zoom_range),
            ("Search", "Fade what does not match a query (/)", lambda: self.action_query("search")),
            ("Filter", "Show only spans matching a query (F)", lambda: self.action_query("filter")),
            ("Stalls", "The stalls panel, focused (3)", lambda: self.action_panel("stalls")),
            ("Summary", "Per-phase statistics (2)", lambda: self.action_panel("summary")),
            ("Details", "The selected span (1)", lambda: self.action_panel("details")),
            ("Range", "What ran in the measured range (4)", lambda: self.action_panel("range")),
            ("Legend", "Show / hide the phase-colour legend (g)", self.action_toggle_legend),
            ("Compact", "One row per lane / depth rows (c)", gantt.action_compact),
            ("Help", "Every key (?)", self.action_help),
        ):
            yield SystemCommand(title, help_, call)

    def action_save_svg(self) -> None:
        """The palette's Screenshot: an SVG in ~/Downloads, or the working directory when that is missing."""
        downloads = Path.home() / "Downloads"
        folder = downloads if downloads.is_dir() else Path.cwd()
        name = time.strftime("gputrace-%Y%m%d-%H%M%S.svg")
        try:
            path = folder / name
            write_atomic(path, self.export_screenshot(title=visible(f"gputrace view {self.trace_title}")))
        except OSError as e:
            self.notify(visible(f"screenshot not saved: {e}"), severity="error", markup=False)
            return
        self.notify(f"saved {visible(path)}", title="Screenshot", markup=False)

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        return preserve_space(super().export_screenshot(title=title, simplify=simplify))
