"""Stalls: every instance of lost time (GPU idle gap, host wait, pinning, unattributed parent
time, GPU launch gap), grouped where instances repeat and ranked by the time lost.

Repeated instances of one kind of loss are one row ("GPU 0 idle 4 ms x 2,000 while
synthesis ran on the host", "sync waited 2.5 ms x 40 in prove"): a stall that costs 2.5 ms
forty times matters as much as one 100 ms stall, and forty rows of it would hide the rest.
Grouping keys (instances in one group share all of them):

* idle: host, device, edge (between / leading / trailing) and the host phase that overlapped
  the gap most (or "no host work", or "not measured" for gaps beyond the measured ones);
* wait: kind (sync / host>device), phase, device, lane and the parent's phase;
* unattributed: phase, device and the parent's phase;
* launch: device and the phase whose GPU activity had the gaps (see `launch_stalls`);
* pin: one row per `PinningReport` (already a total);

and the instance's size, in half-decade buckets (a factor of ~3.2), so a 5 ms gap is not
folded into "19 µs x 34" as its tail.

A `Stall`'s ``lost_ns`` is the sum over its instances; ``start``/``end`` the extent of them
all (what a viewer zooms to); ``row`` the span of the largest instance (-1 when none). An idle
stall also carries ``host`` (the host name) and ``intervals``: its gaps as ``(start, end)`` pairs, sorted
and disjoint (``_common.merged_pairs``: at most ``MAX_INTERVALS``, the shortest holes between them closed
beyond that), so the findings can count each second of wall time once (gputrace/analysis/findings.py).
Categories can overlap in time (a host wait during a GPU idle gap is in both), so the list
is a ranking, not a partition: its rows do not add up to the run. Pure numpy; any thread.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from gputrace.analysis._common import fmt_ns, group_ids, merged_pairs_by_group
from gputrace.analysis.gaps import EDGE_NAMES, IdleGaps
from gputrace.analysis.gpu_activity import LaunchGaps
from gputrace.analysis.unattributed import Unattributed
from gputrace.analysis.waits import SYNC, HostWaits
from gputrace.timeline.model import Timeline

CATEGORIES = ("idle", "wait", "pin", "unattributed", "launch")
NO_HOST_WORK, NOT_MEASURED = -1, -2


@dataclass(frozen=True)
class Stall:
    """One row of the stalls list (see module docstring). ``text`` is plain text built from
    trace names: escape it before it reaches markup."""

    category: str
    text: str
    count: int
    lost_ns: int
    each_ns: int  # median instance
    largest_ns: int
    start: int
    end: int
    row: int = -1
    device: int = -1
    host: str = ""
    intervals: tuple[tuple[int, int], ...] = ()
    #: idle stalls: ns of the gaps' time in recorded host spans, at most lost_ns (-1: not measured, other categories)
    host_busy_ns: int = -1
    #: idle stalls of a trace with host stack samples: the top sites in its gaps (``host_samples.SiteCount``)
    samples: tuple = ()
    #: idle stalls: the GPU work that could fill the gaps, were the host work named overlapped with it: the busy time
    #: of the gaps' device groups (run, host, device) not already under that host work (-1: other categories)
    fill_ns: int = -1
    #: idle stalls: the busy time of the device (this host, every run): what all its idle stalls share (-1: other)
    device_busy_ns: int = -1

    def to_dict(self) -> dict:
        sites = self.samples
        d = asdict(replace(self, samples=()))
        d["intervals"] = [list(p) for p in self.intervals]
        if sites:
            d["samples"] = [s.to_dict() for s in sites]
        else:
            del d["samples"]
        return d


def _times(each: int, count: int, total: int) -> str:
    """'45 ms' for one instance, '2.5 ms x 40 (100 ms)' for several (each = the median)."""
    if count == 1:
        return fmt_ns(total)
    return f"{fmt_ns(each)} x {count:,} ({fmt_ns(total)})"


def _groups(keys: list[np.ndarray], lost: np.ndarray, start: np.ndarray, end: np.ndarray):
    """The groups of equal keys at once: (order, bounds, total, median, largest, extent start, extent end).
    ``order[bounds[k]:bounds[k + 1]]`` are group k's members sorted by lost desc; the other arrays have one
    entry per group (``largest`` is a member index). Whole-array numpy, so a trace of 10k ranks (30k groups)
    costs no per-group numpy calls here."""
    # Instances of one kind group only with others of similar size (half-decade buckets), so
    # one 5 ms gap is not hidden as the tail of "19 µs x 34".
    size = np.floor(2 * np.log10(np.maximum(lost, 1).astype(np.float64))).astype(np.int64)
    gid, _ = group_ids(*keys, size)
    order = np.lexsort((-lost, gid))
    bounds = np.flatnonzero(np.r_[True, gid[order][1:] != gid[order][:-1], True])
    first, n = bounds[:-1], np.diff(bounds)
    vals = lost[order]
    total = np.add.reduceat(vals, first)
    # np.median's value: the middle one, or the mean of the middle two (vals descend within a group)
    mid_a, mid_b = vals[first + (n - 1) // 2], vals[first + n // 2]
    median = (mid_a.astype(np.float64) + mid_b.astype(np.float64)) / 2
    lo = np.minimum.reduceat(start[order], first)
    hi = np.maximum.reduceat(end[order], first)
    return order, bounds, total, median, order[first], lo, hi


def _grouped(keys: list[np.ndarray], lost: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Per group of equal keys: (member indices sorted by lost desc, ...) -> yields
    (indices, total, median, largest index, extent start, extent end), groups in any order."""
    if len(lost) == 0:
        return
    order, bounds, total, median, big, lo, hi = _groups(keys, lost, start, end)
    for k, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        yield order[a:b], int(total[k]), int(median[k]), int(big[k]), int(lo[k]), int(hi[k])


def idle_stalls(gaps: IdleGaps) -> list[Stall]:
    """GPU idle gaps grouped by (host, device, edge, main host phase during the gap)."""
    n = len(gaps)
    if n == 0:
        return []
    has = np.diff(gaps.act_offsets) > 0
    top = np.full(n, NO_HOST_WORK, np.int64)
    top[has] = gaps.act_phase[gaps.act_offsets[:-1][has]]
    measured = gaps.has_activity if len(gaps.has_activity) == n else np.ones(n, bool)
    top = np.where(measured, top, NOT_MEASURED).astype(np.int64)
    dur = gaps.duration
    entries = np.diff(gaps.act_offsets)
    covered = np.bincount(np.repeat(np.arange(n), entries), weights=gaps.act_ns.astype(np.float64), minlength=n)
    order, bounds, totals, medians, bigs, los, his = _groups([gaps.host, gaps.device, gaps.edge, top], dur,
                                                             gaps.start, gaps.end)
    first, sizes = bounds[:-1], np.diff(bounds)
    ngroups = len(first)
    # each group's gaps as merged pairs, all groups in one union pass
    ivs = merged_pairs_by_group(np.repeat(np.arange(ngroups), sizes), gaps.start[order], gaps.end[order], ngroups)
    # (overlaps of several threads' spans add up: capped at the gaps' time)
    busys = np.add.reduceat(covered[order], first)
    all_measured = np.logical_and.reduceat(measured[order], first)
    grp = gaps.group if len(gaps.group) == n else None
    dev_busy: dict[tuple[int, int], int] = {}
    ghost = {h: i for i, h in enumerate(gaps.hosts)}
    for (_, h, d), b in zip(gaps.groups, gaps.busy_ns.tolist(), strict=True):
        dev_busy[(ghost.get(h, -1), d)] = dev_busy.get((ghost.get(h, -1), d), 0) + int(b)
    out = []
    for k in range(ngroups):
        idx_n, total, each, big = int(sizes[k]), int(totals[k]), int(medians[k]), int(bigs[k])
        idx = order[first[k]:first[k] + idx_n]
        fill = -1 if grp is None else sum(gaps.busy_not_under(g, int(top[big])) for g in np.unique(grp[idx]).tolist())
        if idx_n == 1:
            text = gaps.gap(big).describe()
        else:
            g = gaps.gap(big)
            head = f"GPU {g.device} idle {_times(each, idx_n, total)}"
            if g.edge != "between":
                head += f" ({EDGE_NAMES[int(gaps.edge[big])]})"
            t = int(top[big])
            if t == NOT_MEASURED:
                text = head + " (host activity measured only for the longest gaps)"
            elif t == NO_HOST_WORK:
                text = head + " while the host recorded no work"
            else:
                text = head + f" while mostly {gaps.phases[t]} ran on the host"
        if len(gaps.hosts) > 1:
            text = f"{gaps.hosts[int(gaps.host[big])]}: {text}"
        iv = tuple((a, b) for a, b in ivs[k])
        busy = min(int(busys[k]), total) if bool(all_measured[k]) else -1
        out.append(Stall("idle", text, idx_n, total, each, int(dur[big]), int(los[k]), int(his[k]), -1,
                         int(gaps.device[big]), gaps.hosts[int(gaps.host[big])], iv, busy, fill_ns=fill,
                         device_busy_ns=dev_busy.get((int(gaps.host[big]), int(gaps.device[big])), -1)))
    return out


def _parent_phase(tl: Timeline, rows: np.ndarray) -> np.ndarray:
    """Phase id of each row's parent, -1 for roots."""
    par = tl.cols["parent"][rows]
    return np.where(par >= 0, tl.cols["phase"][np.maximum(par, 0)], -1).astype(np.int64)


def _in(tl: Timeline, parent_phase: int) -> str:
    return "" if parent_phase < 0 else f" in {tl.phases[parent_phase]}"


def wait_stalls(tl: Timeline, waits: HostWaits) -> list[Stall]:
    """Host waits grouped by (kind, phase, device, lane, parent phase)."""
    if len(waits) == 0:
        return []
    c = tl.cols
    lane = c["lane"][waits.row].astype(np.int64)
    pp = _parent_phase(tl, waits.row)
    keys = [waits.kind.astype(np.int64), waits.phase, waits.device, lane, pp]
    multi_host = len({ln.host for ln in tl.lanes}) > 1
    out = []
    for idx, total, each, big, s, e in _grouped(keys, waits.wait_ns.astype(np.int64), waits.start, waits.end):
        dev = int(waits.device[big])
        ln = tl.lanes[int(lane[big])]
        where = ln.name + ("" if dev < 0 else f" GPU {dev}") + (f" ({ln.host})" if multi_host else "")
        beyond = "" if int(waits.kind[big]) == SYNC else " beyond its device time"
        text = (f"{waits.phases[int(waits.phase[big])]} on {where}: host waited "
                f"{_times(each, len(idx), total)}{beyond}{_in(tl, int(pp[big]))}")
        out.append(Stall("wait", text, len(idx), total, each, int(waits.wait_ns[big]), s, e, int(waits.row[big]), dev))
    return out


def unattributed_stalls(tl: Timeline, un: Unattributed) -> list[Stall]:
    """Unattributed parent time grouped by (phase, device, parent phase)."""
    if len(un) == 0:
        return []
    c = tl.cols
    pp = _parent_phase(tl, un.row)
    s, e = c["start"][un.row], c["end"][un.row]
    out = []
    for idx, total, each, big, lo, hi in _grouped([un.phase, un.device, pp], un.unattributed_ns, s, e):
        r = int(un.row[big])
        dur = int(un.duration_ns[idx].sum())
        text = (f"{un.phases[int(un.phase[big])]}{_in(tl, int(pp[big]))}: {_times(each, len(idx), total)} "
                f"({total / max(dur, 1):.0%} of its time) not covered by any child span")
        out.append(Stall("unattributed", text, len(idx), total, each, int(un.unattributed_ns[big]), lo, hi, r,
                         int(un.device[big])))
    return out


def pin_stalls(tl: Timeline, reports) -> list[Stall]:
    """One row for the all-devices pinning report (the per-device reports split the same
    time; listing both would count it twice), else one per report; the extent is the
    pin/unpin/h2d spans."""
    overall = [r for r in reports if r.device is None]
    reports = overall or list(reports)
    c = tl.cols
    ids = [tl.phase_id(p) for p in ("pin", "unpin", "h2d") if tl.phase_id(p) >= 0]
    pin_like = np.isin(c["phase"], ids) if ids else np.zeros(tl.n, bool)
    out = []
    for rep in reports:
        if rep.overhead_ns <= 0:
            continue
        m = pin_like if rep.device is None else pin_like & (np.where(c["device"] < 0, -1, c["device"]) == rep.device)
        if not m.any():
            m = pin_like
        lo = int(c["start"][m].min()) if m.any() else tl.t0
        hi = int(c["end"][m].max()) if m.any() else tl.t1
        n = rep.pin_count + rep.unpin_count
        out.append(Stall("pin", rep.describe(), max(n, 1), int(rep.overhead_ns), int(rep.overhead_ns) // max(n, 1),
                         int(rep.overhead_ns), lo, hi, -1, -1 if rep.device is None else int(rep.device)))
    return out


def rank(stalls: list[Stall]) -> list[Stall]:
    """Largest time lost first (ties: category order, then text, so the order is stable)."""
    return sorted(stalls, key=lambda s: (-s.lost_ns, CATEGORIES.index(s.category), s.text))


def launch_stalls(tl: Timeline, g: LaunchGaps) -> list[Stall]:
    """Launch gaps (GPU idle inside a phase that enqueued device work, from activity spans) of every
    non-root phase, grouped by (phase, device, parent phase). A root's holes are its devices' idle
    time (the idle rows); a phase's gap includes its sub-phases' (nested rows overlap)."""
    if len(g) == 0:
        return []
    gap = g.gap_ns
    sel = np.flatnonzero((tl.cols["parent"][g.row] >= 0) & (gap > 0))
    if len(sel) == 0:
        return []
    pp = _parent_phase(tl, g.row[sel])
    out = []
    for idx, total, each, big, lo, hi in _grouped([g.phase[sel], g.device[sel], pp], gap[sel], g.window_start[sel],
                                                  g.window_end[sel]):
        members = sel[idx]
        i = int(sel[big])
        busy, bracket = int(g.busy_ns[members].sum()), int(g.bracket_ns[members].sum())
        kernels = int(g.kernels[members].sum())
        bb = g.bracket_basis[members]
        basis = "cuda events" if bb.all() else "host" if not bb.any() else "mixed"
        text = (f"{g.phases[int(g.phase[i])]} GPU {int(g.device[i])}{_in(tl, int(pp[big]))}: launch gaps "
                f"{_times(each, len(idx), total)} (GPU busy {fmt_ns(busy)} of {fmt_ns(bracket)} {basis} bracket, "
                f"{kernels:,} kernels){_host_in_holes(g, members)}")
        out.append(Stall("launch", text, len(idx), total, each, int(gap[i]), lo, hi, int(g.row[i]), int(g.device[i])))
    return out


def _host_in_holes(g: LaunchGaps, members: np.ndarray) -> str:
    """'; host: synthesis 3 ms, no span 1 ms' over a group's holes (launching thread), or ''."""
    known = members[g.thread_known[members]]
    if len(known) == 0:
        return ""
    cnt = g.act_offsets[known + 1] - g.act_offsets[known]
    pos = np.repeat(g.act_offsets[known] - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
    acts = []
    if len(pos):
        sums = np.bincount(g.act_phase[pos], weights=g.act_ns[pos].astype(np.float64))
        acts = [(g.phases[p], int(sums[p])) for p in np.argsort(-sums, kind="stable")[:2] if sums[p] > 0]
    none = int(g.unattributed_ns[known].sum())
    parts = [f"{p} {fmt_ns(ns)}" for p, ns in acts] + ([f"no span {fmt_ns(none)}"] if none else [])
    return "; host: " + ", ".join(parts) if parts else ""
