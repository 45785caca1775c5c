"""The critical-path walk: the same path as the plain scan it replaced, and linear-ish in the number of
children (a root with a million children took hours: one O(children) scan per step)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gputrace.analysis.critical_path import ChildIndex, critical_path
from gputrace.testing.synth import make_timeline


def _scan_path(tl, root):
    """The reference: at each step scan every child (the original O(children x steps) walk)."""
    ix = ChildIndex(tl)
    rows, ss, es = [], [], []

    def walk(v, hi, depth):
        s, t = int(ix.s[v]), min(int(ix.e[v]), hi)
        kids = ix.children(v)
        if depth > 256 or len(kids) == 0:
            if t > s:
                rows.append(v), ss.append(s), es.append(t)
            return
        ks, ke = ix.s[kids], ix.e[kids]
        alive = (ke > s) & (ke > ks)
        while t > s:
            cand = np.flatnonzero(alive & (ks < t))
            if len(cand) == 0:
                rows.append(v), ss.append(s), es.append(t)
                return
            key = np.minimum(ke[cand], t)
            best = cand[key == key.max()]
            c = int(best[np.argmin(ks[best])])
            k = int(min(ke[c], t))
            if k < t:
                rows.append(v), ss.append(k), es.append(t)
            walk(int(kids[c]), k, depth + 1)
            alive[c] = False
            t = max(int(ks[c]), s)

    walk(root, int(ix.e[root]), 0)
    o = np.argsort(np.array(ss, np.int64), kind="stable")
    return np.array(rows)[o].tolist(), np.array(ss)[o].tolist(), np.array(es)[o].tolist()


def _random_tree(seed, n=300):
    rng = np.random.default_rng(seed)
    spans = [{"id": 0, "name": "prove", "start": 0, "end": 10_000}]
    for i in range(1, n):
        parent = int(rng.integers(0, i))
        p = spans[parent]
        lo, hi = p["start"], p["end"]
        if rng.random() < 0.1:  # some children stick out of their parent, some have no length
            lo, hi = lo - 50, hi + 50
        a, b = sorted(rng.integers(lo, hi + 1, size=2).tolist())
        if rng.random() < 0.05:
            b = a
        if rng.random() < 0.2:  # ties in start and end
            a, b = p["start"], p["end"]
        spans.append({"id": i, "parent": parent, "name": f"p{i % 7}", "start": a, "end": b})
    return make_timeline(spans)


@pytest.mark.parametrize("seed", range(25))
def test_same_path_as_the_scan(seed):
    tl = _random_tree(seed)
    root = int(np.flatnonzero(tl.cols["parent"] < 0)[0])
    cp = critical_path(tl, root)
    assert (cp.row.tolist(), cp.start.tolist(), cp.end.tolist()) == _scan_path(tl, root)


@pytest.mark.slow
def test_many_children_of_one_root_is_fast():
    n = 200_000
    spans = [{"id": 0, "name": "prove", "start": 0, "end": 2 * n + 10}]
    spans += [{"id": i, "parent": 0, "name": "k", "start": 2 * i, "end": 2 * i + 1} for i in range(1, n)]
    tl = make_timeline(spans)
    t = time.perf_counter()
    cp = critical_path(tl, 0)
    took = time.perf_counter() - t
    assert len(cp.row) == 2 * (n - 1) + 1 and cp.total_ns == 2 * n + 10
    assert took < 20.0, took  # the scan took about (n^2 / 2) element steps: minutes at this size
