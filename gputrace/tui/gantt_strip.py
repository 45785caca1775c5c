"""One Gantt screen row as a `Strip`: the name column, then the row's cells in rich styles.

The drawing half of ``Gantt.render_line`` (the hot path: the widget keeps the strips in an LRU and
calls `RowPainter.paint` on a miss). The cells come from `gputrace.tui.gantt_cells`; what the
painter keeps is what their styles cost to look up: the `Palette` (colour keys -> rich styles, from
the widget's component classes and the phases' colours) and the name column's style per row kind.
`reset` drops them when the styles or the phases change.

Threading: UI thread only (it reads the widget's component styles through ``style_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gputrace.tui.layout import elide_middle, fit_lane_label, fit_parts
from gputrace.tui.palette import Palette
from gputrace.tui.render import Cells, cells_to_runs
from gputrace.tui.rows import DEVICE, HOST, PROCESS, RowSpec

NAME_W = 24  # the name column; the timeline starts at this x


class RowPainter:
    """Builds the `Strip` of one screen row. ``style_of`` is the widget's ``get_component_rich_style``
    (component class name, ``partial=``) -> `Style`."""

    def __init__(self, style_of: Callable[..., Style]) -> None:
        self._style_of = style_of
        self._palette: Palette | None = None
        self._style_cache: dict[tuple, tuple[Style, str]] = {}

    def reset(self) -> None:
        """The styles or the phases changed: the palette (and the name styles) are built again."""
        self._palette = None

    def palette(self, phases: Sequence[str]) -> Palette:
        """The palette for ``phases``, built on first use after a `reset`."""
        if self._palette is None:
            self._style_cache = {}
            self._palette = Palette.from_styles(phases, lambda name: self._style_of(name, partial=True))
        return self._palette

    def _name_styles(self, kind: str, cursor: bool, base: str) -> tuple[Style, str]:
        """(name column style, timeline background) for a row kind; cached per palette."""
        key = (kind, cursor)
        hit_ = self._style_cache.get(key)
        if hit_ is None:
            cls = "gantt--cursor" if cursor else {HOST: "gantt--host", PROCESS: "gantt--host",
                                                  DEVICE: "gantt--device"}.get(kind, "gantt--name")
            st = self._style_of(cls)
            bg = base
            if kind in (HOST, PROCESS, DEVICE):
                hdr = self._style_of("gantt--device" if kind == DEVICE else "gantt--host")
                if hdr.bgcolor is not None:
                    bg = hdr.bgcolor.get_truecolor().hex
            hit_ = self._style_cache[key] = (st, bg)
        return hit_

    def paint(self, pal: Palette, spec: RowSpec, cells: Cells, *, cursor: bool, width: int, tw: int) -> Strip:
        """Row ``spec`` (``cursor``: the focused cursor row) from its ``tw`` timeline ``cells``, padded to
        ``width`` cells. ``pal``: `palette` of the widget's phases."""
        name_style, base = self._name_styles(spec.kind, cursor, pal.background)
        # A lane's name fitted to the column keeping what tells it apart (fit_lane_label), any other label
        # elided in the middle (the distinguishing end stays); then cut to cells: wide names keep the grid.
        if spec.name:
            indent = spec.label[:len(spec.label) - len(spec.label.lstrip(" "))]
            text = indent + fit_lane_label(spec.name, "", NAME_W - 1 - len(indent))
        elif spec.parts:  # a process header: rank and pid first, then as much of the command as fits
            head = spec.label[:len(spec.label) - len(spec.label.lstrip(" ")) + 2]  # the indent and "▼ "
            text = head + fit_parts(spec.parts, NAME_W - 1 - len(head))
        else:
            text = elide_middle(spec.label, NAME_W - 1)
        label = set_cell_size(text, NAME_W - 1)
        segs = [Segment(label, name_style), Segment("│", name_style)]
        for text, fg, bg, bold in cells_to_runs(cells):
            segs.append(Segment(text, pal.style(fg, bg, bold, base)))
        return Strip(segs, NAME_W + tw).extend_cell_length(width, Style(bgcolor=base))


__all__ = ["NAME_W", "RowPainter"]
