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
        busy = m & (tl.cols["kind"] != 2)  # sync spans (kind 2) are waits, not busy time
        cs, ce = np.maximum(tl.cols["start"][busy], lo), np.minimum(tl.cols["end"][busy], hi)
        covered, reach = 0, lo  # brute force: walk the clipped intervals in start order
        for x, y in sorted(zip(cs.tolist(), ce.tolist())):
            if y > reach:
                covered += y - max(x, reach)
                reach = y
        assert ln.busy_ns == covered
        assert ln.spans == int(m.sum())
        cs, ce = np.maximum(tl.cols["start"][m], lo), np.minimum(tl.cols["end"][m], hi)
        assert ln.phases[0][1] == max(int((ce - cs)[tl.cols["phase"][m] == p].sum()) for p in np.unique(tl.cols["phase"][m]))
    assert [x.busy_ns for x in s.lanes] == sorted((x.busy_ns for x in s.lanes), reverse=True)


def test_range_summary_gpu_idle_inside_the_range():
    tl = read_trace(SAMPLE)
    gaps = {("h", "GPU 0"): IntervalIndex.of([100, 500], [200, 900], -3)}
    s = range_summary(tl, int(tl.t0), 150, 600, gaps)
    assert s.idle == [("h GPU 0", 50 + 100)]


H200 = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "traces", "multi-2_20-2gpu.jsonl.gz")


def test_a_host_side_sync_is_a_wait_not_lane_busy_time():
    """Issue 26: measuring a sync on GPU 1's stream lane read 'GPU 1 idle 100 %' beside 'stream:0 busy 100 %'."""
    from gputrace.timeline.model import KIND_CODES

    tl = read_trace(H200)
    origin = int(tl.t0)
    lane = next(k for k, ln in enumerate(tl.lanes) if ln.device == 1 and ln.name == "stream:0")
    sync = np.flatnonzero((tl.cols["lane"] == lane) & (tl.cols["kind"] == KIND_CODES["sync"]))
    row = int(sync[np.argmax(tl.cols["end"][sync] - tl.cols["start"][sync])])
    a, b = int(tl.cols["start"][row]) - origin, int(tl.cols["end"][row]) - origin
    s = range_summary(tl, origin, a, b)
    ln = next(x for x in s.lanes if x.lane == lane)
    assert ln.label == "vm/GPU 1/stream:0"
    assert ("sync", b - a) in ln.phases  # the wait is listed as what ran, not counted as busy
    other = (tl.cols["lane"] == lane) & (tl.cols["kind"] != KIND_CODES["sync"])
    cs = np.maximum(tl.cols["start"][other], a + origin)
    ce = np.minimum(tl.cols["end"][other], b + origin)
    assert ln.busy_ns == union_length(cs[ce > cs], ce[ce > cs]) < b - a


def test_a_profilers_annotation_lane_is_listed_but_never_busy():
    """Kineto's gpu_user_annotation rows sit under their GPU (annotations:stream N); measuring a range must not
    read them as GPU work."""
    from pathlib import Path

    from gputrace.timeline import read_any

    tl = read_any([Path(__file__).resolve().parents[1] / "data" / "foreign" / "train_kineto.json.gz"])
    origin = int(tl.t0)
    s = range_summary(tl, origin, 0, int(tl.t1) - origin)
    ann = [x for x in s.lanes if x.label.endswith("/annotations:stream 7")]
    assert len(ann) == 1 and ann[0].spans > 0 and ann[0].phases  # what ran is still listed
    assert ann[0].busy_ns == 0
    stream = next(x for x in s.lanes if x.label.endswith("/stream:7"))
    assert stream.busy_ns > 0
