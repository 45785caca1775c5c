"""Phase statistics and GPU idle gaps on hand-built Timelines with exact expected numbers."""

import numpy as np
import pytest

from gputrace.analysis.gaps import BETWEEN, LEADING, TRAILING, gpu_idle_gaps
from gputrace.analysis.stats import phase_stats, wall_ns
from gputrace.testing.synth import make_timeline
from gputrace.timeline.model import Timeline


def _tl():
    return make_timeline(
        [
            {"id": "p", "name": "prove", "start": 0, "end": 1000},
            {"name": "synthesis", "start": 0, "end": 100, "parent": "p"},
            {"name": "h2d", "start": 100, "end": 200, "gpu_start": 110, "gpu_end": 200, "device": 0, "parent": "p", "bytes": 1 << 30},
            {"name": "pin", "start": 200, "end": 280, "device": 0, "parent": "p", "lane": "thread:main"},
            {"id": "n", "name": "ntt", "start": 300, "end": 500, "gpu_start": 300, "gpu_end": 500, "device": 0, "parent": "p"},
            {"name": "coset_ntt", "start": 300, "end": 400, "gpu_start": 300, "gpu_end": 400, "device": 0, "parent": "n"},
            {"name": "b_g2", "start": 500, "end": 900, "parent": "p"},
            # GPU 1: a gpu-kind span without device times counts by host time.
            {"name": "msm_a", "start": 600, "end": 700, "device": 1, "kind": "gpu", "parent": "p"},
        ]
    )


def test_gaps_exact():
    g = gpu_idle_gaps(_tl())
    got = sorted(zip(g.device.tolist(), g.start.tolist(), g.end.tolist(), g.edge.tolist()))
    assert got == [
        (0, 0, 110, LEADING),
        (0, 200, 300, BETWEEN),
        (0, 500, 1000, TRAILING),
        (1, 0, 600, LEADING),
        (1, 700, 1000, TRAILING),
    ]
    by = {(int(d), int(s)): g.gap(i) for i, (d, s) in enumerate(zip(g.device, g.start))}
    mid = by[(0, 200)]
    assert dict(mid.host_activity) == {"pin": 80, "prove": 20}
    assert mid.host_activity[0] == ("pin", 80)
    assert mid.describe().startswith("GPU 0 idle 100 ns while pin and prove ran on the host")
    lead = by[(0, 0)]
    assert dict(lead.host_activity) == {"synthesis": 100, "prove": 10}
    trail = by[(0, 500)]
    assert dict(trail.host_activity) == {"b_g2": 400, "prove": 100}
    assert g.idle_by_device() == {0: 110 + 100 + 500, 1: 600 + 300}
    # busy time per device group: GPU 0 = 90 + 200, GPU 1 = 100
    assert sorted(g.busy_ns.tolist()) == [100, 290]


def test_gaps_min_and_no_edges():
    g = gpu_idle_gaps(_tl(), min_gap_ns=101, edges=False)
    assert len(g) == 0
    g = gpu_idle_gaps(_tl(), edges=False)
    assert list(zip(g.device.tolist(), g.start.tolist(), g.end.tolist())) == [(0, 200, 300)]
    assert [x.duration for x in g.largest(5)] == [100]


def test_gaps_overlapping_device_work_merges_and_touching_merges():
    tl = make_timeline(
        [
            {"name": "msm_h", "start": 0, "end": 50, "gpu_start": 0, "gpu_end": 50, "device": 0, "lane": "stream:0"},
            {"name": "msm_l", "start": 40, "end": 90, "gpu_start": 40, "gpu_end": 90, "device": 0, "lane": "stream:1"},
            {"name": "msm_a", "start": 90, "end": 120, "gpu_start": 90, "gpu_end": 120, "device": 0, "lane": "stream:0"},
            {"name": "msm_b_g1", "start": 150, "end": 160, "gpu_start": 150, "gpu_end": 160, "device": 0},
        ]
    )
    g = gpu_idle_gaps(tl, edges=False)
    assert list(zip(g.start.tolist(), g.end.tolist())) == [(120, 150)]
    assert g.gap(0).describe() == "GPU 0 idle 30 ns while the host recorded no work"


def test_gaps_separate_runs_do_not_bridge():
    a = make_timeline([{"name": "ntt", "start": 0, "end": 10, "gpu_start": 0, "gpu_end": 10, "device": 0}], trace_id="a")
    b = make_timeline([{"name": "ntt", "start": 1000, "end": 1010, "gpu_start": 1000, "gpu_end": 1010, "device": 0}], trace_id="b")
    g = gpu_idle_gaps(Timeline.concat([a, b]))
    assert len(g) == 0
    assert wall_ns(Timeline.concat([a, b])) == 20


def test_gaps_empty():
    assert len(gpu_idle_gaps(Timeline.empty())) == 0
    assert len(gpu_idle_gaps(make_timeline([{"name": "synthesis", "start": 0, "end": 5}]))) == 0


def test_phase_stats_exact():
    spans = [{"name": "prove", "start": 0, "end": 1000}]
    for i, d in enumerate([10, 20, 30, 40, 100]):
        spans.append({"name": "msm_l", "start": 100 * i, "end": 100 * i + d, "device": i % 2, "gpu_start": 100 * i, "gpu_end": 100 * i + d // 2})
    st = phase_stats(make_timeline(spans), by_device=False)
    m = {s.phase: s for s in st}
    s = m["msm_l"]
    assert (s.count, s.total_ns, s.min_ns, s.max_ns) == (5, 200, 10, 100)
    assert s.mean_ns == 40 and s.median_ns == 30
    assert s.p95_ns == pytest.approx(np.percentile([10, 20, 30, 40, 100], 95))
    assert s.share == pytest.approx(200 / 1000)
    assert s.gpu_count == 5 and s.gpu_total_ns == 5 + 10 + 15 + 20 + 50 and s.gpu_median_ns == 15
    assert m["prove"].gpu_count == 0 and np.isnan(m["prove"].gpu_median_ns)
    assert st[0].phase == "prove"  # sorted by total
    per_dev = {(s.phase, s.device): s for s in phase_stats(make_timeline(spans))}
    assert per_dev[("msm_l", 0)].count == 3 and per_dev[("msm_l", 0)].median_ns == 30
    assert per_dev[("msm_l", 1)].total_ns == 60 and per_dev[("msm_l", 1)].p95_ns == pytest.approx(39)
    assert per_dev[("prove", -1)].count == 1


def test_phase_stats_matches_numpy_on_random():
    rng = np.random.default_rng(1)
    spans = []
    truth = {}
    for i in range(500):
        name = ["a", "b", "c"][i % 3]
        d = int(rng.integers(1, 10_000))
        truth.setdefault(name, []).append(d)
        spans.append({"name": name, "start": i * 20_000, "end": i * 20_000 + d})
    for s in phase_stats(make_timeline(spans), by_device=False):
        v = np.array(truth[s.phase])
        assert s.median_ns == pytest.approx(np.median(v))
        assert s.p95_ns == pytest.approx(np.percentile(v, 95))
        assert s.total_ns == v.sum()


def test_gaps_activity_only_for_longest():
    g = gpu_idle_gaps(_tl(), activity_for=2)
    assert g.has_activity.sum() == 2
    longest = g.largest(5)
    assert longest[0].duration == 600 and longest[0].measured and longest[1].measured
    assert not longest[2].measured and longest[2].host_activity == []
    assert longest[2].describe() == "GPU 1 idle 300 ns (trailing)"


def _random_trace(seed):
    rng = np.random.default_rng(seed)
    spans, t = [], 0
    for r in range(30):
        root = f"r{r}"
        start = t
        s = t
        kids = []
        for k in range(4):
            d = int(rng.integers(10, 100))
            kind = ["host", "gpu"][int(rng.integers(0, 2))]
            sp = {"id": f"{root}k{k}", "name": ["synthesis", "ntt", "msm_l", "b_g2"][k], "start": s, "end": s + d, "parent": root}
            if kind == "gpu":
                dev = int(rng.integers(0, 2))
                sp.update(device=dev, lane=f"stream:{dev}", gpu_start=s + 1, gpu_end=s + d)
            else:
                sp.update(kind="host", lane=f"thread:t{int(rng.integers(0, 2))}")
                if rng.random() < 0.5:  # a nested host child
                    kids.append({"name": "assemble", "start": s + 2, "end": s + d // 2, "parent": sp["id"], "kind": "host", "lane": sp["lane"]})
            kids.append(sp)
            s += d + int(rng.integers(0, 30))
        spans.append({"id": root, "name": "prove", "start": start, "end": s, "kind": "host"})
        spans += kids
        t = s + int(rng.integers(0, 50))
    return make_timeline(spans)


def _brute_activity(tl, g0, g1):
    c = tl.cols
    host = [r for r in range(tl.n) if c["gpu_start"][r] < 0 and c["kind"][r] != 1]
    hs = set(host)
    out = {}
    for r in host:
        a, b = int(c["start"][r]), int(c["end"][r])
        covered = set()
        for k in range(tl.n):
            if c["parent"][k] == r and k in hs:
                covered |= set(range(max(a, int(c["start"][k])), min(b, int(c["end"][k]))))
        own = set(range(max(a, g0), min(b, g1))) - covered
        if own:
            p = tl.phases[int(c["phase"][r])]
            out[p] = out.get(p, 0) + len(own)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gap_activity_matches_brute_force(seed):
    tl = _random_trace(seed)
    g = gpu_idle_gaps(tl)
    assert len(g) > 5
    for i in range(len(g)):
        gap = g.gap(i)
        assert dict(gap.host_activity) == _brute_activity(tl, gap.start, gap.end)
    # Limiting the measured gaps does not change the measured ones.
    lim = gpu_idle_gaps(tl, activity_for=3)
    full = {(x.device, x.start): x.host_activity for x in g.largest(len(g))}
    for x in lim.largest(3):
        assert x.measured and x.host_activity == full[(x.device, x.start)]


@pytest.mark.parametrize("seed", [5, 6])
def test_gap_activity_with_a_thread_waiting_through_the_whole_trace(seed):
    """A second thread's span covering the whole trace (a torch.profiler trace's ``threading.py: wait``) is
    one long piece among short ones: every gap overlaps it, and the short pieces are still found exactly."""
    from gputrace.testing.synth import make_timeline

    base = _random_trace(seed)
    c = base.cols
    spans = [{"id": f"r{r}", "name": base.phases[int(c["phase"][r])], "start": int(c["start"][r]),
              "end": int(c["end"][r]), "parent": f"r{int(c['parent'][r])}" if c["parent"][r] >= 0 else None,
              "lane": base.lanes[int(c["lane"][r])].name,
              **({"device": int(c["device"][r]), "gpu_start": int(c["gpu_start"][r]), "gpu_end": int(c["gpu_end"][r])}
                 if c["gpu_start"][r] >= 0 else {"kind": "host"})} for r in range(base.n)]
    spans.append({"name": "wait", "start": int(c["start"].min()), "end": int(c["end"].max()), "kind": "host",
                  "lane": "thread:waiter"})
    tl = make_timeline(spans)
    g = gpu_idle_gaps(tl)
    assert len(g) > 5
    for i in range(len(g)):
        gap = g.gap(i)
        want = _brute_activity(tl, gap.start, gap.end)
        assert want.get("wait") == gap.end - gap.start
        assert dict(gap.host_activity) == want


@pytest.mark.parametrize("seed", [3, 4])
def test_gaps_match_brute_force(seed):
    tl = _random_trace(seed)
    c = tl.cols
    lo = int(min(c["start"].min(), c["gpu_start"][c["gpu_start"] >= 0].min()))
    hi = int(max(c["end"].max(), c["gpu_end"].max()))
    want = set()
    for dev in (0, 1):
        busy = np.zeros(hi - lo, bool)
        for r in range(tl.n):
            if c["device"][r] == dev:
                a, b = (c["gpu_start"][r], c["gpu_end"][r]) if c["gpu_start"][r] >= 0 else (c["start"][r], c["end"][r])
                busy[a - lo : b - lo] = True
        t = 0
        while t < len(busy):  # maximal idle runs
            if busy[t]:
                t += 1
                continue
            u = t
            while u < len(busy) and not busy[u]:
                u += 1
            want.add((dev, t + lo, u + lo))
            t = u
    g = gpu_idle_gaps(tl)
    assert set(zip(g.device.tolist(), g.start.tolist(), g.end.tolist())) == want
