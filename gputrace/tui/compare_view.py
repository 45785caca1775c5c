"""`CompareApp`: the compare view (``gputrace view --compare A... --vs B...``).

Top: a banner with the environment differences the comparison found (hidden when none) and
one line of context (runs, confidence). Middle: the per-phase table of a
`gputrace.analysis.ab.compare.ComparisonResult`: phase path, device, clock, median A, median B,
change, confidence interval, a bar with whiskers (the change and its interval on one scale
shared by all rows, around a zero mark) and the verdict, coloured; sorted with the rows
called slower first, then by the size of the change. Bottom: the representative run of each
side (the run whose wall time is closest to its side's median) as two `Gantt` widgets, one
above the other, each relative to its own run's start, so the same phase lines up; zoom and
pan on either apply to both (their views are kept equal on `Gantt.ViewChanged`). Highlighting
a table row fades every other phase on both timelines.

Threads: reading, splitting and comparing run in a thread worker that posts `Compared`
(with both `TimelineIndex` already built) or `CompareFailed` (shown as one message on the
error screen, never a traceback). The UI thread only swaps references and redraws.

Files are read through the entrance, `gputrace.timeline.load.load_runs` (paths -> (Timelines,
labels), one per run); a test may inject another ``load_runs``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.compare import ComparisonResult, PhaseComparison, compare_sets
from gputrace.textsafe import rich_text
from gputrace.timeline.model import Timeline
from gputrace.tui.axis import TimeAxis
from gputrace.tui.gantt import NAME_W, Gantt
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import View
from gputrace.tui.screenshots import preserve_space
from gputrace.tui.widgets import QUIT_BINDING, ErrorScreen, TextLine

__all__ = ["CompareApp", "sort_rows", "whisker_bar", "bar_scale", "VERDICT_STYLE"]

LoadRuns = Callable[[Sequence[str]], "tuple[list[Timeline], list[str]]"]

VERDICT_STYLE = {
    "slower": "bold red",
    "faster": "bold green",
    "unchanged": "",
    "inconclusive": "dim",
    "too few runs": "magenta",
    "within margin": "dim yellow",
    "partial": "dim cyan",
    "new": "cyan",
    "gone": "cyan",
}

BAR_W = 21  # cells of the whisker column (odd: the zero mark sits in the middle)


# ---- pure helpers (tested directly) -----------------------------------------------------
def _fin(x: float) -> bool:
    return x is not None and math.isfinite(x)


def sort_rows(rows: Sequence[PhaseComparison]) -> list[PhaseComparison]:
    """Rows called slower first, then by |relative change| (largest first; no change last)."""
    return sorted(rows, key=lambda r: (r.verdict != "slower", -abs(r.rel) if _fin(r.rel) else math.inf))


def bar_scale(rows: Sequence[PhaseComparison], floor: float = 0.05) -> float:
    """The common half-width of the whisker bars: the largest |change| or interval bound, unless a
    few outliers (one phase with a +-2000 % interval from a handful of noisy runs) would shrink every
    other row to a dot; then twice the upper quartile of the values (or the 90th percentile of the
    estimates, if larger). Bounds beyond the scale are drawn ``◀`` ``▶``."""
    vals = np.array([abs(v) for r in rows for v in (r.rel, r.rel_low, r.rel_high) if _fin(v)])
    if vals.size == 0:
        return floor
    rels = np.array([abs(r.rel) for r in rows if _fin(r.rel)])
    robust = max(2.0 * float(np.quantile(vals, 0.75)), float(np.quantile(rels, 0.9)) if rels.size else 0.0)
    return max(floor, min(float(vals.max()), robust))


def whisker_bar(rel: float, low: float, high: float, scale: float, width: int = BAR_W) -> str:
    """``   ├──■──┤ `` around a zero mark ``│`` in the middle: the interval ``[low, high]``
    (whiskers), the estimate ``rel`` (■), all on ``±scale``. Bounds beyond the scale end in
    ``◀``/``▶``; NaN bounds draw only the estimate."""
    half = max(1, width // 2)
    width = 2 * half + 1
    scale = scale if _fin(scale) and scale > 0 else 0.05
    cells = [" "] * width
    cells[half] = "│"

    def col(x: float) -> int:
        return max(0, min(width - 1, half + int(round(x / scale * half))))

    if _fin(low) and _fin(high):
        a, b = col(min(low, high)), col(max(low, high))
        for i in range(a + 1, b):
            cells[i] = "─"
        cells[a], cells[b] = "├", "┤"
        if a == b:
            cells[a] = "┼"
        if min(low, high) < -scale:
            cells[0] = "◀"
        if max(low, high) > scale:
            cells[-1] = "▶"
    if _fin(rel):
        cells[col(rel)] = "■"
    return "".join(cells)


def _pct(x: float) -> str:
    return "-" if not _fin(x) else f"{x * 100:+.1f}%"


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab if k == 0 else f"{lab}~{k + 1}")
    return out


class SyncedGantt(Gantt):
    """A Gantt whose "fit" shows ``[0, fit_t_max]`` (the longer of the two runs), so both
    timelines fit to the same view."""

    fit_t_max: int | None = None

    def _fit_view(self) -> View:
        if self.index is None or self.fit_t_max is None:
            return super()._fit_view()
        return View.fit(0, self.fit_t_max, self.timeline_width)


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
    DEFAULT_CSS = """
    #banner { height: auto; max-height: 4; background: $error 30%; color: $text; padding: 0 1; display: none; }
    #banner.shown { display: block; }
    #context { height: 1; color: $text-muted; padding: 0 1; }
    #table { height: 1fr; min-height: 5; }
    #timelines { height: 2fr; border-top: hkey $panel-lighten-2; }
    .side-label { height: 1; background: #232833; color: $accent; text-style: bold; padding: 0 1; }
    #timelines Gantt { height: 1fr; }
    """

    BINDINGS = [
        Binding("plus,equals_sign", "zoom(2)", "Zoom +"),
        Binding("minus,underscore", "zoom(0.5)", "Zoom -"),
        Binding("left,h", "pan(-0.1)", show=False),
        Binding("right,l", "pan(0.1)", show=False),
        Binding("f,0", "fit", "Fit"),
        Binding("t", "focus_table", "Table"),
        Binding("g", "focus_gantt", "Timeline"),
        Binding("q", "quit", "Quit"),
        QUIT_BINDING,
    ]

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
        self._syncing = False

    @staticmethod
    def _side_title(paths: list[str], side: str) -> str:
        if not paths:
            return side
        more = f" +{len(paths) - 1}" if len(paths) > 1 else ""
        return f"{Path(paths[0]).name}{more}"

    # ---- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TextLine(f"gputrace compare · {self.trace_title} · loading…", id="title")
        yield Static("", id="banner")
        yield TextLine("reading and comparing…", id="context")
        yield DataTable(id="table", cursor_type="row", zebra_stripes=True)
        with Vertical(id="timelines"):
            yield TextLine("A", id="label-a", classes="side-label")
            yield TimeAxis(NAME_W, id="axis")
            yield SyncedGantt(id="gantt-a")
            yield TextLine("B", id="label-b", classes="side-label")
            yield SyncedGantt(id="gantt-b")
        yield Footer()

    def on_mount(self) -> None:
        self._compare()

    @property
    def gantts(self) -> list[Gantt]:
        return list(self.query(Gantt))

    # ---- loading and comparing (worker thread) -----------------------------------------
    def _runs(self, given, paths) -> tuple[list[Timeline], list[str]]:
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
            bl, vl = _unique(list(bl)), _unique(list(vl))
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
        res = self.result = msg.result
        self.rows = sort_rows(res.rows)
        env = res.environment
        banner = self.query_one("#banner", Static)
        lines = list(env.warnings)
        if env.config_diffs:
            lines.append("configuration: " + env.config_summary())
        if lines:
            banner.update(rich_text("⚠ the runs' environments differ: " + " · ".join(lines), style="bold"))
            banner.add_class("shown")
        nb, nv = len(res.base_labels), len(res.variant_labels)
        ctx = f"A: {nb} runs vs B: {nv} runs · {res.confidence:.0%} confidence"
        if res.paired:
            ctx += f" · paired by round ({res.paired_rounds})"
        if res.warmup_dropped:
            ctx += f" · warm-up discarded: {', '.join(res.warmup_dropped)}"
        if res.undecidable:
            ctx += (f" · too few runs to call any of {res.tested_rows} rows ({res.correction}): add runs")
        emu = sorted({k for side in res.emulated.values() for k in side})
        if emu:
            ctx += " · emulated costs: " + ", ".join(k[len("gputrace.emulated."):] for k in emu)
        self.query_one("#context", TextLine).update(ctx)
        self._fill_table(res)
        total = res.total
        tot = f" · end to end {_pct(total.rel)} ({total.verdict})" if total is not None else ""
        self.query_one("#title", TextLine).update(f"gputrace compare · {self.trace_title}{tot}")
        ga, gb = self.query_one("#gantt-a", SyncedGantt), self.query_one("#gantt-b", SyncedGantt)
        self.query_one("#label-a", TextLine).update(
            f"A · {msg.label_a} (median of {nb}) · {msg.index_a.timeline.n:,} spans · relative to its start")
        self.query_one("#label-b", TextLine).update(
            f"B · {msg.label_b} (median of {nv}) · {msg.index_b.timeline.n:,} spans · relative to its start")
        t_max = max(msg.index_a.t_max, msg.index_b.t_max)
        for g, idx in ((ga, msg.index_a), (gb, msg.index_b)):
            g.compact = True  # one row per lane: both runs fit on one screen
            g.fit_t_max = t_max
            g.set_index(idx)
        self.query_one("#table", DataTable).focus()
        self.call_after_refresh(self.loaded.set)

    def _fill_table(self, res: ComparisonResult) -> None:
        table = self.query_one("#table", DataTable)
        scale = bar_scale(self.rows)
        conf = res.row_confidence
        table.clear(columns=True)
        for label, key in (("phase", "phase"), ("device", "device"), ("clock", "clock"), ("median A", "a"),
                           ("median B", "b"), ("change", "rel"), (f"{conf:.4g} interval" if conf != res.confidence
                                                                  else f"{conf:.0%} interval", "ci"),
                           (f"-{scale * 100:.0f}%  0  +{scale * 100:.0f}%".center(BAR_W), "bar"),
                           ("verdict", "verdict")):
            table.add_column(label, key=key)
        for i, r in enumerate(self.rows):
            style = VERDICT_STYLE.get(r.verdict, "")
            ci = f"[{_pct(r.rel_low)}, {_pct(r.rel_high)}]" if _fin(r.rel_low) else "-"
            table.add_row(
                rich_text(r.path), rich_text(r.device_label), rich_text(r.clock),
                Text(fmt_ns(r.base_median_ns), justify="right"), Text(fmt_ns(r.variant_median_ns), justify="right"),
                Text(_pct(r.rel), style=style, justify="right"), Text(ci, justify="right"),
                Text(whisker_bar(r.rel, r.rel_low, r.rel_high, scale), style=style or "white"),
                Text(r.verdict, style=style), key=str(i),
            )

    # ---- the two timelines, kept in step ------------------------------------------------
    def on_gantt_view_changed(self, msg: Gantt.ViewChanged) -> None:
        # Use the sender's current view: a message posted before a refit may arrive after it.
        view = msg.gantt.view
        axis = self.query(TimeAxis)
        if axis:
            axis.first().show(view, msg.gantt.timeline_width, msg.gantt.cursor_t, 0.0)
        if self._syncing:
            return
        self._syncing = True
        try:
            for g in self.gantts:
                if g is not msg.gantt and g.view != view:
                    g.view = view
                    g.auto_fit = msg.gantt.auto_fit
                    g.refresh()
        finally:
            self._syncing = False

    def _target(self) -> Gantt | None:
        f = self.focused
        if isinstance(f, Gantt):
            return f
        gs = [g for g in self.gantts if g.index is not None]
        return gs[0] if gs else None

    def action_zoom(self, factor: float) -> None:
        g = self._target()
        if g is not None:
            g.action_zoom(factor)

    def action_pan(self, fraction: float) -> None:
        g = self._target()
        if g is not None:
            g.action_pan(fraction)

    def action_fit(self) -> None:
        g = self._target()
        if g is not None:
            g.action_fit()

    def action_focus_table(self) -> None:
        self.query_one("#table", DataTable).focus()

    def action_focus_gantt(self) -> None:
        g = self._target()
        if g is not None:
            g.focus()

    def on_data_table_row_highlighted(self, msg: DataTable.RowHighlighted) -> None:
        """Fade every phase but the highlighted row's on both timelines."""
        if msg.row_key is None or msg.row_key.value is None or not self.rows:
            return
        r = self.rows[int(msg.row_key.value)]
        phase = None if r.path.startswith("(") else r.path.rsplit("/", 1)[-1]
        for g in self.gantts:
            if g.index is None:
                continue
            tl = g.index.timeline
            pid = tl.phase_id(phase) if phase else -1
            g.set_dim(np.asarray(tl.phase != pid) if pid >= 0 else None)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if self.error and action != "quit":
            return False
        return True

    # ---- headless use -----------------------------------------------------------------
    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until compared and drawn (or failed); raises TimeoutError."""
        await asyncio.wait_for(self.loaded.wait(), timeout)
