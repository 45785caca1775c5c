"""Critical path through a ``prove`` root: the chain of spans that set its end time.

Walking back from the root's end: at time ``t`` the path follows the child still active
latest before ``t`` (host or device side; ties go to the child that started earliest),
recurses into it, then continues from that child's start. Time no child covers is the
parent's own (self) time on the path. Shortening anything off the path cannot make the
root end sooner; the per-phase totals say where shortening would help.

Cost: per span on the path, one sort of its children by start and a binary search per step (so a
root with a million children costs O(n log n), not n steps of O(n) scans); a children index (CSR by
parent) is built once per Timeline and can be shared across calls. Pure; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.activity_index import activity_index
from gputrace.timeline.model import Timeline


@dataclass
class CriticalPath:
    """Segments of one root's critical path, sorted by start.

    * ``root``: the root row; ``row``/``start``/``end``: each segment is time (epoch ns) on
      the path owned by span ``row`` (its activity not covered by a deeper span on the path).
    * ``total_ns``: sum of segment lengths (= the root's activity extent).
    """

    root: int
    row: np.ndarray
    start: np.ndarray
    end: np.ndarray
    total_ns: int

    def phase_ns(self, tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
        """(phase ids, ns on the path), largest first; ties in the order the phases first appear on the path."""
        return _ranked(tl.cols["phase"][self.row].astype(np.int64), self.end - self.start, len(tl.phases))

    def by_phase(self, tl: Timeline) -> list[tuple[str, int]]:
        """(phase name, ns on the path), largest first."""
        ids, ns = self.phase_ns(tl)
        return [(tl.phases[p], n) for p, n in zip(ids.tolist(), ns.tolist(), strict=True)]

    def describe(self, tl: Timeline) -> str:
        parts = [f"{p} {fmt_ns(ns)} ({ns / max(self.total_ns, 1):.0%})" for p, ns in self.by_phase(tl)[:5]]
        return f"critical path of {tl.path(self.root)} ({fmt_ns(self.total_ns)}): " + ", ".join(parts)


def _ranked(ids: np.ndarray, ns: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``ns`` per id: (ids, sums) largest sum first, ties in order of first appearance in ``ids``."""
    if len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sums = np.bincount(ids, weights=ns.astype(np.float64), minlength=n_ids).astype(np.int64)
    uniq, first = np.unique(ids, return_index=True)
    by_first = uniq[np.argsort(first, kind="stable")]
    o = by_first[np.argsort(-sums[by_first], kind="stable")]
    return o, sums[o]


class ChildIndex:
    """Children of every row (CSR by parent; GPU activity spans left out) and each row's activity interval."""

    def __init__(self, tl: Timeline):
        c = tl.cols
        par = c["parent"]
        # GPU activity spans (kernels, copies) are left out: the path is walked per phase, and a phase
        # with 100k kernels under it would cost one numpy step per kernel (2 s at 100k kernels).
        kids = np.flatnonzero((par >= 0) & ~activity_index(tl).mask(tl.n))
        o = np.argsort(par[kids], kind="stable")
        self.kids = kids[o]
        self.offsets = np.searchsorted(par[self.kids], np.arange(tl.n + 1))
        g0, g1 = c["gpu_start"], c["gpu_end"]
        ok = (g0 >= 0) & (g1 >= g0)
        self.s = np.where(ok, np.minimum(c["start"], g0), c["start"])
        self.e = np.where(ok, np.maximum(c["end"], g1), c["end"])

    def children(self, row: int) -> np.ndarray:
        return self.kids[self.offsets[row] : self.offsets[row + 1]]


def default_root(tl: Timeline) -> int:
    """The longest ``prove`` root, else the longest root span; -1 for an empty Timeline."""
    if tl.n == 0:
        return -1
    c = tl.cols
    roots = c["parent"] < 0
    pid = tl.phase_id("prove")
    cand = np.flatnonzero(roots & (c["phase"] == pid)) if pid >= 0 else np.zeros(0, np.int64)
    if len(cand) == 0:
        cand = np.flatnonzero(roots)
    d = (c["end"] - c["start"])[cand]
    return int(cand[np.argmax(d)])


def critical_path(tl: Timeline, root: int | None = None, index: ChildIndex | None = None) -> CriticalPath:
    """Critical path of ``root`` (default: `default_root`). Raises IndexError for a row out
    of range and ValueError for an empty Timeline."""
    if tl.n == 0:
        raise ValueError("critical_path: the Timeline is empty")
    if root is None:
        root = default_root(tl)
    if not 0 <= root < tl.n:
        raise IndexError(f"critical_path: row {root} out of range 0..{tl.n - 1}")
    ix = index or ChildIndex(tl)
    rows: list[int] = []
    ss: list[int] = []
    es: list[int] = []

    def walk(v: int, hi: int, depth: int) -> None:
        s = int(ix.s[v])
        t = min(int(ix.e[v]), hi)
        a, b = int(ix.offsets[v]), int(ix.offsets[v + 1])
        if depth > 256 or a == b:
            if t > s:
                rows.append(v)
                ss.append(s)
                es.append(t)
            return
        kids = ix.kids[a:b]
        ks, ke = ix.s[kids], ix.e[kids]
        keep = np.flatnonzero((ke > s) & (ke > ks))
        o = keep[np.argsort(ks[keep], kind="stable")]  # candidates by start (ties: the children's order)
        KS, KE = ks[o], ke[o]
        pm = np.maximum.accumulate(KE) if len(KE) else KE  # prefix max of ends: nondecreasing
        # first index reaching each prefix max: where pm rises, else the previous one
        rise = np.flatnonzero(np.concatenate(([True], pm[1:] > pm[:-1]))) if len(KE) else keep
        while t > s:
            # The candidates are the children starting before t: a prefix of the by-start order (t only falls,
            # and every chosen child moves t to its own start, so a child is never chosen twice).
            j = int(KS.searchsorted(t, "left"))
            if j == 0:
                rows.append(v)
                ss.append(s)
                es.append(t)
                return
            if pm[j - 1] >= t:  # some child covers t: the earliest-starting of those (the first with pm >= t)
                i = int(pm.searchsorted(t, "left"))
            else:  # the child ending latest before t; ties: the earliest start (where the prefix max rose)
                i = int(rise[rise.searchsorted(j - 1, "right") - 1])
            c = int(o[i])
            k = int(min(ke[c], t))
            if k < t:
                rows.append(v)
                ss.append(k)
                es.append(t)
            walk(int(kids[c]), k, depth + 1)
            t = max(int(ks[c]), s)

    walk(root, int(ix.e[root]), 0)
    r, s, e = np.array(rows, np.int64), np.array(ss, np.int64), np.array(es, np.int64)
    o = np.argsort(s, kind="stable")
    return CriticalPath(root=root, row=r[o], start=s[o], end=e[o], total_ns=int((e - s).sum()))


def critical_path_summary(tl: Timeline, max_roots: int = 1000) -> list[dict]:
    """Per phase, time on the critical paths of all ``prove`` roots (at most ``max_roots``,
    the longest): ``{"phase", "ns", "share"}`` largest first; share of the summed path time."""
    c = tl.cols
    pid = tl.phase_id("prove")
    if tl.n == 0 or pid < 0:
        return []
    roots = np.flatnonzero((c["parent"] < 0) & (c["phase"] == pid))
    roots = roots[np.argsort(-(c["end"] - c["start"])[roots], kind="stable")][:max_roots]
    ix = ChildIndex(tl)
    ids, nss = [], []
    total = 0
    for r in roots.tolist():
        cp = critical_path(tl, r, ix)
        total += cp.total_ns
        i, n = cp.phase_ns(tl)
        ids.append(i)
        nss.append(n)
    pid_, ns_ = _ranked(np.concatenate(ids), np.concatenate(nss), len(tl.phases))
    names = tl.phases
    return [{"phase": names[p], "ns": n, "share": n / total if total else 0.0}
            for p, n in zip(pid_.tolist(), ns_.tolist(), strict=True)]
