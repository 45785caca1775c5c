"""Render-side indexes over a `Timeline`: one sorted interval set per drawn row.

The Gantt draws each screen row with a handful of ``np.searchsorted`` calls over that
row's `IntervalIndex`, so a redraw costs O(width * log n) whatever the zoom and however
many spans fall into one cell (1 M spans redraw as fast as 1 k). Building the index is
O(n log n) and happens off the UI thread (in the loader worker).

Times inside the index are int64 nanoseconds *relative to an origin* (the trace start):
epoch nanoseconds (~1.7e18) do not fit float64 exactly, relative ones do for 100+ days.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gputrace.timeline.model import Timeline
from gputrace.tui.activity_rows import row_keys
from gputrace.tui.layout import pack_levels


@dataclass
class Sample:
    """What one row shows at one view, per cell (``W`` cells, ``2W`` half-cells).

    ``sub``: interval covering each half-cell centre (-1: none). ``count``: intervals
    overlapping each cell. ``cover``: covered fraction of each cell (0..1).
    ``near``: the last interval starting before each cell's right edge (-1: none).
    """

    sub: np.ndarray
    count: np.ndarray
    cover: np.ndarray
    near: np.ndarray


@dataclass
class IntervalIndex:
    """Intervals sorted by start, plus the prefix arrays that make sampling O(log n).

    ``key`` is the colour key (a phase id, or a special key for gaps); ``row`` the
    Timeline row (-1 for intervals that are not spans, such as idle gaps).
    """

    start: np.ndarray  # int64, sorted ascending (relative ns)
    end: np.ndarray  # int64
    key: np.ndarray  # int32 colour key
    row: np.ndarray  # int32 Timeline row
    labels: Sequence[str] | None = None  # a list, or a lazy sequence (overlays.IdleLabels)
    end_sorted: np.ndarray = field(init=False, repr=False)
    cum: np.ndarray = field(init=False, repr=False)  # cum[k] = sum of durations of intervals < k
    _end_max: np.ndarray | None = field(init=False, repr=False, default=None)  # running max of end (lazy)

    def __post_init__(self) -> None:
        if len(self.start) > 1 and np.any(self.start[1:] < self.start[:-1]):
            order = np.argsort(self.start, kind="stable")
            self.start, self.end = self.start[order], self.end[order]
            self.key, self.row = self.key[order], self.row[order]
            if self.labels is not None:
                self.labels = [self.labels[i] for i in order]
        self.end_sorted = np.sort(self.end)
        dur = np.maximum(self.end - self.start, 0)
        self.cum = np.zeros(len(self.start) + 1, dtype=np.int64)
        np.cumsum(dur, out=self.cum[1:])

    @classmethod
    def of(cls, start, end, key, row=None, labels=None) -> IntervalIndex:
        start = np.asarray(start, dtype=np.int64)
        n = len(start)
        return cls(
            start=start,
            end=np.asarray(end, dtype=np.int64),
            key=np.asarray(key, dtype=np.int32) if np.ndim(key) else np.full(n, key, np.int32),
            row=np.full(n, -1, np.int32) if row is None else np.asarray(row, dtype=np.int32),
            labels=labels,
        )

    def __len__(self) -> int:
        return len(self.start)

    @property
    def end_max(self) -> np.ndarray:
        """Running maximum of ``end`` (built on first use: only hit tests need it)."""
        if self._end_max is None:
            self._end_max = np.maximum.accumulate(self.end) if len(self.end) else self.end
        return self._end_max

    def sample(self, t0: float, ns_per_cell: float, width: int) -> Sample:
        """Sample the row for a window starting at ``t0`` (relative ns), ``width`` cells."""
        width = max(0, int(width))
        h = ns_per_cell / 2.0
        centres = t0 + (np.arange(2 * width, dtype=np.float64) + 0.5) * h
        edges = t0 + np.arange(width + 1, dtype=np.float64) * ns_per_cell
        if len(self.start) == 0:
            z = np.zeros(width, np.int64)
            return Sample(np.full(2 * width, -1, np.int64), z, z.astype(np.float64), np.full(width, -1, np.int64))
        s, e = self.start, self.end
        # Query with int64 (floor/ceil chosen so the integer comparisons equal the real
        # ones): searching an int64 array with float keys would copy-cast the whole array.
        c_fl = np.floor(centres).astype(np.int64)
        i = np.searchsorted(s, c_fl, side="right") - 1  # last start <= centre
        ic = np.maximum(i, 0)
        sub = np.where((i >= 0) & (e[ic] > c_fl), i, -1)  # e > centre  <=>  e > floor(centre)
        e_fl = np.floor(edges).astype(np.int64)
        n_start_before = np.searchsorted(s, np.ceil(edges[1:]).astype(np.int64), side="left")  # s < edge
        n_end_before = np.searchsorted(self.end_sorted, e_fl[:-1], side="right")  # e <= edge
        count = n_start_before - n_end_before
        k = np.searchsorted(s, e_fl, side="right")  # starts <= edge
        km = np.maximum(k - 1, 0)
        partial = np.clip(np.minimum(edges, e[km]) - s[km], 0, None)
        covered = np.where(k > 0, self.cum[km] + partial, 0.0)
        cover = np.clip(np.diff(covered) / ns_per_cell, 0.0, 1.0)
        near = n_start_before - 1
        return Sample(sub=sub, count=count, cover=cover, near=near)

    def at(self, t: float) -> int:
        """Index of an interval covering time ``t`` (the latest-starting one), or -1."""
        if len(self.start) == 0:
            return -1
        i = int(np.searchsorted(self.start, int(np.floor(t)), side="right")) - 1
        while i >= 0 and self.end_max[i] > t:
            if self.end[i] > t:
                return i
            i -= 1
        return -1

    def nearest(self, t: float, max_dist: float) -> int:
        """Interval covering ``t``, else the closest one within ``max_dist`` ns, else -1."""
        hit = self.at(t)
        if hit >= 0 or len(self.start) == 0:
            return hit
        best, best_d = -1, max_dist
        i = int(np.searchsorted(self.start, int(np.floor(t)), side="right"))
        for j in (i - 1, i):
            if 0 <= j < len(self.start):
                d = max(self.start[j] - t, t - self.end[j], 0)
                if d <= best_d:
                    best, best_d = j, d
        return best


@dataclass
class Level:
    """One drawn row of a lane: spans of one depth (and one packing level within it)."""

    depth: int
    sublevel: int
    index: IntervalIndex


@dataclass
class LaneIndex:
    levels: list[Level]
    gpu: IntervalIndex | None  # device-time intervals of this lane's spans, if any


@dataclass
class TimelineIndex:
    """Per-lane level indexes for a Timeline (optionally restricted by a row mask).

    Built on a worker thread; read-only afterwards. ``origin`` is the epoch ns that
    relative times count from.
    """

    timeline: Timeline
    origin: int
    lanes: list[LaneIndex]
    t_min: int  # relative extent of the shown data
    t_max: int
    row_level: np.ndarray  # int32 per Timeline row: index into ``level_ids``, -1 if not shown
    level_ids: list[tuple[int, int]]  # (lane, level index in LaneIndex.levels)

    @classmethod
    def build(cls, tl: Timeline, origin: int | None = None, mask: np.ndarray | None = None) -> TimelineIndex:
        c = tl.cols
        if origin is None:
            origin = tl.t0
        n = tl.n
        lanes: list[LaneIndex] = []
        row_level = np.full(n, -1, np.int32)
        level_ids: list[tuple[int, int]] = []
        t_min, t_max = None, None
        keys = row_keys(tl)  # phase ids; pinned/pageable copies get their own keys
        for k in range(len(tl.lanes)):
            sl = tl.lane_slice(k)
            rows = np.arange(sl.start, sl.stop, dtype=np.int64)
            if mask is not None:
                rows = rows[mask[sl]]
            levels: list[Level] = []
            if len(rows):
                depth = c["depth"][rows]
                order = np.argsort(depth, kind="stable")  # keeps start order inside a depth
                rows_by_depth = rows[order]
                d_sorted = depth[order]
                cuts = np.flatnonzero(np.diff(d_sorted)) + 1
                for chunk in np.split(rows_by_depth, cuts):
                    d = int(c["depth"][chunk[0]])
                    s = c["start"][chunk] - origin
                    e = c["end"][chunk] - origin
                    lv = pack_levels(s, e)
                    for sub in range(int(lv.max()) + 1 if len(lv) else 1):
                        m = lv == sub
                        row_level[chunk[m]] = len(level_ids)
                        level_ids.append((k, len(levels)))
                        levels.append(Level(d, sub, IntervalIndex.of(s[m], e[m], keys[chunk[m]], chunk[m])))
                lo, hi = int(c["start"][rows].min()) - origin, int(c["end"][rows].max()) - origin
            gpu = None
            if len(rows):
                g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
                gm = (g0 >= 0) & (g1 >= g0)
                if gm.any():
                    gpu = IntervalIndex.of(g0[gm] - origin, g1[gm] - origin, keys[rows[gm]], rows[gm])
                    lo, hi = min(lo, int(g0[gm].min()) - origin), max(hi, int(g1[gm].max()) - origin)
                t_min = lo if t_min is None else min(t_min, lo)
                t_max = hi if t_max is None else max(t_max, hi)
            lanes.append(LaneIndex(levels, gpu))
        return cls(tl, int(origin), lanes, t_min or 0, t_max or 0, row_level, level_ids)


def same_span(old: TimelineIndex | None, new: TimelineIndex, row: int) -> int:
    """Row in ``new`` of ``old``'s span at ``row`` (same span id and start), or -1 if it is not there: a
    selection survives the renumbering of rows when spans arrive."""
    if old is None:
        return -1
    if old.timeline is new.timeline:
        return row
    a, b = old.timeline, new.timeline
    if row >= a.n:
        return -1
    hits = np.flatnonzero((b.span_id == a.span_id[row]) & (b.start == a.start[row]))
    return int(hits[0]) if hits.size else -1
