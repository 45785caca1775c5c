"""`gputrace.tui.range_stats`: what ran in a measured range, against brute force."""

import numpy as np

import os

from gputrace.timeline import read_trace
from gputrace.tui.index import IntervalIndex
from gputrace.tui.range_stats import range_summary, union_length


SAMPLE = os.path.join(os.path.dirname(__file__), "..", "data", "sample_2gpu.jsonl")


def test_union_length_counts_nesting_and_overlap_once():
    assert union_length(np.array([0, 2, 10]), np.array([5, 3, 12])) == 7
    assert union_length(np.array([4, 0]), np.array([9, 6])) == 9
    assert union_length(np.array([], np.int64), np.array([], np.int64)) == 0


def test_range_summary_matches_brute_force():
    tl = read_trace(SAMPLE)
    origin = int(tl.t0)
    span = int(tl.cols["end"].max()) - origin
    a, b = 0.3 * span, 0.55 * span
    s = range_summary(tl, origin, b, a)  # any order
    assert (s.t0, s.t1) == (a, b)
    lo, hi = int(np.floor(a)) + origin, int(np.ceil(b)) + origin
    for ln in s.lanes:
        m = (tl.cols["lane"] == ln.lane) & (tl.cols["start"] < hi) & (tl.cols["end"] > lo)
        cs, ce = np.maximum(tl.cols["start"][m], lo), np.minimum(tl.cols["end"][m], hi)
        covered, reach = 0, lo  # brute force: walk the clipped intervals in start order
        for x, y in sorted(zip(cs.tolist(), ce.tolist())):
            if y > reach:
                covered += y - max(x, reach)
                reach = y
        assert ln.busy_ns == covered
        assert ln.spans == int(m.sum())
        assert ln.phases[0][1] == max(int((ce - cs)[tl.cols["phase"][m] == p].sum()) for p in np.unique(tl.cols["phase"][m]))
    assert [x.busy_ns for x in s.lanes] == sorted((x.busy_ns for x in s.lanes), reverse=True)


def test_range_summary_gpu_idle_inside_the_range():
    tl = read_trace(SAMPLE)
    gaps = {("h", "GPU 0"): IntervalIndex.of([100, 500], [200, 900], -3)}
    s = range_summary(tl, int(tl.t0), 150, 600, gaps)
    assert s.idle == [("h GPU 0", 50 + 100)]
