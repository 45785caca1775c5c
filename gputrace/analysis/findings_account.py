"""Each second of wall time in at most one finding: the :class:`Finding` record and :func:`account`, which
turns the findings' wall-clock intervals into savings that add up to at most the wall time (docs/findings.md,
"Each second in one finding"). The rules that make findings are in gputrace/analysis/findings.py.

A saving is wall time the fix could remove from the job, so it is measured on the job's one timeline (the
epoch clock all processes share), never summed over processes: a finding carries the wall-clock ``intervals``
its saving comes from (GPU idle gaps, unattributed pieces, launch gaps, sync waits, start-up, the ranks' waits
for a straggler, a rank's communication), merged, so two ranks idling at the same moment count that moment once.
Findings claim wall time in :data:`CLAIM_ORDER`, the most specific first: start-up, the straggler's waits,
exposed communication, sync waits, pageable copies, pinning, launch gaps, unattributed host time inside a named
phase (deepest first), GPU idle per device, and last a process root's host time in no phase. A finding's
saving is at most the part of its intervals no earlier finding claimed (its evidence says how much went to
which; a finding whose ``bound_ns`` is shorter than that part claims only its first ``saving_ns`` of it, leaving
the rest to later findings), and at most the wall time that the claimed intervals and the earlier findings
without intervals (pageable copies, pinning, any rule over an older document) left. So the table's savings add
up to at most ``wall_ns``, the union of the runs' extents. Two GPUs idle at the same moment save that moment once
(the second is named in the first's evidence). Wall time in which no GPU was observed (CUDA collection paused, the
document's ``unobserved``: gputrace/analysis/unobserved.py) is in no finding: nothing is known about the GPUs
there.

Pure; any thread; raises nothing.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from gputrace.analysis._common import fmt_ns

__all__ = ["CLAIM_ORDER", "Finding", "Span", "account", "merge_spans"]


@dataclass(frozen=True)
class Finding:
    """One row of the Findings table: ``rule`` (the name of its row in findings.RULES), ``title`` (what to fix),
    ``evidence`` (the figures behind it), ``saving_ns`` (estimated time saved), ``where`` (phase, device or
    rank it concerns), ``bound_ns`` and ``bound`` (what the fix can recover at most, and what bounds it). Text is
    built from trace names: escape it before it reaches markup."""

    rule: str
    title: str
    evidence: str
    saving_ns: int
    where: str = ""
    #: The wall-clock intervals (epoch ns, sorted, disjoint) the saving comes from; () when the rule has none.
    #: Not part of the JSON document: :func:`account` turns them into the saving.
    intervals: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)
    #: What the fix can physically recover at most (ns; -1: not known, e.g. a section of an older document missing),
    #: computed by the rule from other figures than its estimate (docs/findings.md, "What bounds each saving"):
    #: ``saving_ns <= bound_ns`` whenever it is known.
    bound_ns: int = -1
    #: What bounds it, in words ("the GPU work that could fill it"); "" when ``bound_ns`` is -1.
    bound: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("intervals")
        return d


Span = tuple[int, int]


def merge_spans(pairs: Iterable) -> list[Span]:
    """Sorted, disjoint union of ``(start, end)`` pairs (empty ones dropped; touching ones joined)."""
    out: list[Span] = []
    for a, b in sorted((int(p[0]), int(p[1])) for p in pairs if int(p[1]) > int(p[0])):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(iv: list[Span]) -> int:
    return sum(b - a for a, b in iv)


def _minus(a: list[Span], b: list[Span]) -> list[Span]:
    """``a`` less ``b`` (both sorted and disjoint); each of ``a``'s intervals starts its walk of ``b`` by
    bisection, so the cost follows the pieces of ``b`` that overlap ``a``, not the length of ``b``."""
    ends = [e for _, e in b]
    out: list[Span] = []
    for s, e in a:
        k, cur = bisect_right(ends, s), s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


class _Claims:
    """The wall time claimed so far: sorted, disjoint pieces (numpy arrays), each tagged with the position of the
    finding that claimed it (pieces of different findings may touch). :meth:`claim` finds the pieces a new
    finding's intervals overlap by bisection (:meth:`overlap`) and measures them in whole-array passes, and
    :meth:`add` inserts what the finding claims, so accounting F findings
    costs about F x (their intervals + the pieces they overlap) element operations, never a Python step per
    earlier finding (the scan of every earlier finding's intervals per finding took 250 s at 10k ranks)."""

    def __init__(self) -> None:
        self.starts = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self.owner = np.zeros(0, np.int64)
        self.total = 0

    def overlap(self, iv: list[Span]) -> tuple[list[Span], np.ndarray, np.ndarray]:
        """For ``iv`` (sorted, disjoint): the part no earlier finding holds and, for each earlier finding that
        holds some of ``iv``, its position and how much it holds."""
        starts, ends, owner = self.starts, self.ends, self.owner
        own: list[Span] = []
        held_o, held_ns = [], []
        for s, e in iv:
            k0, k1 = int(np.searchsorted(ends, s, "right")), int(np.searchsorted(starts, e, "left"))
            if k0 >= k1:
                own.append((s, e))
                continue
            ps, pe = starts[k0:k1], ends[k0:k1]
            held_o.append(owner[k0:k1])
            held_ns.append(np.minimum(pe, e) - np.maximum(ps, s))
            hole_s = np.concatenate(([s], pe))  # the holes between the overlapped pieces, before and after them
            hole_e = np.concatenate((ps, [e]))
            keep = hole_e > hole_s
            own += zip(hole_s[keep].tolist(), hole_e[keep].tolist(), strict=True)
        if not held_o:
            z = np.zeros(0, np.int64)
            return own, z, z
        by, ns = (np.concatenate(held_o), np.concatenate(held_ns)) if len(held_o) > 1 else (held_o[0], held_ns[0])
        if len(by) == 1:
            return own, by, ns
        u, inv = np.unique(by, return_inverse=True)
        return own, u, np.bincount(inv.reshape(-1), weights=ns, minlength=len(u)).astype(np.int64)

    def add(self, own: list[Span], who: int) -> None:
        """Claim ``own`` (sorted, disjoint, in holes :meth:`overlap` found) for finding position ``who``."""
        if own:
            os_, oe = np.array(own, np.int64).T
            at = np.searchsorted(self.starts, os_)
            self.starts, self.ends = np.insert(self.starts, at, os_), np.insert(self.ends, at, oe)
            self.owner = np.insert(self.owner, at, who)
            self.total += int((oe - os_).sum())


def _first(iv: list[Span], ns: int) -> list[Span]:
    """The first ``ns`` of ``iv`` (sorted, disjoint): what a finding whose bound is shorter than its intervals claims
    (its fix recovers at most that much of them; the rest of that wall time stays free for later findings)."""
    out: list[Span] = []
    for a, b in iv:
        if ns <= 0:
            break
        out.append((a, min(b, a + ns)))
        ns -= out[-1][1] - a
    return out


#: The order in which findings claim wall time, the most specific first (see the module docstring).
#: ``unattributed`` of a phase inside a process (a path with ``/``) claims before ``gpu-idle-host``, the
#: deepest path first; of a top-level span (a process root: its host code in no phase) after it.
CLAIM_ORDER = ("startup", "straggler", "exposed-comm", "sync-wait", "pageable-copy", "pinning-loss", "launch-bound",
               "unattributed", "gpu-idle-host", "unattributed-root")


#: The most findings an evidence names as "at the same time (counted here once)" (10k ranks idle at once named
#: all 10k in one cell); the rest are counted.
SAME_TIME_NAMES = 8


def _claim_key(f: Finding) -> tuple:
    name = "unattributed-root" if f.rule == "unattributed" and "/" not in f.where else f.rule
    order = CLAIM_ORDER.index(name) if name in CLAIM_ORDER else len(CLAIM_ORDER)
    depth = -f.where.count("/") if f.rule == "unattributed" else 0
    return (order, depth, -f.saving_ns, f.where)


def _label(f: Finding) -> str:
    return f"{f.rule} ({f.where})" if f.where else f.rule


def account(found: list[Finding], wall_ns: int = 0, min_ns: int = 0, unobserved: Iterable = ()) -> list[Finding]:
    """Each second of wall time in at most one finding (see the module docstring): ``found`` with savings
    bounded by the wall time each can still claim, in :data:`CLAIM_ORDER`; findings left under ``min_ns``
    are dropped; the rest keep their order of ``found``. With ``wall_ns`` > 0 (the union of the runs'
    extents, which every interval of a trace lies in) the savings add up to at most it: a finding gets at
    most the wall time that the claimed intervals and the earlier findings without intervals left.
    ``unobserved``: ``(start, end)`` pairs of wall time in which no GPU was observed (CUDA collection paused:
    ``gputrace.analysis.unobserved``): no finding claims them, and they are not wall time left to claim."""
    unseen = merge_spans(unobserved)
    unseen_ns = _length(unseen)
    claims = _Claims()
    owners: list[tuple[str, int]] = []  # (label, index in found) of each interval finding, in claim order
    new: dict[int, Finding] = {}
    also: dict[int, list[str]] = {}  # a finding -> the same rule's findings at the same time (e.g. GPU 1 idle too)
    scalar_total = 0
    for i, f in sorted(enumerate(found), key=lambda p: _claim_key(p[1])):
        notes = []
        left = max(0, wall_ns - unseen_ns - claims.total - scalar_total) if wall_ns > 0 else None
        saving = f.saving_ns
        if f.intervals:
            iv = merge_spans(f.intervals)
            span = _length(iv)
            if unseen:
                iv = _minus(iv, unseen)
                if _length(iv) < span:
                    notes.append(f"{fmt_ns(span - _length(iv))} of it with CUDA collection paused (not observed), "
                                 "not counted")
            own, held_by, held_ns = claims.overlap(iv)
            saving = min(saving, _length(own))
            if span < f.saving_ns:
                notes.append(f"{fmt_ns(span)} of wall time (processes in parallel counted once)")
            span = _length(iv)
            if saving < min(f.saving_ns, span):
                # the findings that held it, most first (ties: the earlier claim): the first, and the others
                # that held at least 1 % of this finding's saving
                o = np.lexsort((held_by, -held_ns))
                o = o[held_ns[o] > 0]
                n_taken = max(int(np.count_nonzero(held_ns[o] * 100 >= f.saving_ns)), 1) if len(o) else 0
                taken = [(owners[int(held_by[j])][0], int(held_ns[j]), owners[int(held_by[j])][1]) for j in o[:2]]
                notes.append(", ".join(f"{fmt_ns(ns)} of it counted in {lbl}" for lbl, ns, _ in taken[:n_taken])
                             + (f" and {n_taken - 2} more" if n_taken > 2 else ""))
                for _, ns, k in taken[:1]:
                    if found[k].rule == f.rule and f.where:
                        also.setdefault(k, []).append(f"{f.where} {fmt_ns(ns)}")
            if 0 <= f.bound_ns < _length(own):  # bounded below its intervals: the rest is left to later findings
                own = _first(own, saving)
            claims.add(own, len(owners))
            owners.append((_label(f), i))
        if left is not None and left < saving:
            notes.append(f"capped at the {fmt_ns(left)} of wall time no other finding counts")
            saving = left
        if not f.intervals:
            scalar_total += saving
        new[i] = f if not notes else replace(f, saving_ns=int(saving), evidence=f.evidence + "; " + "; ".join(notes))
    for k, names in also.items():  # e.g. GPU 0 and GPU 1 idle at once: the second counted in the first, say so
        same = ", ".join(names[:SAME_TIME_NAMES]) + (f" and {len(names) - SAME_TIME_NAMES:,} more"
                                                     if len(names) > SAME_TIME_NAMES else "")
        new[k] = replace(new[k], evidence=f"{new[k].evidence}; at the same time (counted here once): {same}")
    # Invariant: each interval finding's saving lies in its own claimed intervals (disjoint), each other
    # finding's within the wall left, so the sum is at most |claimed| + scalar_total <= wall_ns.
    return [new[i] for i in range(len(found)) if new[i].saving_ns >= min_ns and new[i].saving_ns > 0]
