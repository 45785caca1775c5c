"""GPU truth from activity spans: device busy/idle and per-phase launch gaps.

Activity spans (``gputrace.activity`` = kernel / memcpy / memset / sync, see :mod:`gputrace.activity`)
say what a GPU really did; a phase's CUDA-event bracket is only an upper bound that includes every
moment the stream sat empty waiting for the host. Every result here carries ``basis``:
``"kernels"`` where activity spans were used, ``"brackets"`` where a device had none and only event
brackets (or the host times of ``gpu`` phases) were available.

* :func:`activity_index`: the activity rows of a Timeline (cached per Timeline object; in
  :mod:`gputrace.analysis.activity_index`, re-exported here).
* :func:`device_busy`: per (run, host, device), the union of kernel/copy/memset intervals (not the
  sum: overlapping streams count once) against the run's extent.
* :func:`launch_gaps`: per phase instance and device, the bracket (CUDA events, else host times),
  the GPU busy time of the activity it enqueued (its own and its sub-phases'), the launch gaps (the
  parts of its window in which the device ran nothing at all), and what the launching host thread was
  doing in them: host
  spans' exclusive time per phase name, or none (the phase's own code between launches, e.g.
  Python or the GIL: *unattributed* host time).

Copies, sync waits and per-kernel tables are in :mod:`gputrace.analysis.gpu_transfers`; the host-thread
attribution of launch gaps in :mod:`gputrace.analysis.launch_host`.
Pure numpy; any thread; the Timeline is never modified.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from gputrace.analysis._common import (
    climb,
    device_activity,
    gaps_between,
    group_ids,
    host_run_extents,
    merged_pairs_by_group,
    offsets_from_counts,
    pair_overlaps,
    row_hosts,
    run_index,
    segment_bounds,
    union_by_group,
)
from gputrace.analysis.activity_index import (  # noqa: F401 (re-exported: the names callers import from here)
    BRACKETS,
    CUDA_EVENTS,
    HOST_TIMES,
    KERNEL,
    KERNELS,
    MEMCPY,
    MEMSET,
    SYNC,
    WHAT_NAMES,
    ActivityIndex,
    activity_index,
)
from gputrace.analysis.api_calls import phase_mask
from gputrace.analysis.launch_host import host_in_holes, thread_keys
from gputrace.analysis.unobserved import observed_parts, unobserved
from gputrace.timeline.model import Timeline


# ---- device busy / idle --------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceBusy:
    """One device of one run. ``window_ns``: the run's extent less ``unobserved_ns`` (the time CUDA collection
    was paused: ``gputrace.analysis.unobserved``), the observed window; ``busy_ns``: union of device work;
    ``kernel_ns``: union of kernels alone; ``idle_ns`` = window - busy. ``basis``: "kernels" or
    "brackets" (no activity spans on this device: busy is the union of event brackets / ``gpu``
    phases, an upper bound). ``kernels``/``copies``/``memsets``: counts (0 on brackets)."""

    run: str
    host: str
    device: int
    basis: str
    window_ns: int
    busy_ns: int
    kernel_ns: int
    idle_ns: int
    kernels: int
    copies: int
    memsets: int
    unobserved_ns: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def device_busy(tl: Timeline, idx: ActivityIndex | None = None) -> list[DeviceBusy]:
    """GPU busy/idle per (run, host, device), kernel truth where it exists (see module docstring)."""
    idx = idx or activity_index(tl)
    run, runs = run_index(tl)
    host, hosts = row_hosts(tl)
    extents = host_run_extents(tl, run, host, len(hosts))
    unobs = unobserved(tl)
    dw = idx.device_work()
    a_rows, a_s, a_e, a_w = idx.rows[dw], idx.start[dw], idx.end[dw], idx.what[dw]
    b_rows, b_s, b_e = device_activity(tl, kernel_truth=False)
    keep = ~idx.mask(tl.n)[b_rows]
    b_rows, b_s, b_e = b_rows[keep], b_s[keep], b_e[keep]
    out: list[DeviceBusy] = []
    c = tl.cols
    with_activity: set[tuple[int, int, int]] = set()
    for basis, rows, s, e in ((KERNELS, a_rows, a_s, a_e), (BRACKETS, b_rows, b_s, b_e)):
        if len(rows) == 0:
            continue
        dev = c["device"][rows].astype(np.int64)
        gid, first = group_ids(run[rows], host[rows], dev)
        ug, us, ue = union_by_group(gid, s, e)
        busy = np.bincount(ug, weights=(ue - us).astype(np.float64), minlength=len(first)).astype(np.int64)
        if basis == KERNELS:
            k = a_w == KERNEL
            kg, ks, ke = union_by_group(gid[k], s[k], e[k])
            kern = np.bincount(kg, weights=(ke - ks).astype(np.float64), minlength=len(first)).astype(np.int64)
            counts = [np.bincount(gid[a_w == w], minlength=len(first)) for w in (KERNEL, MEMCPY, MEMSET)]
        else:
            kern = np.zeros(len(first), np.int64)
            counts = [np.zeros(len(first), np.int64)] * 3
        for g, fr in enumerate(first.tolist()):
            key = (int(run[rows[fr]]), int(host[rows[fr]]), int(dev[fr]))
            if basis == BRACKETS and key in with_activity:
                continue
            with_activity.add(key)
            lo, hi = (int(x) for x in extents.of(key[0], key[1]))
            un = unobs.ns_within((key[1], key[2]), lo, hi) if unobs else 0
            window = max(hi - lo - un, int(busy[g]))
            out.append(DeviceBusy(runs[key[0]], hosts[key[1]], key[2], basis, window, int(busy[g]), int(kern[g]),
                                  max(window - int(busy[g]), 0), int(counts[0][g]), int(counts[1][g]),
                                  int(counts[2][g]), un))
    out.sort(key=lambda d: (d.run, d.host, d.device))
    return out


# ---- launch gaps ---------------------------------------------------------------------------
@dataclass
class LaunchGaps:
    """Launch gaps, columnar: one entry per (phase instance, device) that enqueued device work.

    * ``row``: the phase's row; ``device``; ``phase``: phase id into ``phases``.
    * ``bracket_start``/``bracket_end``: CUDA-event times where the phase has them on that device
      (``bracket_basis`` CUDA_EVENTS), else its host times (HOST_TIMES).
    * ``window_start``/``window_end``: the bracket widened to cover all its device work.
    * ``busy_ns``: union of its device work (kernels, copies, memsets, its sub-phases' included);
      ``kernel_ns``: union of kernels alone; ``kernels``: kernel count.
    * Holes (CSR): entry ``i``'s launch gaps are ``hole_start/hole_end[hole_offsets[i]:hole_offsets[i+1]]``:
      the parts of its window in which the *device* ran nothing (time the stream spent on earlier work of
      other phases is not a gap, nor is time CUDA collection was paused: ``gputrace.analysis.unobserved``);
      ``gap_ns``: their sum. So window = busy + other phases' work + gap (+ unobserved time).
    * Host activity in the holes on the launching thread (CSR, largest first):
      ``act_phase``/``act_ns`` over ``act_offsets``; ``unattributed_ns``: hole time in which the thread
      was in no child span (the phase's own code, or no span at all). ``thread_known`` is False where
      no host-thread lane was found for the phase (then host activity is not measured).
    """

    row: np.ndarray
    device: np.ndarray
    phase: np.ndarray
    bracket_start: np.ndarray
    bracket_end: np.ndarray
    bracket_basis: np.ndarray  # bool: True = CUDA events
    window_start: np.ndarray
    window_end: np.ndarray
    busy_ns: np.ndarray
    kernel_ns: np.ndarray
    kernels: np.ndarray
    hole_offsets: np.ndarray
    hole_start: np.ndarray
    hole_end: np.ndarray
    act_offsets: np.ndarray
    act_phase: np.ndarray
    act_ns: np.ndarray
    unattributed_ns: np.ndarray
    thread_known: np.ndarray
    phases: list[str]
    is_root: np.ndarray | None = None  # bool per entry: the phase has no parent (its window is the whole run's)

    def __len__(self) -> int:
        return int(len(self.row))

    @cached_property
    def gap_ns(self) -> np.ndarray:
        """Device idle time inside each window (the sum of its holes); computed once."""
        if not len(self.row):
            return np.zeros(0, np.int64)
        counts = np.diff(self.hole_offsets)
        return np.bincount(np.repeat(np.arange(len(self.row)), counts),
                           weights=(self.hole_end - self.hole_start).astype(np.float64),
                           minlength=len(self.row)).astype(np.int64)

    @cached_property
    def bracket_ns(self) -> np.ndarray:
        return self.bracket_end - self.bracket_start

    def holes_of(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.hole_offsets[i]), int(self.hole_offsets[i + 1])
        return self.hole_start[a:b], self.hole_end[a:b]

    def entry(self, i: int) -> dict:
        """One entry as plain data (details panels, JSON)."""
        a, b = int(self.act_offsets[i]), int(self.act_offsets[i + 1])
        return {
            "row": int(self.row[i]), "phase": self.phases[int(self.phase[i])], "device": int(self.device[i]),
            "basis": KERNELS, "bracket": CUDA_EVENTS if self.bracket_basis[i] else HOST_TIMES,
            "bracket_ns": int(self.bracket_ns[i]), "window_ns": int(self.window_end[i] - self.window_start[i]),
            "busy_ns": int(self.busy_ns[i]), "kernel_ns": int(self.kernel_ns[i]), "kernels": int(self.kernels[i]),
            "gap_ns": int(self.gap_ns[i]), "holes": int(self.hole_offsets[i + 1] - self.hole_offsets[i]),
            "host_activity": [{"phase": self.phases[int(p)], "ns": int(n)}
                              for p, n in zip(self.act_phase[a:b], self.act_ns[a:b], strict=True)],
            "unattributed_ns": int(self.unattributed_ns[i]) if self.thread_known[i] else None,
        }

    def by_phase(self, top_activity: int = 3) -> list[dict]:
        """Totals per (phase name, device), largest gap first, root phases (a ``prove``: their gaps are the
        GPU's idle time of the whole run) after the others: instances, bracket/window/busy/kernel/gap ns,
        kernels, unattributed ns (None if no instance had a known thread), the top host activities,
        ``intervals``: the union of the holes, ``[start, end]`` pairs (at most ``MAX_INTERVALS``: see
        ``_common.merged_pairs``), and ``long_gap_ns``/``long_gaps``: the holes longer than :data:`LONG_HOLE_NS`,
        their sum and count (exact, whatever ``intervals`` kept)."""
        acc: dict[tuple[int, int], dict] = {}
        for i in range(len(self)):
            key = (int(self.phase[i]), int(self.device[i]))
            d = acc.get(key)
            if d is None:
                d = acc[key] = {"phase": self.phases[key[0]], "device": key[1], "basis": KERNELS, "instances": 0,
                                "bracket_ns": 0, "busy_ns": 0, "kernel_ns": 0, "gap_ns": 0, "kernels": 0,
                                "unattributed_ns": None, "_act": {}, "bracket": set(), "root": True, "_rows": []}
            d["instances"] += 1
            d["_rows"].append(i)
            d["root"] &= bool(self.is_root[i]) if self.is_root is not None else False
            d["bracket_ns"] += int(self.bracket_ns[i])
            d["busy_ns"] += int(self.busy_ns[i])
            d["kernel_ns"] += int(self.kernel_ns[i])
            d["gap_ns"] += int(self.gap_ns[i])
            d["kernels"] += int(self.kernels[i])
            d["bracket"].add(CUDA_EVENTS if self.bracket_basis[i] else HOST_TIMES)
            if self.thread_known[i]:
                d["unattributed_ns"] = (d["unattributed_ns"] or 0) + int(self.unattributed_ns[i])
            a, b = int(self.act_offsets[i]), int(self.act_offsets[i + 1])
            for p, n in zip(self.act_phase[a:b].tolist(), self.act_ns[a:b].tolist(), strict=True):
                d["_act"][p] = d["_act"].get(p, 0) + n
        entry_group = np.zeros(len(self), np.int64)
        for k, d in enumerate(acc.values()):
            entry_group[d.pop("_rows")] = k
        owner = np.repeat(np.arange(len(self)), np.diff(self.hole_offsets))
        pairs = merged_pairs_by_group(entry_group[owner], self.hole_start, self.hole_end, len(acc))
        # Holes longer than a launch, counted exactly (``intervals`` is coarsened past MAX_INTERVALS, and its merged
        # windows would all look long): host work or a wait, not launch overhead (findings' launch-bound rule).
        hl = self.hole_end - self.hole_start
        is_long = hl > LONG_HOLE_NS
        long_ns = np.bincount(entry_group[owner], weights=np.where(is_long, hl, 0).astype(np.float64),
                              minlength=len(acc))
        long_n = np.bincount(entry_group[owner], weights=is_long.astype(np.float64), minlength=len(acc))
        out = []
        for k, d in enumerate(acc.values()):
            act = sorted(d.pop("_act").items(), key=lambda kv: -kv[1])[:top_activity]
            d["host_activity"] = [{"phase": self.phases[p], "ns": n} for p, n in act]
            d["bracket"] = "/".join(sorted(d["bracket"]))
            d["intervals"] = pairs[k]
            d["long_gap_ns"] = int(long_ns[k])
            d["long_gaps"] = int(long_n[k])
            out.append(d)
        out.sort(key=lambda d: (d["root"], -d["gap_ns"]))
        return out


#: A launch gap longer than this (ns) is host work or a wait, not launch overhead.
LONG_HOLE_NS = 1_000_000


def launch_gaps(tl: Timeline, idx: ActivityIndex | None = None) -> LaunchGaps:
    """Launch gaps of every phase instance that enqueued device work (see :class:`LaunchGaps`)."""
    idx = idx or activity_index(tl)
    c = tl.cols
    parent = c["parent"]
    act_mask = idx.mask(tl.n)
    dw = idx.device_work()
    a_rows, a_s, a_e, a_w, a_dev = idx.rows[dw], idx.start[dw], idx.end[dw], idx.what[dw], idx.device[dw]
    # (phase row, activity) pairs: every phase ancestor of each activity span (not activity, not an API call,
    # framework operator or profiler row: a Kineto trace nests its phases inside Python frames and operators).
    pr, pa = [], []
    phase_rows = phase_mask(tl)

    def collect(ai, anc):  # every level: the activities' phase ancestors
        ph = ~act_mask[anc] & phase_rows[anc]
        pr.append(anc[ph])
        pa.append(ai[ph])

    climb(np.arange(len(a_rows), dtype=np.int64), parent[a_rows], parent, collect)
    if not pr or sum(len(p) for p in pr) == 0:
        return _empty(tl)
    prow, pact = np.concatenate(pr), np.concatenate(pa)
    gid, first = group_ids(prow, a_dev[pact])
    ng = len(first)
    g_row, g_dev = prow[first], a_dev[pact[first]]
    s, e = a_s[pact], a_e[pact]
    ug, us, ue = union_by_group(gid, s, e)
    busy = np.bincount(ug, weights=(ue - us).astype(np.float64), minlength=ng).astype(np.int64)
    isk = a_w[pact] == KERNEL
    kg, ks, ke = union_by_group(gid[isk], s[isk], e[isk])
    kern = np.bincount(kg, weights=(ke - ks).astype(np.float64), minlength=ng).astype(np.int64)
    nk = np.bincount(gid[isk], minlength=ng).astype(np.int64)
    # Bracket: CUDA events on the same device where recorded, else host times.
    ev = (c["gpu_start"][g_row] >= 0) & (c["gpu_end"][g_row] >= c["gpu_start"][g_row]) & (c["device"][g_row] == g_dev)
    b_s = np.where(ev, c["gpu_start"][g_row], c["start"][g_row])
    b_e = np.where(ev, c["gpu_end"][g_row], c["end"][g_row])
    seg_first, seg_last = segment_bounds(ug)
    f_s = np.empty(ng, np.int64)
    f_s[ug[seg_first]] = us[seg_first]
    l_e = np.empty(ng, np.int64)
    l_e[ug[seg_last]] = ue[seg_last]
    w_s, w_e = np.minimum(b_s, f_s), np.maximum(b_e, l_e)
    # Holes: the window's time in which the whole device was idle (work of other phases on the device,
    # e.g. earlier kernels still queued on the stream, is not a launch gap).
    host, _ = row_hosts(tl)
    stride = int(a_dev.max(initial=0)) + 2
    a_key = host[a_rows] * stride + a_dev + 1
    g_dkey = host[g_row] * stride + g_dev + 1
    hg, hs, he = _idle_in_windows(a_key, a_s, a_e, g_dkey, w_s, w_e)
    unobs = unobserved(tl)
    if unobs:  # paused collection: no launch gap there (gputrace.analysis.unobserved)
        i, hs, he = observed_parts(unobs, host[g_row[hg]], g_dev[hg], hs, he)
        hg = hg[i]
    o = np.lexsort((hs, hg))
    hg, hs, he = hg[o], hs[o], he[o]
    hole_off = offsets_from_counts(np.bincount(hg, minlength=ng))
    # Host activity in the holes, on the launching thread.
    tkey = thread_keys(tl, act_mask)
    g_key = tkey[g_row]
    act_off, act_ph, act_ns, unattr = host_in_holes(tl, tkey, act_mask, g_row, g_key, hg, hs, he, ng)
    phase = c["phase"][g_row].astype(np.int64)
    o = np.lexsort((g_dev, c["start"][g_row]))
    if not np.array_equal(o, np.arange(ng)):  # entries in phase start order; CSR arrays follow
        hole_off, hs, he = _reorder_csr(hole_off, o, hs, he)
        act_off, act_ph, act_ns = _reorder_csr(act_off, o, act_ph, act_ns)
        g_row, g_dev, phase, b_s, b_e, ev, w_s, w_e = (x[o] for x in (g_row, g_dev, phase, b_s, b_e, ev, w_s, w_e))
        busy, kern, nk, unattr, g_key = busy[o], kern[o], nk[o], unattr[o], g_key[o]
    return LaunchGaps(g_row, g_dev, phase, b_s, b_e, ev, w_s, w_e, busy, kern, nk, hole_off, hs, he,
                      act_off, act_ph, act_ns, unattr, g_key >= 0, list(tl.phases), is_root=parent[g_row] < 0)


def _idle_in_windows(a_key, a_s, a_e, w_key, w_s, w_e):
    """(window, start, end) of the parts of each window [w_s, w_e) in which no device work of the
    window's device (``a_key`` == ``w_key``) ran. Per device: union of its work, the gaps between (and
    before/after) it, intersected with the windows."""
    big = np.iinfo(np.int64).max // 4
    ug, us, ue = union_by_group(a_key, a_s, a_e)
    gg, gs, ge = gaps_between(ug, us, ue)
    first, last = segment_bounds(ug)
    ig = np.concatenate([gg, ug[first], ug[last]])
    i_s = np.concatenate([gs, np.full(int(first.sum()), -big, np.int64), ue[last]])
    i_e = np.concatenate([ge, us[first], np.full(int(last.sum()), big, np.int64)])
    parts: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for k in np.unique(w_key).tolist():
        wi = np.flatnonzero(w_key == k)
        ii = np.flatnonzero(ig == k)
        if len(ii) == 0:  # a device with no work at all: the whole window is idle
            a, b = np.arange(len(wi)), None
            s, e = w_s[wi], w_e[wi]
        else:
            a, b = pair_overlaps(w_s[wi], w_e[wi], i_s[ii], i_e[ii])
            s = np.maximum(w_s[wi[a]], i_s[ii[b]])
            e = np.minimum(w_e[wi[a]], i_e[ii[b]])
        keep = e > s
        parts[0].append(wi[a][keep])
        parts[1].append(s[keep])
        parts[2].append(e[keep])
    if not parts[0]:
        z = np.zeros(0, np.int64)
        return z, z, z
    return tuple(np.concatenate(p).astype(np.int64) for p in parts)


def _reorder_csr(offsets: np.ndarray, order: np.ndarray, *vals: np.ndarray):
    counts = np.diff(offsets)[order]
    new_off = offsets_from_counts(counts)
    take = np.repeat(offsets[:-1][order] - new_off[:-1], counts) + np.arange(int(counts.sum()), dtype=np.int64)
    return (new_off, *(v[take] for v in vals))


def _empty(tl: Timeline) -> LaunchGaps:
    z = np.zeros(0, np.int64)
    one = np.zeros(1, np.int64)
    return LaunchGaps(z, z, z, z, z, np.zeros(0, bool), z, z, z, z, z, one, z, z, one, z, z, z, np.zeros(0, bool),
                      list(tl.phases))


def bracket_only_phases(tl: Timeline, gaps: LaunchGaps) -> list[dict]:
    """Phases with CUDA-event brackets but no activity spans under them: their device time is an
    upper bound (``basis`` "brackets"). Totals per (phase name, device), largest first."""
    c = tl.cols
    has = (c["gpu_start"] >= 0) & (c["gpu_end"] >= c["gpu_start"])
    has[gaps.row] = False
    idx = activity_index(tl)
    has[idx.rows] = False
    rows = np.flatnonzero(has)
    acc: dict[tuple[int, int], list[int]] = {}
    bracket = (c["gpu_end"][rows] - c["gpu_start"][rows]).tolist()
    for p, d, ns in zip(c["phase"][rows].tolist(), c["device"][rows].tolist(), bracket, strict=True):
        a = acc.setdefault((p, d), [0, 0])
        a[0] += 1
        a[1] += ns
    out: list[dict[str, Any]] = [{"phase": tl.phases[p], "device": d, "basis": BRACKETS, "instances": n,
                                  "bracket_ns": ns} for (p, d), (n, ns) in acc.items()]
    out.sort(key=lambda r: -r["bracket_ns"])
    return out
