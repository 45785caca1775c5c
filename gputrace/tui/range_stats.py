"""What ran in a time range, per lane: the numbers behind the Range panel (measuring).

Pure numpy over the Timeline's columns (no Textual): one pass over the spans that overlap
the range, clipped to it. Times are nanoseconds relative to the render index's origin, like
`gputrace.tui.layout.View`. Tested in ``tests/tui/test_range_stats.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gputrace.activity import ANNOTATION_LANE_PREFIX
from gputrace.analysis.lanes import occupies_lane
from gputrace.timeline.model import Timeline


@dataclass
class LaneInRange:
    """One lane's share of the range: ``busy_ns`` is the union of its spans clipped to the
    range (nesting counted once), host waits (``kind=sync``) left out (`occupies_lane`), and 0 on a
    profiler's annotation lane (``annotations:stream N``: bookkeeping beside a GPU stream, not work);
    ``phases`` the phases that ran, largest clipped time first (a parent's time includes its
    children's, as in a flame view)."""

    lane: int
    label: str
    busy_ns: int
    spans: int
    phases: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class RangeSummary:
    t0: float
    t1: float
    lanes: list[LaneInRange]
    idle: list[tuple[str, int]]  # (device label, GPU idle ns inside the range)

    @property
    def duration(self) -> float:
        return self.t1 - self.t0


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by intervals (any order, may overlap or nest)."""
    if len(start) == 0:
        return 0
    o = np.argsort(start, kind="stable")
    s, e = start[o].astype(np.int64), end[o].astype(np.int64)
    prev = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
    return int(np.maximum(0, e - np.maximum(s, prev)).sum())


def range_summary(tl: Timeline, origin: int, t0: float, t1: float, gaps: dict | None = None,
                  top: int = 3) -> RangeSummary:
    """Per-lane busy time and phases in ``[t0, t1]`` (relative ns), lanes with nothing in the
    range left out; ``gaps`` (device key -> IntervalIndex of idle gaps, relative) adds each
    GPU's idle time inside the range."""
    a, b = (t0, t1) if t0 <= t1 else (t1, t0)
    lo, hi = int(np.floor(a)) + origin, int(np.ceil(b)) + origin
    start, end = tl.cols["start"], tl.cols["end"]
    rows = np.flatnonzero((start < hi) & (end > lo))
    cs = np.maximum(start[rows], lo)
    ce = np.minimum(end[rows], hi)
    lanes_of = tl.cols["lane"][rows]
    phase_of = tl.cols["phase"][rows]
    works = occupies_lane(tl, rows)
    out: list[LaneInRange] = []
    for lane in np.unique(lanes_of).tolist():
        m = lanes_of == lane
        ls, le, lp = cs[m], ce[m], phase_of[m]
        per = np.bincount(lp, weights=(le - ls).astype(np.float64), minlength=len(tl.phases))
        order = np.argsort(-per, kind="stable")[:top]
        phases = [(tl.phases[int(p)], int(per[p])) for p in order.tolist() if per[p] > 0]
        ln = tl.lanes[lane]
        label = f"{ln.host}/{ln.device_label}/{ln.name}"
        w = works[m] & (not ln.name.startswith(ANNOTATION_LANE_PREFIX))
        out.append(LaneInRange(lane, label, union_length(ls[w], le[w]), int(m.sum()), phases))
    out.sort(key=lambda x: -x.busy_ns)
    idle = []
    for key, ii in sorted((gaps or {}).items(), key=lambda kv: str(kv[0])):
        s = np.maximum(ii.start.astype(np.float64), a)
        e = np.minimum(ii.end.astype(np.float64), b)
        ns = float(np.maximum(0.0, e - s).sum())
        if ns > 0:
            idle.append((" ".join(str(k) for k in key) if isinstance(key, tuple) else str(key), int(ns)))
    return RangeSummary(a, b, out, idle)
