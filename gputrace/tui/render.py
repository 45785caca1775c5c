"""Row rendering: one `IntervalIndex` + a view -> characters and colour keys per cell,
then rich `Segment`s.

``row_cells`` is pure numpy (vectorised over the cells of a row; no per-span Python loop,
which is what keeps a 1 M-span redraw inside 50 ms); ``cells_to_segments`` runs a Python
loop only over runs of equal style. Glyphs:

* a half-cell is *covered* when an interval covers its centre, so an edge is drawn to
  half-cell precision with ``▌``/``▐`` (and ``▖``/``▗`` in thin device-time rows);
* a boundary between two spans of one phase is marked by ``▏``;
* a cell that three or more spans touch (or that only sub-half-cell spans touch) is
  *dense*: ``░▒▓`` by the fraction of the cell they cover;
* marks over a bar: ``┄`` a parent's time no child covers (unattributed), ``╍`` host time
  past a span's device time (a host wait).

Colour keys are the ints of `gputrace.tui.keys`; the `Palette` turns keys into rich styles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from rich.cells import cell_len

from gputrace.textsafe import visible
from gputrace.tui.index import IntervalIndex
from gputrace.tui.keys import BG, DIM, INK, SEL
from gputrace.tui.layout import View

SHADES = np.array(["░", "▒", "▓"])


def _cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Glyph and colour sources per half-cell case. Index bits: 1 left half covered,
    2 right half covered, 4 same colour both halves, 8 same span both halves. Colour
    sources: 0 row background, 1 left colour, 2 right colour."""
    chars, fgs, bgs = [], [], []
    for code in range(16):
        hl, hr, k_eq, same = code & 1, code & 2, code & 4, code & 8
        if hl and hr:
            c = (" ", 0, 1) if same else (("▏", 0, 1) if k_eq else ("▌", 1, 2))
        elif hl:
            c = ("▌", 1, 0)
        elif hr:
            c = ("▐", 2, 0)
        else:
            c = (" ", 0, 0)
        chars.append(c[0])
        fgs.append(c[1])
        bgs.append(c[2])
    return np.array(chars, dtype="<U1"), np.array(fgs, np.int8), np.array(bgs, np.int8)


_CASE_CHAR, _CASE_FG, _CASE_BG = _cases()


@dataclass
class Cells:
    chars: np.ndarray  # '<U1' per cell
    fg: np.ndarray  # int64 colour key per cell
    bg: np.ndarray
    bold: np.ndarray  # bool

    @property
    def text(self) -> str:
        return "".join(self.chars.tolist())


def blank_cells(width: int) -> Cells:
    return Cells(np.full(width, " ", dtype="<U1"), np.full(width, BG, np.int64), np.full(width, BG, np.int64),
                 np.zeros(width, bool))


def row_cells(
    index: IntervalIndex,
    view: View,
    width: int,
    *,
    thin: bool = False,
    label_fn: Callable[[int], str] | None = None,
    selected_row: int = -1,
    dim_rows: np.ndarray | None = None,
    marks: Sequence[tuple[IntervalIndex, str, int]] = (),
) -> Cells:
    """Cells for one row. ``dim_rows`` (bool per Timeline row) dims non-matching spans;
    ``marks`` are (intervals, glyph, colour key) drawn over the bars (waits, unattributed
    time) wherever an interval covers a half-cell. Pure."""
    if width <= 0 or len(index) == 0:
        return blank_cells(max(width, 0))
    smp = index.sample(view.t0, view.ns_per_cell, width)
    key, rowa = index.key, index.row

    def keys_of(ix: np.ndarray) -> np.ndarray:
        ok = ix >= 0
        ixc = np.maximum(ix, 0)
        k = np.where(ok, key[ixc], BG)
        r = rowa[ixc]
        if dim_rows is not None:
            d = ok & (r >= 0) & dim_rows[np.maximum(r, 0)]
            k = np.where(d, k + DIM, k)
        if selected_row >= 0:
            k = np.where(ok & (r == selected_row), SEL, k)
        return k

    L, R = smp.sub[0::2], smp.sub[1::2]
    kL, kR = keys_of(L), keys_of(R)
    hasL, hasR = L >= 0, R >= 0
    same = hasL & (L == R)
    # One table lookup per cell instead of a dozen masked assignments (see _cases).
    code = hasL.view(np.int8) + 2 * hasR.view(np.int8) + 4 * (kL == kR).view(np.int8) + 8 * same.view(np.int8)
    ch = _CASE_CHAR[code]
    bgk = np.full(width, BG, np.int64)
    fg = np.choose(_CASE_FG[code], (bgk, kL, kR))
    bg = np.choose(_CASE_BG[code], (bgk, kL, kR))
    out = Cells(ch, fg, bg, np.zeros(width, bool))
    # Dense or sub-half-cell content: shade by covered fraction.
    dense = ((smp.count >= 3) & ~same) | (~hasL & ~hasR & (smp.count > 0))
    if dense.any():
        shade_src = np.where(hasL, L, np.where(hasR, R, smp.near))
        lvl = np.clip((smp.cover * 3).astype(np.int64), 0, 2)
        ch[dense] = SHADES[lvl[dense]]
        fg[dense] = keys_of(shade_src)[dense]
        bg[dense] = BG
    for mk, glyph, colour in marks:
        ms = mk.sample(view.t0, view.ns_per_cell, width).sub
        hit = (ms[0::2] >= 0) | (ms[1::2] >= 0)
        ch[hit], fg[hit] = glyph, colour
    if thin:
        _thin(out)
    elif label_fn is not None:
        _labels(out, np.where(same, L, -1), label_fn, selected_row, rowa)
    return out


def _thin(out: Cells) -> None:
    ch, fg, bg = out.chars, out.fg, out.bg
    full = (ch == " ") & (bg != BG)
    ch[full], fg[full], bg[full] = "▄", bg[full], BG
    sep = ch == "▏"
    ch[sep], fg[sep], bg[sep] = "▄", bg[sep], BG
    two = (ch == "▌") & (bg != BG)
    ch[two], bg[two] = "▄", BG
    ch[ch == "▌"] = "▖"
    ch[ch == "▐"] = "▗"


def cell_text(text: str) -> str:
    """Trace text for a span label drawn one character per cell: control characters made visible
    (gputrace.textsafe.visible), and characters that are not exactly one cell wide (wide CJK, emoji,
    combining marks) shown as '?' so the row keeps its grid."""
    text = visible(text)
    if text.isascii():
        return text
    return "".join(c if cell_len(c) == 1 else "?" for c in text)


def _labels(out: Cells, sid: np.ndarray, label_fn, selected_row: int, rowa) -> None:
    """Write each span's label inside the run of cells it fully covers, when it fits."""
    w = len(sid)
    cuts = np.flatnonzero(sid[1:] != sid[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [w]))
    keep = (sid[starts] >= 0) & (ends - starts >= 4)
    for a, b in zip(starts[keep].tolist(), ends[keep].tolist(), strict=True):
        i = int(sid[a])
        text = cell_text(label_fn(i))
        room = b - a - 2
        if room <= 0 or not text:
            continue
        if len(text) > room:
            if room < 3:
                continue
            text = text[: room - 1] + "…"
        seg = slice(a + 1, a + 1 + len(text))
        out.chars[seg] = list(text)
        out.fg[seg] = INK
        if selected_row >= 0 and rowa[i] == selected_row:
            out.bold[seg] = True


def cells_to_runs(cells: Cells) -> list[tuple[str, int, int, bool]]:
    """(text, fg key, bg key, bold) per run of equal style, left to right."""
    fg, bg, bold = cells.fg, cells.bg, cells.bold
    w = len(fg)
    if w == 0:
        return []
    change = np.flatnonzero((fg[1:] != fg[:-1]) | (bg[1:] != bg[:-1]) | (bold[1:] != bold[:-1])) + 1
    starts = [0, *change.tolist()]
    ends = [*change.tolist(), w]
    chars = cells.chars.tolist()
    fl, bl, ol = fg.tolist(), bg.tolist(), bold.tolist()
    return [("".join(chars[a:b]), fl[a], bl[a], ol[a]) for a, b in zip(starts, ends, strict=True)]
