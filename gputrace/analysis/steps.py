"""Steps: the iterations of a training (or any repeating) loop, per process, and its warm-up.

A *step series* is found per process (``host``, ``pid``), by the first of these that applies:

1. **Numbered steps**: host spans named ``ProfilerStep#N`` (torch.profiler's ``schedule``), else a name that
   ends in a number after a step word (``step0``, ``iteration 3``, ``train_step_12``, ``batch#4``), at least
   :data:`MIN_STEPS` of one prefix, disjoint in time, numbers rising with time.
2. **A repeating range**: on the process's main thread lane (the lane whose top-level spans cover the most
   time, as a union: overlapping spans of a helper thread count once), a span name recurring at least
   :data:`MIN_STEPS` times at one depth, disjoint in time, under one parent (or under sequential parents
   that it fills: steps inside ``epoch`` ranges): the shallowest depth that has one. There the step is the
   coarsest period (:func:`_period`): the name with the most time in all (``train_step``), or a rarer name
   between two calls of which it is called 2 to :data:`MAX_PER_STEP` times (``backward``, with the model's
   and the loss module's ``forward`` before it); the names that recur that often are once per step
   (``dataloader.next``, ``backward``, ``optimizer.step``); the step starts at the first of the iteration:
   the first of them, or a name called several times per step that comes before it (``forward``), at its
   first call after the previous iteration's (:func:`_iteration_starts`), so a step starts where the loop's
   body does.
3. **A repeating kernel sequence** (no host range repeats): the process's kernels on its busiest GPU, in
   start order; the period is that of a kernel name whose recurrences are mostly the same number of kernels
   apart and whose repeats tile most of the sequence (the same name sequence between them, of at least
   :data:`MIN_KERNEL_NAMES` distinct names; of several, the
   one that tiles the most kernels, so not a layer's sub-loop nor one kernel repeated); a step starts at
   the position in the period with the longest GPU idle gap before it (where the host loads the next batch).

A step runs from one occurrence's start to the next's (so time between two ranges is in a step); the last
runs to the end of the last occurrence (of any of the names recurring with it). Per step: ``wall_ns`` and
``gpu_busy_ns``, the union of the process's kernels, copies and memsets in the step (``_common.device_activity``;
a Kineto trace's streams belong to no pid: the host's activity then).

**Warm-up**: the first steps whose wall is above the median by more than :data:`WARMUP_MADS` scaled MADs (and
by :data:`WARMUP_MIN_EXCESS` of the median at least), contiguous from the first step, at most half of them;
with everything of the process before its first step (start-up, imports, CUDA context, module loading,
cuDNN autotuning before the loop). The *steady state* is from the first step that is not warm-up
(:attr:`StepSeries.cut`). The slowest step of the steady state is compared with the median one: the
breakdown of each (time per host range, CUDA API call, kernel, copy, and GPU idle) and the largest
differences say why it was slow.

:func:`steady_timeline` cuts the warm-up out of a Timeline (what a recording started at the steady state
would hold): ``analysis.report`` runs the findings on it, so no finding counts warm-up time and the 1 %
threshold is of the steady-state wall (docs/findings.md, "Warm-up and the steady state").

Pure numpy over a Timeline; any thread; raises nothing on a trace without steps (an empty report). Names come
from the trace: escape them before they reach markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from gputrace.activity import short_kernel_name
from gputrace.analysis._common import device_activity, fmt_ns, host_rows, union_by_group
from gputrace.analysis.activity_index import KERNEL, WHAT_NAMES, activity_index, renumbered_scan
from gputrace.analysis.api_calls import api_rows, phase_mask
from gputrace.timeline.model import Timeline

__all__ = ["MIN_STEPS", "WARMUP_MADS", "WARMUP_MIN_EXCESS", "StepSeries", "Steps", "detect_steps",
           "steady_timeline"]

#: The fewest occurrences that make a series of steps.
MIN_STEPS = 3
#: A leading step is warm-up when its wall exceeds the median by more than this many scaled MADs ...
WARMUP_MADS = 5.0
#: ... and by at least this share of the median (a MAD of 0 does not make every slower step warm-up).
WARMUP_MIN_EXCESS = 0.25
#: The steps (first start to last end) hold at least this share of the process's phase and GPU busy time (a
#: series of ``verify`` calls at the end of a run of proofs is not the run's loop).
MIN_COVERAGE = 0.5
#: A kernel period holds at least this many distinct kernel names (forward, backward, optimizer: not two
#: kernels alternating inside one phase).
MIN_KERNEL_NAMES = 3
#: A name defines the step when the name with the most time is called at most this many times between two of
#: its calls (gradient accumulation's micro-batches, each a ``forward`` and ``backward``, per ``optimizer.step``);
#: a rarer name is not the loop's (a ``validate`` per epoch of hundreds of steps).
MAX_PER_STEP = 8
#: Steps listed one by one in the JSON document (the figures count them all).
MAX_LISTED_STEPS = 1000
#: Rows of a breakdown difference kept (largest first).
DIFF_ROWS = 5

_PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")
_NUMBERED = re.compile(r"(.*?(?:step|iter|iteration|batch)[\s#_:\-]*)(\d+)", re.IGNORECASE)
_BIG = np.iinfo(np.int64).max


@dataclass
class StepSeries:
    """One process's steps. ``method``: ``profiler-step``, ``numbered``, ``range`` or ``kernels``; ``name``:
    the span name (a numbered series: its prefix, e.g. ``ProfilerStep#``) or kernel name that marks a step;
    ``start``/``end``: int64 arrays (epoch ns); ``gpu_busy``: per step; ``warmup``: how many leading steps are
    warm-up; ``first_ns``: the process's first time (where its warm-up starts); ``depth``: the marking spans'
    depth (-1 for kernels)."""

    host: str
    pid: int
    process: str
    method: str
    name: str
    start: np.ndarray
    end: np.ndarray
    gpu_busy: np.ndarray
    warmup: int
    first_ns: int
    depth: int = -1
    marks: tuple[int, ...] = ()  # the phase ids of the marking spans (their breakdown rows are left out)
    has_gpu: bool = False

    @property
    def wall(self) -> np.ndarray:
        return self.end - self.start

    @property
    def cut(self) -> int:
        """Where the steady state starts: the first step that is not warm-up."""
        return int(self.start[self.warmup])

    @property
    def warmup_ns(self) -> int:
        return max(0, self.cut - self.first_ns)


@dataclass
class Steps:
    """The step series of a Timeline (one per process with steps) and their summary."""

    series: list[StepSeries] = field(default_factory=list)
    doc: dict = field(default_factory=dict)  # ``to_dict()``, computed once

    @property
    def cuts(self) -> dict[tuple[str, int], int]:
        """(host, pid) -> where that process's steady state starts (only processes with a warm-up)."""
        return {(s.host, s.pid): s.cut for s in self.series if s.warmup_ns > 0}

    @property
    def warmup_intervals(self) -> list[tuple[int, int]]:
        from gputrace.analysis.findings_account import merge_spans

        return merge_spans((s.first_ns, s.cut) for s in self.series if s.warmup_ns > 0)

    @property
    def warmup_ns(self) -> int:
        return sum(b - a for a, b in self.warmup_intervals)

    def to_dict(self) -> dict:
        return self.doc


# ---- detection ---------------------------------------------------------------------------------------------


def _proc_of_lanes(tl: Timeline) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """Lane -> index into the processes (host, pid) list, -1 for a lane of no process (pid < 0)."""
    keys = sorted({(ln.host, int(ln.pid)) for ln in tl.lanes if int(ln.pid) >= 0})
    ix = {k: i for i, k in enumerate(keys)}
    return np.array([ix.get((ln.host, int(ln.pid)), -1) for ln in tl.lanes] or [-1], np.int64), keys


def _disjoint(s: np.ndarray, e: np.ndarray) -> bool:
    o = np.argsort(s, kind="stable")
    return bool(np.all(s[o][1:] >= e[o][:-1]))


def _numbered(tl: Timeline, rows: np.ndarray):
    """Candidates ``(method, prefix, rows by start)`` of numbered steps among host ``rows``: ``ProfilerStep#N``
    first, then other numbered names, each by depth (shallowest first)."""
    c = tl.cols
    for pat, method in ((_PROFILER_STEP, "profiler-step"), (_NUMBERED, "numbered")):
        groups: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for pid in np.unique(c["phase"][rows]).tolist():
            m = pat.fullmatch(tl.phases[pid])
            if not m:
                continue
            prefix = "ProfilerStep#" if method == "profiler-step" else m.group(1)
            num = int(m.group(m.lastindex or 1))
            for r in rows[c["phase"][rows] == pid].tolist():
                groups.setdefault((prefix, int(c["depth"][r])), []).append((r, num))
        for (prefix, _), items in sorted(groups.items(), key=lambda kv: (kv[0][1], -len(kv[1]), kv[0][0])):
            if len(items) < MIN_STEPS:
                continue
            r = np.array([i for i, _ in items], np.int64)
            nums = np.array([n for _, n in items], np.int64)
            o = np.argsort(c["start"][r], kind="stable")
            r, nums = r[o], nums[o]
            if np.all(np.diff(nums) > 0) and _disjoint(c["start"][r], c["end"][r]):
                yield method, prefix, r


def _main_lane(tl: Timeline, rows: np.ndarray) -> int:
    """The lane whose top-level rows (among ``rows``) cover the most time, as a union (the thread that drives
    the loop): a thread of overlapping spans (DDP's reducer thread, its bucket all-reduces in flight together,
    one waiting for a late rank most of each step) counts each instant once, so it never outweighs the lane
    of the process's root span, whatever the trace's extent (the whole run, or the steady state only)."""
    c = tl.cols
    par = c["parent"][rows]
    top = rows[(par < 0) | (c["lane"][np.maximum(par, 0)] != c["lane"][rows])]
    if not len(top):
        top = rows
    g, us, ue = union_by_group(c["lane"][top], c["start"][top], c["end"][top])
    dur = np.bincount(g, weights=(ue - us).astype(np.float64))
    return int(np.argmax(dur))


def _fills_parents(tl: Timeline, r: np.ndarray) -> bool:
    """Whether ranges ``r`` under several parents are a loop split over them (steps filling each of
    sequential ``epoch`` ranges), not a sub-loop inside each of them (the per-circuit ``assemble`` calls at
    the end of each proof): under each parent, from their first start to their last end they cover at least
    half of it. One parent (or none): True."""
    c = tl.cols
    par = c["parent"][r]
    ps = np.unique(par)
    if len(ps) == 1:
        return True
    if (ps < 0).any() or not _disjoint(c["start"][ps], c["end"][ps]):
        return False
    lo = np.full(len(ps), _BIG, np.int64)
    hi = np.zeros(len(ps), np.int64)
    k = np.searchsorted(ps, par)
    np.minimum.at(lo, k, c["start"][r])
    np.maximum.at(hi, k, c["end"][r])
    return bool(np.all((hi - lo) * 2 >= c["end"][ps] - c["start"][ps]))


def _per_gap(q: np.ndarray, a: np.ndarray) -> np.ndarray:
    """How many of the starts ``a`` (sorted) fall between each two consecutive starts ``q`` (sorted)."""
    return np.diff(np.searchsorted(a, q, side="left"))


def _regular(q: np.ndarray, a: np.ndarray, k: int) -> bool:
    """Whether ``k`` of the starts ``a`` fall between most consecutive starts ``q`` (two thirds of them: a
    warm-up iteration may hold an extra call)."""
    per = _per_gap(q, a)
    return bool(len(per)) and int(np.count_nonzero(per == k)) * 3 >= len(per) * 2


def _period(cands: list, start: np.ndarray) -> tuple[int, list]:
    """``(count, the candidates called once per iteration)`` of candidates ``(total, phase, rows by start)`` of
    one depth: their coarsest period. The anchor is the candidate with the most time; a rarer candidate
    defines the period when ``k`` of the anchor's calls (2 <= k <= :data:`MAX_PER_STEP`) fall between most two
    of its consecutive calls (``backward`` once per iteration, the anchor ``forward`` twice: the model's and
    the loss module's); of those, the rarest. So a name called k times per iteration never defines the step,
    nor does a name far rarer than the loop's body (a ``validate`` per epoch). None: the anchor's count."""
    _, _, ar = max(cands, key=lambda t: (t[0], -t[1]))
    n_a = len(ar)
    best = n_a
    for _, _, r in sorted(cands, key=lambda t: len(t[2])):
        k = int(round(n_a / len(r)))
        if len(r) < n_a - 1 and 2 <= k <= MAX_PER_STEP and _regular(start[r], start[ar], k):
            best = len(r)
            break
    return best, [t for t in cands if abs(len(t[2]) - best) <= 1]


def _repeating(tl: Timeline, rows: np.ndarray):
    """Candidates ``(name, its rows by start, the phase ids recurring with it, the marking phase ids)`` of a
    repeating range on the main lane, one per depth, shallowest first (see the module docstring, case 2). The
    marks are the names called once per iteration (their rows are left out of a step's breakdown); a name
    called k times per iteration that starts it (``forward``) recurs with them but is no mark."""
    c = tl.cols
    rows = rows[c["lane"][rows] == _main_lane(tl, rows)]
    if len(rows) < MIN_STEPS:
        return
    depth = c["depth"][rows].astype(np.int64)
    for d in np.unique(depth).tolist():
        at = rows[depth == d]
        ph, cnt = np.unique(c["phase"][at], return_counts=True)
        cands = []
        for p, n in zip(ph.tolist(), cnt.tolist(), strict=True):
            if n < MIN_STEPS:
                continue
            r = at[c["phase"][at] == p]
            r = r[np.argsort(c["start"][r], kind="stable")]
            if _disjoint(c["start"][r], c["end"][r]) and _fills_parents(tl, r):
                cands.append((int((c["end"][r] - c["start"][r]).sum()), p, r))
        if not cands:
            continue
        n, once = _period(cands, c["start"])
        peers = [(int(c["start"][r[0]]), p, r) for _, p, r in once]
        first = min(peers, key=lambda t: (t[0], t[1]))
        # The names called k times per iteration (``forward`` of the model, then of the loss) ...
        multi = [(int(c["start"][r[0]]), p, r) for _, p, r in cands
                 if 2 <= round(len(r) / n) <= MAX_PER_STEP
                 and _regular(c["start"][first[2]], c["start"][r], int(round(len(r) / n)))]
        lead = min(multi, key=lambda t: (t[0], t[1])) if multi else None
        if lead is not None and lead[0] < first[0]:
            # ... one of which comes first: a step starts at its first call after the iteration before ends
            r = _iteration_starts(c["start"], c["end"], first[2], [r for _, _, r in peers], lead[2])
            marks = tuple(p for _, p, _ in peers)
            yield tl.phases[lead[1]], r, marks + (lead[1],), marks
            continue
        r = first[2]
        every = rows[c["phase"][rows] == first[1]]  # the same range at other depths too (a warm-up loop before
        every = every[np.argsort(c["start"][every], kind="stable")]  # the profiled `train` range), if disjoint
        if len(every) > len(r) and _disjoint(c["start"][every], c["end"][every]):
            r = every
        marks = tuple(p for _, p, _ in peers)
        yield tl.phases[first[1]], r, marks, marks


def _iteration_starts(start: np.ndarray, end: np.ndarray, first: np.ndarray, once: list[np.ndarray],
                      lead: np.ndarray) -> np.ndarray:
    """The rows of ``lead`` (a name called several times per iteration, the first of it) that start the
    iterations: before each occurrence of ``first`` (the first of the names called once per iteration), the
    first ``lead`` from the last end of a once-per-iteration name before it (the previous iteration's
    ``optimizer.step``) on, after the previous ``first``; that ``first`` itself when there is none."""
    fs = start[first]
    ends = np.sort(np.concatenate([end[r] for r in once]))
    j = np.searchsorted(ends, fs, side="right") - 1
    lo = np.where(j >= 0, ends[np.maximum(j, 0)], np.iinfo(np.int64).min)
    lo = np.maximum(lo, np.concatenate([[np.iinfo(np.int64).min], fs[:-1] + 1]))
    ls = start[lead]
    i = np.searchsorted(ls, lo, side="left")
    ok = (i < len(ls)) & (ls[np.minimum(i, len(ls) - 1)] <= fs)
    return np.where(ok, lead[np.minimum(i, len(ls) - 1)], first)


def _kernel_steps(tl: Timeline, krows: np.ndarray, ks: np.ndarray, ke: np.ndarray) -> tuple[str, np.ndarray,
                                                                                            np.ndarray] | None:
    """(anchor kernel name, step starts, step ends) from a repeating kernel sequence, or None (see the module
    docstring, case 3). ``krows``/``ks``/``ke``: one device's kernels, by start."""
    n = len(krows)
    if n < 2 * MIN_STEPS:
        return None
    names = tl.cols["phase"][krows].astype(np.int64)
    best = None
    for p in np.unique(names).tolist():
        pos = np.flatnonzero(names == p)
        if len(pos) < MIN_STEPS:
            continue
        d = np.diff(pos)
        vals, cnt = np.unique(d, return_counts=True)
        m = int(vals[np.argmax(cnt)])
        regular = pos[:-1][d == m]
        if len(regular) * 2 < len(d) or len(regular) * m * 10 < n * 7:
            continue  # a sub-loop inside a step (a layer), or no regular period
        segs = [tuple(names[a:a + m].tolist()) for a in regular.tolist()]
        ref = max(set(segs), key=segs.count)
        if segs.count(ref) * 2 < len(segs) or len(set(ref)) < MIN_KERNEL_NAMES:
            continue
        key = (-len(regular) * m, m, int(pos[0]))  # the period that tiles the most kernels, then the shortest
        if best is None or key < best[0]:
            best = (key, m, pos, regular)
    if best is None:
        return None
    _, m, pos, regular = best
    # The step starts where the GPU waited longest within the period (the host preparing the next batch).
    prev_end = np.concatenate([[ks[0]], np.maximum.accumulate(ke)[:-1]])
    gap = np.maximum(ks - prev_end, 0)
    idx = regular[:, None] + np.arange(m)[None, :]
    r = int(np.argmax(np.median(gap[idx], axis=0)))
    target = names[regular[0] + r]
    b = np.concatenate([[pos[0] + r - m], pos + r])  # a step may start before the anchor's first occurrence
    b = b[(b >= 0) & (b < n)]
    b = b[names[b] == target]
    if len(b) < MIN_STEPS:
        return None
    starts = ks[b]
    last_end = int(ke[b[-1]:min(n, b[-1] + m)].max())
    ends = np.concatenate([starts[1:], [last_end]])
    return tl.phases[int(names[b[0]])], starts, ends


def _last_end(tl: Timeline, r: np.ndarray, rows: np.ndarray, peers) -> int:
    """Where the last step ends: the end of the last marking span, or of a span recurring with it (same depth)
    that starts after it (a step marked by ``forward`` ends with its ``optimizer.step``)."""
    c = tl.cols
    ph = c["phase"][rows]
    m = c["depth"][rows] == c["depth"][r[-1]]
    peer = ph == peers[0]  # np.isin over a few names, without its set-up per call
    for p in peers[1:]:
        peer |= ph == p
    peer_rows = rows[peer & m]
    tail = peer_rows[c["start"][peer_rows] >= c["start"][r[-1]]]
    return int(max(c["end"][r[-1]], c["end"][tail].max() if len(tail) else 0))


def _work_union(tl: Timeline, rows: np.ndarray, us: np.ndarray, ue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the process's phase spans (its root left out) and its GPU busy time: what the steps of a
    loop must hold most of."""
    c = tl.cols
    lo, hi = c["start"][rows].min(), c["end"][rows].max()
    inner = rows[~((c["parent"][rows] < 0) & (c["start"][rows] <= lo) & (c["end"][rows] >= hi))]
    s = np.concatenate([c["start"][inner], us])
    e = np.concatenate([c["end"][inner], ue])
    _, ws, we = union_by_group(np.zeros(len(s), np.int64), s, e)
    return ws, we


def _coverage(work: tuple[np.ndarray, np.ndarray], a: int, b: int) -> float:
    """The share of ``work`` that steps from ``a`` (their first start) to ``b`` (:func:`_last_end`) hold."""
    ws, we = work
    total = int((we - ws).sum())
    if total <= 0:
        return 1.0
    return int(_busy_in(ws, we, np.array([a], np.int64), np.array([b], np.int64))[0]) / total


def _busy_in(us: np.ndarray, ue: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of the union ``[us, ue)`` (sorted, disjoint) inside each window ``[a, b)``."""
    if len(us) == 0:
        return np.zeros(len(a), np.int64)
    cum = np.concatenate([[0], np.cumsum(ue - us)])
    t = np.concatenate([b, a])  # the union up to each end, then up to each start: one pass for both
    k = np.searchsorted(us, t, side="right") - 1
    kk = np.maximum(k, 0)
    upto = np.where(k >= 0, cum[kk] + np.clip(np.minimum(t, ue[kk]) - us[kk], 0, None), 0)
    return (upto[:len(b)] - upto[len(b):]).astype(np.int64)


def _median(x: np.ndarray) -> float:
    """``np.median`` of a non-empty 1-d array without NaN (the same float: the middle value, or the float64 mean
    of the two middle ones), without its per-call set-up (it runs per process)."""
    v = np.sort(x)
    n = len(v)
    if n % 2:
        return float(v[n // 2])
    return (float(v[n // 2 - 1]) + float(v[n // 2])) / 2


def _warmup_count(wall: np.ndarray) -> int:
    n = len(wall)
    med = _median(wall)
    mad = _median(np.abs(wall - med)) * 1.4826
    thr = med + max(WARMUP_MADS * mad, WARMUP_MIN_EXCESS * med)
    k = 0
    while k < n // 2 and wall[k] > thr:
        k += 1
    return k


def _process_name(tl: Timeline, rows: np.ndarray, host: str, pid: int, several: bool) -> str:
    """The process's root span name (``record``), else its host (a profiler file), with its rank if any."""
    c = tl.cols
    name = f"{host} pid {pid}" if several else host
    rank = None
    if len(rows):
        lo, hi = c["start"][rows].min(), c["end"][rows].max()
        root = rows[(c["parent"][rows] < 0) & (c["start"][rows] <= lo) & (c["end"][rows] >= hi)]
        if len(root):
            name = tl.name_of(int(root[0]))
        res = int(c["resource"][rows[0]])
        if 0 <= res < len(tl.resources):
            rank = tl.resources[res].get("gputrace.rank")
    return name if rank is None else f"{name} (rank {rank})"


@dataclass
class _Procs:
    """Each process's rows, found once (whole-array passes; a trace of thousands of pids is not scanned per pid):
    ``keys`` (host, pid); per process ``rows`` (all, ascending), ``phases`` (host phase rows, no CUDA API call),
    ``api`` (CUDA API rows), ``dev`` (indices into ``act_*``: its device activity, or, when none is its own,
    the pid-less activity of its host: a Kineto trace's streams), ``own`` (whether ``dev`` is its own) and
    ``group`` (which ``dev`` it is: its own index, or ``len(keys)`` + its host's index when shared: what is
    derived from ``dev`` alone is computed once per group, in ``cache``); ``index``: (host, pid) -> its index."""

    keys: list[tuple[str, int]]
    rows: list[np.ndarray]
    phases: list[np.ndarray]
    api: list[np.ndarray]
    dev: list[np.ndarray]
    own: list[bool]
    act_rows: np.ndarray
    act_s: np.ndarray
    act_e: np.ndarray
    group: list[int] = field(default_factory=list)
    index: dict[tuple[str, int], int] = field(default_factory=dict)
    cache: dict[tuple[str, int], object] = field(default_factory=dict)

    def cached(self, make, k: int, *args):
        """``make(*args)`` for process ``k``'s device activity group: computed once per group and ``make``."""
        key = (make.__name__, self.group[k])
        if key not in self.cache:
            self.cache[key] = make(*args)
        return self.cache[key]


def _groups(key: np.ndarray, n: int) -> list[np.ndarray]:
    """Indices of ``key == k`` for k in range(n), each ascending (one stable sort)."""
    o = np.argsort(key, kind="stable")
    b = np.searchsorted(key[o], np.arange(n + 1))
    return [o[b[k]:b[k + 1]] for k in range(n)]


def _procs(tl: Timeline) -> _Procs:
    c = tl.cols
    lane_proc, keys = _proc_of_lanes(tl)
    proc = lane_proc[c["lane"]]
    n = len(keys)
    hm = np.zeros(tl.n, bool)
    hm[host_rows(tl)] = True
    api = api_rows(tl)
    ph = hm & phase_mask(tl) & ~api
    ap = hm & api
    rows = _groups(proc, n)
    act_rows, act_s, act_e = device_activity(tl)
    act_proc = proc[act_rows]
    dev = _groups(act_proc, n)
    hosts = sorted({h for h, _ in keys} | {ln.host for ln in tl.lanes})
    hix = {h: i for i, h in enumerate(hosts)}
    lane_host = np.array([hix[ln.host] for ln in tl.lanes] or [0], np.int64)
    loose = np.flatnonzero(act_proc < 0)
    by_host = [loose[g] for g in _groups(lane_host[c["lane"][act_rows[loose]]], len(hosts))]  # one array per host
    own = [len(d) > 0 for d in dev]
    dev = [d if o else by_host[hix[h]] for d, o, (h, _) in zip(dev, own, keys, strict=True)]
    group = [k if o else n + hix[h] for k, (o, (h, _)) in enumerate(zip(own, keys, strict=True))]
    return _Procs(keys, rows, [r[ph[r]] for r in rows], [r[ap[r]] for r in rows], dev, own, act_rows, act_s, act_e,
                  group, {key: k for k, key in enumerate(keys)})


def _dev_kernels(tl: Timeline, P: _Procs, k: int) -> np.ndarray:
    """Positions in ``activity_index(tl)`` of process ``k``'s kernels (its ``dev``), ascending."""
    ai = activity_index(tl)
    mine = np.sort(P.act_rows[P.dev[k]])
    if not len(mine) or not len(ai.rows):
        return np.zeros(0, np.int64)
    at = np.searchsorted(ai.rows, mine).clip(0, len(ai.rows) - 1)
    at = at[ai.rows[at] == mine]
    return at[ai.what[at] == KERNEL]


def _dev_union(P: _Procs, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of device activity ``dev`` (indices into ``P.act_*``): (starts, ends), sorted and disjoint."""
    if not len(dev):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, us, ue = union_by_group(np.zeros(len(dev), np.int64), P.act_s[dev], P.act_e[dev])
    return us, ue


def _busiest_kernel_steps(tl: Timeline, P: _Procs, k: int) -> tuple[str, np.ndarray, np.ndarray] | None:
    """:func:`_kernel_steps` of process ``k``'s kernels on the device that ran the most of them, or None."""
    ki = _dev_kernels(tl, P, k)
    if not len(ki):
        return None
    ai = activity_index(tl)
    krows, kst, ken, kdev = ai.rows[ki], ai.start[ki], ai.end[ki], ai.device[ki]
    vals, cnt = np.unique(kdev, return_counts=True)
    sel = kdev == vals[np.argmax(cnt)]
    o = np.argsort(kst[sel], kind="stable")
    return _kernel_steps(tl, krows[sel][o], kst[sel][o], ken[sel][o])


def detect_steps(tl: Timeline, procs: _Procs | None = None) -> list[StepSeries]:
    """The step series of each process that has one (see the module docstring), by host then pid."""
    if tl.n == 0 or not tl.lanes:
        return []
    c = tl.cols
    P = procs or _procs(tl)
    hosts = {h for h, _ in P.keys}
    out = []
    for k, (host, pid) in enumerate(P.keys):
        rows = P.phases[k]
        dev = P.dev[k]
        if len(rows) < MIN_STEPS and len(dev) < 2 * MIN_STEPS:
            continue
        us, ue = P.cached(_dev_union, k, P, dev)  # per host, not per pid, when shared
        found = None
        if len(rows) >= MIN_STEPS:
            work = _work_union(tl, rows, us, ue)
            held = 0.0
            for method, name, r in _numbered(tl, rows):
                peers = (int(c["phase"][r[0]]),)
                le = _last_end(tl, r, rows, peers)
                held = 1.0 if method == "profiler-step" else _coverage(work, int(c["start"][r[0]]), le)
                if held >= MIN_COVERAGE:
                    found = (method, name, r, le, np.unique(c["phase"][r]).tolist())
                    break
            if found is None or found[0] == "numbered":
                # A range wins over numbered steps that it holds more of than they do (the loop's first
                # iterations before the numbered ones: an Nsight trace's warm-up loop outside its `train` range).
                for name, r, peers, marks in _repeating(tl, rows):
                    le = _last_end(tl, r, rows, peers)
                    cov = _coverage(work, int(c["start"][r[0]]), le)
                    if cov >= MIN_COVERAGE:
                        if found is None or (len(r) > len(found[2]) and cov > held + 0.1):
                            found = ("range", name, r, le, list(marks))
                        break
        if found is not None:
            method, name, r, last_end, marks = found
            starts = c["start"][r].astype(np.int64)
            ends = np.concatenate([starts[1:], [last_end]])
            depth = int(c["depth"][r[0]])
        else:
            ks_ = P.cached(_busiest_kernel_steps, k, tl, P, k)
            if ks_ is None:
                continue
            name, starts, ends = ks_[0], ks_[1].copy(), ks_[2].copy()
            method, depth, marks = "kernels", -1, []
        every = P.rows[k]
        lo = [int(c["start"][every].min())] if len(every) else []
        if P.own[k]:
            lo.append(int(P.act_s[dev].min()))
        first = min(lo + [int(starts[0])])
        wall = ends - starts
        out.append(StepSeries(host, pid, _process_name(tl, rows, host, pid, len(P.keys) > len(hosts)), method, name,
                              starts, ends, _busy_in(us, ue, starts, ends), _warmup_count(wall), first, depth,
                              tuple(int(m) for m in marks), bool(len(us))))
    return out


# ---- breakdowns and the summary ----------------------------------------------------------------------------


def breakdown(tl: Timeline, s: StepSeries, a: int, b: int, procs: _Procs | None = None) -> dict[str, int]:
    """Where the time of window [a, b) of series ``s``'s process went: ``{label: ns}`` with ``span NAME`` (host
    ranges in the window, at the shallowest depth there and one below; the marking spans and the ranges around
    the whole window left out), ``host in no range`` (the window less the union of the process's ranges but
    its root), ``CUDA API NAME``, ``kernel NAME``, ``copy NAME``/``memset``, and ``GPU idle`` (the window less
    the GPU's busy time in it)."""
    c = tl.cols
    P = procs or _procs(tl)
    k = P.index.get((s.host, s.pid), -1)
    if b <= a or k < 0:
        return {}
    out: dict[str, int] = {}

    def add(labels: list[str], s0: np.ndarray, e0: np.ndarray) -> None:
        d = np.clip(np.minimum(e0, b) - np.maximum(s0, a), 0, None)
        for lab, v in zip(labels, d.tolist(), strict=True):
            if v > 0:
                out[lab] = out.get(lab, 0) + int(v)

    every = P.phases[k]
    if len(every):  # the process's root (a span over all its host work) is the window itself: left out
        lo_t, hi_t = c["start"][every].min(), c["end"][every].max()
        every = every[~((c["parent"][every] < 0) & (c["start"][every] <= lo_t) & (c["end"][every] >= hi_t))]
    ph = every[(c["start"][every] < b) & (c["end"][every] > a)]
    if len(ph):
        _, us, ue = union_by_group(np.zeros(len(ph), np.int64), np.maximum(c["start"][ph], a),
                                   np.minimum(c["end"][ph], b))
        untraced = (b - a) - int(np.clip(ue - us, 0, None).sum())
    else:
        untraced = b - a
    if untraced > 0 and len(P.phases[k]):
        out["host in no range"] = untraced
    # the step's parts: ranges inside the window (not those around it: the step's own range, `train`), at the
    # shallowest depth there and one below, the marking ranges left out
    ph = ph[~((c["start"][ph] <= a) & (c["end"][ph] >= b)) & ~np.isin(c["phase"][ph], list(s.marks))]
    if len(ph):
        lo = int(c["depth"][ph].min())
        ph = ph[c["depth"][ph] <= lo + 1]
        add([f"span {tl.name_of(int(r))}" for r in ph.tolist()], c["start"][ph], c["end"][ph])
    ar = P.api[k]
    ar = ar[(c["start"][ar] < b) & (c["end"][ar] > a)]
    add([f"CUDA API {tl.name_of(int(r))}" for r in ar.tolist()], c["start"][ar], c["end"][ar])
    ai = activity_index(tl)
    ix = _activity_in(P.cached(_activity_by_time, k, tl, P, k), a, b)
    labels = []
    for r, w in zip(ai.rows[ix].tolist(), ai.what[ix].tolist(), strict=True):
        nm = tl.name_of(int(r))
        labels.append(f"kernel {short_kernel_name(nm)}" if w == KERNEL else
                      ("memset" if WHAT_NAMES[w] == "memset" else f"copy {nm}"))
    add(labels, ai.start[ix], ai.end[ix])
    if s.has_gpu:
        if len(ix):
            _, us, ue = union_by_group(np.zeros(len(ix), np.int64), np.maximum(ai.start[ix], a),
                                       np.minimum(ai.end[ix], b))
            idle = (b - a) - int((ue - us).sum())
        else:
            idle = b - a
        if idle > 0:
            out["GPU idle"] = idle
    return out


def _activity_by_time(tl: Timeline, P: _Procs, k: int) -> tuple[np.ndarray, ...]:
    """Process ``k``'s device activity (its ``dev``) as positions in ``activity_index(tl)``, by start: (positions,
    their starts, their ends, the running maximum of their ends), for :func:`_activity_in`."""
    ai = activity_index(tl)
    keep = np.sort(P.act_rows[P.dev[k]])
    if not len(keep) or not len(ai.rows):
        z = np.zeros(0, np.int64)
        return z, z, z, z
    at = np.searchsorted(ai.rows, keep).clip(0, len(ai.rows) - 1)
    ix = at[ai.rows[at] == keep]
    ix = ix[np.argsort(ai.start[ix], kind="stable")]
    e = ai.end[ix]
    return ix, ai.start[ix], e, np.maximum.accumulate(e) if len(e) else e


def _activity_in(by_time: tuple[np.ndarray, ...], a: int, b: int) -> np.ndarray:
    """The positions (ascending) of the activity in ``by_time`` (:func:`_activity_by_time`) that overlaps [a, b):
    only those starting before ``b`` from the first whose running end passes ``a`` are looked at (a window of a
    process sharing its host's streams with thousands of others does not scan them all)."""
    ix, st, en, run_end = by_time
    lo = int(np.searchsorted(run_end, a, side="right"))
    hi = int(np.searchsorted(st, b, side="left"))
    if hi <= lo:
        return np.zeros(0, np.int64)
    return np.sort(ix[lo:hi][en[lo:hi] > a])


def diff(slow: dict[str, int], base: dict[str, int], rows: int = DIFF_ROWS) -> list[dict]:
    """The largest differences of two breakdowns: ``[{"what", "slowest_ns", "median_ns", "delta_ns"}]``, the
    largest increase first (only increases when there are any)."""
    rows_ = [(k, slow.get(k, 0), base.get(k, 0)) for k in set(slow) | set(base)]
    up = [r for r in rows_ if r[1] > r[2]]
    picked = sorted(up, key=lambda r: (r[2] - r[1], r[0])) if up else sorted(
        rows_, key=lambda r: (-abs(r[1] - r[2]), r[0]))
    return [{"what": k, "slowest_ns": a, "median_ns": b, "delta_ns": a - b} for k, a, b in picked[:rows]]


def _top(bd: dict[str, int], rows: int = 3) -> list[dict]:
    return [{"what": k, "ns": v} for k, v in sorted(bd.items(), key=lambda kv: (-kv[1], kv[0]))[:rows]]


def _series_dict(tl: Timeline, s: StepSeries, startup: list[dict], procs: _Procs) -> dict:
    """Series ``s`` in the JSON document; ``startup``: the start-up entries of its process (``_by_process``)."""
    wall = s.wall
    steady = wall[s.warmup:]
    med = _median(steady)
    out = {"process": s.process, "host": s.host, "pid": s.pid, "method": s.method, "name": s.name,
           "count": len(wall), "steady_count": len(steady), "median_ns": int(med),
           "p90_ns": int(np.percentile(steady, 90)), "mean_ns": int(steady.mean()),
           "gpu_busy_median_ns": int(_median(s.gpu_busy[s.warmup:])) if s.has_gpu else None,
           "steady_from_ns": s.cut,
           "steps": [{"index": i, "start_ns": int(a), "wall_ns": int(w), "gpu_busy_ns": int(g) if s.has_gpu else None,
                      "warmup": i < s.warmup}
                     for i, (a, w, g) in enumerate(zip(s.start[:MAX_LISTED_STEPS].tolist(),
                                                       wall[:MAX_LISTED_STEPS].tolist(),
                                                       s.gpu_busy[:MAX_LISTED_STEPS].tolist(), strict=True))]}
    i_slow = s.warmup + int(np.argmax(steady))
    i_med = s.warmup + int(np.argmin(np.abs(steady - med)))
    why = [] if i_slow == i_med else diff(breakdown(tl, s, int(s.start[i_slow]), int(s.end[i_slow]), procs),
                                          breakdown(tl, s, int(s.start[i_med]), int(s.end[i_med]), procs))
    out["slowest"] = {"index": i_slow, "wall_ns": int(wall[i_slow]), "median_index": i_med,
                      "median_wall_ns": int(wall[i_med]), "why": why, "text": _why_text(s, i_slow, i_med, why)}
    if s.warmup_ns > 0:
        st = sum(max(0, min(int(d["end_ns"]), s.cut) - max(int(d["start_ns"]), s.first_ns)) for d in startup)
        out["warmup"] = {"start_ns": s.first_ns, "end_ns": s.cut, "ns": s.warmup_ns, "steps": s.warmup,
                         "steps_ns": int(wall[:s.warmup].sum()), "before_first_step_ns": int(s.start[0]) - s.first_ns,
                         "startup_ns": st, "top": _top(breakdown(tl, s, s.first_ns, s.cut, procs))}
    return out


def _why_text(s: StepSeries, i_slow: int, i_med: int, why: list[dict]) -> str:
    w = s.wall
    head = f"step {i_slow} {fmt_ns(w[i_slow])} vs median step {i_med} {fmt_ns(w[i_med])}"
    parts = [f"{x['what']} {'+' if x['delta_ns'] >= 0 else '-'}{fmt_ns(abs(x['delta_ns']))}" for x in why[:3]]
    return head + (": " + ", ".join(parts) if parts else "")


def _by_process(startup: list[dict]) -> dict[tuple[object, int], list[dict]]:
    """The start-up entries by (host, pid), in their order (grouped once: not scanned per process)."""
    out: dict[tuple[object, int], list[dict]] = {}
    for d in startup:
        out.setdefault((d.get("host"), int(d.get("pid", -1))), []).append(d)
    return out


def steps_report(tl: Timeline, startup: list[dict] | None = None) -> Steps:
    """:func:`detect_steps` and the ``steps`` section of ``report --json`` (docs/analysis.md, "Steps"):
    ``series`` (one per process with steps) and ``warmup`` (the union of the processes' warm-up, or None).
    ``startup``: ``startup.startup_intervals(tl)`` when the caller has it (the warm-up says how much of it
    was start-up)."""
    procs = _procs(tl) if tl.n and tl.lanes else None
    series = detect_steps(tl, procs)
    st = startup or []
    out = Steps(series)
    by_proc = _by_process(st)
    docs = [_series_dict(tl, s, by_proc.get((s.host, s.pid), []), procs) for s in series] if procs is not None else []
    warm = None
    iv = out.warmup_intervals
    if iv:
        ws = [d["warmup"] for d in docs if "warmup" in d]
        warm = {"ns": sum(b - a for a, b in iv), "intervals": [[a, b] for a, b in iv],
                "steps": sum(w["steps"] for w in ws), "steps_ns": sum(w["steps_ns"] for w in ws),
                "startup_ns": sum(w["startup_ns"] for w in ws)}
    out.doc = {"series": docs, "warmup": warm}
    return out


# ---- the steady state --------------------------------------------------------------------------------------


def steady_timeline(tl: Timeline, cuts: dict[tuple[str, int], int]) -> Timeline:
    """``tl`` without the warm-up: each process's rows before its cut (``Steps.cuts``) dropped, and those
    crossing it started at the cut (host and device times); rows of a process without steps, or of no
    process (a Kineto trace's streams), are cut at the earliest cut. What a recording started at the steady
    state would hold; attributes, names and parents kept."""
    if not cuts or tl.n == 0:
        return tl
    c = tl.cols
    lane_cut = np.array([cuts.get((ln.host, int(ln.pid)), min(cuts.values())) for ln in tl.lanes], np.int64)
    cut = lane_cut[c["lane"]]
    g0, g1 = c["gpu_start"], c["gpu_end"]
    keep = np.flatnonzero(np.maximum(c["end"], g1) > cut)
    cols = {k: v[keep] for k, v in c.items()}
    ct = cut[keep]
    end = np.maximum(cols["end"], ct)
    cols["start"] = np.minimum(np.maximum(cols["start"], ct), end)
    cols["end"] = end
    has = cols["gpu_start"] >= 0
    cols["gpu_start"] = np.where(has, np.maximum(cols["gpu_start"], ct), cols["gpu_start"])
    cols["gpu_end"] = np.where(has, np.maximum(cols["gpu_end"], cols["gpu_start"]), cols["gpu_end"])
    del g0
    pos = np.full(tl.n, -1, np.int64)  # old row -> its index among the kept rows (the unsorted order)
    pos[keep] = np.arange(len(keep), dtype=np.int64)
    attrs = {int(pos[r]): a for r, a in tl.attrs.items() if pos[r] >= 0}
    names = {int(pos[r]): v for r, v in tl.names.items() if pos[r] >= 0}
    out = Timeline.from_unsorted(cols, tl.phases, tl.lanes, tl.resources, tl.trace_ids, attrs, names)
    # old row -> new row: the kept rows in the Timeline's order (what from_unsorted sorts them by; tl.lanes are
    # in order already), so the attributes' scan is renumbered rather than redone
    order = np.lexsort((-cols["end"], cols["start"], cols["lane"]))  # the model's row order (stable)
    inv = np.full(tl.n, -1, np.int64)
    inv[keep[order]] = np.arange(len(keep), dtype=np.int64)
    if len(keep) == out.n and np.array_equal(out.cols["start"], cols["start"][order]):
        renumbered_scan(out, tl, inv)
    return out
