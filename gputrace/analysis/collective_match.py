"""Collectives matched across ranks by content, their waits, and whether the clocks let a straggler be named.

Input: per rank a list of :class:`CollEvent` (one collective call or kernel: its normalised op, its span on the
job's clock, and what the trace says of its content: process group, sequence number, size). Output: the matched
collectives (:class:`Matched`) and a :class:`ClockCheck`. Never by order alone:

1. **By content**: events that carry a sequence number (``gputrace.collective.seq`` from ``gputrace record``'s torch
   capture, Kineto's ``Seq`` on ``record_param_comms``) on every rank match when their (process group, sequence
   number, op) agree; a size both sides know and that must agree (all_reduce, broadcast, reduce, all_gather,
   reduce_scatter: not all_to_all, whose inputs differ per rank) that differs makes no match.
2. **By time**, for the rest: a collective cannot complete on any rank before every rank has arrived, so the
   spans of one collective that last until it completes (an NCCL kernel, gloo's worker-thread annotation, a
   synchronous call, the torch capture's span ended at completion: ``covers_wait``) overlap, and they end
   nearly together. Two such events of the same op (and group and size, where both are known) match when they
   overlap, within the clock uncertainty (plus :data:`OVERLAP_SLACK_NS`); each event is used once, closest
   ends first. Events that do not last until completion (an asynchronous call's enqueue) are matched only by
   content.

**Waits**: in a matched collective the rank that arrived last (latest start) made each other rank wait
``last arrival - own arrival``, bounded by that rank's own span where it lasts until completion (a rank cannot
wait longer than its call lasted).

**Clock check** (:func:`check_clocks`): the verdict on which rank is the straggler is only given when the
trace allows it. It is refused ("cannot tell: clocks differ by X") when the exact ends of matched collectives,
which must coincide, differ by more than the tolerance (an end seen late by a completion callback, the torch
capture's ``future`` spans, is no evidence: ``CollEvent.end_exact``); when an arrival difference is longer than
the waiting rank's own call for most matched collectives; or when the ranks have collectives of the same op but
none of them line up in time (X is then the typical distance between their nearest ends).

Pure Python over small lists (a collective is a few events per rank); any thread.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import median

from gputrace.analysis._common import fmt_ns

#: How far apart (ns, median over the matched collectives, beyond the clock uncertainty) two ranks' ends of one
#: collective may be before the clocks are called apart: NCCL kernels of one all-to-all on two GPUs ended up to
#: 0.33 ms apart in HTA's public trace; gloo's worker threads on a loaded 2-core machine 0.05-3 ms (median 0.8).
END_SLACK_NS = 2_000_000
#: How far (ns, beyond the clock uncertainty) one rank's span may end before another's starts and still be
#: one collective with it (timestamps rounded to a microsecond, as Kineto writes them).
OVERLAP_SLACK_NS = 2_000
#: Ops whose per-rank inputs have the same size (so a size that differs means another collective).
SAME_SIZE_OPS = frozenset(("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"))

_PREFIX = re.compile(r"^(?:void\s+)?(?:c10d::|nccl:|gloo:|mpi:|ucc:|nccldevkernel_|ncclkernel_|nccl)", re.IGNORECASE)
_FAMILIES = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
             ("alltoall", "all_to_all"), ("sendrecv", "all_to_all"), ("broadcast", "broadcast"),
             ("bcast", "broadcast"), ("barrier", "barrier"), ("reduce", "reduce"), ("gather", "gather"),
             ("scatter", "scatter"), ("send", "send_recv"), ("recv", "send_recv"))


@lru_cache(maxsize=4096)
def op_of(name: str) -> str:
    """The normalised op of a collective's name, whoever wrote it: ``c10d::allreduce_``, ``nccl:all_reduce``,
    ``gloo:all_reduce``, ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``allreduce``, Kineto's ``Collective name``
    -> ``all_reduce``; ``_allgather_base`` -> ``all_gather``; ``ncclKernel_SendRecv_...`` and ``alltoall_base_``
    -> ``all_to_all`` (NCCL runs an all-to-all as grouped send/receive kernels). Unknown: the name lowered."""
    s = _PREFIX.sub("", str(name).strip())
    key = re.sub(r"[^a-z]", "", s.lower())
    for head, op in _FAMILIES:
        if key.startswith(head):
            return op
    return key or str(name)


@dataclass(frozen=True)
class CollEvent:
    """One rank's part of a collective: ``op`` (``op_of``), ``start`` / ``end`` on the job's clock (ns), and its
    content where the trace has it: ``group`` (process group name), ``seq`` (that group's sequence number),
    ``size`` in ``unit`` ("B" bytes, "n" elements; compared only between events that both have it in one unit).
    ``covers_wait``: the span
    lasts until the collective completes (see the module docstring). ``row``: the Timeline row, -1 if none.
    ``end_exact``: see the field."""

    rank: int
    op: str
    start: int
    end: int
    group: str | None = None
    seq: int | None = None
    size: int | None = None
    unit: str = ""
    covers_wait: bool = True
    row: int = -1
    #: the end is when the collective completed on this rank, not when a callback on another thread later saw it
    #: complete (the torch capture's async ``future`` spans end a few ms late under load): only exact ends
    #: testify in the clock check's end comparison.
    end_exact: bool = True


@dataclass
class Matched:
    """One collective seen on several ranks: ``events`` by rank, ``how`` ("sequence" or "time")."""

    events: dict[int, CollEvent]
    how: str
    waits: dict[int, int] = field(default_factory=dict)
    last_rank: int = -1
    raw: dict[int, int] = field(default_factory=dict)  # arrival differences before the bound

    @property
    def op(self) -> str:
        return next(iter(self.events.values())).op

    @property
    def arrival(self) -> int:
        """The last rank's arrival."""
        return self.events[self.last_rank].start if self.last_rank in self.events else 0


def _content_ok(a: CollEvent, b: CollEvent) -> bool:
    if a.op != b.op:
        return False
    if a.group is not None and b.group is not None and a.group != b.group:
        return False
    return not (a.op in SAME_SIZE_OPS and a.size is not None and b.size is not None and a.unit == b.unit
                and a.size != b.size)


def match_by_sequence(per_rank: Mapping[int, Sequence[CollEvent]]) -> tuple[list[Matched], dict[int, list[CollEvent]]]:
    """(the collectives matched by (group, seq, op) over the ranks whose events carry a sequence number, the
    events left for matching by time). An event whose key another rank lacks, or whose size disagrees, stays."""
    keyed: dict[tuple, dict[int, CollEvent]] = {}
    rest: dict[int, list[CollEvent]] = {rk: [] for rk in per_rank}
    for rk, evs in per_rank.items():
        for ev in evs:
            if ev.seq is None:
                rest[rk].append(ev)
                continue
            slot = keyed.setdefault((ev.group or "", ev.seq, ev.op), {})
            if rk in slot:  # a repeated key on one rank (two captures of one call): keep the first
                rest[rk].append(ev)
            else:
                slot[rk] = ev
    out: list[Matched] = []
    for slot in keyed.values():
        evs = list(slot.values())
        if len(slot) >= 2 and all(_content_ok(evs[0], e) for e in evs[1:]):
            out.append(Matched(dict(slot), "sequence"))
        else:
            for rk, ev in slot.items():
                rest[rk].append(ev)
    return out, rest


def match_by_time(per_rank: Mapping[int, Sequence[CollEvent]], tolerance: int) -> list[Matched]:
    """Collectives matched in time (see the module docstring): the rank with the most events is the reference;
    each other rank's events are paired with its events one to one, closest ends first, where the content
    agrees and the two spans overlap (one may end up to ``tolerance`` before the other starts). Only events that
    last until completion take part."""
    evs = {rk: sorted((e for e in v if e.covers_wait), key=lambda e: e.start) for rk, v in per_rank.items()}
    evs = {rk: v for rk, v in evs.items() if v}
    if len(evs) < 2:
        return []
    ref = max(evs, key=lambda rk: (len(evs[rk]), -rk))
    base = evs[ref]
    groups: list[dict[int, CollEvent]] = [{ref: e} for e in base]
    starts = [e.start for e in base]
    longest = max(e.end - e.start for e in base)
    for rk, mine in evs.items():
        if rk == ref:
            continue
        pairs = []
        for j, e in enumerate(mine):
            lo = bisect.bisect_left(starts, e.start - longest - tolerance)
            hi = bisect.bisect_right(starts, e.end + tolerance)
            for i in range(lo, hi):
                b = base[i]
                if b.end + tolerance >= e.start and _content_ok(b, e):
                    pairs.append((abs(b.end - e.end), i, j))
        pairs.sort()
        used_i, used_j = set(), set()
        for _, i, j in pairs:
            if i in used_i or j in used_j:
                continue
            used_i.add(i)
            used_j.add(j)
            groups[i][rk] = mine[j]
    return [Matched(g, "time") for g in groups if len(g) >= 2]


def assign_waits(m: Matched) -> Matched:
    """Sets ``last_rank``, ``raw`` (last arrival - own arrival) and ``waits`` (``raw`` bounded by the rank's own
    span where it lasts until completion) of ``m``; returns it."""
    last = max(m.events, key=lambda rk: (m.events[rk].start, -rk))
    t = m.events[last].start
    m.last_rank = last
    m.raw = {rk: t - e.start for rk, e in m.events.items() if rk != last}
    m.waits = {rk: (min(w, max(m.events[rk].end - m.events[rk].start, 0)) if m.events[rk].covers_wait else w)
               for rk, w in m.raw.items()}
    return m


@dataclass(frozen=True)
class ClockCheck:
    """Whether the matched collectives allow naming a straggler: ``ok``; else ``offset_ns`` (how far the clocks
    appear apart) and ``reason`` (one sentence). ``tolerance_ns``: what the check allowed."""

    ok: bool
    tolerance_ns: int
    offset_ns: int = 0
    reason: str = ""

    def to_dict(self) -> dict:
        return {"ok": self.ok, "tolerance_ns": self.tolerance_ns, "offset_ns": self.offset_ns, "reason": self.reason}


def _nearest_end_offset(per_rank: Mapping[int, Sequence[CollEvent]]) -> int:
    """The typical distance (ns, the largest over the ranks of the median over a rank's events) from an event's end
    to the nearest end of an event of the same op on the reference rank (the one with the most events); 0 when no
    two ranks share an op. One sorted search per event: linear in the ranks."""
    ranks = [rk for rk, v in per_rank.items() if v]
    if len(ranks) < 2:
        return 0
    ref = max(ranks, key=lambda rk: (len(per_rank[rk]), -rk))
    ends: dict[str, list[int]] = {}
    for e in per_rank[ref]:
        ends.setdefault(e.op, []).append(e.end)
    for v in ends.values():
        v.sort()
    best = 0
    for rk in ranks:
        if rk == ref:
            continue
        ds = []
        for e in per_rank[rk]:
            near = ends.get(e.op) or []
            if not near:
                continue
            i = bisect.bisect_left(near, e.end)
            ds.append(min((near[j] - e.end for j in (i - 1, i) if 0 <= j < len(near)), key=abs))
        if ds:
            best = max(best, abs(int(median(ds))))
    return best


def check_clocks(matched: Sequence[Matched], per_rank: Mapping[int, Sequence[CollEvent]], tolerance: int) -> ClockCheck:
    """The clock check of the module docstring over ``matched`` (waits assigned) and the events they came from."""
    if not matched:
        shared = {e.op for v in per_rank.values() for e in v}
        ranks_with = [rk for rk, v in per_rank.items() if v]
        if len(ranks_with) >= 2 and any(all(any(e.op == op for e in per_rank[rk]) for rk in ranks_with)
                                        for op in shared):
            off = _nearest_end_offset(per_rank)
            if abs(off) > tolerance:
                return ClockCheck(False, tolerance, off, f"cannot tell: clocks differ by {fmt_ns(abs(off))} (no "
                                                         "collective lines up across the ranks)")
        return ClockCheck(True, tolerance)
    # Ends of one collective coincide on a shared clock: their offset per rank against a reference.
    offs: dict[int, list[int]] = {}
    for m in matched:
        ends = {rk: e.end for rk, e in m.events.items() if e.covers_wait and e.end_exact}
        if len(ends) < 2:
            continue
        ref = min(ends)
        for rk, t in ends.items():
            if rk != ref:
                offs.setdefault(rk, []).append(t - ends[ref])
    worst = max((int(median(v)) for v in offs.values()), key=abs, default=0)
    if abs(worst) > tolerance:
        return ClockCheck(False, tolerance, worst, f"cannot tell: clocks differ by {fmt_ns(abs(worst))} (the ends of "
                                                   "one collective, which coincide, are that far apart)")
    # A rank cannot wait longer than its own call lasted.
    over = [max(m.raw[rk] - (m.events[rk].end - m.events[rk].start) for rk in m.raw)
            for m in matched if m.raw and all(m.events[rk].covers_wait for rk in m.raw)]
    bad = [x for x in over if x > tolerance]
    if over and len(bad) * 2 > len(over):
        x = int(median(bad))
        return ClockCheck(False, tolerance, x, f"cannot tell: clocks differ by about {fmt_ns(x)} (the arrival "
                                               "differences exceed the collectives' own durations)")
    return ClockCheck(True, tolerance)


def match(per_rank: Mapping[int, Sequence[CollEvent]], uncertainty: int = 0) -> tuple[list[Matched], ClockCheck]:
    """Every collective matched (by sequence, then by time within ``uncertainty`` + :data:`OVERLAP_SLACK_NS`),
    waits assigned, in arrival order; and the clock check (tolerance ``uncertainty`` + :data:`END_SLACK_NS`)."""
    by_seq, rest = match_by_sequence(per_rank)
    out = by_seq + match_by_time(rest, uncertainty + OVERLAP_SLACK_NS)
    for m in out:
        assign_waits(m)
    out.sort(key=lambda m: m.arrival)
    return out, check_clocks(out, per_rank, uncertainty + END_SLACK_NS)
