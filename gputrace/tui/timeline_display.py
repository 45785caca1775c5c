"""`TimelineDisplay`: the layout of ``gputrace view``'s timeline screen, its state, and what it is shown.

Layout: title bar; legend and time axis over the Gantt (left), tabs Details / Summary / Stalls /
Range (right, or under the timeline on terminals narrower than ``NARROW``); the search/filter box;
status bar; footer. The screen shows what the app gives it (`show_update`: a loaded `Update`;
`show_analysis`: the overlays and statistics; `show_findings`) and keeps the view's own state: the
shown index (the whole one, or filtered), the search and its matches. It answers its widgets'
messages (the Gantt's selection, view and range; the summary's and stalls panel's choices) and is
driven by calls (`_apply_search`, `_apply_filter`, `action_match`); the keys, the actions and the
messages to the app (`Mounted`, `AnalysisWanted`) are the subclass's,
`gputrace.tui.timeline_screen.TimelineScreen` (as `GanttDisplay` is `Gantt`'s: a subclass, not a mixin).

Threading: Textual's event loop (the UI thread) only; the app calls ``show_*`` from its message
handlers, workers never call in. Raises: a bad search or filter is a notice, never an exception;
the message handlers and ``show_update`` / ``show_analysis`` wear `gputrace.tui.guard.while_mounted`
(a `NoMatches` after the screen was torn down is ignored while the app shuts down, raised any other time).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from rich.text import Text
from textual.app import ComposeResult, ScreenStackError
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from gputrace.analysis.stats import PhaseStat
from gputrace.textsafe import rich_text, visible
from gputrace.tui.activity_rows import activity_phases
from gputrace.tui.axis import TimeAxis
from gputrace.tui.gantt import NAME_W, Gantt
from gputrace.tui.guard import while_mounted
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import View, format_duration
from gputrace.tui.legend import Legend
from gputrace.tui.loader import Update
from gputrace.tui.overlays import Overlays, StallItem, with_findings
from gputrace.tui.panels import DetailsPanel, RangePanel, StallsPanel, SummaryPanel, samples_text
from gputrace.tui.query import QueryError, match_mask
from gputrace.tui.range_stats import range_summary
from gputrace.tui.status import status_line, title_line, waiting_line
from gputrace.tui.widgets import QUERY_HELP, TextLine


class TimelineDisplay(Screen[None]):
    """The timeline, its panels and bars, driven by calls; see the module docstring."""

    #: Below this many columns the side panel is hidden until asked for, and then sits under the timeline.
    NARROW = 110

    def __init__(self, trace_title: str, paths: list[str], *, follow: bool = False,
                 focus_phase: str | None = None) -> None:
        super().__init__()
        self.trace_title = trace_title
        self.paths = paths
        self.follow = follow
        self.focus_phase = focus_phase  # zoom to the first span of this phase once loaded (None: fit all)
        self._focused = False
        self.index: TimelineIndex | None = None  # shown (filtered)
        self.full_index: TimelineIndex | None = None  # unfiltered
        self.last_update: Update | None = None
        self.filter_text = ""
        self.search_text = ""
        self.search_rows = np.empty(0, np.int64)
        self.query_mode = "search"
        self.overlays = Overlays()

    # ---- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TextLine(f"gputrace · {self.trace_title} · loading…", id="title")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield Legend(id="legend")
                yield TimeAxis(NAME_W, id="axis")
                yield Gantt(id="gantt")
            with TabbedContent(id="side", initial="stalls"):
                with TabPane("Details", id="details"):
                    yield DetailsPanel(id="details-panel")
                with TabPane("Summary", id="summary"):
                    yield SummaryPanel(id="summary-panel")
                with TabPane("Stalls", id="stalls"):
                    yield StallsPanel(id="stalls-panel")
                    yield Static("", id="stall-detail")
                with TabPane("Range", id="range"):
                    yield RangePanel(id="range-panel")
        yield Input(placeholder=QUERY_HELP, id="query")
        yield TextLine("", id="status")
        yield Footer()

    def on_resize(self, event: Resize) -> None:
        self._fit_layout(event.size.width)

    def _fit_layout(self, width: int) -> None:
        """Narrow terminals (80 columns): the side panel starts hidden and, shown (1-4 or p), sits
        under the timeline, so the timeline keeps the width."""
        narrow = width < self.NARROW
        if narrow and not self.has_class("narrow"):
            self.query_one("#side").add_class("hidden")
        self.set_class(narrow, "narrow")

    # ---- what the app gives -----------------------------------------------------------
    @while_mounted
    def show_update(self, upd: Update) -> None:
        """A loaded update: the whole data so far (re-filtered and re-searched), the legend, the bars,
        the ``--focus`` phase once it is there."""
        self.last_update = upd
        self.full_index = upd.index
        gantt = self.query_one(Gantt)
        if self.filter_text:
            self._apply_filter(self.filter_text, quiet=True)
        else:
            self.index = upd.index
            gantt.set_index(upd.index)
        if self.search_text:
            self._apply_search(self.search_text, quiet=True)
        if gantt.range is not None:
            self._show_range()  # new spans (a live file, a filter) may fall in the measured range
        tl = upd.index.timeline
        present = np.bincount(tl.cols["phase"], minlength=len(tl.phases)) > 0 if tl.n else np.zeros(0, bool)
        act = activity_phases(tl)
        self.query_one(Legend).show([p for p, here in zip(tl.phases, present.tolist(), strict=False) if here],
                                    [tl.phases[i] for i in sorted(act)])
        self.query_one("#title", TextLine).update(title_line(self.trace_title, upd.index))
        self._update_status()
        if self.focus_phase and not self._focused and (upd.final or (self.follow and upd.spans)):
            # While following a live file, focus as soon as the phase appears; a notice only at the end.
            self._focused = self._focus(self.focus_phase, quiet=not upd.final) or upd.final

    @while_mounted
    def show_analysis(self, overlays: Overlays, stats: Iterable[PhaseStat]) -> None:
        """Analysis results: drawn on the timeline, listed in the summary and stalls panels. While the
        findings are pending, the previous analysis's findings stay listed until `show_findings`."""
        if overlays.findings_pending:
            overlays.items = [it for it in self.overlays.items if it.category == "finding"] + overlays.items
        self.overlays = overlays
        self.query_one(Gantt).set_overlays(overlays)
        self.query_one(SummaryPanel).show(stats)
        self.query_one(StallsPanel).show(overlays.items, overlays.notes)

    def show_findings(self, items: list[StallItem], notes: list[str]) -> None:
        """The findings of the shown analysis (`overlays.with_findings`), listed above its stalls."""
        with_findings(self.overlays, items, notes)
        self.query_one(StallsPanel).show(self.overlays.items, self.overlays.notes)

    def _focus(self, phase: str, quiet: bool = False) -> bool:
        """Select the earliest span of ``phase`` and zoom the Gantt to it. False if there is none (with a
        notice unless ``quiet``)."""
        tl = self.index.timeline if self.index is not None else None
        pid = tl.phase_id(phase) if tl is not None else -1
        rows = np.flatnonzero(tl.cols["phase"] == pid) if tl is not None and pid >= 0 else np.empty(0, np.int64)
        if tl is None or rows.size == 0:
            if not quiet:
                self.notify(visible(f"--focus: no span named {phase!r}"), severity="warning", timeout=10, markup=False)
            return False
        row = int(rows[np.argmin(tl.cols["start"][rows])])
        gantt = self.query_one(Gantt)
        gantt.select_row(row, reveal=False)
        gantt.action_zoom_selection()
        return True

    def _update_status(self) -> None:
        if not self.query("#status"):
            return
        u, gantt = self.last_update, self.query_one(Gantt)
        if u is None:
            text = waiting_line(self.follow, self.paths)
        else:
            text = status_line(u, follow=self.follow, zero=gantt.zero, view_text=gantt.describe_view(),
                               range_=gantt.range, mark_a=gantt.mark_a, cursor_t=gantt.cursor_t,
                               origin=self.index.origin if self.index is not None else None,
                               filter_text=self.filter_text, search_text=self.search_text,
                               matches=len(self.search_rows))
        self.query_one("#status", TextLine).update(text)

    # ---- the Gantt's messages ---------------------------------------------------------
    @while_mounted
    def on_gantt_span_selected(self, msg: Gantt.SpanSelected) -> None:
        idx = self.index
        if msg.row >= 0 and not msg.moved and not self._side_focused():
            self.query_one("#side", TabbedContent).active = "details"
        self.query_one(DetailsPanel).show(idx.timeline if idx else None, msg.row, idx.origin if idx else 0)
        self._update_status()

    @while_mounted
    def on_gantt_view_changed(self, msg: Gantt.ViewChanged) -> None:
        axis = self.query(TimeAxis)
        if not axis:  # a message that arrives while the screen is being torn down
            return
        axis.first().show(msg.view, msg.width, msg.cursor_t, msg.zero, msg.gantt.range)
        self._update_status()

    @while_mounted
    def on_gantt_range_changed(self, msg: Gantt.RangeChanged) -> None:
        self._show_range()
        if msg.range is not None:
            side = self.query_one("#side", TabbedContent)
            if not (self.has_class("narrow") and side.has_class("hidden")):
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

    # ---- the panels' messages ---------------------------------------------------------
    @while_mounted
    def on_summary_panel_chosen(self, msg: SummaryPanel.Chosen) -> None:
        # The query language splits on spaces: a phase name with spaces is searched by its first word.
        term = f"phase={msg.phase}" if " " not in msg.phase else msg.phase.split()[0]
        if msg.device is not None:
            term += f" device={'cpu' if msg.device < 0 else msg.device}"
        self._apply_search(term)  # focus stays on the list: the timeline shows the matches, m / M walk them

    @while_mounted
    def on_stalls_panel_highlighted(self, msg: StallsPanel.Highlighted) -> None:
        it = msg.item
        detail = Text()
        if it is not None:  # Text, not markup: the item's text holds names from the trace
            detail.append(it.category, style="bold")
            detail.append(f" {format_duration(it.amount_ns)}\n")
            detail.append_text(rich_text(it.text))
            detail.append("\n")
            detail.append_text(samples_text(it.samples))
            detail.append("Enter: zoom the timeline to it · x: measure it · Esc: to the timeline", style="dim")
        self.query_one("#stall-detail", Static).update(detail)
        if it is not None and self.index is not None and self.query_one(StallsPanel).has_focus:
            self._show_stall(it, zoom=False)  # the timeline follows the list

    @while_mounted
    def on_stalls_panel_chosen(self, msg: StallsPanel.Chosen) -> None:
        if self.index is not None:
            self._show_stall(msg.item, zoom=True)  # focus stays on the list

    @while_mounted
    def on_stalls_panel_measure(self, msg: StallsPanel.Measure) -> None:
        if self.index is not None:
            o = self.index.origin
            self.query_one(Gantt).set_range(msg.item.start - o, msg.item.end - o)

    def _show_stall(self, item: StallItem, zoom: bool) -> None:
        """Put the timeline's cursor on a stall (its span selected, or its GPU row and start);
        ``zoom``: fit the view to it, else pan only as much as needed."""
        assert self.index is not None
        gantt = self.query_one(Gantt)
        o = self.index.origin
        s, e = item.start - o, item.end - o
        if item.row >= 0:
            gantt.select_row(item.row, reveal=not zoom)
        else:
            gantt.show_time(s, e, device=item.device)
        if zoom:
            gantt.set_view(View.fit(s, e, gantt.timeline_width, margin=0.25))

    # ---- search and filter ------------------------------------------------------------
    def _apply_search(self, text: str, quiet: bool = False) -> None:
        """Fade every span that does not match ``text`` (`gputrace.tui.query`) and select the first match;
        an empty text clears the search. A bad query is a notice."""
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
        """Show only the spans that match ``text`` (a re-index of the whole data); empty: show all."""
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
