"""Search and filter for the app: the query box, dimming matches, re-indexing on a filter.

A mixin of `gputrace.tui.app.GputraceApp` (UI thread). Search dims everything that does
not match (``m``/``M`` walk the matches); filter rebuilds the render index with only the
matching rows. Both use `gputrace.tui.query` (its errors become notifications).
"""

from __future__ import annotations

import numpy as np
from textual.widgets import Input

from gputrace.textsafe import visible
from gputrace.tui.gantt import Gantt
from gputrace.tui.index import TimelineIndex
from gputrace.tui.query import QueryError, match_mask
from gputrace.tui.widgets import QUERY_HELP


class SearchFilter:
    """Needs ``index``, ``full_index``, ``search_text``, ``search_rows``, ``filter_text``,
    ``query_mode`` and ``_update_status`` from the app."""

    def action_query(self, mode: str) -> None:
        self.query_mode = mode
        box = self.query_one("#query", Input)
        box.value = self.search_text if mode == "search" else self.filter_text
        box.placeholder = f"{mode}: {QUERY_HELP}"
        box.add_class("shown")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        box = self.query_one("#query", Input)
        box.remove_class("shown")
        text = event.value.strip()
        if self.query_mode == "search":
            self._apply_search(text)
        else:
            self._apply_filter(text)
        self.query_one(Gantt).focus()

    def _apply_search(self, text: str, quiet: bool = False) -> None:
        gantt = self.query_one(Gantt)
        if not text or self.index is None:
            self.search_text, self.search_rows = "", np.empty(0, np.int64)
            gantt.set_dim(None)
            self._update_status()
            return
        try:
            mask = match_mask(self.index.timeline, text)
        except QueryError as e:
            self.notify(visible(e), severity="error", markup=False)
            return
        self.search_text = text
        self.search_rows = np.flatnonzero(mask)
        gantt.set_dim(~mask)
        if not quiet:
            if len(self.search_rows):
                self.action_match(1)
            else:
                self.notify(visible(f"no span matches {text!r}"), severity="warning", markup=False)
        self._update_status()

    def _apply_filter(self, text: str, quiet: bool = False) -> None:
        full = self.full_index
        if full is None:
            return
        gantt = self.query_one(Gantt)
        if not text:
            self.filter_text = ""
            self.index = full
            gantt.set_index(full)
            self._update_status()
            return
        try:
            mask = match_mask(full.timeline, text)
        except QueryError as e:
            self.notify(visible(e), severity="error", markup=False)
            return
        self.filter_text = text
        idx = TimelineIndex.build(full.timeline, origin=full.origin, mask=mask)
        self.index = idx
        gantt.set_index(idx)
        if not quiet and not mask.any():
            self.notify(visible(f"filter {text!r} hides every span (Esc clears it)"), severity="warning", markup=False)
        self._update_status()

    def action_match(self, delta: int) -> None:
        rows = self.search_rows
        if not len(rows) or self.index is None:
            return
        gantt = self.query_one(Gantt)
        tl = self.index.timeline
        order = rows[np.lexsort((rows, tl.start[rows]))]
        if gantt.selected in order:
            j = int(np.flatnonzero(order == gantt.selected)[0]) + delta
        else:
            t = gantt.view.t0 + self.index.origin
            j = int(np.searchsorted(tl.start[order], t)) if delta > 0 else int(np.searchsorted(tl.start[order], t)) - 1
        gantt.select_row(int(order[j % len(order)]))

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
            if self.screen.has_class("narrow"):  # after the focus moved: hiding a focused widget drops focus
                self.call_after_refresh(self.query_one("#side").add_class, "hidden")
        elif self.search_text:
            self._apply_search("")
        elif self.filter_text:
            self._apply_filter("")
        elif not gantt.clear_range():
            gantt.select_row(-1)
