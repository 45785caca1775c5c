"""`GputraceApp`: the timeline viewer (``gputrace view``).

Layout: title bar; legend and time axis over the Gantt (left), tabs Details / Summary /
Stalls / Range (right, or under the timeline on narrow terminals); search/filter input; status
bar; footer. The panels' wiring is `gputrace.tui.side`, the command palette
`gputrace.tui.palette_commands`, measuring the Gantt itself.

Threads: loading runs in a thread worker (`gputrace.tui.loader`) that posts `Loaded`
messages carrying an already-built `TimelineIndex`; analysis (idle gaps, stalls, phase
statistics) runs in a second thread worker after the load and posts `Analysed`. The UI
thread only swaps references and redraws. A load that fails posts `LoadFailed`, shown as a
message in place of the timeline (never a traceback).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from gputrace.textsafe import visible
from gputrace.timeline.model import Timeline
from gputrace.tui.axis import TimeAxis
from gputrace.tui.gantt import NAME_W, Gantt
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import format_duration
from gputrace.tui.loader import LoadError, Part, Update, batch_updates
from gputrace.tui.overlays import Overlays, compute_overlays
from gputrace.tui.panels import DetailsPanel, RangePanel, StallsPanel, SummaryPanel
from gputrace.tui.palette_commands import PaletteCommands, preserve_space  # noqa: F401 (re-exported)
from gputrace.tui.search import SearchFilter
from gputrace.tui.side import SidePanels, _ui

from gputrace.tui.widgets import QUERY_HELP, ErrorScreen, Legend, TextLine

@dataclass
class Loaded(Message):
    update: Update


@dataclass
class LoadFailed(Message):
    text: str


@dataclass
class Analysed(Message):
    generation: int
    overlays: Overlays
    stats: list


class GputraceApp(SidePanels, PaletteCommands, SearchFilter, App):
    """The viewer. Give ``paths`` (files read by the timeline reader), or ``timeline``, or
    ``parts`` (an iterable of `Part`, for tests and benchmarks)."""

    CSS_PATH = str(Path(__file__).with_name("gputrace.tcss"))  # absolute: subclasses elsewhere find it too
    TITLE = "gputrace"

    # The help screen and the footer are built from these and the Gantt's and panels' bindings.
    BINDINGS = [
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("slash", "query('search')", "Search", tooltip="search: fade what does not match, select the first match"),
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
        Binding("g", "toggle_legend", show=False, tooltip="show / hide the phase-colour legend"),
        Binding("q", "quit", "Quit", tooltip="quit"),
    ]

    def __init__(
        self,
        paths: Sequence[str] = (),
        *,
        timeline: Timeline | None = None,
        parts: Iterable[Part] | Callable[[], Iterable[Part]] | None = None,
        follow: bool = False,
        batch_time: float = 0.25,
        title: str | None = None,
        focus: str | None = None,
    ) -> None:
        super().__init__()
        self.focus_phase = focus  # zoom to the first span of this phase once loaded (None: fit all)
        self._focused = False
        self.paths = list(paths)
        self._timeline = timeline
        self._parts = parts
        self.follow = follow
        self.batch_time = batch_time
        self.trace_title = title or (", ".join(self.paths) if self.paths else "trace")
        self.index: TimelineIndex | None = None
        self.full_index: TimelineIndex | None = None  # unfiltered
        self.filter_text = ""
        self.search_text = ""
        self.search_rows = np.empty(0, np.int64)
        self.query_mode = "search"
        self.loaded = asyncio.Event()  # set after the final update (or a failure)
        self.analysed = asyncio.Event()
        self.error: str | None = None
        self.last_update: Update | None = None
        self.first_draw_s: float | None = None
        self._t_start = time.perf_counter()
        self._analysis_gen = 0
        self._last_analysis = 0.0
        self._analysis_cost = 0.0
        self._analysis_timer = None
        self._analysed_index: TimelineIndex | None = None
        self.overlays = Overlays()
        self.by_device = True

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

    def on_mount(self) -> None:
        self.query_one(DetailsPanel).show(None, -1, 0)
        self.query_one(RangePanel).show(None)
        self._fit_layout(self.size.width)
        self.query_one(Gantt).focus()
        self._update_status()
        self._load()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # After a failed load only help and quit make sense (the footer hides the rest).
        if self.error and action not in ("quit", "help"):
            return False
        return True

    # ---- loading (worker thread) ------------------------------------------------------
    def _make_parts(self, stop_event) -> Iterable[Part]:
        if self._timeline is not None:
            return [Part(self._timeline)]
        if self._parts is not None:
            return self._parts() if callable(self._parts) else self._parts
        from gputrace.tui.sources import trace_parts

        return trace_parts(self.paths, follow=self.follow, stop_event=stop_event)

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        worker = get_current_worker()
        try:
            for upd in batch_updates(
                self._make_parts(worker.cancelled_event), batch_time=self.batch_time,
                cancelled=lambda: worker.is_cancelled, final=not self.follow,
            ):
                self.post_message(Loaded(upd))
        except LoadError as e:
            self.post_message(LoadFailed(str(e)))
        except Exception as e:  # the reader's TraceFormatError names file/line/field
            name = type(e).__name__
            text = str(e) if name in ("TraceFormatError", "FileNotFoundError", "PermissionError") else f"{name}: {e}"
            self.post_message(LoadFailed(f"cannot open {self.trace_title}: {text}"))

    @_ui
    def on_loaded(self, msg: Loaded) -> None:
        upd = msg.update
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
        if self.first_draw_s is None and upd.spans:
            self.call_after_refresh(self._mark_first_draw)
        if self.query_one(Gantt).range is not None:
            self._show_range()  # new spans (a live file, a filter) may fall in the measured range
        tl = upd.index.timeline
        present = np.bincount(tl.cols["phase"], minlength=len(tl.phases)) > 0 if tl.n else []
        self.query_one(Legend).show([p for p, here in zip(tl.phases, present) if here])
        self._update_title()
        self._update_status()
        if self.focus_phase and not self._focused and (upd.final or (self.follow and upd.spans)):
            # While following a live file, focus as soon as the phase appears; a notice only at the end.
            self._focused = self._focus(self.focus_phase, quiet=not upd.final) or upd.final
        if upd.final and upd.note:
            self.notify(visible(f"loaded with problems: {upd.note}"), severity="warning", timeout=10, markup=False)
        if upd.final:
            if upd.spans == 0:
                self._fail(f"{self.trace_title}: no spans (empty file, or not an OTLP JSON Lines trace)"
                           + (f" — {upd.note}" if upd.note else ""))
                return
            self.loaded.set()
        # Analysis competes with loading for the CPU: run it once at the end, and while
        # following a live file at most every few seconds (longer when it is slow).
        # A skipped live update is analysed later by a timer, so the stalls of the end of a run
        # appear once the writer stops.
        now = time.monotonic()
        wait = max(3.0, 4 * self._analysis_cost) - (now - self._last_analysis)
        if upd.final or (self.follow and wait <= 0):
            self._run_analysis(upd.index)
        elif self.follow and self._analysis_timer is None:
            self._analysis_timer = self.set_timer(wait, self._analyse_latest)

    def _run_analysis(self, index: TimelineIndex) -> None:
        self._last_analysis = time.monotonic()
        self._analysed_index = index
        self._analysis_gen += 1
        self._analyse(index, self._analysis_gen, self.by_device)

    def _analyse_latest(self) -> None:
        self._analysis_timer = None
        if self.full_index is not None and self.full_index is not self._analysed_index:
            self._run_analysis(self.full_index)

    def _focus(self, phase: str, quiet: bool = False) -> bool:
        """Select the earliest span of ``phase`` and zoom the Gantt to it. False if there is none (with a
        notice unless ``quiet``)."""
        tl = self.index.timeline if self.index is not None else None
        pid = tl.phase_id(phase) if tl is not None else -1
        rows = np.flatnonzero(tl.cols["phase"] == pid) if pid >= 0 else np.empty(0, np.int64)
        if rows.size == 0:
            if not quiet:
                self.notify(visible(f"--focus: no span named {phase!r}"), severity="warning", timeout=10, markup=False)
            return False
        row = int(rows[np.argmin(tl.cols["start"][rows])])
        gantt = self.query_one(Gantt)
        gantt.select_row(row, reveal=False)
        gantt.action_zoom_selection()
        return True

    def _mark_first_draw(self) -> None:
        if self.first_draw_s is None:
            self.first_draw_s = time.perf_counter() - self._t_start

    @_ui
    def on_load_failed(self, msg: LoadFailed) -> None:
        self._fail(msg.text)

    def _fail(self, text: str) -> None:
        self.error = text

        def shown(_result=None) -> None:
            self.loaded.set()
            self.analysed.set()

        self.push_screen(ErrorScreen(self.trace_title, text))
        self.call_after_refresh(shown)

    # ---- analysis (worker thread) -----------------------------------------------------
    @work(thread=True, exclusive=True, group="analysis")
    def _analyse(self, index: TimelineIndex, gen: int, by_device: bool) -> None:
        from gputrace.analysis.report import analyse_timeline

        tl = index.timeline
        t = time.monotonic()
        try:
            # The composition `gputrace report` prints: one policy, the same rows.
            analysis = analyse_timeline(tl, by_device=by_device, critical=False)
            ov = compute_overlays(tl, index.origin, analysis)
            stats = analysis.phases
        except Exception as e:  # analysis must never take the viewer down
            ov, stats = Overlays(notes=[f"analysis failed: {type(e).__name__}: {e}"]), []
        self._analysis_cost = time.monotonic() - t
        self.post_message(Analysed(gen, ov, stats))

    @_ui
    def on_analysed(self, msg: Analysed) -> None:
        if msg.generation != self._analysis_gen:
            return
        self.overlays = msg.overlays
        self.query_one(Gantt).set_overlays(msg.overlays)
        self.query_one(SummaryPanel).show(msg.stats)
        self.query_one(StallsPanel).show(msg.overlays.items, msg.overlays.notes)
        if self.loaded.is_set():
            self.analysed.set()

    @_ui
    def on_summary_panel_by_device_toggled(self, msg: SummaryPanel.ByDeviceToggled) -> None:
        self.by_device = msg.by_device
        if self.full_index is not None:
            self._analysis_gen += 1
            self._analyse(self.full_index, self._analysis_gen, self.by_device)

    @_ui
    def on_summary_panel_chosen(self, msg: SummaryPanel.Chosen) -> None:
        # The query language splits on spaces: a phase name with spaces is searched by its first word.
        term = f"phase={msg.phase}" if " " not in msg.phase else msg.phase.split()[0]
        if msg.device is not None:
            term += f" device={'cpu' if msg.device < 0 else msg.device}"
        self._apply_search(term)  # focus stays on the list: the timeline shows the matches, m / M walk them

    # ---- panels and bars --------------------------------------------------------------
    @_ui
    def on_gantt_span_selected(self, msg: Gantt.SpanSelected) -> None:
        idx = self.index
        if msg.row >= 0 and not msg.moved and not self._side_focused():
            self.query_one("#side", TabbedContent).active = "details"
        self.query_one(DetailsPanel).show(idx.timeline if idx else None, msg.row, idx.origin if idx else 0)
        self._update_status()

    @_ui
    def on_gantt_view_changed(self, msg: Gantt.ViewChanged) -> None:
        axis = self.query(TimeAxis)
        if not axis:  # a message that arrives while the screen is being torn down
            return
        axis.first().show(msg.view, msg.width, msg.cursor_t, msg.zero, msg.gantt.range)
        self._update_status()

    def _update_title(self) -> None:
        idx = self.full_index
        if idx is None:
            return
        tl = idx.timeline
        hosts = {ln.host for ln in tl.lanes}
        gpus = {(ln.host, ln.device) for ln in tl.lanes if ln.device >= 0}
        dur = format_duration(idx.t_max - idx.t_min)
        self.query_one("#title", TextLine).update(
            f"gputrace · {self.trace_title} · {tl.n:,} spans · {len(hosts)} host{'s' * (len(hosts) != 1)} · "
            f"{len(gpus)} GPU{'s' * (len(gpus) != 1)} · {dur}"
        )

    def _update_status(self) -> None:
        if self.error or not self.query("#status"):
            return
        parts = []
        u = self.last_update
        if u is None:
            what = "following" if self.follow else "reading"
            self.query_one("#status", TextLine).update(f"{what} {', '.join(self.paths) or 'trace'} · waiting for spans…")
            return
        if u is not None and not u.final:
            if self.follow and u.total_bytes and u.done_bytes >= u.total_bytes:
                parts.append(f"following · {u.spans:,} spans")
            else:
                parts.append(f"loading {u.fraction:.0%} · {u.spans:,} spans")
        if u is not None and u.note:
            parts.append(u.note)
        gantt = self.query_one(Gantt)
        if gantt.range is not None:  # the measured range comes first: it is what the user asked for
            a, b = gantt.range
            parts.insert(0, f"range {format_duration(b - a, 4)} (+{format_duration(a - gantt.zero, 5)} → "
                            f"+{format_duration(b - gantt.zero, 5)}; r zooms, Esc clears)")
        elif gantt.mark_a is not None:
            parts.insert(0, f"mark A +{format_duration(gantt.mark_a - gantt.zero, 5)}: b sets B")
        if gantt.cursor_t is not None and self.index is not None:
            wall = (gantt.cursor_t + self.index.origin) / 1e9
            parts.append(f"cursor +{format_duration(gantt.cursor_t - gantt.zero, 5)} "
                         f"({time.strftime('%H:%M:%S', time.localtime(wall))}.{int(wall % 1 * 1e6):06d})")
        parts.append(gantt.describe_view())
        if self.filter_text:
            parts.append(f"filter: {self.filter_text}")
        if self.search_text:
            parts.append(f"search: {self.search_text} ({len(self.search_rows):,} matches)")
        self.query_one("#status", TextLine).update(" · ".join(parts))

    # ---- headless use -----------------------------------------------------------------
    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until loaded and analysed (or failed); raises TimeoutError."""
        await asyncio.wait_for(self.loaded.wait(), timeout)
        if not self.follow:
            await asyncio.wait_for(self.analysed.wait(), timeout)


async def _screenshot(app: GputraceApp, size: tuple[int, int], timeout: float) -> str:
    async with app.run_test(size=size) as pilot:
        await app.wait_ready(timeout)
        await pilot.pause()
        await pilot.pause(0.05)
        return app.export_screenshot(title=visible(f"gputrace view {app.trace_title}"))


def screenshot_svg(app: GputraceApp, size: tuple[int, int] = (160, 48), timeout: float = 120.0) -> str:
    """Run ``app`` headless until loaded and analysed, and return its first screen as SVG."""
    return asyncio.run(_screenshot(app, size, timeout))
