"""Lane labels in the name column keep what tells a lane from its neighbours (``layout.fit_lane_label``): a kind
the name repeats is shown once, and a too-long label loses, in order, the pid tag, a lane word before an id,
the ``thread:`` kind, then the middle of its name; trace text stays plain text on one line. A host of several
processes shows each process's header above its lanes (tests/tui/test_process_rows.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from gputrace.timeline.formats.chrome.read import read_chrome
from gputrace.tui.gantt_strip import NAME_W
from gputrace.tui.index import TimelineIndex
from gputrace.tui.layout import fit_lane_label
from gputrace.tui.rows import LANE, PROCESS, build_rows

W = NAME_W - 1 - 3  # the name column less the lane indent


@pytest.mark.parametrize("name, tag, want", [
    ("thread:main", " [4711]", "thread:main [4711]"),  # fits: as it is
    ("stream:7", " [-1]", "stream:7 [-1]"),
    ("thread:thread 483 (python3)", "", "thread 483 (python3)"),  # the kind is not repeated
    ("thread:thread 483 (python3)", " [483]", "thread 483 (python3)"),  # the tag goes first
    ("thread:thread 508 (pt_autograd_0)", " [483]", "508 (pt_autograd_0)"),  # then the lane word before an id
    ("api:thread 483 (python3)", " [483]", "api:483 (python3)"),
    ("annotations:stream 24", " [-1]", "annotations:24"),
    ("thread:PyTorch Profiler", " [-1]", "PyTorch Profiler"),  # then the thread: kind
    ("api:thread 508 (pt_autograd_0)", " [483]", "api:508 (pt_…grad_0)"),  # last the middle, kind kept
    ("thread:stream 7", " [0]", "thread:stream 7 [0]"),  # another lane word than the kind: kept
    ("CUDA collection paused (not recorded)", "", "CUDA colle…recorded)"),
])
def test_fit_lane_label(name, tag, want):
    got = fit_lane_label(name, tag, W)
    assert got == want and len(got) <= W


def test_fit_lane_label_always_fits_on_one_line():
    for name in ("thread:" + "x" * 60, "api:thread 1 " + "y" * 40, "a:b", "", "thread:thread", "stream 12345678901"):
        for width in (1, 2, 5, W):
            out = fit_lane_label(name, " [12]", width)
            assert len(out) <= width and "\n" not in out


def test_kineto_lanes_read_in_the_name_column(tmp_path):
    """On a PyTorch-profiler trace the thread lanes show their thread id and name, not ``thread:thr…n3) [483]``,
    and a trace's markup-like thread name is drawn as text."""
    from gputrace.tui.app import GputraceApp
    from gputrace.tui.gantt import Gantt

    ev = [{"ph": "M", "name": "thread_name", "pid": 483, "tid": 483, "args": {"name": "thread 483 (python3)"}},
          {"ph": "M", "name": "thread_name", "pid": 483, "tid": 508, "args": {"name": "thread 508 ([b]red[/b])"}},
          {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "other"}}]
    for i in range(20):
        ev.append({"ph": "X", "cat": "user_annotation", "name": "step", "pid": 483, "tid": 483, "ts": 10 * i,
                   "dur": 5})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 483, "tid": 483,
                   "ts": 10 * i + 1, "dur": 1, "args": {"correlation": i}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 483, "tid": 508, "ts": 10 * i, "dur": 3})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 7, "tid": 7, "ts": 10 * i, "dur": 3})
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    rows = [r for r in build_rows(TimelineIndex.build(read_chrome(p))) if r.kind == LANE and r.name]
    assert {r.name for r in rows} >= {"thread:thread 483 (python3)", "api:thread 483 (python3)"}

    async def go():
        app = GputraceApp([str(p)])
        async with app.run_test(size=(120, 30)) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            g = app.query_one(Gantt)
            return [g.render_line(y).text[:NAME_W - 1].rstrip() for y in range(g.size.height)]

    shown = asyncio.run(go())
    # two processes: each has its header (host > process > device > lane), with no pid in its lanes' labels
    assert " ▼ pid 7" in shown and " ▼ pid 483" in shown
    assert "   thread 483 (python3)" in shown and "   api:483 (python3)" in shown
    assert "   508 ([b]red[/b])" in shown  # untrusted text drawn as it is, not as markup
    assert "   thread:other" in shown


def test_a_lane_of_no_process_makes_no_process_level():
    """Kineto's GPU stream lanes and its profiler-overhead lane have pid -1: they are no process of their own,
    and a trace of one process (plus such lanes) gets no process level and no pid in any label."""
    from pathlib import Path

    from gputrace.timeline import read_any

    tl = read_any([Path(__file__).resolve().parents[1] / "data" / "foreign" / "train_kineto.json.gz"])
    assert {ln.pid for ln in tl.lanes} >= {-1, 483}  # the premise: pid -1 lanes beside one process's
    rows = build_rows(TimelineIndex.build(tl))
    assert not [r for r in rows if r.kind == PROCESS]
    lanes = [r for r in rows if r.kind == LANE and r.name]
    assert lanes and not any("[" in r.label for r in lanes)
