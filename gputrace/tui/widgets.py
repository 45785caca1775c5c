"""Small widgets of the app: one-line bars and the help screen (with the key table)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from gputrace.textsafe import rich_text

KEYS = [
    ("←/→  h/l", "pan a tenth of the view (shift: half)"),
    ("↑/↓  k/j", "move the row cursor"),
    ("+ / -", "zoom in / out around the cursor (mouse wheel: around the pointer)"),
    ("f  0", "zoom to fit"),
    ("z", "zoom to the selected span"),
    ("enter", "select the span under the cursor on this row"),
    ("[ / ]", "previous / next span on this row"),
    ("n / N", "next / previous span of the same phase"),
    ("space", "fold / unfold the host or device group"),
    ("c", "compact: one row per lane, nested phases stacked (deepest on top)"),
    ("/", "search: dims everything that does not match"),
    ("m / M", "next / previous search match"),
    ("F", "filter: show only matching spans"),
    ("escape", "clear search, then filter"),
    ("1 2 3", "details / summary / stalls panel"),
    ("s  d  enter", "summary: cycle sort column / split by device / highlight the phase"),
    ("enter", "stalls: zoom the timeline to the gap, wait or span"),
    ("p", "show / hide the side panel"),
    ("mouse", "click selects, drag pans, wheel zooms, shift+wheel pans"),
    ("q", "quit"),
]

QUERY_HELP = (
    "words match phase names; key=value[,value] on phase, device (n|cpu), lane, host, kind, "
    "circuit, batch, bytes or any attribute; dur>10ms, bytes>1000000"
)


class TextLine(Widget):
    """A one-line bar whose updates repaint only itself (a Static's update re-lays out the
    screen, which costs more than a Gantt redraw on every zoom or pan). The text is shown
    literally (gputrace.textsafe.rich_text): it may quote file, phase or lane names."""

    def __init__(self, text: str = "", **kw) -> None:
        super().__init__(**kw)
        self.text = text

    def update(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        t = rich_text(self.text)
        t.no_wrap, t.overflow = True, "ellipsis"
        return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column()
        for k, v in KEYS:
            t.add_row(k, v)
        t.add_row("", "")
        t.add_row("query", QUERY_HELP)
        t.add_row("", "")
        t.add_row("drawing", "▌▐ half-cell edges · ░▒▓ many spans in one cell · ▄ device (CUDA-event) time "
                             "· red bars on GPU rows: idle gaps · ┄ parent time no child covers (unattributed)")
        yield Static(t, id="help")


class ErrorScreen(Screen):
    """Shown instead of the timeline when a trace cannot be read: one clear message."""

    BINDINGS = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        yield TextLine(f"gputrace · {self.title_text} · cannot show this trace", id="title")
        yield Static(Text.assemble("⚠ ", rich_text(self.text), "\n\nPress q to quit."), id="message")
        yield Footer()
