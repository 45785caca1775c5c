"""Small widgets of the app: one-line bars, the help screen (its key table built from the bindings)
and the error screen. The legend is `gputrace.tui.legend`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from gputrace.textsafe import rich_text

#: Help lines that are not key bindings (the mouse).
MOUSE_HELP = [
    ("click", "select a span (a group name: fold it); drag pans"),
    ("wheel", "zoom around the pointer (shift+wheel pans; over the names: scroll)"),
    ("drag on axis", "measure that range"),
]


def binding_rows(app: App[Any], sections: Sequence[tuple[str, Sequence[BindingType]]]) -> list[tuple[str, str, str]]:
    """(section, keys, what) for every binding of ``sections`` ((title, bindings) pairs), built
    from the bindings themselves (their tooltip, else their description), so the help never
    drifts from what the keys do. Bindings of one action with several keys share a line."""
    out: list[tuple[str, str, str]] = []
    for title, bindings in sections:
        seen: dict[str, int] = {}
        for b in bindings:
            if isinstance(b, tuple):
                b = Binding(*b)
            what = b.tooltip or b.description or b.action
            keys = " ".join(app.get_key_display(Binding(k.strip(), b.action)) for k in b.key.split(","))
            if what in seen:  # the same help text under another binding: join the keys
                i = seen[what]
                out[i] = (out[i][0], f"{out[i][1]} {keys}", what)
                continue
            seen[what] = len(out)
            out.append((title, keys, what))
    return out


#: ctrl+c quits the viewers as ctrl+q and q do (Textual's own ctrl+c only says to press ctrl+q). A
#: priority binding of the app, so it quits from the query box and the panels too.
QUIT_BINDING = Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit")

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
    """Every key binding of the app, its timeline and its panels (``sections``: title and
    bindings), then the mouse, the query language and the glyphs."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, sections) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold cyan", no_wrap=True, max_width=22)
        t.add_column()
        last = None
        for title, keys, what in binding_rows(self.app, self.sections):
            if title != last:
                t.add_row(Text(title, style="bold underline"), "")
                last = title
            t.add_row(keys, what)
        t.add_row(Text("mouse", style="bold underline"), "")
        for k, v in MOUSE_HELP:
            t.add_row(k, v)
        t.add_row("", "")
        t.add_row("query", QUERY_HELP)
        t.add_row("", "")
        t.add_row("drawing", "▌▐ half-cell edges · ░▒▓ many spans in one cell · ▄ device (CUDA-event) time "
                             "· red bars on GPU rows: idle gaps · ┄ parent time no child covers (unattributed) "
                             "· ╍ host wait · ┊ time cursor · │ marks, shaded: the measured range")
        yield VerticalScroll(Static(t), id="help")


class ErrorScreen(Screen):
    """Shown instead of the timeline when a trace cannot be read: one clear message."""

    # Help is the app's: the compare view has none, and its check_action hides the key.
    BINDINGS = [Binding("q,escape", "app.quit", "Quit"), Binding("question_mark", "app.help", "Help")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        yield TextLine(f"gputrace · {self.title_text} · cannot show this trace", id="title")
        yield Static(Text.assemble("⚠ ", rich_text(self.text), "\n\nPress q to quit."), id="message")
        yield Footer()
