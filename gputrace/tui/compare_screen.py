"""`CompareScreen`: the layout of the compare view (``gputrace view --compare A... --vs B...``).

Top: a banner with the environment differences the comparison found (hidden when none) and one line
of context (runs, confidence). Middle: the per-phase table (`gputrace.tui.compare_table`). Bottom: the
representative run of each side as two `SyncedGantt` widgets, one above the other, each relative to
its own run's start; zoom and pan on either apply to both (their views are kept equal on
`Gantt.ViewChanged`). Highlighting a table row fades every other phase on both timelines.

The app (`gputrace.tui.compare_view.CompareApp`) compares in a worker and hands the result down with
`show`. UI thread only.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.ab.compare import ComparisonResult, PhaseComparison
from gputrace.textsafe import rich_text
from gputrace.tui.axis import TimeAxis
from gputrace.tui.compare_table import BAR_W, VERDICT_STYLE, bar_scale, finite, pct, whisker_bar
from gputrace.tui.gantt import NAME_W, Gantt
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import View
from gputrace.tui.widgets import TextLine


class SyncedGantt(Gantt):
    """A Gantt whose "fit" shows ``[0, fit_t_max]`` (the longer of the two runs), so both
    timelines fit to the same view."""

    fit_t_max: int | None = None

    def _fit_view(self) -> View:
        if self.index is None or self.fit_t_max is None:
            return super()._fit_view()
        return View.fit(0, self.fit_t_max, self.timeline_width)


class CompareScreen(Screen[None]):
    """The compare view's table and timelines; see the module docstring."""

    DEFAULT_CSS = """
    #banner { height: auto; max-height: 4; background: $error 30%; color: $text; padding: 0 1; display: none; }
    #banner.shown { display: block; }
    #context { height: 1; color: $text-muted; padding: 0 1; }
    #table { height: 1fr; min-height: 5; }
    #timelines { height: 2fr; border-top: hkey $panel-lighten-2; }
    .side-label { height: 1; background: #232833; color: $accent; text-style: bold; padding: 0 1; }
    #timelines Gantt { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(2)", "Zoom +"),
        Binding("minus,underscore", "zoom(0.5)", "Zoom -"),
        Binding("left,h", "pan(-0.1)", show=False),
        Binding("right,l", "pan(0.1)", show=False),
        Binding("f,0", "fit", "Fit"),
        Binding("t", "focus_table", "Table"),
        Binding("g", "focus_gantt", "Timeline"),
        Binding("q", "app.quit", "Quit"),
    ]

    class Mounted(Message):
        """The screen's widgets are there: the app starts comparing then."""

    def __init__(self, trace_title: str) -> None:
        super().__init__()
        self.trace_title = trace_title
        self.rows: list[PhaseComparison] = []
        self._syncing = False

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
        self.post_message(self.Mounted())

    @property
    def gantts(self) -> list[Gantt]:
        return list(self.query(Gantt))

    def show(self, res: ComparisonResult, rows: list[PhaseComparison], index_a: TimelineIndex,
             index_b: TimelineIndex, label_a: str, label_b: str) -> None:
        """A finished comparison: the banner, the context line, the table (``rows`` in their order) and
        the representative run of each side (``index_a``/``index_b``, labelled ``label_a``/``label_b``)."""
        self.rows = rows
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
        tot = f" · end to end {pct(total.rel)} ({total.verdict})" if total is not None else ""
        self.query_one("#title", TextLine).update(f"gputrace compare · {self.trace_title}{tot}")
        ga, gb = self.query_one("#gantt-a", SyncedGantt), self.query_one("#gantt-b", SyncedGantt)
        self.query_one("#label-a", TextLine).update(
            f"A · {label_a} (median of {nb}) · {index_a.timeline.n:,} spans · relative to its start")
        self.query_one("#label-b", TextLine).update(
            f"B · {label_b} (median of {nv}) · {index_b.timeline.n:,} spans · relative to its start")
        t_max = max(index_a.t_max, index_b.t_max)
        for g, idx in ((ga, index_a), (gb, index_b)):
            g.compact = True  # one row per lane: both runs fit on one screen
            g.fit_t_max = t_max
            g.set_index(idx)
        self.query_one("#table", DataTable).focus()

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
            ci = f"[{pct(r.rel_low)}, {pct(r.rel_high)}]" if finite(r.rel_low) else "-"
            table.add_row(
                rich_text(r.path), rich_text(r.device_label), rich_text(r.clock),
                Text(fmt_ns(r.base_median_ns), justify="right"), Text(fmt_ns(r.variant_median_ns), justify="right"),
                Text(pct(r.rel), style=style, justify="right"), Text(ci, justify="right"),
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

