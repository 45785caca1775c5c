"""Per-phase (and per-device) duration statistics over a Timeline.

Pure numpy: one lexsort over (group, duration) and segment reductions, so a million spans
take tens of milliseconds. Safe to call from any thread (reads the Timeline only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np

from gputrace.analysis._common import (
    group_ids,
    offsets_from_counts,
    quantiles_sorted,
    run_extents,
    run_index,
    union_by_group,
)
from gputrace.timeline.model import Timeline


@dataclass(frozen=True)
class PhaseStat:
    """Statistics of one phase name (on one device, when split by device).

    Fields (durations in nanoseconds, host clock unless prefixed ``gpu_``):

    * ``phase``: phase name; ``device``: GPU index, -1 for host-only spans, ``None`` when
      the statistics cover all devices together.
    * ``count``, ``total_ns``, ``mean_ns``, ``median_ns``, ``p95_ns``, ``min_ns``, ``max_ns``:
      over the host durations (end - start) of the spans.
    * ``share``: ``total_ns`` / wall time (see `wall_ns`); nested phases overlap their
      parents, so shares do not add up to 1.
    * ``gpu_count``, ``gpu_total_ns``, ``gpu_median_ns``, ``gpu_p95_ns``: the same over
      device durations (CUDA events) for the spans that have them; 0 / NaN when none.
    """

    phase: str
    device: int | None
    count: int
    total_ns: int
    mean_ns: float
    median_ns: float
    p95_ns: float
    min_ns: int
    max_ns: int
    share: float
    gpu_count: int
    gpu_total_ns: int
    gpu_median_ns: float
    gpu_p95_ns: float

    def to_dict(self) -> dict:
        return asdict(self)


def wall_ns(tl: Timeline) -> int:
    """The wall time of the runs: the union of each run's extent (first start to last end, host or device
    clock) on the one epoch clock.

    Several runs merged into one Timeline do not count the idle time between them; runs that overlap in time
    (the ranks of one job read from separate files) count the time they share once.
    """
    if tl.n == 0:
        return 0
    run, labels = run_index(tl)
    mins, maxs = run_extents(tl, run, len(labels))
    ok = maxs >= mins
    if not ok.any():
        return 0
    _, us, ue = union_by_group(np.zeros(int(ok.sum()), np.int64), mins[ok], maxs[ok])
    return int((ue - us).sum())


def _group_stats(gid: np.ndarray, dur: np.ndarray, ngroups: int):
    """Per-group count, total, min, max, median, p95 of int64 durations."""
    if len(dur) and ngroups * (int(dur.max()) + 1) < 2**62 and int(dur.min()) >= 0:
        order = np.argsort(gid * (int(dur.max()) + 1) + dur)  # one int64 sort beats lexsort 2x
    else:
        order = np.lexsort((dur, gid))
    d = dur[order]
    counts = np.bincount(gid, minlength=ngroups)
    offsets = offsets_from_counts(counts)
    nz = counts > 0
    total = np.zeros(ngroups, np.int64)
    med = np.full(ngroups, np.nan)
    p95 = np.full(ngroups, np.nan)
    mn = np.zeros(ngroups, np.int64)
    mx = np.zeros(ngroups, np.int64)
    if nz.any():
        starts = offsets[:-1][nz]
        total[nz] = np.add.reduceat(d, starts) if len(d) else 0
        # reduceat over non-empty groups only: their segments are contiguous in order.
        sub = np.concatenate([starts, [offsets[-1]]])
        med[nz] = quantiles_sorted(d, sub, 0.5)
        p95[nz] = quantiles_sorted(d, sub, 0.95)
        mn[nz] = d[starts]
        mx[nz] = d[sub[1:] - 1]
    return counts, total, med, p95, mn, mx


@dataclass(frozen=True)
class PhaseTable:
    """`phase_stats` as columns: one entry per (phase, device) group, sorted by ``total_ns`` descending
    (ties: phase name, then device), the fields of `PhaseStat` as numpy arrays. A read-only sequence of
    `PhaseStat` (``table[i]``, ``len``, iteration build rows on demand), so a caller that shows the top
    rows never builds a million row objects; `to_dicts` gives the JSON rows column-wise.

    ``phase``: phase ids into ``names`` (the Timeline's interned phase names); ``device``: -1 for host-only
    spans (and every entry when not ``by_device``)."""

    names: list[str]
    by_device: bool
    phase: np.ndarray
    device: np.ndarray
    count: np.ndarray
    total_ns: np.ndarray
    median_ns: np.ndarray
    p95_ns: np.ndarray
    min_ns: np.ndarray
    max_ns: np.ndarray
    share: np.ndarray
    gpu_count: np.ndarray
    gpu_total_ns: np.ndarray
    gpu_median_ns: np.ndarray
    gpu_p95_ns: np.ndarray

    def __len__(self) -> int:
        return int(len(self.phase))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        k = range(len(self))[i]  # (IndexError, negative indices)
        return self._row(k)

    def __iter__(self) -> Iterator[PhaseStat]:
        return (self._row(k) for k in range(len(self)))

    def _row(self, k: int) -> PhaseStat:
        count, total = int(self.count[k]), int(self.total_ns[k])
        return PhaseStat(phase=self.names[int(self.phase[k])], device=int(self.device[k]) if self.by_device else None,
                         count=count, total_ns=total, mean_ns=total / max(count, 1), median_ns=float(self.median_ns[k]),
                         p95_ns=float(self.p95_ns[k]), min_ns=int(self.min_ns[k]), max_ns=int(self.max_ns[k]),
                         share=float(self.share[k]), gpu_count=int(self.gpu_count[k]),
                         gpu_total_ns=int(self.gpu_total_ns[k]), gpu_median_ns=float(self.gpu_median_ns[k]),
                         gpu_p95_ns=float(self.gpu_p95_ns[k]))

    def to_dicts(self, limit: int | None = None) -> list[dict]:
        """The first ``limit`` rows (all when None) as `PhaseStat.to_dict` gives them, built column-wise."""
        n = len(self) if limit is None else min(limit, len(self))
        sl = slice(0, n)
        count, total = self.count[sl], self.total_ns[sl]
        cols = {
            "phase": [self.names[i] for i in self.phase[sl].tolist()],
            "device": self.device[sl].tolist() if self.by_device else [None] * n,
            "count": count.tolist(), "total_ns": total.tolist(),
            "mean_ns": (total / np.maximum(count, 1)).tolist(),
            "median_ns": self.median_ns[sl].tolist(), "p95_ns": self.p95_ns[sl].tolist(),
            "min_ns": self.min_ns[sl].tolist(), "max_ns": self.max_ns[sl].tolist(), "share": self.share[sl].tolist(),
            "gpu_count": self.gpu_count[sl].tolist(), "gpu_total_ns": self.gpu_total_ns[sl].tolist(),
            "gpu_median_ns": self.gpu_median_ns[sl].tolist(), "gpu_p95_ns": self.gpu_p95_ns[sl].tolist(),
        }
        keys = list(cols)
        return [dict(zip(keys, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]


def phase_table(tl: Timeline, by_device: bool = True, rows: np.ndarray | None = None) -> PhaseTable:
    """Statistics per phase name, split by device when ``by_device``, as a `PhaseTable` (module
    docstring: segment reductions over the interned phase ids; one sort, no per-group Python work);
    over the rows where the boolean mask ``rows`` (length ``tl.n``) is true when given, else every row."""
    c = tl.cols
    gd = tl.gpu_duration()
    if rows is not None and not rows.all():
        sel = np.flatnonzero(rows)
        c = {k: c[k][sel] for k in ("phase", "device", "start", "end")}
        gd = gd[sel]
    dev = np.where(c["device"] < 0, -1, c["device"]).astype(np.int64)
    if len(c["phase"]) == 0:
        z = np.zeros(0, np.int64)
        f = np.zeros(0)
        return PhaseTable(list(tl.phases), by_device, z, z, z, z, f, f, z, z, f, z, z, f, f)
    keys = (c["phase"], dev) if by_device else (c["phase"],)
    gid, first = group_ids(*keys)
    ng = len(first)
    dur = (c["end"] - c["start"]).astype(np.int64)
    counts, total, med, p95, mn, mx = _group_stats(gid, dur, ng)
    has = gd >= 0
    g_counts, g_total, g_med, g_p95, _, _ = _group_stats(gid[has], gd[has], ng)
    wall = wall_ns(tl)
    phase = c["phase"][first].astype(np.int64)
    g_dev = dev[first] if by_device else np.full(ng, -1, np.int64)
    # Order: total descending, then phase name, then device (None/-1 first): name ranks of the interned ids.
    name_rank = np.empty(len(tl.phases), np.int64)
    name_rank[np.argsort(np.asarray(tl.phases, dtype=object), kind="stable")] = np.arange(len(tl.phases))
    o = np.lexsort((g_dev, name_rank[phase], -total))
    share = total / wall if wall > 0 else np.full(ng, np.nan)
    return PhaseTable(list(tl.phases), by_device, phase[o], g_dev[o], counts[o], total[o], med[o], p95[o], mn[o], mx[o],
                      np.asarray(share, np.float64)[o], g_counts[o], g_total[o], g_med[o], g_p95[o])


def phase_stats(tl: Timeline, by_device: bool = True) -> list[PhaseStat]:
    """Statistics per phase name, split by device when ``by_device`` (else ``device=None``).

    Rows come sorted by ``total_ns`` descending (ties: phase name, then device). An empty Timeline
    gives an empty list. `phase_table` is the same without building every row."""
    return list(phase_table(tl, by_device))
