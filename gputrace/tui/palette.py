"""Colour keys -> rich styles, cached.

Phase colours come from `gputrace.phases.phase_hex` (the same colours NVTX and the
exporters use); the structural colours (row background, selection, idle gaps,
unattributed time) come from the Gantt widget's CSS component classes and are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.color import Color
from rich.style import Style

from gputrace.phases import phase_hex
from gputrace.tui.keys import BG, CURSOR, DIM, IDLE, INK, LAUNCH, PAGEABLE, PINNED, RANGE, SEL, UNATTR, WAIT


def _rgb(hex_: str) -> tuple[int, int, int]:
    h = hex_.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def blend(a: str, b: str, t: float) -> str:
    """``a`` moved ``t`` of the way towards ``b`` (both '#rrggbb')."""
    ra, ga, ba = _rgb(a)
    rb, gb, bb = _rgb(b)
    return f"#{round(ra + (rb - ra) * t):02x}{round(ga + (gb - ga) * t):02x}{round(ba + (bb - ba) * t):02x}"


def luminance(hex_: str) -> float:
    r, g, b = _rgb(hex_)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255.0


@dataclass
class Palette:
    """Resolves colour keys (see `gputrace.tui.render`) for one list of phase names."""

    phases: list[str]
    background: str = "#1e1e1e"
    selected: str = "#ffffff"
    idle: str = "#a33a3a"
    unattributed: str = "#e0a030"
    wait: str = "#ffe066"
    launch: str = "#ff7f50"  # launch gaps inside a phase bar
    pageable: str = "#ff4d6d"  # copies touching pageable host memory (staged by the driver: slow)
    pinned: str = "#2ec4b6"  # copies from/to pinned host memory
    range: str = "#233a5c"
    cursor: str = "#9cdcfe"
    _cache: dict = field(default_factory=dict, repr=False)
    _hex: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_styles(cls, phases: Sequence[str], style_of: Callable[[str], Style]) -> Palette:
        """A palette whose structural colours come from component classes: ``style_of(name)`` is the rich
        style of ``gantt--<name>`` (the widget's ``get_component_rich_style``); a class without the colour
        keeps the default."""

        def bg(name: str, default: str) -> str:
            st = style_of(name)
            c = st.bgcolor or st.color
            return c.get_truecolor().hex if c is not None else default

        def fg(name: str, default: str) -> str:
            c = style_of(name).color
            return c.get_truecolor().hex if c is not None else default

        return cls(
            list(phases),
            background=bg("gantt--row", "#1e1e1e"),
            selected=bg("gantt--selected", "#ffffff"),
            idle=bg("gantt--idle", "#a33a3a"),
            unattributed=fg("gantt--unattributed", "#e0a030"),
            wait=fg("gantt--wait", "#ffe066"),
            launch=fg("gantt--launch", "#ff7f50"),
            pageable=fg("gantt--pageable", "#ff4d6d"),
            pinned=fg("gantt--pinned", "#2ec4b6"),
        )

    def colour(self, key: int, base: str | None = None) -> str:
        base = base or self.background
        if key == BG:
            return base
        if key == SEL:
            return self.selected
        if key == IDLE:
            return self.idle
        if key == UNATTR:
            return self.unattributed
        if key == WAIT:
            return self.wait
        if key == LAUNCH:
            return self.launch
        if key == PAGEABLE:
            return self.pageable
        if key == PINNED:
            return self.pinned
        if key == RANGE:
            return self.range
        if key == CURSOR:
            return self.cursor
        dim = key >= DIM
        k = key - DIM if dim else key
        h = self._hex.get(k)
        if h is None:
            h = phase_hex(self.phases[k]) if 0 <= k < len(self.phases) else "#808080"
            self._hex[k] = h
        return blend(h, base, 0.7) if dim else h

    def style(self, fg: int, bg: int, bold: bool = False, base: str | None = None) -> Style:
        ck = (fg, bg, bold, base)
        st = self._cache.get(ck)
        if st is None:
            bgh = self.colour(bg, base)
            if fg == INK:
                fgh = "#000000" if luminance(bgh) > 0.5 else "#ffffff"
            else:
                fgh = self.colour(fg, base)
            st = Style(color=Color.parse(fgh), bgcolor=Color.parse(bgh), bold=bold)
            self._cache[ck] = st
        return st
