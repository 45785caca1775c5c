"""The compare view's table, pure: row order, the whisker bars and their common scale, verdict colours.

No Textual; tested directly (``tests/tui/test_compare_view.py``). The screen that shows them is
`gputrace.tui.compare_screen.CompareScreen`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gputrace.analysis.ab.compare import PhaseComparison

__all__ = ["BAR_W", "VERDICT_STYLE", "bar_scale", "finite", "pct", "sort_rows", "unique_labels", "whisker_bar"]

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


def finite(x: float) -> bool:
    return x is not None and math.isfinite(x)


def sort_rows(rows: Sequence[PhaseComparison]) -> list[PhaseComparison]:
    """Rows called slower first, then by |relative change| (largest first; no change last)."""
    return sorted(rows, key=lambda r: (r.verdict != "slower", -abs(r.rel) if finite(r.rel) else math.inf))


def bar_scale(rows: Sequence[PhaseComparison], floor: float = 0.05) -> float:
    """The common half-width of the whisker bars: the largest |change| or interval bound, unless a
    few outliers (one phase with a +-2000 % interval from a handful of noisy runs) would shrink every
    other row to a dot; then twice the upper quartile of the values (or the 90th percentile of the
    estimates, if larger). Bounds beyond the scale are drawn ``◀`` ``▶``."""
    vals = np.array([abs(v) for r in rows for v in (r.rel, r.rel_low, r.rel_high) if finite(v)])
    if vals.size == 0:
        return floor
    rels = np.array([abs(r.rel) for r in rows if finite(r.rel)])
    robust = max(2.0 * float(np.quantile(vals, 0.75)), float(np.quantile(rels, 0.9)) if rels.size else 0.0)
    return max(floor, min(float(vals.max()), robust))


def whisker_bar(rel: float, low: float, high: float, scale: float, width: int = BAR_W) -> str:
    """``   ├──■──┤ `` around a zero mark ``│`` in the middle: the interval ``[low, high]``
    (whiskers), the estimate ``rel`` (■), all on ``±scale``. Bounds beyond the scale end in
    ``◀``/``▶``; NaN bounds draw only the estimate."""
    half = max(1, width // 2)
    width = 2 * half + 1
    scale = scale if finite(scale) and scale > 0 else 0.05
    cells = [" "] * width
    cells[half] = "│"

    def col(x: float) -> int:
        return max(0, min(width - 1, half + int(round(x / scale * half))))

    if finite(low) and finite(high):
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
    if finite(rel):
        cells[col(rel)] = "■"
    return "".join(cells)


def pct(x: float) -> str:
    return "-" if not finite(x) else f"{x * 100:+.1f}%"


def unique_labels(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        k = seen.get(lab, 0)
        seen[lab] = k + 1
        out.append(lab if k == 0 else f"{lab}~{k + 1}")
    return out
