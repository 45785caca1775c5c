"""Ranks and collectives: communication time per rank, its overlap with compute, waits and stragglers.

* A row's **rank** is its resource's ``gputrace.rank`` (written by ``gputrace record`` from ``RANK``, and by
  the Kineto reader from ``distributedInfo.rank``), else ``rank`` / ``distributedInfo.rank``; a trace
  with no rank attribute has no ranks and this module reports nothing.
* **A rank's collectives**, one kind per rank, the first it has in this order (so one collective is never
  counted twice): NCCL kernels (``ncclKernel_*``, ``ncclDevKernel_*``: device time); the torch capture's spans
  (``gputrace record``: a span named after the collective with ``gputrace.collective.*`` attributes); gloo's
  own annotations (``gloo:all_reduce``, on gloo's worker thread: the collective itself); the program's own
  ranges named after a collective (``all_reduce``, ``allreduce``, ``all_gather``, ``reduce_scatter``,
  ``broadcast``, ``all_to_all``, ``barrier``: a ``gputrace.phase``, an NVTX range or a ``record_function``
  around the call); torch.distributed's calls (``c10d::allreduce_`` ...); the backend's host annotations
  (``nccl:all_reduce``) and NCCL's own NVTX ranges (``ncclAllReduce`` ...). Compute: every other kernel. The
  calls, ``nccl:`` annotations and NCCL's ranges only enqueue an asynchronous collective: they do not last until
  it completes (``CollEvent.covers_wait`` false).
* **Content** of an event, where the trace has it (the event's own attributes, its ancestors', and a
  ``c10d::`` call's ``record_param_comms`` child): process group (``gputrace.collective.group``, Kineto's
  ``Process Group Name``), sequence number (``gputrace.collective.seq``, ``Seq``), size
  (``gputrace.collective.bytes``, ``In msg nelems``, ``Input Dims``).
* Per rank: ``comm_ns`` (union of its communication), ``overlap_ns`` (the part of it during compute kernels
  of that rank) and ``exposed_ns`` = comm - overlap: communication nothing hid.
* **Collectives matched across ranks** by content, else by their ends in time, never by order
  (:mod:`gputrace.analysis.collective_match`); each rank's wait is the last rank's arrival minus its own,
  bounded by its own call. The clocks are checked first: where the trace itself shows the ranks' clocks apart
  (``clock``), no straggler is named ("cannot tell: clocks differ by X"). The tolerance is the ranks' clock
  uncertainty (``gputrace.clock.anchor_uncertainty_ns``, the two largest summed) plus the slacks of
  ``collective_match``.
* **Per step** (``steps``): where a rank has ``ProfilerStep#N`` ranges (torch.profiler's steps) the matched
  collectives are grouped by the step their last rank arrived in, with each rank's summed wait there. Another
  step detection can hand its steps in (``steps=``).
* **The straggler's cause**: what the straggler rank ran while the others waited for it: ``stragglers[i]["cause"]``,
  the spans innermost on its threads inside those waits (top three names); ``stragglers[i]["lines"]``, the
  lines its processes were at then, from ``gputrace record``'s stack samples (``analysis.host_samples``); and
  ``stragglers[i]["kernels"]``, its compute kernels in those waits (its GPU's work, when that made it late).

Pure; any thread. :func:`collectives` returns plain JSON-able data.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gputrace import activity as A
from gputrace.analysis._common import merged_pairs, merged_pairs_by_group
from gputrace.analysis.activity_index import KERNEL, activity_index, attr_scan
from gputrace.analysis.collective_match import CollEvent, Matched, match, op_of
from gputrace.analysis.host_samples import sites_in
from gputrace.timeline.model import Timeline

RANK_KEYS = ("gputrace.rank", "rank", "distributedInfo.rank")
UNCERTAINTY_KEY = "gputrace.clock.anchor_uncertainty_ns"
_NCCL_KERNEL = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_|^ncclKernel|^ncclDevKernel")
_HOST_COLLECTIVE = re.compile(
    r"^(?:c10d::(?:allreduce|allgather|all_gather|reduce_scatter|_reduce_scatter|broadcast|alltoall|all_to_all|"
    r"reduce|gather|scatter|barrier|_allgather)\w*|(?:nccl|gloo):\w+|"
    # NCCL's own NVTX ranges (domain NCCL, named after the API function, when NCCL is built with NVTX)
    r"nccl(?:AllReduce|Broadcast|Bcast|Reduce|AllGather|ReduceScatter|AlltoAll|AllToAll|Gather|Scatter))$")
#: A program's own range around a collective call, named after it (exactly; any case).
_NAMED_COLLECTIVE = re.compile(
    r"^(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|barrier)$", re.IGNORECASE)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: The cause named for time a step range covers with no span inside it (the program's own code, untraced).
UNTRACED_IN_STEP = "code in no span (inside its step)"
#: Host kinds of collective span, most faithful first (see the module docstring): kind -> lasts until completion.
_KINDS = (("capture", True), ("gloo", True), ("range", True), ("call", False), ("annotation", False))
_SOURCE = {"capture": "torch capture", "gloo": "gloo annotations", "range": "named ranges", "call": "c10d calls",
           "annotation": "nccl annotations"}
# Content keys: (attribute, what it gives).
_GROUP_KEYS = ("gputrace.collective.group", "Process Group Name")
_SEQ_KEYS = ("gputrace.collective.seq", "Seq")
_OP_KEYS = ("gputrace.collective.op", "Collective name")
_CAPTURE_OP = "gputrace.collective.op"
#: Span names of the torch capture that are not a named range above (docs/record.md, "torch capture").
_CAPTURE_ONLY_NAMES = frozenset(("reduce", "gather", "scatter"))
#: Above this many host rows inside the straggler's windows its cause is not computed (a Python sweep per row).
CAUSE_MAX_ROWS = 200_000


def is_collective_name(name: str) -> bool:
    """Whether a host span name is a collective call (torch.distributed's, or a range named after one)."""
    return bool(_HOST_COLLECTIVE.match(name) or _NAMED_COLLECTIVE.match(name))


def is_comm_kernel(name: str) -> bool:
    """Whether a kernel name (full or short) is an NCCL communication kernel."""
    return bool(_NCCL_KERNEL.search(name.strip()))


def rank_of(res: Mapping) -> int | None:
    """The rank a resource names (see the module docstring), or None."""
    for k in RANK_KEYS:
        v = res.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().isdigit():
            return int(v)
    return None


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return s[new], np.maximum.reduceat(e, idx)


def _covered(s: np.ndarray, e: np.ndarray, cs: np.ndarray, ce: np.ndarray) -> int:
    """Total length of the union (s, e) covered by the union (cs, ce)."""
    s, e = _union(s, e)
    cs, ce = _union(cs, ce)
    tot = 0
    j = 0
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        while j < len(cs) and ce[j] <= a:
            j += 1
        k = j
        while k < len(cs) and cs[k] < b:
            tot += max(0, min(b, int(ce[k])) - max(a, int(cs[k])))
            k += 1
    return tot


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**63:
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _dims_size(v: Any) -> int | None:
    """Elements of Kineto's ``Input Dims`` (the first tensor's dims): ``[[19618307]]`` -> 19618307."""
    if isinstance(v, list) and v and isinstance(v[0], list) and v[0] and all(isinstance(x, int) for x in v[0]):
        return int(np.prod(v[0], dtype=object))
    return None


class _Content:
    """Reads the content of collective rows (see the module docstring) from ``tl``'s attributes."""

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.parent = tl.cols["parent"]
        self.param_child: dict[int, int] = {}  # c10d call row -> its record_param_comms row
        ids = [i for i, p in enumerate(tl.phases) if p == "record_param_comms"]
        if ids:
            for r in np.flatnonzero(np.isin(tl.cols["phase"], np.asarray(ids))).tolist():
                p = int(self.parent[r])
                if p >= 0:
                    self.param_child.setdefault(p, r)

    def of(self, row: int) -> tuple[str | None, str | None, int | None, tuple]:
        """(op, group, seq, (size, unit)) of ``row``: its own attributes first (a recent Kineto's NCCL kernel
        carries ``Collective name``, ``Process Group Name``, ``In msg nelems``), then its ``record_param_comms``
        child, then up to four ancestors (a kernel's: the phase around its launch, ``nccl:all_reduce``, and its
        ``record_param_comms``)."""
        chain = [row]
        if row in self.param_child:
            chain.append(self.param_child[row])
        p = int(self.parent[row])
        for _ in range(4):
            if p < 0:
                break
            chain.append(p)
            p = int(self.parent[p])
        op = group = None
        seq: int | None = None
        size: tuple = (None, "")
        for r in chain:
            a = self.tl.attrs.get(r)
            if not a:
                continue
            if op is None:
                op = next((str(a[k]) for k in _OP_KEYS if a.get(k) is not None), None)
            if group is None:
                group = next((str(a[k]) for k in _GROUP_KEYS if a.get(k) is not None), None)
            if seq is None:
                seq = next((x for x in (_int(a.get(k)) for k in _SEQ_KEYS) if x is not None), None)
            if size[0] is None:
                b = _int(a.get("gputrace.collective.bytes"))
                n = _int(a.get("In msg nelems"))
                d = _dims_size(a.get("Input Dims")) if self.tl.name_of(r).startswith(("nccl:", "gloo:")) else None
                size = (b, "B") if b is not None else (n, "n") if n is not None else (d, "n") if d else (None, "")
        return op, group, seq, size


def _host_kind(name: str, attrs: Mapping | None) -> str | None:
    if attrs and attrs.get(_CAPTURE_OP) is not None:
        return "capture"
    if name.startswith("gloo:"):
        return "gloo"
    if _NAMED_COLLECTIVE.match(name):
        return "range"
    if name.startswith("c10d::") and _HOST_COLLECTIVE.match(name):
        return "call"
    if _HOST_COLLECTIVE.match(name):
        return "annotation"
    return None


def _capture_covers(attrs: Mapping) -> bool:
    """Whether a torch-capture span lasts until its collective completed (docs/trace-format.md, "torch capture")."""
    return (attrs.get("gputrace.collective.completion") != "call"
            and str(attrs.get("gputrace.collective.backend", "")).lower() != "nccl")


def _by_rank(ranks: np.ndarray) -> dict[int, np.ndarray]:
    """rank -> the positions in ``ranks`` that hold it (ascending), for ranks >= 0; one sort."""
    ok = np.flatnonzero(ranks >= 0)
    if len(ok) == 0:
        return {}
    o = ok[np.argsort(ranks[ok], kind="stable")]
    u, first = np.unique(ranks[o], return_index=True)
    return {int(k): v for k, v in zip(u.tolist(), np.split(o, first[1:]), strict=True)}


def _uncertainty(tl: Timeline, ranks_of_res: list[int | None]) -> dict[int, int]:
    out: dict[int, int] = {}
    for res, rk in zip(tl.resources, ranks_of_res, strict=True):
        if rk is None:
            continue
        u = _int(res.get(UNCERTAINTY_KEY))
        out[rk] = max(out.get(rk, 0), max(u or 0, 0))
    return out


def _steps_of(tl: Timeline, row_rank: np.ndarray) -> dict[int, list[tuple[int, int, str]]]:
    """Per rank, its ``ProfilerStep#N`` ranges (start, end, name), by start."""
    ids = [i for i, p in enumerate(tl.phases) if _STEP.match(p)]
    out: dict[int, list[tuple[int, int, str]]] = {}
    if not ids:
        return out
    c = tl.cols
    for r in np.flatnonzero(np.isin(c["phase"], np.asarray(ids))).tolist():
        rk = int(row_rank[r])
        if rk >= 0:
            out.setdefault(rk, []).append((int(c["start"][r]), int(c["end"][r]), tl.phases[int(c["phase"][r])]))
    for v in out.values():
        v.sort()
    return out


def _step_at(steps: Sequence[tuple[int, int, str]], t: int) -> str | None:
    for s, e, name in steps:
        if s <= t < e:
            return name
    return None


def _innermost(rows: list[int], starts: list[int], ends: list[int], ws: list[int], we: list[int]) -> dict[int, int]:
    """Per row, the time inside the merged windows ``[ws, we)`` during which it was the innermost of ``rows``
    (one lane's spans): the latest-started span still open, the shorter on a tie. Time covered by no row is
    not counted. A sweep over the rows' starts and ends (a heap of the open rows), so a broken nesting (a
    span whose parent link is wrong) does not change the answer."""
    pts = sorted({*starts, *ends, *ws, *we})
    order = sorted(range(len(rows)), key=lambda i: starts[i])
    heap: list[tuple[int, int, int]] = []
    out: dict[int, int] = {}
    k = w = 0
    for a, b in zip(pts, pts[1:], strict=False):
        while k < len(order) and starts[order[k]] <= a:
            i = order[k]
            heapq.heappush(heap, (-starts[i], ends[i], i))
            k += 1
        while heap and heap[0][1] <= a:
            heapq.heappop(heap)
        while w < len(ws) and we[w] <= a:
            w += 1
        if not heap or w >= len(ws) or ws[w] >= b:
            continue
        # a covering span whose end passed is popped lazily above; the top is open over [a, b)
        inside = min(b, we[w]) - max(a, ws[w])
        if inside > 0:
            r = rows[heap[0][2]]
            out[r] = out.get(r, 0) + inside
    return out


def _cause(tl: Timeline, row_rank: np.ndarray, rank: int, windows: list[tuple[int, int]], coll_rows: set[int],
           top: int = 3) -> list[dict]:
    """What ``rank`` ran on the host inside ``windows``: per span name, the time its spans were the innermost
    span of their thread (collectives, process roots and the profiler's rows left out); top ``top`` names, longest
    first."""
    if not windows:
        return []
    c = tl.cols
    # (process roots left out: a root's own time is the process's code in no span, and a rank's forked DataLoader
    # workers, whose roots span the whole run, named themselves the cause of every wait)
    host = (c["gpu_start"] < 0) & (c["kind"] != 1) & (row_rank == rank) & (c["parent"] >= 0)
    pr = attr_scan(tl).profiler  # Kineto's bookkeeping, the recorder's sample batches
    if len(pr):
        host[pr] = False
    if coll_rows:
        host[np.fromiter(coll_rows, np.int64)] = False
    ms, me = _union(np.asarray([w[0] for w in windows], np.int64), np.asarray([w[1] for w in windows], np.int64))
    rows = np.flatnonzero(host & (c["start"] < me.max()) & (c["end"] > ms.min()))
    if len(rows) > CAUSE_MAX_ROWS:
        return []
    names: dict[str, int] = {}
    lanes = c["lane"][rows]
    for ln in np.unique(lanes).tolist():
        rr = rows[lanes == ln]
        st = np.maximum(c["start"][rr], ms.min()).tolist()
        en = np.minimum(c["end"][rr], me.max()).tolist()
        for r, ns in _innermost(rr.tolist(), st, en, ms.tolist(), me.tolist()).items():
            n = tl.name_of(r)
            n = UNTRACED_IN_STEP if _STEP.match(n) else n  # a step's own time: code no span inside it covers
            names[n] = names.get(n, 0) + ns
    return [{"name": n, "ns": ns} for n, ns in sorted(names.items(), key=lambda kv: -kv[1])[:top]]


def _lines(tl: Timeline, rank: int, windows: list[tuple[int, int]], top: int = 3) -> list[dict]:
    """The lines ``rank``'s processes were at while the others waited for it, from the recorder's stack samples
    (``host_samples.sites_in``): sites with a user frame, busy ones first, then those waiting in a blocking call
    (a ``time.sleep`` or a queue read in the program is the straggler's own line too); [] without samples."""
    if not windows:
        return []
    sites = [x for x in sites_in(tl, windows, top=50) if x.rank == rank and x.user is not None]
    sites.sort(key=lambda x: (x.parked, -x.count))
    return [{"site": x.label(), "samples": x.count, "parked": x.parked, "pid": x.pid, "thread": x.thread}
            for x in sites[:top]]


def collectives(tl: Timeline, top: int = 20,
                steps: Mapping[int, Sequence[tuple[int, int, str]]] | None = None) -> dict:
    """``{"ranks", "collectives", "matched", "unmatched", "stragglers", "steps", "clock"}``; empty lists when the
    trace has no rank. ``ranks``: per rank ``rank``, ``source`` (which kind of event: "nccl kernels", "torch
    capture", "gloo annotations", "named ranges", "c10d calls", "nccl annotations"), ``comm_ns``,
    ``overlap_ns``, ``exposed_ns``, ``calls``, ``intervals`` (its communication on the epoch clock, ``[start,
    end]`` pairs: ``_common.merged_pairs``), ``compute_ns`` (the union of its compute kernels: what could hide its
    communication, the bound of the exposed-comm finding). ``collectives`` (at most ``top``, longest wait first):
    ``name``
    (the op), ``index`` (its place among the matched collectives, in arrival order), ``how`` ("sequence" /
    "time"), ``last_rank``, ``wait_ns`` (summed over the other ranks), ``waits`` ({rank: ns}, each bounded by
    that rank's own call), ``start`` (the last arrival), ``step``. ``matched``/``unmatched``: how many
    collectives were matched, how many events were not. ``stragglers``: per rank that arrived last at least
    once, most often last first: ``rank``, ``last``, ``of``, ``caused_ns`` (the others' summed wait),
    ``median_wait_ns`` (per collective it was last at), ``waited_ns`` / ``waits`` / ``median_merged_wait_ns`` (each
    other rank's waits for it with overlapping ones merged, as DDP's bucket all-reduces of one step wait together,
    each merged stretch costing its longest single wait: their total, how many, the median: the wait per step where
    a step's collectives wait at once), ``intervals`` (those waits on the job's timeline, all ranks merged:
    ``[start, end]`` pairs, ``_common.merged_pairs``), ``cause`` (see the module docstring); empty when the clock
    check refuses (``clock``: ``collective_match.ClockCheck.to_dict``).
    ``steps``: per step ``step``, ``collectives``, ``waits`` ({rank: summed wait}), ``last_rank`` (the rank last
    most often in it).
    ``steps`` (argument): per rank its steps as (start, end, name), from another step detection; default
    ``ProfilerStep#N`` ranges."""
    empty: dict = {"ranks": [], "collectives": [], "stragglers": []}
    ranks_of_res = [rank_of(r) for r in tl.resources]
    if tl.n == 0 or not any(r is not None for r in ranks_of_res):
        return empty
    c = tl.cols
    res = c["resource"]
    lut = np.asarray([-1 if rk is None else rk for rk in ranks_of_res] + [-1], np.int64)  # [-1]: no resource
    row_rank = lut[np.where((res >= 0) & (res < len(ranks_of_res)), res, len(ranks_of_res))]
    idx = activity_index(tl)
    kr = idx.rows[idx.what == KERNEL]
    ks, ke = idx.start[idx.what == KERNEL], idx.end[idx.what == KERNEL]
    kcomm = np.array([is_comm_kernel(str(tl.attrs.get(int(r), {}).get(A.KERNEL_NAME, tl.name_of(int(r)))))
                      for r in kr.tolist()], bool)
    phase_names = tl.phases
    coll_ids = [i for i, p in enumerate(phase_names) if _HOST_COLLECTIVE.match(p) or _NAMED_COLLECTIVE.match(p)]
    host_coll = np.isin(c["phase"], np.asarray(coll_ids)) if coll_ids else np.zeros(tl.n, bool)
    # the torch capture's spans are named after their op: only rows of such names are asked for its attribute
    cap_ids = [i for i, p in enumerate(phase_names) if _NAMED_COLLECTIVE.match(p) or p in _CAPTURE_ONLY_NAMES]
    if cap_ids:
        cand = np.flatnonzero(np.isin(c["phase"], np.asarray(cap_ids))).tolist()
        cap = [r for r in cand if (tl.attrs.get(r) or {}).get(_CAPTURE_OP) is not None]
        if cap:
            host_coll[np.asarray(cap, np.int64)] = True
    # not calls: the profiler's device-side copies of annotations, the recorder's sample batches
    pr = attr_scan(tl).profiler
    if len(pr):
        host_coll[pr] = False
    content = _Content(tl)
    ranks_out, per_rank = [], {}
    coll_rows: dict[int, set[int]] = {}
    # Rows grouped by rank once (a mask per rank would cost rows x ranks).
    kern_of = _by_rank(row_rank[kr])
    hrows = np.flatnonzero(host_coll)
    host_of = _by_rank(row_rank[hrows])
    no = np.zeros(0, np.int64)
    iv_g: list[np.ndarray] = []
    iv_s: list[np.ndarray] = []
    iv_e: list[np.ndarray] = []
    for rk in sorted(set(_by_rank(row_rank).keys())):
        ki = kern_of.get(rk, no)
        comm_i, comp_i = ki[kcomm[ki]], ki[~kcomm[ki]]
        evs: list[CollEvent] = []
        hr = no
        if len(comm_i):
            cs, ce, source = ks[comm_i], ke[comm_i], "nccl kernels"
            for r, s, e in zip(kr[comm_i].tolist(), cs.tolist(), ce.tolist(), strict=True):
                name = str(tl.attrs.get(r, {}).get(A.KERNEL_NAME, tl.name_of(r)))
                op, group, seq, (size, unit) = content.of(r)
                evs.append(CollEvent(rk, op_of(name), int(s), int(e), group, seq, size, unit, True, r))
            rows_used = kr[comm_i].tolist()
        else:
            hr = hrows[host_of.get(rk, no)]
            kinds: dict[str, list[int]] = {}
            for r in hr.tolist():
                k = _host_kind(phase_names[int(c["phase"][r])], tl.attrs.get(r))
                if k:
                    kinds.setdefault(k, []).append(r)
            kind = next((k for k, _ in _KINDS if kinds.get(k)), None)
            rows_used = kinds.get(kind, []) if kind else []
            source = _SOURCE.get(kind or "", "host calls")
            covers = dict(_KINDS).get(kind or "", False)
            for r in rows_used:
                op, group, seq, (size, unit) = content.of(r)
                a = tl.attrs.get(r) or {}
                evs.append(CollEvent(rk, op_of(op or phase_names[int(c["phase"][r])]), int(c["start"][r]),
                                     int(c["end"][r]), group, seq, size, unit,
                                     _capture_covers(a) if kind == "capture" else covers, r,
                                     end_exact=not (kind == "capture"
                                                    and a.get("gputrace.collective.completion") == "future")))
            ru = np.asarray(rows_used, np.int64)
            cs, ce = c["start"][ru], c["end"][ru]
        coll_rows[rk] = set(rows_used) if len(comm_i) else set(hr.tolist())
        comm = int((_union(cs, ce)[1] - _union(cs, ce)[0]).sum()) if len(cs) else 0
        overlap = _covered(cs, ce, ks[comp_i], ke[comp_i]) if len(cs) and len(comp_i) else 0
        us, ue = _union(ks[comp_i], ke[comp_i])
        ranks_out.append({"rank": rk, "source": source, "comm_ns": comm, "overlap_ns": overlap,
                          "exposed_ns": comm - overlap, "calls": len(evs), "intervals": [],
                          "compute_ns": int((ue - us).sum())})  # what could hide it: the exposed-comm bound
        iv_g.append(np.full(len(cs), len(ranks_out) - 1, np.int64))
        iv_s.append(cs)
        iv_e.append(ce)
        per_rank[rk] = sorted(evs, key=lambda e: e.start)
    if ranks_out:  # every rank's intervals in one union pass
        pairs = merged_pairs_by_group(np.concatenate(iv_g), np.concatenate(iv_s), np.concatenate(iv_e), len(ranks_out))
        for r, p in zip(ranks_out, pairs, strict=True):
            r["intervals"] = p
    if len(per_rank) < 2:
        return {"ranks": ranks_out, "collectives": [], "matched": 0, "stragglers": []}
    unc = _uncertainty(tl, ranks_of_res)
    found, clock = match(per_rank, int(sum(sorted(unc.values(), reverse=True)[:2])))
    step_ranges = dict(steps) if steps is not None else _steps_of(tl, row_rank)
    matched = [_matched_dict(i, m, step_ranges) for i, m in enumerate(found)]
    n_used = sum(len(m.events) for m in found)
    out = {"ranks": ranks_out, "matched": len(matched),
           "unmatched": sum(len(v) for v in per_rank.values()) - n_used, "clock": clock.to_dict(),
           "stragglers": [], "steps": _per_step(matched)}
    if clock.ok:
        comp = ~kcomm
        out["stragglers"] = _stragglers(tl, row_rank, found, coll_rows,
                                        (kr[comp], ks[comp], ke[comp], row_rank[kr[comp]]))
    matched.sort(key=lambda m: -m["wait_ns"])
    out["collectives"] = matched[:top]
    return out


def _matched_dict(i: int, m: Matched, step_ranges: Mapping[int, Sequence[tuple[int, int, str]]]) -> dict:
    step = _step_at(step_ranges.get(m.last_rank, ()), m.arrival)
    return {"name": m.op, "index": i, "how": m.how, "last_rank": m.last_rank, "wait_ns": int(sum(m.waits.values())),
            "waits": {str(rk): int(w) for rk, w in m.waits.items()}, "start": int(m.arrival), "step": step}


def _per_step(matched: list[dict]) -> list[dict]:
    acc: dict[str, dict] = {}
    for m in matched:
        if m["step"] is None:
            continue
        d = acc.setdefault(m["step"], {"step": m["step"], "collectives": 0, "waits": {}, "_last": {}, "_t": m["start"]})
        d["collectives"] += 1
        for rk, w in m["waits"].items():
            d["waits"][rk] = d["waits"].get(rk, 0) + int(w)
        d["_last"][m["last_rank"]] = d["_last"].get(m["last_rank"], 0) + 1
    out = []
    for d in sorted(acc.values(), key=lambda d: d["_t"]):
        last = d.pop("_last")
        d.pop("_t")
        d["last_rank"] = max(last, key=lambda rk: (last[rk], -rk))
        out.append(d)
    return out


def _kernels_in(tl: Timeline, kernels: tuple, rank: int, windows: list[tuple[int, int]], top: int = 3) -> list[dict]:
    """``rank``'s compute kernels (rows, starts, ends, ranks) inside ``windows``: time per kernel name (clipped to
    the windows), top ``top``, longest first; what its GPU was busy with while the others waited."""
    rows, ks, ke, kr = kernels
    sel = np.flatnonzero(kr == rank)
    if not windows or not len(sel):
        return []
    ws = np.asarray([w[0] for w in windows], np.int64)
    we = np.asarray([w[1] for w in windows], np.int64)
    names: dict[str, int] = {}
    for i in sel.tolist():
        ov = int(np.clip(np.minimum(we, ke[i]) - np.maximum(ws, ks[i]), 0, None).sum())
        if ov > 0:
            n = tl.name_of(int(rows[i]))
            names[n] = names.get(n, 0) + ov
    return [{"name": n, "ns": ns} for n, ns in sorted(names.items(), key=lambda kv: -kv[1])[:top]]


def _stretch_costs(waits: list[tuple[int, int]]) -> list[int]:
    """One rank's ``waits`` ((start, end) pairs) merged where they overlap; per merged stretch, the longest single
    wait in it (what the stretch cost the rank: DDP launches its first bucket while it still computes the next ones,
    so a stretch's length also holds that rank's own compute). One sort, one pass."""
    out: list[int] = []
    end = 0
    for a, b in sorted(waits):
        if out and a <= end:
            end = max(end, b)
            out[-1] = max(out[-1], b - a)
        else:
            out.append(b - a)
            end = b
    return out


def _stragglers(tl: Timeline, row_rank: np.ndarray, found: list[Matched], coll_rows: dict[int, set[int]],
                kernels: tuple) -> list[dict]:
    strag: dict[int, list[Matched]] = {}
    for m in found:
        strag.setdefault(m.last_rank, []).append(m)
    # The straggler is the rank last most often (a one-off, such as a profiler starting late on one rank,
    # does not make a straggler); ``median_wait_ns``: what one collective typically cost the others.
    out: list[dict[str, Any]] = []
    for rk, ms in strag.items():
        waits = [int(sum(m.waits.values())) for m in ms]
        windows = [(m.arrival - max(m.waits.values()), m.arrival) for m in ms if m.waits and max(m.waits.values()) > 0]
        # Each waiting rank's waits on the timeline, overlapping ones merged: a step's bucket all-reduces that all
        # wait for the same late arrival are one wait of that rank, not one per bucket.
        per_rank: dict[int, list[tuple[int, int]]] = {}
        for m in ms:
            for w_rk, w in m.waits.items():
                if w > 0:
                    per_rank.setdefault(w_rk, []).append((m.arrival - int(w), m.arrival))
        stretches = [c for iv in per_rank.values() for c in _stretch_costs(iv)]
        every = [x for iv in per_rank.values() for x in iv]
        out.append({"rank": rk, "last": len(ms), "of": len(found), "caused_ns": int(sum(waits)),
                    "median_wait_ns": int(np.median(waits)),
                    "waited_ns": int(sum(stretches)),
                    "waits": len(stretches),
                    "median_merged_wait_ns": int(np.median(stretches)) if stretches else 0,
                    "intervals": merged_pairs(np.asarray([a for a, _ in every], np.int64),
                                              np.asarray([b for _, b in every], np.int64)),
                    "cause": _cause(tl, row_rank, rk, windows, coll_rows.get(rk, set())),
                    "lines": _lines(tl, rk, windows),
                    "kernels": _kernels_in(tl, kernels, rk, windows) if len(windows) <= 10_000 else []})
    out.sort(key=lambda s: (-s["last"], -s["caused_ns"]))
    return out
