"""One name for the CPU lanes, and a host-side ``sync`` is a wait, not lane work (issue: "GPU 1 idle
100 %" beside "GPU 1 stream:0 busy 100 %")."""

from __future__ import annotations

import numpy as np

from gputrace.analysis.gaps import gpu_idle_gaps
from gputrace.analysis.lanes import device_name, occupies_lane
from gputrace.testing.synth import make_timeline
from gputrace.timeline.model import Lane
from gputrace.tui.range_stats import range_summary

MS = 1_000_000


def _trace():
    return make_timeline([
        {"name": "msm_h", "start": 0, "end": 10 * MS, "device": 1, "lane": "stream:0", "kind": "gpu"},
        {"name": "sync", "start": 10 * MS, "end": 110 * MS, "device": 1, "lane": "stream:0", "kind": "sync"},
        {"name": "msm_l", "start": 110 * MS, "end": 120 * MS, "device": 1, "lane": "stream:0", "kind": "gpu"},
        {"name": "b_g2", "start": 0, "end": 120 * MS, "device": -1, "lane": "thread:cpu-worker-0"},
    ])


def test_sync_spans_do_not_occupy_their_lane():
    tl = _trace()
    assert occupies_lane(tl, np.arange(tl.n)).tolist() == [True, False, True, True]


def test_range_over_a_sync_shows_the_stream_idle_like_its_gpu():
    tl = _trace()
    gaps = gpu_idle_gaps(tl, min_gap_ns=1)
    idle = int(gaps.duration[gaps.device == 1].sum())
    assert idle == 100 * MS  # the GPU is idle during the wait ...
    s = range_summary(tl, 0, 20 * MS, 100 * MS)
    stream = next(ln for ln in s.lanes if ln.label.endswith("stream:0"))
    assert stream.busy_ns == 0  # ... and so is the stream the host waits on
    assert stream.spans == 1  # the wait is still listed as a span in the range
    whole = range_summary(tl, 0, 0, 120 * MS)
    assert next(ln for ln in whole.lanes if ln.label.endswith("stream:0")).busy_ns == 20 * MS


def test_one_name_for_the_cpu_lanes():
    assert device_name(-1) == "CPU" == Lane("h", 1, -1, "thread:cpu-worker-0").device_label
    assert device_name(0) == "GPU 0" == Lane("h", 1, 0, "stream:0").device_label
    assert device_name(None) == "all"


def test_report_names_host_only_rows_cpu():
    import io

    from rich.console import Console

    from gputrace.commands.report import analyse, render

    out = io.StringIO()
    render(analyse(_trace()), Console(file=out, width=200))
    text = out.getvalue()
    row = next(ln for ln in text[text.index("Phases"):].splitlines() if "b_g2" in ln and "│" in ln)  # (after Findings)
    assert "CPU" in row and "host" not in row
