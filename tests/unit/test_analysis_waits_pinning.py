"""Host waits, pinning economics, unattributed time and critical path: exact numbers on
hand-built Timelines."""

import math

import numpy as np
import pytest

from gputrace.analysis.critical_path import critical_path, critical_path_summary, default_root
from gputrace.analysis.pinning import GIB, pinning_economics
from gputrace.testing.synth import make_timeline
from gputrace.analysis.unattributed import unattributed_time
from gputrace.analysis.waits import EXCESS, SYNC, host_waits
from gputrace.timeline.model import Timeline

MS = 1_000_000
S = 1_000_000_000


def test_host_waits_sync_and_excess():
    tl = make_timeline(
        [
            {"name": "sync", "start": 0, "end": 5 * MS, "device": 0},
            # host 10 ms, device 4 ms: 6 ms excess >= 1 ms and >= 25 % of 4 ms -> wait
            {"name": "msm_l", "start": 10 * MS, "end": 20 * MS, "gpu_start": 12 * MS, "gpu_end": 16 * MS, "device": 0},
            # host 1.5 ms, device 1 ms: 0.5 ms excess < 1 ms margin -> not a wait
            {"name": "ntt", "start": 30 * MS, "end": 31_500_000, "gpu_start": 30 * MS, "gpu_end": 31 * MS, "device": 1},
            # host 110 ms, device 100 ms: 10 ms excess < 25 % of 100 ms -> not a wait
            {"name": "msm_h", "start": 40 * MS, "end": 150 * MS, "gpu_start": 40 * MS, "gpu_end": 140 * MS, "device": 1},
            {"name": "waitall", "kind": "sync", "start": 200 * MS, "end": 203 * MS},
        ]
    )
    w = host_waits(tl)
    assert [tl.phases[p] for p in w.phase] == ["sync", "msm_l", "waitall"]
    assert w.kind.tolist() == [SYNC, EXCESS, SYNC]
    assert w.wait_ns.tolist() == [5 * MS, 6 * MS, 3 * MS]
    assert w.device.tolist() == [0, 0, -1]
    tot = w.total_by()
    assert tot[0] == {"kind": "host>device", "phase": "msm_l", "device": 0, "count": 1, "wait_ns": 6 * MS}
    assert len(host_waits(tl, margin_ns=0, ratio=0)) == 5
    with pytest.raises(ValueError, match="margin_ns"):
        host_waits(tl, margin_ns=-1)


def test_pinning_economics_exact():
    tl = make_timeline(
        [
            {"name": "pin", "start": 0, "end": 2 * S, "device": 0, "bytes": 4 << 30, "lane": "thread:w0"},
            {"name": "h2d", "start": 2 * S, "end": 3 * S, "gpu_start": 2 * S, "gpu_end": 2 * S + 200 * MS, "device": 0, "bytes": 4 << 30},
            {"name": "unpin", "start": 3 * S, "end": 3 * S + 400 * MS, "device": 0, "bytes": 4 << 30, "lane": "thread:w0"},
            {"name": "h2d", "start": 0, "end": 1 * S, "device": 1, "kind": "gpu", "bytes": 2 << 30},
        ]
    )
    reps = {r.device: r for r in pinning_economics(tl, pageable_gbps=8.0)}
    r0 = reps[0]
    assert (r0.pin_ns, r0.unpin_ns, r0.overhead_ns) == (2 * S, 400 * MS, 2400 * MS)
    assert r0.pin_bytes == 4 << 30 and r0.pin_ns_per_gib == pytest.approx(0.5 * S)
    assert r0.unpin_ns_per_gib == pytest.approx(100 * MS)
    assert r0.h2d_ns == 200 * MS  # device time, not the 1 s host time
    b = 4 * GIB
    assert r0.h2d_gbps == pytest.approx(b / (200 * MS))
    assert r0.effective_gbps == pytest.approx(b / (2600 * MS))
    saved = b / 8.0 - 200 * MS
    assert r0.saved_ns == pytest.approx(saved)
    assert r0.net_ns == pytest.approx(saved - 2400 * MS)
    assert r0.reuses_to_break_even == pytest.approx(2400 * MS / saved)
    assert "lost" in r0.describe() and "GPU 0" in r0.describe()
    r1 = reps[1]
    assert r1.pin_count == 0 and r1.overhead_ns == 0 and math.isnan(r1.pin_ns_per_gib)
    assert r1.h2d_ns == 1 * S and r1.effective_gbps == pytest.approx(2 * GIB / S)
    assert reps[None].overhead_ns == 2400 * MS and reps[None].h2d_bytes == 6 << 30
    assert pinning_economics(make_timeline([{"name": "ntt", "start": 0, "end": 1}])) == []


def seed_gap_timeline():
    """The seed: wrapper 44.2 s, inner timer 35.6 s, pinning unrecorded -> 8.6 s gap."""
    return make_timeline(
        [
            {"id": "w", "name": "prove", "start": 0, "end": 44_200 * MS},
            {"id": "i", "name": "gpu_prove", "start": 8_600 * MS, "end": 44_200 * MS, "parent": "w"},
            {"name": "ntt", "start": 8_600 * MS, "end": 9_000 * MS, "gpu_start": 8_600 * MS, "gpu_end": 20_000 * MS, "device": 0, "parent": "i"},
            {"name": "msm_l", "start": 20_000 * MS, "end": 30_000 * MS, "device": 0, "kind": "gpu", "parent": "i"},
            {"name": "b_g2", "start": 25_000 * MS, "end": 44_000 * MS, "parent": "i", "lane": "thread:pool"},
        ]
    )


def test_unattributed_seed_gap():
    tl = seed_gap_timeline()
    u = unattributed_time(tl)
    assert [tl.path(int(r)) for r in u.row] == ["prove", "prove/gpu_prove"]
    assert u.unattributed_ns.tolist() == [8_600 * MS, 200 * MS]
    assert u.pieces(0) == [(0, 8_600 * MS)]
    # ntt's host span ends at 9 s but its kernels run to 20 s: the device side covers it.
    assert u.pieces(1) == [(44_000 * MS, 44_200 * MS)]
    assert u.fraction[0] == pytest.approx(8.6 / 44.2)
    assert "8.6 s of 44.2 s" in u.describe(0, tl)
    assert len(unattributed_time(tl, min_ns=1 * S)) == 1
    assert len(unattributed_time(tl, min_fraction=0.5)) == 0
    assert u.by_path(tl)[0]["unattributed_ns"] == 8_600 * MS


def test_unattributed_overlapping_children_and_clipping():
    tl = make_timeline(
        [
            {"id": "p", "name": "prove", "start": 100, "end": 200},
            {"name": "a", "start": 90, "end": 130, "parent": "p"},
            {"name": "b", "start": 120, "end": 140, "parent": "p", "lane": "thread:x"},
            {"name": "c", "start": 160, "end": 170, "parent": "p"},
        ]
    )
    u = unattributed_time(tl)
    assert u.unattributed_ns.tolist() == [50]
    assert u.pieces(0) == [(140, 160), (170, 200)]


def test_critical_path_follows_latest_child():
    tl = make_timeline(
        [
            {"id": "p", "name": "prove", "start": 0, "end": 100},
            {"name": "synthesis", "start": 0, "end": 40, "parent": "p"},
            {"name": "b_g2", "start": 45, "end": 60, "parent": "p", "lane": "thread:pool"},  # off the path
            {"id": "m", "name": "msm_h", "start": 40, "end": 50, "gpu_start": 42, "gpu_end": 90, "device": 0, "parent": "p"},
            {"name": "assemble", "start": 92, "end": 98, "parent": "p"},
        ]
    )
    assert tl.path(default_root(tl)) == "prove"
    cp = critical_path(tl)
    segs = [(tl.phases[int(tl.cols["phase"][r])], int(s), int(e)) for r, s, e in zip(cp.row, cp.start, cp.end)]
    assert segs == [("synthesis", 0, 40), ("msm_h", 40, 90), ("prove", 90, 92), ("assemble", 92, 98), ("prove", 98, 100)]
    assert cp.total_ns == 100
    assert dict(cp.by_phase(tl)) == {"msm_h": 50, "synthesis": 40, "assemble": 6, "prove": 4}
    summ = critical_path_summary(Timeline.concat([tl]))
    assert summ[0] == {"phase": "msm_h", "ns": 50, "share": 0.5}
    with pytest.raises(IndexError):
        critical_path(tl, 99)
    with pytest.raises(ValueError):
        critical_path(Timeline.empty())


def test_critical_path_nested():
    tl = seed_gap_timeline()
    cp = critical_path(tl)
    d = dict(cp.by_phase(tl))
    # From 44.2 s back: gpu_prove's own 0.2 s, b_g2 to its start at 25 s, then msm_l (still
    # running at 25 s) back to 20 s, ntt's kernels to 8.6 s, and prove's unrecorded 8.6 s.
    assert d == {"prove": 8_600 * MS, "ntt": 11_400 * MS, "msm_l": 5_000 * MS, "b_g2": 19_000 * MS, "gpu_prove": 200 * MS}
    assert cp.total_ns == 44_200 * MS
    assert np.all(np.diff(cp.start) > 0)


def test_pinning_summary_is_on_the_reports_first_lines_under_the_stalls_cut():
    """113 ms of pinning in a 153 s run is under the stalls cut (0.1 % of wall), yet a user asking
    what pinning cost finds it on the first screen, and in --json."""
    import io

    from rich.console import Console

    from gputrace.commands.report import analyse, render
    from gputrace.testing.synth import make_timeline

    ms = 1_000_000
    spans = [{"name": "prove", "start": 0, "end": 153_000 * ms}]
    for d in (0, 1):
        spans += [{"name": "pin", "start": 10 * ms, "end": 66 * ms, "device": d, "bytes": 1 << 27},
                  {"name": "h2d", "start": 70 * ms, "end": 90 * ms, "device": d, "kind": "gpu", "bytes": 1 << 27},
                  {"name": "unpin", "start": 100 * ms, "end": 100 * ms + 500_000, "device": d}]
    data = analyse(make_timeline(spans))
    assert not any(s["category"] == "pin" for s in data["stalls"])  # under the cut
    assert data["pinning_summary"].startswith("pinning: pin+unpin cost 113 ms (0.07% of the 153 s wall)")
    out = io.StringIO()
    render(data, Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    # on the first screen: right after the Findings table, which opens the report
    assert lines[1].startswith("Findings") and data["pinning_summary"][:200] in lines[:30]
    empty = analyse(make_timeline([{"name": "prove", "start": 0, "end": ms}]))
    assert empty["pinning_summary"] == "pinning: no pin/unpin spans in this trace"
