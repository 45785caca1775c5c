"""`GputraceApp`: the timeline viewer (``gputrace view``).

The app reads the trace and analyses it; its one screen, `gputrace.tui.timeline_screen.TimelineScreen`
(the default screen), shows it. A trace that cannot be shown replaces it with `ErrorScreen` (one
message, never a traceback).

Threads: loading runs in a thread worker (`gputrace.tui.loader`) that posts `Loaded` messages
carrying an already-built `TimelineIndex`; analysis (idle gaps, stalls, phase statistics) runs in a
second thread worker after the load and posts `Analysed`. A load that fails posts `LoadFailed`.
The handlers run on the UI thread and only swap references and hand them to the screen.

Keys of the app itself: ``ctrl+c`` quits, as ``q`` and ``ctrl+q`` do, from any screen and from the
query box (`gputrace.tui.widgets.QUIT_BINDING`); the rest are the screen's and its widgets'.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from gputrace.atomic_write import write_atomic
from gputrace.textsafe import visible
from gputrace.timeline.model import Timeline
from gputrace.tui.guard import while_mounted
from gputrace.tui.index import TimelineIndex
from gputrace.tui.loader import LoadError, Part, Update, batch_updates
from gputrace.tui.overlays import Overlays, StallItem, compute_overlays, finding_items
from gputrace.tui.screenshots import preserve_space, screenshot_svg
from gputrace.tui.timeline_screen import TimelineScreen
from gputrace.tui.widgets import QUIT_BINDING, ErrorScreen, HelpScreen

if TYPE_CHECKING:
    from gputrace.analysis.stats import PhaseStat

__all__ = ["GputraceApp", "preserve_space", "screenshot_svg"]


@dataclass
class Loaded(Message):
    update: Update


@dataclass
class LoadFailed(Message):
    text: str


@dataclass
class Analysed(Message):
    generation: int
    overlays: Overlays  # findings pending (``findings_pending``): `FindingsFound` brings them
    stats: Iterable[PhaseStat]  # a list, or the analysis's PhaseTable (rows built when iterated)


@dataclass
class FindingsFound(Message):
    """The findings of analysis ``generation`` (rows for the stalls panel), or ``notes`` saying why none."""

    generation: int
    items: list[StallItem]
    notes: list[str]


class GputraceApp(App[None]):
    """The viewer. Give ``paths`` (files read by the timeline reader), or ``timeline``, or
    ``parts`` (an iterable of `Part`, for tests and benchmarks)."""

    CSS_PATH = str(Path(__file__).with_name("gputrace.tcss"))  # absolute: subclasses elsewhere find it too
    TITLE = "gputrace"
    BINDINGS: ClassVar[list[BindingType]] = [QUIT_BINDING]

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
        self.focus_phase = focus
        self.paths = list(paths)
        self._timeline = timeline
        self._parts = parts
        self.follow = follow
        self.batch_time = batch_time
        self.trace_title = title or (", ".join(self.paths) if self.paths else "trace")
        self.full_index: TimelineIndex | None = None  # the latest update's, unfiltered
        self.loaded = asyncio.Event()  # set after the final update (or a failure)
        self.analysed = asyncio.Event()
        self.error: str | None = None
        self.first_draw_s: float | None = None
        self._t_start = time.perf_counter()
        self._analysis_gen = 0
        self._last_analysis = 0.0
        self._analysis_cost = 0.0
        self._analysis_timer: Timer | None = None
        self._analysed_index: TimelineIndex | None = None
        self.by_device = True
        self._main: TimelineScreen | None = None

    def get_default_screen(self) -> Screen:
        # Built here, not in __init__: a screen made outside the running app would belong to no app.
        self._main = TimelineScreen(self.trace_title, self.paths, follow=self.follow, focus_phase=self.focus_phase)
        return self._main

    @property
    def main(self) -> TimelineScreen:
        """The timeline screen (the default screen; there from the start of a run)."""
        if self._main is None:
            raise RuntimeError("the app is not running: its timeline screen is not built yet")
        return self._main

    @property
    def index(self) -> TimelineIndex | None:
        """The index the timeline shows (filtered when a filter is set); None before a run."""
        return self._main.index if self._main is not None else None

    def on_timeline_screen_mounted(self, msg: TimelineScreen.Mounted) -> None:
        self._load()  # from now on every Loaded finds the screen's widgets

    def action_help(self) -> None:
        self.push_screen(HelpScreen(TimelineScreen.help_sections()))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # After a failed load only help and quit make sense (the footer hides the rest).
        if self.error and action not in ("quit", "help"):
            return False
        return True

    # ---- loading (worker thread) ------------------------------------------------------
    def _make_parts(self, stop_event: threading.Event) -> Iterable[Part]:
        if self._timeline is not None:
            return [Part(self._timeline)]
        if self._parts is not None:
            return self._parts() if callable(self._parts) else self._parts
        from gputrace.tui.sources import trace_parts  # the read side only when reading files

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
        except Exception as e:  # noqa: BLE001 - shown as one message; the reader's TraceFormatError names file/line/field
            name = type(e).__name__
            text = str(e) if name in ("TraceFormatError", "FileNotFoundError", "PermissionError") else f"{name}: {e}"
            self.post_message(LoadFailed(f"cannot open {self.trace_title}: {text}"))

    @while_mounted
    def on_loaded(self, msg: Loaded) -> None:
        upd = msg.update
        self.full_index = upd.index
        self.main.show_update(upd)
        if self.first_draw_s is None and upd.spans:
            self.call_after_refresh(self._mark_first_draw)
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
        if upd.final and self.first_draw_s is None:
            # Not before the first frame: the analysis worker would share the interpreter with the paint.
            self.call_after_refresh(self._run_analysis, upd.index)
        elif upd.final or (self.follow and wait <= 0):
            self._run_analysis(upd.index)
        elif self.follow and self._analysis_timer is None:
            self._analysis_timer = self.set_timer(wait, self._analyse_latest)

    def _mark_first_draw(self) -> None:
        if self.first_draw_s is None:
            self.first_draw_s = time.perf_counter() - self._t_start

    @while_mounted
    def on_load_failed(self, msg: LoadFailed) -> None:
        self._fail(msg.text)

    def _fail(self, text: str) -> None:
        self.error = text

        def shown() -> None:
            self.loaded.set()
            self.analysed.set()

        self.push_screen(ErrorScreen(self.trace_title, text))
        self.call_after_refresh(shown)

    # ---- analysis (worker thread) -----------------------------------------------------
    def _run_analysis(self, index: TimelineIndex) -> None:
        self._last_analysis = time.monotonic()
        self._analysed_index = index
        self._analysis_gen += 1
        self._analyse(index, self._analysis_gen, self.by_device)

    def _analyse_latest(self) -> None:
        self._analysis_timer = None
        if self.full_index is not None and self.full_index is not self._analysed_index:
            self._run_analysis(self.full_index)

    @work(thread=True, exclusive=True, group="analysis")
    def _analyse(self, index: TimelineIndex, gen: int, by_device: bool) -> None:
        from gputrace.analysis.report import analyse_timeline  # heavy: loaded once there is a trace

        tl = index.timeline
        t = time.monotonic()
        try:
            # The composition `gputrace report` prints: one policy, the same rows. The stalls first (no
            # GPU-activity tables), then the findings, which need those tables: the panel fills in two steps.
            analysis = analyse_timeline(tl, by_device=by_device, critical=False)
            ov = compute_overlays(tl, index.origin, analysis, findings=False)
            stats: Iterable[PhaseStat] = analysis.phases
        except Exception as e:  # noqa: BLE001 - analysis must never take the viewer down; shown in the stalls panel
            ov, stats = Overlays(notes=[f"analysis failed: {type(e).__name__}: {e}"]), []
            analysis = None
        self.post_message(Analysed(gen, ov, stats))
        if analysis is None or get_current_worker().is_cancelled:
            self._analysis_cost = time.monotonic() - t
            return
        notes: list[str] = []
        try:
            items = finding_items(tl, analysis)  # the same `findings` over the same tables as `report --json`
        except Exception as e:  # noqa: BLE001 - as above: shown in the stalls panel instead of the findings
            items, notes = [], [f"findings failed: {type(e).__name__}: {e}"]
        self._analysis_cost = time.monotonic() - t
        self.post_message(FindingsFound(gen, items, notes))

    @while_mounted
    def on_analysed(self, msg: Analysed) -> None:
        if msg.generation != self._analysis_gen:
            return
        self.main.show_analysis(msg.overlays, msg.stats)
        if self.loaded.is_set() and not msg.overlays.findings_pending:
            self.analysed.set()

    @while_mounted
    def on_findings_found(self, msg: FindingsFound) -> None:
        if msg.generation != self._analysis_gen:
            return
        self.main.show_findings(msg.items, msg.notes)
        if self.loaded.is_set():
            self.analysed.set()

    def on_timeline_screen_analysis_wanted(self, msg: TimelineScreen.AnalysisWanted) -> None:
        self.by_device = msg.by_device
        if self.full_index is not None:
            self._analysis_gen += 1
            self._analyse(self.full_index, self._analysis_gen, self.by_device)

    # ---- the palette's Screenshot -----------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterator[SystemCommand]:
        for cmd in super().get_system_commands(screen):
            if cmd.title != "Screenshot":  # replaced: Textual's writes to ~/Downloads, failing where it is missing
                yield cmd
        yield SystemCommand("Screenshot", "Save an SVG of the screen (to ~/Downloads if it exists, else here)",
                            self.action_save_svg)

    def action_save_svg(self) -> None:
        """The palette's Screenshot: an SVG in ~/Downloads, or the working directory when that is missing."""
        downloads = Path.home() / "Downloads"
        folder = downloads if downloads.is_dir() else Path.cwd()
        path = folder / time.strftime("gputrace-%Y%m%d-%H%M%S.svg")
        try:
            write_atomic(path, self.export_screenshot(title=visible(f"gputrace view {self.trace_title}")))
        except OSError as e:
            self.notify(visible(f"screenshot not saved: {e}"), severity="error", markup=False)
            return
        self.notify(f"saved {visible(path)}", title="Screenshot", markup=False)

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        return preserve_space(super().export_screenshot(title=title, simplify=simplify))

    # ---- headless use -----------------------------------------------------------------
    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until loaded and analysed (or failed); raises TimeoutError."""
        await asyncio.wait_for(self.loaded.wait(), timeout)
        if not self.follow:
            await asyncio.wait_for(self.analysed.wait(), timeout)
