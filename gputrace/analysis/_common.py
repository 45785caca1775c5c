"""Shared vectorised helpers for the analysis functions (interval unions, run grouping).

Everything here is pure numpy over `Timeline` columns; nothing allocates per span in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gputrace.analysis.activity_index import SYNC, activity_index, attr_scan, profiler_rows
from gputrace.timeline.model import KIND_CODES, Timeline

# Run grouping lives with the readers (the entrance splits files into runs); re-exported here.
from gputrace.timeline.runs import PROCESS_KEYS, RUN_KEYS, run_index  # noqa: F401

GPU_KIND = KIND_CODES["gpu"]
SYNC_KIND = KIND_CODES["sync"]
PIN_KIND = KIND_CODES["pin"]
#: The most ``(start, end)`` pairs a stall, an unattributed path or a launch-gap row carries into the
#: ``report --json`` document; more are coarsened (see :func:`merged_pairs`).
MAX_INTERVALS = 256


def merged_pairs(s, e, cap: int = MAX_INTERVALS) -> list[list[int]]:
    """The union of intervals [s, e) as sorted, disjoint ``[start, end]`` pairs (plain ints, JSON-able), at
    most ``cap`` of them: beyond that the shortest holes between pairs are closed, so the pairs cover the
    union and a little more (an upper bound of the wall time, never less)."""
    return merged_pairs_by_group(np.zeros(len(s), np.int64), s, e, 1, cap)[0]


def merged_pairs_by_group(g, s, e, ngroups: int, cap: int = MAX_INTERVALS) -> list[list[list[int]]]:
    """:func:`merged_pairs` of each group ``0 <= g < ngroups`` at once (one union pass); a list per group."""
    s = np.asarray(s, np.int64)
    e = np.asarray(e, np.int64)
    out: list[list[list[int]]] = [[] for _ in range(ngroups)]
    if len(s) == 0:
        return out
    ug, us, ue = union_by_group(np.asarray(g, np.int64), s, e)
    keep = ue > us
    ug, us, ue = ug[keep], us[keep], ue[keep]
    bounds = np.flatnonzero(np.r_[True, ug[1:] != ug[:-1], True]) if len(ug) else np.zeros(1, np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        out[int(ug[a])] = _coarsened(us[a:b], ue[a:b], cap)
    return out


def _coarsened(us: np.ndarray, ue: np.ndarray, cap: int) -> list[list[int]]:
    """Disjoint sorted pairs, at most ``cap``: beyond that the shortest holes between them are closed."""
    if len(us) > cap > 0:
        holes = us[1:] - ue[:-1]
        open_ = np.zeros(len(holes), bool)
        open_[np.argsort(-holes, kind="stable")[: cap - 1]] = True  # keep the cap - 1 longest holes
        starts = np.r_[0, np.flatnonzero(open_) + 1]
        ends = np.r_[np.flatnonzero(open_), len(us) - 1]
        us, ue = us[starts], ue[ends]
    return [[a, b] for a, b in zip(us.tolist(), ue.tolist(), strict=True)]


def row_hosts(tl: Timeline) -> tuple[np.ndarray, list[str]]:
    """Row -> host number (from its lane), and the host names."""
    names = sorted({ln.host for ln in tl.lanes})
    hix = {h: i for i, h in enumerate(names)}
    lane_host = np.array([hix[ln.host] for ln in tl.lanes] or [0], np.int64)
    return (lane_host[tl.cols["lane"]] if tl.n else np.zeros(0, np.int64)), names


def run_extents(tl: Timeline, run: np.ndarray, nruns: int) -> tuple[np.ndarray, np.ndarray]:
    """First start and last end of each run over both clocks (host times, and device times where
    recorded). ``run``: row -> run number (from :func:`run_index`). Returns (min, max) per run; a run
    with no rows keeps the int64 max / min sentinels."""
    c = tl.cols
    lo = np.where(c["gpu_start"] >= 0, np.minimum(c["start"], c["gpu_start"]), c["start"])
    hi = np.maximum(c["end"], c["gpu_end"])
    rmin = np.full(nruns, np.iinfo(np.int64).max, np.int64)
    rmax = np.full(nruns, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(rmin, run, lo)
    np.maximum.at(rmax, run, hi)
    return rmin, rmax


@dataclass(frozen=True)
class HostRunExtents:
    """:func:`run_extents` per (run, host) pair that has rows: ``keys`` (``run * nhosts + host``, sorted), ``lo``
    and ``hi``. Only the pairs present are kept (a table of every run x every host was quadratic: 10k ranks
    on 1,250 hosts made 12.5M entries)."""

    nhosts: int
    keys: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def of(self, run, host) -> tuple[np.ndarray, np.ndarray]:
        """(first start, last end) of each (run, host) given (arrays or ints; each pair must have rows)."""
        i = np.searchsorted(self.keys, np.asarray(run, np.int64) * self.nhosts + np.asarray(host, np.int64))
        return self.lo[i], self.hi[i]


def host_run_extents(tl: Timeline, run: np.ndarray, host: np.ndarray, nhosts: int) -> HostRunExtents:
    """:func:`run_extents` per (run, host). A device's leading and trailing idle and its busy window end where
    its own host's recording does: per-rank profiler traces read together cover different windows, and a rank is
    not idle where it was not recorded."""
    nh = max(nhosts, 1)
    keys, inv = np.unique(run.astype(np.int64) * nh + host, return_inverse=True)
    lo, hi = run_extents(tl, inv.reshape(-1), len(keys))
    return HostRunExtents(nh, keys, lo, hi)


def device_activity(tl: Timeline, kernel_truth: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows that are device activity, with their activity interval.

    A row is device activity when it has device times (``gpu_start``/``gpu_end`` >= 0) or
    has kind ``gpu`` and a device index >= 0; its interval is the device time where
    recorded, else its host time. With ``kernel_truth`` (the default), on every (host, device)
    that has GPU activity spans (kernels, copies, memsets; see ``gputrace.analysis.gpu_activity``)
    only those count: a phase's CUDA-event bracket also covers the time its stream sat empty.
    Returns (rows, start, end).
    """
    c = tl.cols
    has_gpu = (c["gpu_start"] >= 0) & (c["gpu_end"] >= c["gpu_start"])
    is_dev = (c["device"] >= 0) & (has_gpu | (c["kind"] == GPU_KIND))
    if kernel_truth and tl.n:
        idx = activity_index(tl)
        work = idx.rows[idx.what != SYNC]
        if len(work):
            host, _ = row_hosts(tl)
            stride = int(c["device"].max()) + 2
            truth = np.unique(host[work] * stride + c["device"][work].astype(np.int64) + 1)
            key = host * stride + c["device"].astype(np.int64) + 1
            is_act = np.zeros(tl.n, bool)
            is_act[work] = True
            is_dev &= is_act | ~np.isin(key, truth)
    rows = np.flatnonzero(is_dev)
    s = np.where(has_gpu[rows], c["gpu_start"][rows], c["start"][rows])
    e = np.where(has_gpu[rows], c["gpu_end"][rows], c["end"][rows])
    return rows, s, e


def host_rows(tl: Timeline) -> np.ndarray:
    """Rows that are host-side work: no device time and kind other than ``gpu``; profiler bookkeeping
    rows (``gputrace.analysis.activity_index.profiler_rows``) and the spans of paused CUDA collection
    (``gputrace.analysis.unobserved``) are not work."""
    c = tl.cols
    m = (c["gpu_start"] < 0) & (c["kind"] != GPU_KIND)
    for rows in (profiler_rows(tl), attr_scan(tl).paused if tl.n else ()):
        if len(rows):
            m[rows] = False
    return np.flatnonzero(m)


def climb(ids: np.ndarray, anc: np.ndarray, parent: np.ndarray, visit, levels: int = 64) -> None:
    """Walk up the ancestors of many items at once, one numpy pass per level, for at most ``levels``
    levels. ``anc[i]`` is item ``ids[i]``'s first ancestor row (-1: none); ``parent`` the parent column.
    At each level ``visit(ids, anc)`` gets the items still climbing and their ancestor at that level
    and returns a boolean mask of the items that climb on (None: all of them). Items whose ancestor is
    -1 stop. Raises what ``visit`` raises."""
    for _ in range(levels):
        ok = anc >= 0
        ids, anc = ids[ok], anc[ok]
        if len(ids) == 0:
            return
        keep = visit(ids, anc)
        if keep is not None:
            ids, anc = ids[keep], anc[keep]
        anc = parent[anc]


def group_ids(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids for the tuples of several equal-length integer key arrays.

    Returns (ids, first_row_of_each_id). Ids follow the lexicographic order of the keys.
    Each key is densified with a 1-D ``np.unique``, then the codes are combined in mixed
    radix into one int64 (much faster than ``np.unique(axis=0)`` on a million rows).
    """
    if not keys or len(keys[0]) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    combined = np.zeros(len(keys[0]), np.int64)
    for k in keys:
        k = np.asarray(k)
        lo = int(k.min())
        span = int(k.max()) - lo + 1
        if span <= 4 * len(k) + 1024:
            code, radix = k.astype(np.int64) - lo, span  # already small: skip the sort
        else:
            u, code = np.unique(k, return_inverse=True)
            code, radix = code.reshape(-1).astype(np.int64), len(u)
        combined = combined * radix + code
    u, first, inv = np.unique(combined, return_index=True, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), first.astype(np.int64)


def sum_count_max(key: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct value of ``key``: the sum, count and maximum of ``d`` (equal-length arrays, ``d`` integer).

    Returns (keys, inverse, total, count, max): ``keys`` the distinct values ascending (``np.unique``), ``inverse``
    each element's index into them (1-D), ``total`` float64 sums, ``count`` and ``max`` (int64) per key."""
    uk, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    tot = np.bincount(inv, weights=d.astype(np.float64), minlength=len(uk))
    cnt = np.bincount(inv, minlength=len(uk))
    mx = np.zeros(len(uk), np.int64)
    np.maximum.at(mx, inv, d)
    return uk, inv, tot, cnt, mx


def offsets_from_counts(counts: np.ndarray) -> np.ndarray:
    """CSR offsets for per-group counts: group k's items are ``[offsets[k], offsets[k+1])``."""
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def segment_bounds(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the first and the last element of each run of equal values in ``g`` (sorted by group,
    as :func:`union_by_group` returns it)."""
    first = np.ones(len(g), bool)
    first[1:] = g[1:] != g[:-1]
    last = np.ones(len(g), bool)
    last[:-1] = g[1:] != g[:-1]
    return first, last


def union_by_group(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals [s, e) within each group ``g``.

    Returns (group, start, end) of the disjoint merged segments, sorted by (group, start).
    Touching intervals (one ends where the next starts) merge. Vectorised: one lexsort and
    one running maximum; groups are kept apart by offsetting each group's times by a
    stride larger than the whole time range, so the running maximum never crosses them.
    """
    n = len(s)
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    g = np.asarray(g, np.int64)
    s = np.asarray(s, np.int64)
    e = np.maximum(np.asarray(e, np.int64), s)
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    rank = np.zeros(n, np.int64)
    if n > 1:
        np.cumsum(g[1:] != g[:-1], out=rank[1:])
    base = int(s.min())
    stride = int(e.max()) - base + 1
    if (int(rank[-1]) + 1) * stride < 2**62:
        first, ends = _merge_sorted(rank, s - base, e - base, stride)
        return g[first], s[first], ends + base
    # Times too far apart for the offset trick (a span of hours times millions of groups, or a trace
    # spanning more than 2**62 ns): merge the times' ranks instead, which only compares them. Ranks run
    # below 2n, so (groups x stride) stays below 2**62 for any n under 2**30.
    vals, inv = np.unique(np.concatenate((s, e)), return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    first, ends = _merge_sorted(rank, inv[:n], inv[n:], len(vals))
    return g[first], s[first], vals[ends]


def _merge_sorted(rank: np.ndarray, s: np.ndarray, e: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """The merge of :func:`union_by_group` over intervals sorted by (group rank, start), with times in
    ``[0, stride)``: the index of each merged segment's first interval, and the segment's end."""
    n = len(s)
    off = rank * stride
    ss, ee = s + off, e + off
    cm = np.maximum.accumulate(ee)
    new = np.ones(n, bool)
    new[1:] = ss[1:] > cm[:-1]
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = n - 1
    return first, cm[last] - off[last]


def gaps_between(g: np.ndarray, us: np.ndarray, ue: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaps between consecutive merged segments of the same group (output of union_by_group)."""
    if len(us) < 2:
        z = np.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    same = g[1:] == g[:-1]
    gs, ge = ue[:-1][same], us[1:][same]
    keep = ge > gs
    return g[:-1][same][keep], gs[keep], ge[keep]


def quantiles_sorted(vals: np.ndarray, offsets: np.ndarray, q: float) -> np.ndarray:
    """Per-group quantile (numpy's default linear interpolation) of values already sorted
    within each group; group k is ``vals[offsets[k]:offsets[k+1]]`` (non-empty)."""
    n = np.diff(offsets)
    pos = (n - 1) * q
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    a = vals[offsets[:-1] + lo].astype(np.float64)
    hi = np.minimum(lo + 1, n - 1)
    b = vals[offsets[:-1] + hi].astype(np.float64)
    return a + (b - a) * frac


def fmt_ns(ns: float) -> str:
    """Human duration: '812 ns', '4.20 µs', '12.5 ms', '2.10 s', '3 m 05 s'."""
    ns = float(ns)
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3g} µs"
    if a < 1e9:
        return f"{ns / 1e6:.3g} ms"
    if a < 600e9:
        return f"{ns / 1e9:.3g} s"
    m, s = divmod(round(ns / 1e8) / 10, 60)  # (rounded first: 10799.99 s is '180 m 00.0 s', not '179 m 60.0 s')
    return f"{int(m)} m {s:04.1f} s"


def uncovered(
    tl: Timeline,
    parent_mask: np.ndarray,
    child_rows: np.ndarray,
    child_start: np.ndarray | None = None,
    child_end: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parts of each parent's host interval not covered by its children.

    ``parent_mask``: bool per row, the rows to examine; ``child_rows``: candidate children
    (only those whose ``parent`` is a masked row count). Children are clipped to their
    parent. Returns (row, start, end) of the uncovered pieces, sorted by (row, start); a
    masked row with no child yields its whole interval, zero-length pieces are dropped.
    ``child_start``/``child_end`` (per row, optional) replace the children's host times.
    """
    c = tl.cols
    ps, pe = c["start"], c["end"]
    qs = ps if child_start is None else child_start
    qe = pe if child_end is None else child_end
    child_rows = np.asarray(child_rows, np.int64)
    par = c["parent"][child_rows]
    ok = par >= 0
    ok[ok] = parent_mask[par[ok]]
    ch, p = child_rows[ok], par[ok]
    cs = np.maximum(qs[ch], ps[p])
    ce = np.minimum(qe[ch], pe[p])
    v = ce > cs
    ug, us, ue = union_by_group(p[v], cs[v], ce[v])
    bg, bs, be = gaps_between(ug, us, ue)
    first, last = segment_bounds(ug)
    lg, ls, le = ug[first], ps[ug[first]], us[first]
    tg, ts, te = ug[last], ue[last], pe[ug[last]]
    with_kids = np.zeros(len(ps), bool)
    with_kids[ug] = True
    alone = np.flatnonzero(parent_mask & ~with_kids)
    rg = np.concatenate([bg, lg, tg, alone])
    rs = np.concatenate([bs, ls, ts, ps[alone]])
    re = np.concatenate([be, le, te, pe[alone]])
    keep = re > rs
    rg, rs, re = rg[keep], rs[keep], re[keep]
    o = np.lexsort((rs, rg))
    return rg[o], rs[o], re[o]


def pair_overlaps(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (i, j) with interval a[i] overlapping b[j] (open overlap: a_s < b_e and b_s < a_e).

    Vectorised: b sorted by start, a running maximum of b's ends bounds the first candidate,
    then candidates are expanded with ``np.repeat`` and filtered. Cost is the number of
    candidate pairs, small when each family is mostly disjoint (lanes, devices).
    """
    if len(a_s) == 0 or len(b_s) == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy()
    ob = np.argsort(b_s, kind="stable")
    bs_sorted = b_s[ob]
    pm = np.maximum.accumulate(b_e[ob])
    lo = np.searchsorted(pm, a_s, side="right")
    hi = np.searchsorted(bs_sorted, a_e, side="left")
    cnt = np.maximum(hi - lo, 0)
    tot = int(cnt.sum())
    if tot == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy()
    ai = np.repeat(np.arange(len(a_s), dtype=np.int64), cnt)
    csum = np.cumsum(cnt)
    pos = np.arange(tot, dtype=np.int64) + np.repeat(lo - csum + cnt, cnt)
    bj = ob[pos]
    ok = (b_e[bj] > a_s[ai]) & (b_s[bj] < a_e[ai])
    return ai[ok], bj[ok]
