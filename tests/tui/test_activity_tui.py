"""GPU activity in the TUI over tests/data/sample_kernels.jsonl: kernels on the stream lanes, pinned and
pageable copies in different colours, launch-gap marks inside phase bars and in the stalls panel, kernel
attributes (and launch latency) in the details panel, zoom down to one kernel."""

import asyncio

import numpy as np

from gputrace.timeline import read_trace
from gputrace.tui.activity_rows import row_keys
from gputrace.tui.keys import LAUNCH, MARK_LAUNCH, PAGEABLE, PINNED
from gputrace.tui.app import GputraceApp
from gputrace.tui.overlays import compute_overlays
from gputrace.tui.palette import Palette
from gputrace.tui.panels import DetailsPanel, StallsPanel
from gputrace.tui.rows import LANE

from test_app import SIZE, ready, text_of, until


def _copies(tl):
    return {r: tl.attrs[r]["cuda.memcpy.src_kind"] for r in range(tl.n) if "cuda.memcpy.kind" in tl.attrs.get(r, {})}


def test_copies_get_pinned_and_pageable_keys(sample_kernels):
    tl = read_trace(sample_kernels)
    keys = row_keys(tl)
    copies = _copies(tl)
    assert sorted(copies.values()) == ["PAGEABLE", "PAGEABLE", "PINNED", "PINNED"]
    for r, src in copies.items():
        assert keys[r] == (PAGEABLE if src == "PAGEABLE" else PINNED)
    other = np.setdiff1d(np.arange(tl.n), list(copies))
    assert np.array_equal(keys[other], tl.phase[other])
    pal = Palette(tl.phases)
    assert pal.colour(PAGEABLE) != pal.colour(PINNED) and pal.colour(LAUNCH) not in (pal.colour(PAGEABLE), pal.background)


def test_overlays_mark_launch_gaps_inside_phase_bars(sample_kernels):
    tl = read_trace(sample_kernels)
    ov = compute_overlays(tl, tl.t0)
    m = ov.marks_kind == MARK_LAUNCH
    assert m.any()
    rows = set(ov.marks_row[m].tolist())
    assert {tl.name_of(r) for r in rows} >= {"ntt", "msm_h"}
    assert all(tl.parent[r] >= 0 for r in rows)  # never the prove root
    # Every mark lies inside its phase's window (bracket widened to its work).
    s, e = ov.marks_start[m], ov.marks_end[m]
    assert np.all(e > s)
    launch = [it for it in ov.items if it.category == "launch"]
    assert launch and "launch gaps" in launch[0].text and "GPU busy" in launch[0].text
    assert launch == sorted(launch, key=lambda it: -it.amount_ns)


def test_app_draws_kernels_copies_and_lists_launch_gaps(sample_kernels):
    async def go():
        app = GputraceApp([sample_kernels])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            stalls = app.query_one(StallsPanel)
            await until(pilot, lambda: any(it.category == "launch" for it in stalls.items))
            assert any(it.category == "launch" for it in stalls.items)
            # The launch-gap glyph is drawn over a phase bar somewhere on screen.
            assert any(m[1] == "╌" for marks in gantt._marks.values() for m in marks)
            # Zoom down to one kernel: select it, 'z' fits it to the screen.
            k = next(r for r in range(tl.n) if tl.attrs.get(r, {}).get("gputrace.activity") == "kernel")
            gantt.select_row(k)
            await pilot.press("z")
            await pilot.pause()
            s, e = tl.start[k] - gantt.index.origin, tl.end[k] - gantt.index.origin
            assert gantt.view.t0 <= s and gantt.view.t1(gantt.timeline_width) >= e
            assert gantt.view.ns_per_cell * gantt.timeline_width < (e - s) * 1.5
            details = text_of(app.query_one(DetailsPanel))
            for text in ("cuda.kernel.name", "cuda.grid", "launch latency", "cudaLaunchKernel", "stream:1"):
                assert text in details, text
            # The kernel's lane row shows the kernel's own colour key.
            y = next(y for y, sp in enumerate(gantt.rows) if sp.kind == LANE
                     and k in gantt.index.lanes[sp.lane].levels[max(sp.level, 0)].index.row)
            assert y >= 0

    asyncio.run(go())


def test_legend_explains_activity_colours_only_when_there_is_activity():
    from gputrace.tui.legend import legend_keys, legend_text

    assert "pinned copy" not in legend_text(legend_keys(["prove", "ntt"]), 200)[0].plain
    text = legend_text(legend_keys(["prove", "[CUDA memcpy HtoD]", "ntt_radix"]), 200)[0].plain
    assert "╌ launch gap" in text and "pinned copy" in text and "pageable copy" in text
