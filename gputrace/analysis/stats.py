"""Per-phase (and per-device) duration statistics over a Timeline.

Pure numpy: one lexsort over (group, duration) and segment reductions, so a million spans
take tens of milliseconds. Safe to call from any thread (reads the Timeline only).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gputrace.analysis._common import group_ids, offsets_from_counts, quantiles_sorted, run_extents, run_index
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
    """Sum over runs of each run's extent (first start to last end, host or device clock).

    Several runs merged into one Timeline do not count the idle time between them.
    """
    if tl.n == 0:
        return 0
    run, labels = run_index(tl)
    mins, maxs = run_extents(tl, run, len(labels))
    return int((maxs - mins).sum())


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


def phase_stats(tl: Timeline, by_device: bool = True, rows: np.ndarray | None = None) -> list[PhaseStat]:
    """Statistics per phase name, split by device when ``by_device`` (else ``device=None``); over the
    rows ``rows`` (a boolean mask of length ``tl.n``) when given, else every row.

    Rows come sorted by ``total_ns`` descending. An empty Timeline (or selection) gives an empty list.
    """
    sel = np.arange(tl.n) if rows is None else np.flatnonzero(rows)
    if len(sel) == 0:
        return []
    c = {k: c_[sel] for k, c_ in tl.cols.items() if k in ("device", "phase", "start", "end")}
    dev = c["device"].astype(np.int64)
    dev = np.where(dev < 0, -1, dev)
    keys = (c["phase"], dev) if by_device else (c["phase"],)
    gid, first = group_ids(*keys)
    ng = len(first)
    dur = (c["end"] - c["start"]).astype(np.int64)
    counts, total, med, p95, mn, mx = _group_stats(gid, dur, ng)
    gd = tl.gpu_duration()[sel]
    has = gd >= 0
    g_counts, g_total, g_med, g_p95, _, _ = _group_stats(gid[has], gd[has], ng)
    wall = wall_ns(tl)
    out = []
    for k in range(ng):
        r = int(first[k])
        out.append(
            PhaseStat(
                phase=tl.phases[int(c["phase"][r])],
                device=int(dev[r]) if by_device else None,
                count=int(counts[k]),
                total_ns=int(total[k]),
                mean_ns=float(total[k]) / max(int(counts[k]), 1),
                median_ns=float(med[k]),
                p95_ns=float(p95[k]),
                min_ns=int(mn[k]),
                max_ns=int(mx[k]),
                share=float(total[k]) / wall if wall > 0 else float("nan"),
                gpu_count=int(g_counts[k]),
                gpu_total_ns=int(g_total[k]),
                gpu_median_ns=float(g_med[k]),
                gpu_p95_ns=float(g_p95[k]),
            )
        )
    out.sort(key=lambda s: (-s.total_ns, s.phase, -2 if s.device is None else s.device))
    return out
