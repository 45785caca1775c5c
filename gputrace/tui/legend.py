"""The legend over the timeline: what each glyph and colour means.

Order: the overlay glyphs first (GPU idle, unattributed, host wait; with GPU activity also launch
gaps and pinned / pageable copies), then the phases, then the GPU activity names (kernels, copies,
memsets, syncs), so the keys that explain the analysis never fall off the end. An entry is never
split across lines; one wider than the line is cut with ``…``. Two lines at most unless expanded;
whatever does not fit ends the second line as ``… +N more (g)`` (``g`` shows them all, then hides
the legend, then back).

`legend_keys` and `legend_text` are pure (tested directly); `Legend` is the widget (UI thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, islice

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from gputrace.phases import phase_hex
from gputrace.textsafe import visible


@dataclass(frozen=True)
class Key:
    """One legend entry: a glyph in its colour, then what it means (shown literally)."""

    glyph: str
    style: str
    label: str

    @property
    def width(self) -> int:
        return cell_len(self.glyph) + 1 + cell_len(self.label)


#: The analysis overlays drawn on every trace (colours as in gputrace.tcss).
OVERLAY_KEYS = (Key("█", "#8f2d2d", "GPU idle"), Key("┄", "#ffb000", "unattributed"), Key("╍", "#fff275", "host wait"))
#: ... and on a trace with GPU activity spans.
ACTIVITY_KEYS = (Key("╌", "#ff7f50", "launch gap"), Key("■", "#2ec4b6", "pinned copy"),
                 Key("■", "#ff4d6d", "pageable copy"))
SEP = "  "
MORE_KEY = "g"


def _has_copies(phases: Sequence[str]) -> bool:
    return any(p.startswith("[CUDA memcpy") for p in phases)


def legend_keys(phases: Sequence[str], activity: Sequence[str] = (), limit: int | None = None,
                copies: bool | None = None) -> list[Key]:
    """The entries in order: overlays, phases, then activity names. ``phases`` are the phase names
    present; those also in ``activity`` (the names of GPU activity spans) go last. Activity keys are
    added when a copy is present (names of `gputrace.activity`: ``[CUDA memcpy ...]``). ``limit``: only the
    first ``limit`` entries (a name's colour and escaped label are worked out only for the entries built).
    ``copies``: whether a copy is present, when the caller knows (else the names are scanned)."""
    act = set(activity)
    keys = list(OVERLAY_KEYS)
    if _has_copies(phases) if copies is None else copies:
        keys += ACTIVITY_KEYS
    names = chain((p for p in phases if p not in act), (p for p in phases if p in act))
    room = None if limit is None else max(0, limit - len(keys))
    keys += [Key("■", phase_hex(p), visible(p)) for p in islice(names, room)]
    return keys[:limit] if limit is not None else keys


def legend_size(phases: Sequence[str], copies: bool | None = None) -> int:
    """How many entries :func:`legend_keys` makes for ``phases`` (without building them)."""
    copies = _has_copies(phases) if copies is None else copies
    return len(OVERLAY_KEYS) + len(phases) + (len(ACTIVITY_KEYS) if copies else 0)


def _lines(keys: Sequence[Key], width: int, stop: int | None = None) -> list[list[int]]:
    """Entries (indices) per line, filled greedily, ``SEP`` between entries; ``stop``: at most that many lines
    (the layout ends where line ``stop + 1`` would begin)."""
    lines: list[list[int]] = []
    used = 0
    for i, k in enumerate(keys):
        w = min(k.width, width)
        if lines and used + len(SEP) + w <= width:
            lines[-1].append(i)
            used += len(SEP) + w
        else:
            if stop is not None and len(lines) == stop:
                break
            lines.append([i])
            used = w
    return lines


def legend_text(keys: Sequence[Key], width: int, max_lines: int | None = 2,
                total: int | None = None) -> tuple[Text, int]:
    """The legend laid out in ``width`` cells: ``(text, hidden)``, ``hidden`` the number of entries left
    out (then the last line ends with ``… +N more (g)``). ``max_lines`` None: every entry. ``total``: the
    number of entries when ``keys`` are only the first of them (at least enough to fill ``max_lines``: each
    entry takes at least 3 cells, so ``max_lines * width // 3 + 1`` do); default ``len(keys)``."""
    width = max(1, width)
    total = len(keys) if total is None else total
    lines = _lines(keys, width, None if max_lines is None else max_lines + 1)
    hidden = 0
    if max_lines is not None and (len(lines) > max_lines or sum(len(ln) for ln in lines) < total):
        lines = lines[:max_lines]
        last = lines[-1]
        while True:
            hidden = total - sum(len(ln) for ln in lines)
            if not hidden:
                break
            used = sum(min(keys[i].width, width) for i in last) + len(SEP) * (len(last) - 1)
            more = f"… +{hidden} more ({MORE_KEY})"
            if not last or used + len(SEP) + len(more) <= width:
                break
            last.pop()
    out = Text(no_wrap=True, overflow="ellipsis")
    for n, line in enumerate(lines):
        if n:
            out.append("\n")
        for j, i in enumerate(line):
            k = keys[i]
            if j:
                out.append(SEP)
            label = k.label
            if k.width > width:  # one entry wider than the line: cut with an ellipsis
                label = set_cell_size(label, max(0, width - cell_len(k.glyph) - 2)) + "…"
            out.append(k.glyph, style=k.style)
            out.append(" " + label)  # a Text segment, never parsed as markup
    if hidden:
        out.append((SEP if lines[-1] else "") + f"… +{hidden} more ({MORE_KEY})", style="bold")
    return out, hidden


class Legend(Widget):
    """The legend (see the module docstring). The screen feeds it with `show` and cycles it with ``g``
    (`cycle`): two lines, every line, hidden."""

    DEFAULT_CSS = "Legend { height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.phases: list[str] = []
        self.activity: list[str] = []
        self._keys: list[Key] | None = None  # every entry, built when first asked for (``g``)
        self._copies = False
        self.size_all = legend_size([])
        self.expanded = False
        self.hidden_entries = 0  # entries left out at the last render

    def show(self, phases: Sequence[str], activity: Sequence[str] = ()) -> None:
        """The phases present and, among them, the names of GPU activity spans."""
        if list(phases) != self.phases or list(activity) != self.activity:
            self.phases, self.activity = list(phases), list(activity)
            self._copies = _has_copies(self.phases)
            self._keys, self.size_all = None, legend_size(self.phases, self._copies)
            self.refresh(layout=True)

    def cycle(self) -> None:
        """``g``: two lines -> every line (only when something was left out) -> hidden -> two lines."""
        if self.has_class("hidden"):
            self.remove_class("hidden")
            self.expanded = False
        elif not self.expanded and self.hidden_entries:
            self.expanded = True
        else:
            self.add_class("hidden")
        self.refresh(layout=True)

    def _text(self, width: int) -> tuple[Text, int]:
        if self.expanded:
            return legend_text(self.keys, width, None)
        # Two lines need only the first entries: a trace of 1M names builds a few dozen keys, not 1M.
        keys = legend_keys(self.phases, self.activity, limit=2 * max(1, width) // 3 + 1, copies=self._copies)
        return legend_text(keys, width, 2, total=self.size_all)

    @property
    def keys(self) -> list[Key]:
        """Every entry (``g`` expanded the legend): built once per set of names."""
        if self._keys is None:
            self._keys = legend_keys(self.phases, self.activity, copies=self._copies)
        return self._keys

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._text(width)[0].plain.split("\n"))

    def render(self) -> Text:
        text, self.hidden_entries = self._text(self.size.width)
        return text
