"""`CompareApp`: the compare view (``gputrace view --compare A... --vs B...``).

The app reads, splits and compares the runs; its default screen, `gputrace.tui.compare_screen.CompareScreen`,
shows the per-phase table of a `gputrace.analysis.ab.compare.ComparisonResult` (phase path, device,
clock, median A, median B, change, confidence interval, a whisker bar, the verdict; rows called slower
first, then by the size of the change) over the representative run of each side (the run whose wall
time is closest to its side's median).

Threads: reading, splitting and comparing run in a thread worker that posts `Compared` (with both
`TimelineIndex` already built) or `CompareFailed` (shown as one message on the error screen, never a
traceback). The UI thread only swaps references and hands them to the screen.

Files are read through the entrance, `gputrace.timeline.load.load_runs` (paths -> (Timelines,
labels), one per run); a test may inject another ``load_runs``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen

from gputrace.analysis.ab.compare import ComparisonResult, PhaseComparison, compare_sets
from gputrace.timeline.model import Timeline
from gputrace.tui.compare_screen import CompareScreen
from gputrace.tui.compare_table import VERDICT_STYLE, bar_scale, sort_rows, unique_labels, whisker_bar
from gputrace.tui.index import TimelineIndex
from gputrace.tui.screenshots import preserve_space
from gputrace.tui.widgets import QUIT_BINDING, ErrorScreen

__all__ = ["VERDICT_STYLE", "CompareApp", "bar_scale", "sort_rows", "whisker_bar"]

LoadRuns = Callable[[Sequence[str]], "tuple[list[Timeline], list[str]]"]


# ---- messages ---------------------------------------------------------------------------
@dataclass
class Compared(Message):
    result: ComparisonResult
    index_a: TimelineIndex
    index_b: TimelineIndex
    label_a: str
    label_b: str


@dataclass
class CompareFailed(Message):
    text: str


class CompareApp(App):
    """Compare two sets of runs. Give ``base``/``variant`` paths (read by ``load_runs``, default
    `gputrace.timeline.load.load_runs`), or ``base_runs``/``variant_runs`` (Timelines, one per run)."""

    CSS_PATH = str(Path(__file__).with_name("gputrace.tcss"))
    TITLE = "gputrace compare"
    BINDINGS: ClassVar[list[BindingType]] = [QUIT_BINDING]

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        return preserve_space(super().export_screenshot(title=title, simplify=simplify))

    def __init__(
        self,
        base: Sequence[str] = (),
        variant: Sequence[str] = (),
        *,
        load_runs: LoadRuns | None = None,
        base_runs: Sequence[Timeline] | None = None,
        variant_runs: Sequence[Timeline] | None = None,
        confidence: float = 0.95,
        warmup: int = 0,
        correction: str = "holm",
    ) -> None:
        super().__init__()
        self.base_paths, self.variant_paths = list(base), list(variant)
        self._load_runs = load_runs
        self._base_runs, self._variant_runs = base_runs, variant_runs
        self.confidence, self.warmup, self.correction = confidence, warmup, correction
        self.trace_title = self._side_title(self.base_paths, "A") + " vs " + self._side_title(self.variant_paths, "B")
        self.result: ComparisonResult | None = None
        self.rows: list[PhaseComparison] = []
        self.error: str | None = None
        self.loaded = asyncio.Event()
        self.analysed = self.loaded  # screenshot_svg waits on both
        self.follow = False
        self._main: CompareScreen | None = None

    @staticmethod
    def _side_title(paths: list[str], side: str) -> str:
        if not paths:
            return side
        more = f" +{len(paths) - 1}" if len(paths) > 1 else ""
        return f"{Path(paths[0]).name}{more}"

    # ---- layout -----------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        # Built here, not in __init__: a screen made outside the running app would belong to no app.
        self._main = CompareScreen(self.trace_title)
        return self._main

    @property
    def main(self) -> CompareScreen:
        """The compare screen (the default screen; there from the start of a run)."""
        if self._main is None:
            raise RuntimeError("the app is not running: its screen is not built yet")
        return self._main

    def on_compare_screen_mounted(self, msg: CompareScreen.Mounted) -> None:
        self._compare()  # from now on the result finds the screen's widgets

    # ---- loading and comparing (worker thread) -----------------------------------------
    def _runs(self, given: Sequence[Timeline] | None, paths: list[str]) -> tuple[list[Timeline], list[str]]:
        if given is not None:
            return list(given), [f"run {i}" for i in range(len(given))]
        if self._load_runs is None:
            from gputrace.timeline.load import load_runs

            return load_runs(paths)
        return self._load_runs(paths)

    @work(thread=True, exclusive=True, group="compare")
    def _compare(self) -> None:
        try:
            bt, bl = self._runs(self._base_runs, self.base_paths)
            vt, vl = self._runs(self._variant_runs, self.variant_paths)
            if not bt or not vt:
                raise ValueError(f"{'A' if not bt else 'B'}: no runs with spans")
            bl, vl = unique_labels(list(bl)), unique_labels(list(vl))
            res = compare_sets(bt, vt, base_labels=bl, variant_labels=vl, confidence=self.confidence,
                               warmup=self.warmup, correction=self.correction)
            la = res.base_labels[res.base_representative]
            lb = res.variant_labels[res.variant_representative]
            ta, tb = bt[bl.index(la)], vt[vl.index(lb)]
            ia, ib = TimelineIndex.build(ta, origin=ta.t0), TimelineIndex.build(tb, origin=tb.t0)
        except Exception as e:  # noqa: BLE001 - shown as one message on the error screen, never a traceback
            name = type(e).__name__
            known = ("TraceFormatError", "FileNotFoundError", "PermissionError", "ValueError", "LoadError")
            self.post_message(CompareFailed(str(e) if name in known else f"{name}: {e}"))
            return
        self.post_message(Compared(res, ia, ib, la, lb))

    def on_compare_failed(self, msg: CompareFailed) -> None:
        self.error = msg.text
        self.push_screen(ErrorScreen(f"compare {self.trace_title}", msg.text))
        self.call_after_refresh(self.loaded.set)

    def on_compared(self, msg: Compared) -> None:
        self.result = msg.result
        self.rows = sort_rows(msg.result.rows)
        self.main.show(msg.result, self.rows, msg.index_a, msg.index_b, msg.label_a, msg.label_b)
        self.call_after_refresh(self.loaded.set)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if self.error and action != "quit":
            return False
        return True

    # ---- headless use -----------------------------------------------------------------
    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until compared and drawn (or failed); raises TimeoutError."""
        await asyncio.wait_for(self.loaded.wait(), timeout)
