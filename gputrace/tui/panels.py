"""Side panels: span details, per-phase summary (sortable) and the stalls list.

UI thread only. Each panel is fed plain data by the app (a Timeline row, a list of
`PhaseStat`, a list of `StallItem`); none of them computes analysis itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from gputrace import activity as A
from gputrace.analysis.host_samples import sites_in
from gputrace.analysis.lanes import device_name
from gputrace.analysis.stats import PhaseStat
from gputrace.phases import phase_hex
from gputrace.textsafe import rich_text
from gputrace.timeline.model import KIND_NAMES, Timeline
from gputrace.tui.layout import format_bandwidth, format_bytes, format_duration
from gputrace.tui.overlays import StallItem


class _LiteralGrid:
    """A two-column rich grid whose ``str`` cells are shown literally (gputrace.textsafe.rich_text):
    keys and values may be attribute names and values from the trace."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def add_row(self, *cells) -> None:
        self.table.add_row(*(rich_text(c) if isinstance(c, str) else c for c in cells))


def details_table(tl: Timeline, row: int, origin: int) -> Table:
    """Everything about one span as a two-column table (times relative to ``origin``)."""
    c = tl.cols
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    t = _LiteralGrid(grid)
    phase = tl.phases[int(c["phase"][row])]
    lane = tl.lanes[int(c["lane"][row])]
    s, e = int(c["start"][row]), int(c["end"][row])
    t.add_row("phase", rich_text(f"■ {phase}", style=phase_hex(phase)))
    if tl.name_of(row) != phase:
        t.add_row("name", tl.name_of(row))
    t.add_row("kind", KIND_NAMES.get(int(c["kind"][row]), "host"))
    dev = int(c["device"][row])
    t.add_row("device", device_name(dev))
    t.add_row("lane", f"{lane.name} ({lane.host} pid {lane.pid})")
    t.add_row("host start", f"+{format_duration(s - origin, 6)}")
    t.add_row("host end", f"+{format_duration(e - origin, 6)}")
    t.add_row("host dur", format_duration(e - s, 4))
    g0, g1 = int(c["gpu_start"][row]), int(c["gpu_end"][row])
    if g0 >= 0 and g1 >= 0:
        t.add_row("device start", f"+{format_duration(g0 - origin, 6)}")
        t.add_row("device end", f"+{format_duration(g1 - origin, 6)}")
        t.add_row("device dur", format_duration(g1 - g0, 4))
        t.add_row("launch lag", format_duration(g0 - s, 3))
    nb = int(c["nbytes"][row])
    if nb >= 0:
        t.add_row("bytes", format_bytes(nb))
        t.add_row("bandwidth", format_bandwidth(nb, (g1 - g0) if g0 >= 0 and g1 > g0 else e - s))
    for col in ("circuit", "batch"):
        v = int(c[col][row])
        if v >= 0:
            t.add_row(col, str(v))
    status = int(c["status"][row])
    if status == 2:
        t.add_row("status", Text("ERROR", style="bold red"))
    chain = tl.parent_chain(row)
    if chain:
        t.add_row("parents", " < ".join(f"{tl.name_of(p)} ({format_duration(int(c['end'][p] - c['start'][p]), 3)})"
                                        for p in chain))
    kids = tl.children(row)
    if len(kids):
        covered = int((c["end"][kids] - c["start"][kids]).sum())
        t.add_row("children", f"{len(kids)} (cover {format_duration(covered, 3)} of {format_duration(e - s, 3)})")
    sites = sites_in(tl, [(s, e)], host=lane.host, pid=int(lane.pid))  # its process's Python stack samples
    if sites:
        t.add_row("python", samples_text(sites, head=False))
    attrs = tl.attrs.get(row, {})
    if phase == A.SAMPLES_SPAN:  # a stack-sample batch: its arrays are read above, not listed
        attrs = {k: (f"[{len(v)} values]" if isinstance(v, list) else v) for k, v in attrs.items()}
    api0 = attrs.get("cuda.launch.api_start_ns")
    if isinstance(api0, int) and api0 > 0:
        t.add_row("launch latency", f"{format_duration(s - api0, 3)} (from {attrs.get('cuda.api', 'the API call')})")
    for k, v in sorted(attrs.items()):
        t.add_row(k, str(v))
    res_i = int(c["resource"][row])
    res = tl.resources[res_i] if 0 <= res_i < len(tl.resources) else {}
    for k in ("service.name", "gputrace.run_id"):
        if k in res:
            t.add_row(k.split(".")[-1] if k != "service.name" else "service", str(res[k]))
    for k in sorted(res):
        if k.startswith(("gputrace.config.", "gputrace.emulated.")):  # emulated: injected costs, not real work
            t.add_row(k[len("gputrace."):], str(res[k]))
    if 0 <= int(c["trace"][row]) < len(tl.trace_ids):
        t.add_row("trace", tl.trace_ids[int(c["trace"][row])])
    t.add_row("span id", f"{int(c['span_id'][row]):016x}")
    return grid


def samples_text(sites: Sequence, head: bool = True) -> Text:
    """The top Python sites of a stall or span (``host_samples.SiteCount``), one line each: samples, share and
    ``file.py:LINE in func > library frame``, parked threads dim; empty without samples. Names are trace data:
    shown literally."""
    out = Text()
    if not sites:
        return out
    if head:
        out.append("Python (stack samples in it):\n", style="bold")
    for i, st in enumerate(sites):
        who = f" rank {st.rank}" if st.rank is not None else f" pid {st.pid}"
        line = f"{st.count:>4} {st.share:>4.0%}  {st.label()}{who}" + (" (parked)" if st.parked else "")
        out.append_text(rich_text(line, style="dim" if st.parked else ""))
        if head or i < len(sites) - 1:
            out.append("\n")
    return out


class DetailsPanel(Static):
    """Shows `details_table` of the selected span, or a hint."""

    def show(self, tl: Timeline | None, row: int, origin: int) -> None:
        if tl is None or row < 0 or row >= tl.n:
            self.update(Text("No span selected.\nClick a bar, or press Enter on a row.", style="dim"))
        else:
            self.update(details_table(tl, row, origin))


SUMMARY_COLUMNS = ("phase", "device", "count", "total", "mean", "median", "p95", "share")
# Fixed widths: a DataTable sizes auto columns as rows arrive, so what a first screen (and a
# snapshot test) shows would depend on timing.
_SUMMARY_WIDTHS = (12, 6, 7, 9, 9, 9, 9, 6)
_SORT_KEYS = {
    "phase": lambda s: (s.phase, _dev(s)),
    "device": lambda s: (_dev(s), s.phase),
    "count": lambda s: -s.count,
    "total": lambda s: -s.total_ns,
    "mean": lambda s: -s.mean_ns,
    "median": lambda s: -s.median_ns,
    "p95": lambda s: -(s.p95_ns if not math.isnan(s.p95_ns) else -1),
    "share": lambda s: -(s.share if not math.isnan(s.share) else -1),
}


def _dev(s) -> int:
    return -2 if s.device is None else s.device


def sort_stats(stats: list, column: str) -> list:
    """Stats sorted by a summary column (numbers largest first, names A-Z)."""
    return sorted(stats, key=_SORT_KEYS[column])


class SummaryPanel(DataTable):
    """Per-phase (and per-device) statistics; click a header or press ``s`` to sort, ``d`` to
    split or merge devices, Enter to highlight that phase on the timeline (a search)."""

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", tooltip="cycle the sort column (or click a header)"),
        Binding("d", "toggle_devices", "By device", tooltip="split / merge the rows by device"),
        Binding("enter", "select_cursor", "Highlight", tooltip="highlight that phase on that device (a search)"),
    ]

    @dataclass
    class ByDeviceToggled(Message):
        by_device: bool

    @dataclass
    class Chosen(Message):
        """Enter on a row: the app searches for that phase (on that device)."""

        phase: str
        device: int | None

    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.stats: list = []
        self.sort_column = "total"
        self.by_device = True

    def on_mount(self) -> None:
        for name, w in zip(SUMMARY_COLUMNS, _SUMMARY_WIDTHS, strict=True):
            self.add_column(name, key=name, width=w)

    def show(self, stats: Iterable[PhaseStat]) -> None:
        self.stats = list(stats)
        self._refill()

    def _refill(self) -> None:
        self.clear()
        for s in sort_stats(self.stats, self.sort_column):
            dev = device_name(s.device)
            share = "-" if math.isnan(s.share) else f"{s.share:.1%}"
            self.add_row(
                rich_text(s.phase, style=phase_hex(s.phase)), dev, str(s.count), format_duration(s.total_ns),
                format_duration(s.mean_ns), format_duration(s.median_ns), format_duration(s.p95_ns), share,
            )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        rows = sort_stats(self.stats, self.sort_column)
        if 0 <= event.cursor_row < len(rows):
            st = rows[event.cursor_row]
            self.post_message(self.Chosen(st.phase, st.device))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_column = str(event.column_key.value)
        self._refill()

    def action_cycle_sort(self) -> None:
        i = SUMMARY_COLUMNS.index(self.sort_column)
        self.sort_column = SUMMARY_COLUMNS[(i + 1) % len(SUMMARY_COLUMNS)]
        self._refill()
        self.app.notify(f"summary sorted by {self.sort_column}", timeout=1.5)

    def action_toggle_devices(self) -> None:
        self.by_device = not self.by_device
        self.post_message(self.ByDeviceToggled(self.by_device))


class StallsPanel(DataTable):
    """GPU idle gaps, host waits, pinning and unattributed time; the arrows walk the list (the
    timeline follows), Enter zooms to one. Focus stays here either way."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Zoom",
                tooltip="zoom the timeline to the stall (focus stays here; ↑↓ walk the list, the timeline follows)"),
        Binding("x", "measure", "Measure", tooltip="measure the stall: the range is its interval (panel 4)"),
    ]

    @dataclass
    class Measure(Message):
        item: StallItem

    def action_measure(self) -> None:
        i = self.cursor_row
        if 0 <= i < len(self.items):
            self.post_message(self.Measure(self.items[i]))

    @dataclass
    class Chosen(Message):
        item: StallItem

    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", **kw)
        self.items: list[StallItem] = []

    def on_mount(self) -> None:
        self.add_column("what", key="what", width=12)
        self.add_column("lost", key="dur", width=9)
        self.add_column("detail", key="detail", width=240)

    def show(self, items: Sequence[StallItem], notes: Sequence[str] = ()) -> None:
        self.items = list(items)
        self.clear()
        for it in self.items:
            style = {"idle": "bold red", "wait": "yellow", "pin": "magenta", "unattributed": "dark_orange",
                     "launch": "#ff7f50", "finding": "bold green"}.get(
                it.category, "")
            self.add_row(Text(it.category, style=style), format_duration(it.amount_ns, 3), rich_text(it.text))
        for n in notes:
            self.add_row(Text("n/a", style="dim"), "", rich_text(n, style="dim"))

    @dataclass
    class Highlighted(Message):
        item: StallItem | None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        i = event.cursor_row
        if 0 <= i < len(self.items):
            self.post_message(self.Chosen(self.items[i]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        i = event.cursor_row
        self.post_message(self.Highlighted(self.items[i] if 0 <= i < len(self.items) else None))


def range_table(summary, origin_wall: int | None = None) -> Table:
    """The Range panel: the measured range's duration and bounds, each GPU's idle time in it,
    and per lane its busy time and the phases that ran (`gputrace.tui.range_stats`)."""
    t = Table.grid(padding=(0, 1))
    t.add_column(style="bold", no_wrap=True, max_width=12)
    t.add_column(overflow="fold")
    dur = summary.duration
    t.add_row("range", Text(format_duration(dur, 4), style="bold"))
    t.add_row("from", f"+{format_duration(summary.t0, 6)}")
    t.add_row("to", f"+{format_duration(summary.t1, 6)}")
    for dev, ns in summary.idle:
        t.add_row(Text("idle", style="bold red"), rich_text(f"{dev}: {format_duration(ns, 3)} ({ns / dur:.0%})"))
    if not summary.lanes:
        t.add_row("", Text("no spans in the range", style="dim"))
    for ln in summary.lanes:  # name on its own line: lane labels are long, the panel narrow
        t.add_row("lane", rich_text(ln.label, "cyan"))
        busy = f"{format_duration(ln.busy_ns, 3)} busy ({ln.busy_ns / dur:.0%})" if dur > 0 else ""
        what = Text(busy + "  ")
        for name, ns in ln.phases:
            what.append("■ ", style=phase_hex(name))
            what.append_text(rich_text(name))
            what.append(f" {format_duration(ns, 2)}  ")
        t.add_row("", what)
    return t


class RangePanel(Static):
    """What the measured range holds (`range_table`), or how to measure."""

    def show(self, summary) -> None:
        if summary is None:
            self.update(Text("No range measured.\nx: the span or idle gap under the cursor · b twice: two marks "
                             "at the time cursor (, . < > move it) · drag along the time axis · r zooms to it "
                             "· Esc clears.", style="dim"))
        else:
            self.update(range_table(summary))
