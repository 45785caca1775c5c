"""GPU idle gaps per device, with what the host was doing meanwhile.

A device's activity is the union of its device intervals (CUDA-event times where
recorded, else the host times of ``gpu``-kind spans; on a device with GPU activity spans, only
those: kernel truth, see `_common.device_activity`; ``IdleGaps.kernel_basis`` says which, per
device group). An
idle gap is time between two merged activity segments of one device in one run (runs that overlap
in time, such as the ranks of one job read from separate files, are one: a device is idle only when no
process uses it); with
``edges=True`` the time from the run's first span to the device's first activity (and
from its last activity to the run's end) counts too, marked as leading/trailing.

For each gap, host work overlapping it is measured per phase as *exclusive* overlap: a host
span's overlap with the gap minus its host children's overlap, so ``prove`` does not take
credit for the ``synthesis`` nested in it. Vectorised: candidate (gap, host span) pairs come
from two ``searchsorted`` calls per (run, host) group. Pure function; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import (
    device_activity,
    fmt_ns,
    gaps_between,
    group_ids,
    host_rows,
    host_run_extents,
    offsets_from_counts,
    row_hosts,
    run_extents,
    run_index,
    segment_bounds,
    uncovered,
    union_by_group,
)
from gputrace.analysis.api_calls import background_lanes
from gputrace.analysis.gpu_activity import activity_index
from gputrace.analysis.unobserved import observed_parts, unobserved
from gputrace.timeline.model import KIND_CODES, Timeline

BETWEEN, LEADING, TRAILING = 0, 1, 2
EDGE_NAMES = {BETWEEN: "between", LEADING: "leading", TRAILING: "trailing"}
GPU_KIND = KIND_CODES["gpu"]


@dataclass(frozen=True)
class IdleGap:
    """One idle gap (a row of `IdleGaps`, for lists and details panels)."""

    device: int
    host: str
    run: str
    start: int
    end: int
    edge: str  # "between", "leading" or "trailing"
    host_activity: list[tuple[str, int]]  # (phase, exclusive overlap ns), largest first
    measured: bool = True  # False: host activity was not computed for this gap

    @property
    def duration(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        """E.g. 'GPU 1 idle 2.1 s while synthesis ran on the host'."""
        head = f"GPU {self.device} idle {fmt_ns(self.duration)}"
        if self.edge != "between":
            head += f" ({self.edge})"
        acts = [(p, ns) for p, ns in self.host_activity if ns > 0]
        if not self.measured:
            return head
        if not acts:
            return head + " while the host recorded no work"
        names = [p for p, _ in acts[:3]]
        covered = sum(ns for _, ns in acts)
        what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        tail = "" if covered >= 0.9 * self.duration else f" (host busy {covered / max(self.duration, 1):.0%} of it)"
        return f"{head} while {what} ran on the host{tail}"


@dataclass
class IdleGaps:
    """All idle gaps, columnar (one entry per gap, sorted by device group then start).

    * ``device``: GPU index; ``host``: index into ``hosts``; ``run``: index into ``runs``.
    * ``start``/``end``: epoch ns of the gap; ``duration`` = end - start.
    * ``edge``: BETWEEN (0), LEADING (1) or TRAILING (2).
    * Host activity in CSR form: gap ``i``'s entries are ``act_offsets[i]:act_offsets[i+1]``
      of ``act_phase`` (phase id into ``phases``) and ``act_ns`` (exclusive overlap ns),
      largest first. ``has_activity[i]`` is False where it was not measured (see
      ``activity_for`` in `gpu_idle_gaps`).
    * ``busy_ns``: per device group (same order as ``groups``), the total active time;
      ``groups``: list of (run, host, device) tuples of names/ints; ``unobserved_ns``: per group, the
      time collection was paused (``gputrace.analysis.unobserved``): no gap lies in it.
    """

    device: np.ndarray
    host: np.ndarray
    run: np.ndarray
    start: np.ndarray
    end: np.ndarray
    edge: np.ndarray
    act_offsets: np.ndarray
    act_phase: np.ndarray
    act_ns: np.ndarray
    phases: list[str]
    hosts: list[str]
    runs: list[str]
    groups: list[tuple[str, str, int]] = field(default_factory=list)
    busy_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    has_activity: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    kernel_basis: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # per group: activity spans used
    #: per group: time of the run's extent the device was not observed (paused collection), in no gap
    unobserved_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: per gap: index into ``groups`` of its device group
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: ``{(group, phase id): ns}``: the group's busy time during which that phase ran on the host as the innermost
    #: span of a thread (exclusive, as ``act_ns``), for each phase that is the main host work of one of the group's
    #: gaps: GPU work already overlapped with that host work (`busy_not_under`)
    busy_under: dict[tuple[int, int], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(len(self.start))

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start

    def gap(self, i: int) -> IdleGap:
        a, b = int(self.act_offsets[i]), int(self.act_offsets[i + 1])
        return IdleGap(
            device=int(self.device[i]),
            host=self.hosts[int(self.host[i])],
            run=self.runs[int(self.run[i])],
            start=int(self.start[i]),
            end=int(self.end[i]),
            edge=EDGE_NAMES[int(self.edge[i])],
            host_activity=[(self.phases[int(p)], int(ns))
                           for p, ns in zip(self.act_phase[a:b], self.act_ns[a:b], strict=True)],
            measured=bool(self.has_activity[i]) if len(self.has_activity) else True,
        )

    def largest(self, k: int = 10, min_ns: int = 0) -> list[IdleGap]:
        """The ``k`` longest gaps of at least ``min_ns``, longest first."""
        d = self.duration
        idx = np.flatnonzero(d >= min_ns)
        idx = idx[np.argsort(-d[idx], kind="stable")][:k]
        return [self.gap(int(i)) for i in idx]

    def busy_not_under(self, group: int, phase: int) -> int:
        """The group's busy time not overlapped by ``phase``'s own host time (-1 or -2, no host work: all of it):
        the GPU work that could fill a gap while that host work runs, were the two overlapped."""
        busy = int(self.busy_ns[group]) if group < len(self.busy_ns) else 0
        return max(0, busy - self.busy_under.get((int(group), int(phase)), 0))

    def idle_by_device(self) -> dict[int, int]:
        """Total idle ns per device index (all runs and hosts together)."""
        out: dict[int, int] = {}
        for dv, du in zip(self.device.tolist(), self.duration.tolist(), strict=True):
            out[dv] = out.get(dv, 0) + du
        return out


def _empty(tl: Timeline, hosts: list[str], runs: list[str]) -> IdleGaps:
    z = np.zeros(0, np.int64)
    return IdleGaps(z, z, z, z, z, z, np.zeros(1, np.int64), z, z, list(tl.phases), hosts, runs,
                    has_activity=np.zeros(0, bool))


def _parallel_runs(tl: Timeline, run: np.ndarray, runs: list[str]) -> tuple[np.ndarray, list[str]]:
    """Runs whose extents overlap in time merged into one (row -> merged run, labels joined with ``+``).

    A GPU is idle only when no process uses it: processes read from separate files (``report rank0.json
    rank1.json``: one run each) that ran at the same time share their devices' timeline, so their activity
    is one union per (host, device) and a gap is time none of them ran anything there. Runs one after the
    other (an A/B session in one file) stay apart: the time between them is nobody's idle time."""
    if len(runs) < 2 or tl.n == 0:
        return run, runs
    lo, hi = run_extents(tl, run, len(runs))
    present = np.flatnonzero(lo <= hi)
    merged = np.arange(len(runs), dtype=np.int64)
    cur, cur_end = -1, None
    for r in present[np.argsort(lo[present], kind="stable")].tolist():
        if cur >= 0 and cur_end is not None and int(lo[r]) < cur_end:
            merged[r] = cur
            cur_end = max(cur_end, int(hi[r]))
        else:
            cur, cur_end = r, int(hi[r])
    if (merged == np.arange(len(runs))).all():
        return run, runs
    keep = sorted(set(merged.tolist()))
    labels = ["+".join(runs[k] for k in range(len(runs)) if merged[k] == m) for m in keep]
    dense = np.searchsorted(np.asarray(keep, np.int64), merged)
    return dense[run], labels


def gpu_idle_gaps(tl: Timeline, min_gap_ns: int = 0, edges: bool = True, activity_for: int | None = 20_000) -> IdleGaps:
    """Idle gaps of every device, each at least ``min_gap_ns`` long (see module docstring).

    Host activity is measured for the ``activity_for`` longest gaps (None: all); the rest
    have ``has_activity`` False and no entries (on a million-span trace with half a
    million sub-microsecond gaps, pairing every gap costs seconds and tells nothing).
    """
    run, runs = _parallel_runs(tl, *run_index(tl))
    host, hosts = row_hosts(tl)
    rows, s, e = device_activity(tl)
    if len(rows) == 0:
        return _empty(tl, hosts, runs)
    dev = tl.cols["device"][rows].astype(np.int64)
    gid, first = group_ids(run[rows], host[rows], dev)
    grow = rows[first]  # a representative row per device group
    g_run, g_host, g_dev = run[grow], host[grow], dev[first]
    ug, us, ue = union_by_group(gid, s, e)
    busy = np.bincount(ug, weights=(ue - us).astype(np.float64), minlength=len(first)).astype(np.int64)
    bg, bs, be = gaps_between(ug, us, ue)
    parts_g, parts_s, parts_e, parts_k = [bg], [bs], [be], [np.full(len(bg), BETWEEN, np.int64)]
    unobs = unobserved(tl)
    if edges or unobs:  # each group's (run, host) extents, host and device clocks: its edge gaps and paused time
        g_lo, g_hi = host_run_extents(tl, run, host, len(hosts)).of(g_run, g_host)
    if edges:
        ng = len(first)
        seg_first, seg_last = segment_bounds(ug)
        fs = np.empty(ng, np.int64)
        fs[ug[seg_first]] = us[seg_first]
        le = np.empty(ng, np.int64)
        le[ug[seg_last]] = ue[seg_last]
        gi = np.arange(ng, dtype=np.int64)
        lead_s, lead_e = g_lo, fs
        trail_s, trail_e = le, g_hi
        m1, m2 = lead_e > lead_s, trail_e > trail_s
        parts_g += [gi[m1], gi[m2]]
        parts_s += [lead_s[m1], trail_s[m2]]
        parts_e += [lead_e[m1], trail_e[m2]]
        parts_k += [np.full(int(m1.sum()), LEADING, np.int64), np.full(int(m2.sum()), TRAILING, np.int64)]
    gg, gs, ge, gk = (np.concatenate(p) for p in (parts_g, parts_s, parts_e, parts_k))
    un_ns = np.zeros(len(first), np.int64)
    if unobs:  # a paused collection: neither busy nor idle (gputrace.analysis.unobserved)
        i, gs, ge = observed_parts(unobs, g_host[gg], g_dev[gg], gs, ge)
        gg, gk = gg[i], gk[i]
        for g in range(len(first)):
            un_ns[g] = unobs.ns_within((int(g_host[g]), int(g_dev[g])), int(g_lo[g]), int(g_hi[g]))
    keep = (ge - gs) >= max(min_gap_ns, 1)
    gg, gs, ge, gk = gg[keep], gs[keep], ge[keep], gk[keep]
    order = np.lexsort((gs, gg))
    gg, gs, ge, gk = gg[order], gs[order], ge[order], gk[order]
    has_act = np.ones(len(gs), bool)
    if activity_for is not None and len(gs) > activity_for:
        has_act[:] = False
        has_act[np.argsort(-(ge - gs), kind="stable")[:activity_for]] = True
    sel = np.flatnonzero(has_act)
    offs_s, aph, ans = _host_activity(tl, run, host, g_run[gg][sel], g_host[gg][sel], g_dev[gg][sel], gs[sel], ge[sel])
    counts = np.zeros(len(gs), np.int64)
    counts[sel] = np.diff(offs_s)
    offs = offsets_from_counts(counts)
    under = _busy_under(tl, run, host, g_run, g_host, gid, rows, s, e, _top_pairs(gg[sel], offs_s, aph, (ge - gs)[sel]))
    return IdleGaps(
        device=g_dev[gg],
        host=g_host[gg],
        run=g_run[gg],
        start=gs,
        end=ge,
        edge=gk,
        act_offsets=offs,
        act_phase=aph,
        act_ns=ans,
        phases=list(tl.phases),
        hosts=hosts,
        runs=runs,
        groups=[(runs[int(r)], hosts[int(h)], int(d)) for r, h, d in zip(g_run, g_host, g_dev, strict=True)],
        busy_ns=busy,
        unobserved_ns=un_ns,
        has_activity=has_act,
        kernel_basis=activity_index(tl).mask(tl.n)[grow],
        group=gg,
        busy_under=under,
    )


def _self_pieces(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, start, end) of every host span's own time (itself minus its host children; background threads left
    out, as in `_host_activity`): a time instant belongs to the innermost span of its thread."""
    hrows = host_rows(tl)
    bg = background_lanes(tl)
    if bg.any():
        hrows = hrows[~bg[tl.cols["lane"][hrows]]]
    mask = np.zeros(tl.n, bool)
    mask[hrows] = True
    return uncovered(tl, mask, hrows)


#: GPU-idle fill (`IdleGaps.busy_under`) is measured for at most this many (device group, main host work) pairs, those
#: with the most idle time: each costs a pass over the group's activity; the others' fill is the group's busy time.
FILL_PAIRS = 64


def _top_pairs(gap_group: np.ndarray, offs: np.ndarray, phase: np.ndarray, dur: np.ndarray) -> list[tuple[int, int]]:
    """The (group, main host phase) pairs of the measured gaps (CSR ``offs``/``phase``, first entry the largest),
    the ``FILL_PAIRS`` with the most idle time."""
    has = np.diff(offs) > 0
    tot: dict[tuple[int, int], int] = {}
    for g, p, d in zip(gap_group[has].tolist(), phase[offs[:-1][has]].tolist(), dur[has].tolist(), strict=True):
        tot[(g, p)] = tot.get((g, p), 0) + d
    return sorted(sorted(tot, key=lambda k: -tot[k])[:FILL_PAIRS])


def _union_before(bs: np.ndarray, be: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each ``t``, the length of the sorted disjoint segments ``[bs, be)`` before it."""
    cum = np.concatenate([np.zeros(1, np.int64), np.cumsum(be - bs)])
    i = np.searchsorted(bs, t, side="right") - 1
    j = np.maximum(i, 0)
    return np.where(i >= 0, cum[j] + np.clip(t - bs[j], 0, be[j] - bs[j]), 0)


def _busy_under(tl: Timeline, run: np.ndarray, host: np.ndarray, g_run: np.ndarray, g_host: np.ndarray,
                gid: np.ndarray, rows: np.ndarray, s: np.ndarray, e: np.ndarray, wanted: list[tuple[int, int]]) -> dict:
    """``{(group, phase): ns}`` for each ``wanted`` pair: how much of the group's busy time (its activity ``rows``,
    ``s``/``e``, group ``gid``) lies under that phase's own host time in the same process (the pid of the lanes:
    another process's host code running meanwhile does not overlap this process's GPU work), the phase's pieces
    merged first (two threads in one phase at once count once). GPU work that the phase launched itself (its
    nearest host ancestor is of that phase) is left out: the phase's host time over it is that work being driven or
    waited for, not host work it already hides (a ``train_step`` whose kernels run under it does not make the GPU
    work unavailable to fill a host-only ``train_step``); so is GPU work with no host ancestor (its launcher is
    unknown: a process root's code, most likely). Summed over the group's processes; `busy_not_under` caps it."""
    if not wanted:
        return {}
    lane_pid = np.asarray([ln.pid for ln in tl.lanes], np.int64)
    apid = lane_pid[tl.cols["lane"][rows]]
    # the phase that launched each piece of GPU work: its nearest host ancestor (a kernel under a `gpu` phase span
    # on a stream lane was launched by that span's host parent)
    par = tl.cols["parent"][rows].astype(np.int64)
    for _ in range(8):
        up = (par >= 0) & (tl.cols["kind"][np.maximum(par, 0)] == GPU_KIND)
        if not up.any():
            break
        par = np.where(up, tl.cols["parent"][np.maximum(par, 0)], par)
    aph = np.where(par >= 0, tl.cols["phase"][np.maximum(par, 0)], -1).astype(np.int64)
    srow, ss, se = _self_pieces(tl)
    ph = tl.cols["phase"][srow].astype(np.int64)
    by_ph = np.argsort(ph, kind="stable")  # each pair reads its phase's pieces and its group's rows only
    ph_sorted = ph[by_ph]
    of_group: dict[int, np.ndarray] = {}
    out: dict[tuple[int, int], int] = {}
    for g, p in wanted:
        lo, hi = np.searchsorted(ph_sorted, [p, p + 1])
        pc = by_ph[lo:hi]
        pc = pc[(run[srow[pc]] == g_run[g]) & (host[srow[pc]] == g_host[g])]
        if len(pc) == 0:
            continue
        if g not in of_group:
            of_group[g] = np.flatnonzero(gid == g)
        a = of_group[g]
        a = a[(aph[a] != p) & (aph[a] >= 0)]  # (no host ancestor: who launched it is unknown, none hides it)
        spid = lane_pid[tl.cols["lane"][srow[pc]]]
        for pid in np.unique(spid).tolist():
            ap = a[(apid[a] == pid) | (apid[a] < 0)]  # (a stream lane of unknown pid, as Kineto's: any process's)
            if len(ap) == 0:
                continue
            _, bs, be = union_by_group(np.zeros(len(ap), np.int64), s[ap], e[ap])
            mq = pc[spid == pid]
            _, ps, pe = union_by_group(np.zeros(len(mq), np.int64), ss[mq], se[mq])
            ov = int((_union_before(bs, be, pe) - _union_before(bs, be, ps)).sum())
            out[(g, p)] = out.get((g, p), 0) + ov
    return out


def _host_activity(tl, run, host, gap_run, gap_host, gap_dev, gs, ge):
    """Exclusive host overlap per (gap, phase) in CSR form (see IdleGaps).

    Host spans are first cut into *self* pieces (each span minus its host children), so a
    time instant belongs to the innermost span of its thread; pieces are then paired with
    gaps of the same (run, host).
    """
    ngap = len(gs)
    z = np.zeros(0, np.int64)
    hrows = host_rows(tl)
    bg = background_lanes(tl)
    if bg.any():  # threads that never marked work nor fed a GPU: their frames are not what a GPU waited for
        hrows = hrows[~bg[tl.cols["lane"][hrows]]]
    if ngap == 0 or len(hrows) == 0:
        return np.zeros(ngap + 1, np.int64), z, z
    c = tl.cols
    # Only host spans that overlap some gap matter (exactly: a child outside every gap cannot
    # change its parent's self time inside one). Merge the gaps and test each span against them.
    _, ug_s, ug_e = union_by_group(np.zeros(ngap, np.int64), gs, ge)
    hs, he = c["start"][hrows], c["end"][hrows]
    hrows = hrows[np.searchsorted(ug_e, hs, side="right") < np.searchsorted(ug_s, he, side="left")]
    if len(hrows) == 0:
        return np.zeros(ngap + 1, np.int64), z, z
    mask = np.zeros(tl.n, bool)
    mask[hrows] = True
    srow, ss, se = uncovered(tl, mask, hrows)
    stride = len(tl.lanes) + 1
    skey = run[srow] * stride + host[srow]
    gkey = gap_run * stride + gap_host
    # Segments sorted by (run/host key, length class, start) once. Within one class (lengths in (L/2, L]) a
    # segment that starts before g_s - L ends before g_s, so each gap's candidates are the class's segments
    # starting in [g_s - L, g_e): binary searches, and few candidates that miss (a running maximum of ends
    # over all lengths let one long piece, a thread waiting through the whole trace, make every later
    # segment a candidate of every gap: gaps x segments pairs, 1.8 GB on a 100k-span profiler trace).
    seg_len = np.maximum(se - ss, 1)
    cls = np.ceil(np.log2(seg_len.astype(np.float64))).astype(np.int64)
    cls += np.left_shift(np.int64(1), cls) < seg_len  # (log2 in floats can round a length just past 2^k down)
    # One pass per length class over every gap at once (not per gap group: 10k ranks made 10k groups x
    # classes of small numpy calls): the class's segments sorted by (key, start) and each gap's candidates
    # found by binary search on one composite key, (key, time) with both replaced by their ranks.
    ukeys = np.unique(np.concatenate((skey, gkey)))
    skey_r, gkey_r = np.searchsorted(ukeys, skey), np.searchsorted(ukeys, gkey)
    so = np.lexsort((ss, skey_r, cls))
    cls_s, skey_s, ss_s, se_s, srow_s = cls[so], skey_r[so], ss[so], se[so], srow[so]
    cuts = np.flatnonzero(np.r_[True, cls_s[1:] != cls_s[:-1], True])
    pg_parts, ov_parts, ph_parts = [], [], []
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        reach = min(1 << int(cls_s[a]), 2**63 - 1)  # the class's longest segment
        lo_t = np.maximum(gs, np.iinfo(np.int64).min + reach) - reach  # (saturating: no int64 wrap)
        times = np.unique(np.concatenate((ss_s[a:b], lo_t, ge)))
        width = len(times) + 1
        seg = skey_s[a:b] * width + np.searchsorted(times, ss_s[a:b])  # ascending: (key, start) in the class
        first = a + np.searchsorted(seg, gkey_r * width + np.searchsorted(times, lo_t), side="left")
        last = a + np.searchsorted(seg, gkey_r * width + np.searchsorted(times, ge), side="left")
        cnt = np.maximum(last - first, 0)
        tot = int(cnt.sum())
        if tot == 0:
            continue
        g = np.repeat(np.arange(ngap, dtype=np.int64), cnt)
        pos = np.arange(tot, dtype=np.int64) + np.repeat(first - np.cumsum(cnt) + cnt, cnt)
        ok = se_s[pos] > gs[g]
        g, pos = g[ok], pos[ok]
        pg_parts.append(g)
        ov_parts.append(np.minimum(se_s[pos], ge[g]) - np.maximum(ss_s[pos], gs[g]))
        ph_parts.append(c["phase"][srow_s[pos]].astype(np.int64))
    if not pg_parts:
        return np.zeros(ngap + 1, np.int64), z, z
    pg, ov, ph = (np.concatenate(p) for p in (pg_parts, ov_parts, ph_parts))
    # Sum per (gap, phase), then order each gap's phases by ns descending.
    nph = max(len(tl.phases), 1)
    uk, inv = np.unique(pg * nph + ph, return_inverse=True)
    sums = np.bincount(inv.reshape(-1), weights=ov.astype(np.float64), minlength=len(uk)).astype(np.int64)
    ug, uph = uk // nph, uk % nph
    keep = sums > 0
    ug, uph, sums = ug[keep], uph[keep], sums[keep]
    o2 = np.lexsort((-sums, ug))
    ug, uph, sums = ug[o2], uph[o2], sums[o2]
    offs = offsets_from_counts(np.bincount(ug, minlength=ngap))
    return offs, uph, sums
