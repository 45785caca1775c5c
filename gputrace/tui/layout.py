"""Pure layout maths for the Gantt view: time <-> cells, the visible window, axis ticks,
duration formatting and interval packing. (Half-cell edges: a half-cell is drawn when a span
covers its centre; see `gputrace.tui.index.IntervalIndex.sample`.)

Nothing here imports Textual; every function is deterministic and unit-tested
(``tests/tui/test_layout.py``). Times are nanoseconds relative to the trace start (the
render index's origin; epoch nanoseconds would not fit a float exactly); a *cell* is one
terminal column of the timeline area, split into two *half-cells* for edge precision.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

#: Smallest zoom: one nanosecond per cell. Largest is bounded by ``View.fit``.
MIN_NS_PER_CELL = 1.0
MAX_NS_PER_CELL = 1e15

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def format_duration(ns: float, digits: int = 3) -> str:
    """Human duration with an adaptive unit: ``1.23 ms``, ``950 ns``, ``2.10 s``.

    ``digits`` is the number of significant digits (at least 1). Negative values keep their sign.
    """
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    sign = "-" if ns < 0 else ""
    a = abs(float(ns))
    if a == 0:
        return "0 ns"
    # Pick the largest unit <= a; if rounding carries to 1000, step up one unit.
    i = next((k for k, (scale, _) in enumerate(_UNITS) if a >= scale), len(_UNITS) - 1)
    carried = False
    while True:
        scale, unit = _UNITS[i]
        v = a / scale
        if carried:
            decimals = digits - 1
        elif unit == "ns" and v >= 1:
            decimals = 0
        else:
            decimals = max(0, digits - 1 - int(math.floor(math.log10(v))))
        txt = f"{v:.{decimals}f}"
        if float(txt) >= 1000 and i > 0:
            i, carried = i - 1, True
            continue
        return f"{sign}{txt} {unit}"


def elide_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with ``…``, so both the
    start (the group indent, ``stream:``) and the distinguishing end (a pid, a stream number)
    stay. Leading spaces (the tree indent) are kept."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    indent = len(text) - len(text.lstrip(" "))
    indent = min(indent, width // 3)
    body, room = text[indent:], width - indent - 1
    head = (room + 1) // 2
    tail = room - head
    return text[:indent] + body[:head] + "…" + (body[-tail:] if tail else "")


#: A lane name's kind prefix (``thread:``, ``stream:``, ``api:``, ``annotations:``): a lower-case word and a colon.
_KIND = re.compile(r"([a-z][a-z_]{0,15}):")
#: The words the lane names themselves use for what a lane is (``thread 483 (python3)``, ``stream 7``): before
#: an id they say nothing a lane's kind and group do not already say.
_LANE_WORDS = ("thread", "stream")
#: The kind of a host lane when a label shows none (the CPU group's lanes are threads).
_DEFAULT_KIND = "thread"


def fit_lane_label(name: str, tag: str, width: int) -> str:
    """A lane's label in ``width`` characters, keeping what tells it from its neighbours. ``name``: the lane
    name as shown (already made visible: no control characters), ``kind:BODY`` (``thread:main``,
    ``api:thread 483 (python3)``, ``stream:7``) or free text; ``tag``: what follows it (`` [pid]``) or ``""``.

    A kind the body repeats is never shown twice (``thread:thread 483 (python3)`` -> ``thread 483 (python3)``).
    Then, only as long as the label is too wide, in this order: the tag goes (it is common to a process's
    lanes); a lane word before an id goes (``thread 508 (pt_autograd_0)`` -> ``508 (pt_autograd_0)``,
    ``api:thread 483 (python3)`` -> ``api:483 (python3)``, ``annotations:stream 24`` -> ``annotations:24``);
    the ``thread:`` kind goes (a host lane without a kind is a thread: ``PyTorch Profiler``); last, the body
    is cut in the middle (``elide_middle``), the kind kept unless it would take half the width. At most
    ``width`` characters. Pure; one line in, one line out."""
    m = _KIND.match(name)
    kind, body = (m.group(1), name[m.end():]) if m else ("", name)
    first = body.split(" ", 1)[0].lower()
    if kind and first == kind:  # thread:thread 483 -> thread 483
        kind = ""

    def label() -> str:
        return (f"{kind}:" if kind else "") + body + tag

    if len(label()) <= width:
        return label()
    tag = ""
    if len(label()) > width:
        word, _, rest = body.partition(" ")
        if word.lower() in _LANE_WORDS and rest[:1].isdigit():
            body = rest
    if len(label()) > width and kind == _DEFAULT_KIND:
        kind = ""
    if len(label()) > width:
        prefix = f"{kind}:" if kind else ""
        if 2 * len(prefix) > width:  # a column too narrow to spend on the kind
            return elide_middle(prefix + body, width)
        return prefix + elide_middle(body, width - len(prefix))
    return label()


def fit_parts(parts: tuple[str, ...] | list[str], width: int, sep: str = " · ") -> str:
    """``parts`` joined by ``sep`` in at most ``width`` characters, most telling first: whole parts from the
    first while they fit; the first that does not is cut at its end with ``…`` when three characters of it
    would show, else left out with everything after it (``rank 1 · pid 681 · python tr…``). The first part
    is cut in the middle (``elide_middle``) when even it does not fit. Pure; one line in, one line out."""
    if not parts:
        return ""
    out = elide_middle(parts[0], width)
    for part in parts[1:]:
        room = width - len(out) - len(sep)
        if len(part) <= room:
            out += sep + part
            continue
        if room >= 4:
            out += sep + part[:room - 1] + "…"
        break
    return out


def format_bytes(n: int) -> str:
    """``1.50 GiB``-style binary size; ``-`` for negative (absent) sizes."""
    if n is None or n < 0:
        return "-"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def format_bandwidth(nbytes: int, ns: int) -> str:
    """Bytes over a duration as ``GB/s`` (decimal, like vendor specs); ``-`` if unknown."""
    if nbytes is None or nbytes < 0 or ns is None or ns <= 0:
        return "-"
    gbps = nbytes / ns  # bytes per ns == GB/s
    if gbps >= 1:
        return f"{gbps:.2f} GB/s"
    return f"{gbps * 1e3:.2f} MB/s"


@dataclass(frozen=True)
class View:
    """The horizontal window: the time at the left edge and nanoseconds per cell.

    Immutable; every navigation returns a new View. ``width`` (cells) is passed in where
    needed because it belongs to the widget, not to the view.
    """

    t0: float
    ns_per_cell: float

    def t1(self, width: int) -> float:
        return self.t0 + self.ns_per_cell * width

    def cell_of(self, t: float) -> float:
        """Fractional cell of time ``t`` (may be outside ``[0, width)``)."""
        return (t - self.t0) / self.ns_per_cell

    def time_of(self, cell: float) -> float:
        return self.t0 + cell * self.ns_per_cell

    @classmethod
    def fit(cls, t0: float, t1: float, width: int, margin: float = 0.01) -> View:
        """A view showing ``[t0, t1]`` in ``width`` cells with a small margin each side."""
        width = max(1, width)
        span = max(1.0, float(t1 - t0))
        pad = span * margin
        npc = min(MAX_NS_PER_CELL, max(MIN_NS_PER_CELL, (span + 2 * pad) / width))
        return cls(t0=t0 - pad, ns_per_cell=npc)

    def zoom(self, factor: float, anchor_t: float) -> View:
        """Zoom by ``factor`` (>1 zooms in) keeping time ``anchor_t`` at the same column."""
        npc = min(MAX_NS_PER_CELL, max(MIN_NS_PER_CELL, self.ns_per_cell / factor))
        col = (anchor_t - self.t0) / self.ns_per_cell
        return View(t0=anchor_t - col * npc, ns_per_cell=npc)

    def pan(self, cells: float) -> View:
        """Move the window right by ``cells`` columns (negative: left)."""
        return View(t0=self.t0 + cells * self.ns_per_cell, ns_per_cell=self.ns_per_cell)

    def centred_on(self, t: float, width: int) -> View:
        return View(t0=t - self.ns_per_cell * width / 2, ns_per_cell=self.ns_per_cell)

    def ensure_visible(self, t0: float, t1: float, width: int) -> View:
        """Pan (never zoom) the least amount so that ``[t0, t1]`` starts inside the window."""
        right = self.t1(width)
        if t0 < self.t0 or t0 >= right:
            return self.centred_on(t0 if t1 - t0 > self.ns_per_cell * width else (t0 + t1) / 2, width)
        return self


def nice_step(ns_per_cell: float, min_cells: int = 12) -> float:
    """Tick step (ns) on a 1-2-5 series so that ticks are at least ``min_cells`` apart."""
    raw = max(1.0, ns_per_cell * min_cells)
    exp = math.floor(math.log10(raw))
    base = 10.0**exp
    for m in (1, 2, 5, 10):
        if m * base >= raw:
            return m * base
    return 10 * base


def axis_ticks(view: View, width: int, origin: float, min_cells: int = 12) -> list[tuple[int, str]]:
    """Tick columns and labels for the time axis, relative to ``origin`` (see `axis_scale`)."""
    return axis_scale(view, width, origin, min_cells)[1]


#: Tick labels longer than this many digits switch the axis to offsets from an anchor.
MAX_LABEL_DIGITS = 4


def axis_scale(view: View, width: int, origin: float,
               min_cells: int = 12) -> tuple[float | None, list[tuple[int, str]]]:
    """``(anchor, ticks)`` for the time axis: tick columns and labels on a 1-2-5 step, in the
    unit of the step (``0ms 200ms 400ms``, ``0µs 100µs``).

    When a label would need more than ``MAX_LABEL_DIGITS`` digits (zoomed far into a long
    trace: ``1497000µs``), the labels become offsets from ``anchor`` (the first visible tick,
    a time relative to ``origin``), ``+0 +20µs +40µs``, and the caller shows the anchor
    (`format_anchor`); otherwise ``anchor`` is None.
    """
    step = nice_step(view.ns_per_cell, min_cells)
    scale, unit = _unit_for(step)
    first = math.ceil((view.t0 - origin) / step)
    ks: list[tuple[int, int]] = []
    k = first
    while len(ks) <= width:  # bounded: never loop forever on degenerate input
        col = int(round((origin + k * step - view.t0) / view.ns_per_cell))
        if col >= width:
            break
        if col >= 0:
            ks.append((col, k))
        k += 1
    decimals = 0 if step >= scale else 1
    widest = max((abs(k * step / scale) for _, k in ks), default=0.0)
    if widest < 10 ** MAX_LABEL_DIGITS:
        return None, [(col, f"{k * step / scale:.{decimals}f}{unit}") for col, k in ks]
    k0 = ks[0][1]
    ticks = [(col, "+0" if k == k0 else f"+{(k - k0) * step / scale:.{decimals}f}{unit}") for col, k in ks]
    return k0 * step, ticks


def format_anchor(rel: float, step: float) -> str:
    """A time since the trace start with as many decimals as the tick ``step`` needs
    (``1.497934 s`` for a 1 µs step), for the axis anchor and the cursor readout."""
    scale, unit = next(((sc, u) for sc, u in _UNITS if abs(rel) >= sc), _UNITS[-1])
    decimals = max(0, min(9, math.ceil(math.log10(scale / step)))) if step < scale else 0
    return f"{rel / scale:.{decimals}f} {unit}"


def _unit_for(step: float) -> tuple[float, str]:
    """The largest unit not larger than ``step`` (a 500 µs step is labelled in µs)."""
    return next(((sc, u) for sc, u in _UNITS if step >= sc), _UNITS[-1])


def pack_levels(start: np.ndarray, end: np.ndarray, max_levels: int = 8) -> np.ndarray:
    """Assign sorted-by-start intervals to levels so that no two on one level overlap.

    Greedy first-fit (lowest free level), which is optimal for interval graphs. Fast path:
    when no interval overlaps an earlier one (the common case: spans of one depth on one
    thread or stream are sequential) everything is level 0 and the check is vectorised.
    Intervals beyond ``max_levels`` share the last level.
    """
    n = len(start)
    levels = np.zeros(n, dtype=np.int16)
    if n < 2:
        return levels
    prev_max = np.maximum.accumulate(end)[:-1]
    if not np.any(start[1:] < prev_max):
        return levels
    free_at: list[int] = []  # end time of the last interval on each level
    s_list, e_list = start.tolist(), end.tolist()
    for i in range(n):
        s = s_list[i]
        for lv, fe in enumerate(free_at):
            if fe <= s:
                free_at[lv] = e_list[i]
                levels[i] = lv
                break
        else:
            if len(free_at) < max_levels:
                free_at.append(e_list[i])
                levels[i] = len(free_at) - 1
            else:
                lv = max_levels - 1
                free_at[lv] = max(free_at[lv], e_list[i])
                levels[i] = lv
    return levels
