"""Pilot tests: press keys and use the mouse on the real app over a committed sample trace."""

import asyncio
import io

import numpy as np
import pytest
from rich.console import Console
from textual import events
from textual.widgets import Static

from gputrace.tui.app import GputraceApp
from gputrace.tui.widgets import ErrorScreen, HelpScreen
from gputrace.tui.gantt import NAME_W, Gantt
from gputrace.tui.panels import DetailsPanel, StallsPanel, SummaryPanel, sort_stats
from gputrace.tui.rows import DEVICE, LANE

SIZE = (150, 44)


async def until(pilot, cond, tries=100):
    """Let the app run (0.05 s steps, at most ``tries``) until ``cond()`` holds; the caller asserts it."""
    for _ in range(tries):
        await pilot.pause(0.05)
        if cond():
            return


async def ready(app, pilot):
    await app.wait_ready(60)
    await pilot.pause()
    return app.query_one(Gantt)


def first_lane_row(gantt, phase=None):
    """Screen row of the first lane level whose spans include ``phase`` (or any)."""
    tl = gantt.index.timeline
    for y, spec in enumerate(gantt.rows):
        if spec.kind != LANE:
            continue
        ii = gantt.index.lanes[spec.lane].levels[spec.level].index
        if phase is None or any(tl.phases[tl.phase[r]] == phase for r in ii.row):
            return y
    raise AssertionError(f"no row with {phase}")


def text_of(widget) -> str:
    """Plain text of what a widget shows (a Static's content, or a widget's render())."""
    content = widget.content if isinstance(widget, Static) else widget.render()
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(content)
    return console.export_text()


def test_loads_sample_and_fills_panels(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            assert app.error is None
            assert app.index.timeline.n == 120
            labels = [r.label.strip() for r in gantt.rows if r.kind == DEVICE]
            assert labels == ["▼ GPU 0", "▼ GPU 1", "▼ CPU"]
            assert "120 spans" in text_of(app.query_one("#title"))
            stalls = app.query_one(StallsPanel)
            idle = [it for it in stalls.items if it.category == "idle"]
            assert idle and "idle" in idle[0].text
            # Idle gaps are drawn on the GPU header rows.
            assert set(gantt.gaps) == {("host0", "GPU 0"), ("host0", "GPU 1")}
            summary = app.query_one(SummaryPanel)
            assert summary.row_count == len(summary.stats) > 0

    asyncio.run(go())


def test_zoom_pan_fit_keys(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            v0 = gantt.view
            await pilot.press("plus")
            assert gantt.view.ns_per_cell == pytest.approx(v0.ns_per_cell / 2)
            await pilot.press("minus", "minus")
            assert gantt.view.ns_per_cell == pytest.approx(v0.ns_per_cell * 2)
            v1 = gantt.view
            await pilot.press("l")
            assert gantt.view.t0 == pytest.approx(v1.t0 + 0.1 * gantt.timeline_width * v1.ns_per_cell)
            await pilot.press("H")
            assert gantt.view.t0 == pytest.approx(v1.t0 - 0.4 * gantt.timeline_width * v1.ns_per_cell)
            await pilot.press("f")
            assert gantt.view == v0
            # The axis follows the view.
            axis = app.query_one("#axis")
            assert axis.view == gantt.view
            assert "ms" in text_of(axis)

    asyncio.run(go())


def test_select_step_same_phase_and_details(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            y = first_lane_row(gantt, "msm_h")
            gantt.cursor_row = y
            ii = gantt.index.lanes[gantt.rows[y].lane].levels[gantt.rows[y].level].index
            await pilot.press("right_square_bracket")  # first span at/after the cursor time
            assert gantt.selected in ii.row
            first = gantt.selected
            await pilot.press("right_square_bracket")
            assert tl.start[gantt.selected] > tl.start[first]
            # Jump to an msm_h, then to the next msm_h in time, on any lane.
            msm = int(np.flatnonzero(tl.phase == tl.phase_id("msm_h"))[0])
            gantt.select_row(msm)
            await pilot.press("n")
            nxt = gantt.selected
            assert nxt != msm and tl.phases[tl.phase[nxt]] == "msm_h"
            assert tl.start[nxt] >= tl.start[msm]
            await pilot.press("N")
            assert gantt.selected == msm
            await pilot.pause()
            details = text_of(app.query_one(DetailsPanel))
            assert "msm_h" in details and "device dur" in details and "parents" in details
            assert app.query_one("#side").active == "details"
            await pilot.press("z")
            s, e = tl.start[msm] - gantt.index.origin, tl.end[msm] - gantt.index.origin
            assert gantt.view.t0 <= s and gantt.view.t1(gantt.timeline_width) >= e
            assert gantt.view.ns_per_cell * gantt.timeline_width < (e - s) * 1.5

    asyncio.run(go())


@pytest.mark.slow
def test_search_dims_and_walks_matches(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            await pilot.press("slash")
            await pilot.press(*"msm_l")
            await pilot.press("enter")
            await pilot.pause()
            assert len(app.main.search_rows) == 8
            assert all(tl.phases[p] == "msm_l" for p in tl.phase[app.main.search_rows])
            assert gantt.dim_rows is not None and gantt.dim_rows.sum() == 120 - 8
            first = gantt.selected
            assert first in app.main.search_rows
            await pilot.press("m")
            assert gantt.selected in app.main.search_rows and gantt.selected != first
            assert "8 matches" in text_of(app.query_one("#status"))
            await pilot.press("escape")
            assert gantt.dim_rows is None and not app.main.search_text

    asyncio.run(go())


@pytest.mark.slow
def test_filter_by_device_and_clear(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            n_rows = len(gantt.rows)
            await pilot.press("F")
            await pilot.press(*"device=1")
            await pilot.press("enter")
            await pilot.pause()
            lanes = {gantt.rows[y].lane for y in range(len(gantt.rows)) if gantt.rows[y].kind == LANE}
            assert lanes and all(gantt.index.timeline.lanes[k].device == 1 for k in lanes)
            assert "filter: device=1" in text_of(app.query_one("#status"))
            await pilot.press("escape")
            assert len(gantt.rows) == n_rows

    asyncio.run(go())


def test_fold_group_and_help(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            n = len(gantt.rows)
            gantt.cursor_row = next(y for y, r in enumerate(gantt.rows) if r.kind == DEVICE)
            await pilot.press("space")
            assert len(gantt.rows) < n and gantt.rows[gantt.cursor_row].collapsed
            await pilot.press("space")
            assert len(gantt.rows) == n
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)

    asyncio.run(go())


def test_mouse_click_drag_and_wheel(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            y = first_lane_row(gantt, "synthesis")
            spec = gantt.rows[y]
            ii = gantt.index.lanes[spec.lane].levels[spec.level].index
            mid = (ii.start[0] + ii.end[0]) / 2
            x = NAME_W + int(gantt.view.cell_of(mid))
            await pilot.click(Gantt, offset=(x, y))
            assert gantt.selected == ii.row[0] and tl.phases[tl.phase[gantt.selected]] == "synthesis"
            v = gantt.view
            await pilot.mouse_down(Gantt, offset=(x, y))
            await pilot.hover(Gantt, offset=(x - 10, y))
            await pilot.mouse_up(Gantt, offset=(x - 10, y))
            assert gantt.view.t0 == pytest.approx(v.t0 + 10 * v.ns_per_cell)
            assert gantt.selected == ii.row[0]  # a drag is not a click
            v = gantt.view
            t_at = v.time_of(x - NAME_W + 0.5)
            gantt.post_message(events.MouseScrollUp(gantt, x, y, 0, -1, 0, False, False, False))
            await pilot.pause()
            assert gantt.view.ns_per_cell < v.ns_per_cell
            assert gantt.view.time_of(x - NAME_W + 0.5) == pytest.approx(t_at)  # zoom around the pointer

    asyncio.run(go())


def test_stalls_enter_zooms_to_gap(sample_pinning):
    async def go():
        app = GputraceApp([sample_pinning])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            stalls = app.query_one(StallsPanel)
            cats = [it.category for it in stalls.items]
            assert {"idle", "wait", "pin"} <= set(cats)  # prove's own unattributed time is under the listing threshold
            assert any("pin+unpin" in it.text for it in stalls.items if it.category == "pin")
            # The amount is the time lost, not the extent zoomed to (a parent's whole span).
            un = [it for it in stalls.items if it.category == "unattributed"]
            assert all(0 < it.amount_ns < it.end - it.start for it in un)
            gaps = [it for it in stalls.items if it.category == "idle"]
            assert all(0 < it.amount_ns <= it.end - it.start for it in gaps)  # a group zooms to all its gaps
            stalls.focus()
            await pilot.press("enter")
            await pilot.pause()
            it = stalls.items[0]
            o = gantt.index.origin
            assert gantt.view.t0 <= it.start - o and gantt.view.t1(gantt.timeline_width) >= it.end - o
            assert it.text[:40] in text_of(app.query_one("#stall-detail")).replace("\n", " ")
            # the report's findings first (largest saving first), then the stalls (the biggest loss first)
            cats = [x.category for x in stalls.items]
            assert cats[0] == "finding" and cats == sorted(cats, key=lambda c: c != "finding")
            for group in (True, False):
                amounts = [x.amount_ns for x in stalls.items if (x.category == "finding") == group]
                assert amounts == sorted(amounts, reverse=True)

    asyncio.run(go())


def test_summary_sort():
    class S:
        def __init__(self, phase, device, total, count):
            self.phase, self.device, self.total_ns, self.count = phase, device, total, count
            self.mean_ns = self.median_ns = self.p95_ns = total / count
            self.share = total / 1000

    stats = [S("b", 0, 10, 1), S("a", 1, 30, 5), S("c", None, 20, 2)]
    assert [s.phase for s in sort_stats(stats, "total")] == ["a", "c", "b"]
    assert [s.phase for s in sort_stats(stats, "phase")] == ["a", "b", "c"]
    assert [s.phase for s in sort_stats(stats, "count")] == ["a", "c", "b"]
    assert [s.device for s in sort_stats(stats, "device")] == [None, 0, 1]


@pytest.mark.parametrize(
    "content,expect",
    [
        (b"", "empty file"),
        (b"\x00\x01binary", "not a text file"),
        (b"hello\nworld\n", "not an OTLP JSON Lines trace"),
    ],
)
def test_bad_files_show_a_message_not_a_traceback(tmp_path, content, expect):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)

    async def go():
        app = GputraceApp([str(p)])
        async with app.run_test(size=SIZE) as pilot:
            await app.wait_ready(30)
            await pilot.pause()
            assert app.error and expect in app.error
            assert isinstance(app.screen, ErrorScreen)
            assert expect in text_of(app.screen.query_one("#message"))
            await pilot.press("q")
        assert app.return_code == 0

    asyncio.run(go())


def test_follow_grows_as_the_file_is_written(tmp_path, sample_2gpu):
    lines = open(sample_2gpu, "rb").read().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(lines[0] + lines[1][:100])  # a writer is mid-line

    async def go():
        app = GputraceApp([str(live)], follow=True, batch_time=0.05)
        async with app.run_test(size=SIZE) as pilot:
            gantt = app.query_one(Gantt)
            await until(pilot, lambda: gantt.index is not None)
            first = gantt.index.timeline.n
            assert 0 < first < 120
            with open(live, "ab") as f:
                f.write(lines[1][100:])
            await until(pilot, lambda: gantt.index.timeline.n == 120)
            assert gantt.index.timeline.n == 120
            assert "following" in text_of(app.query_one("#status"))

    asyncio.run(go())


@pytest.mark.slow
def test_follow_catches_up_after_the_writer_stops_mid_burst(tmp_path, sample_2gpu):
    """A prover writes its last lines in a burst (the root span last) and goes quiet: the live view
    must show every span, without more data arriving to push the last batch out."""
    lines = open(sample_2gpu, "rb").read().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(lines[0])

    async def go():
        app = GputraceApp([str(live)], follow=True)  # the default batch time, as `view --follow`
        async with app.run_test(size=SIZE) as pilot:
            gantt = app.query_one(Gantt)
            await until(pilot, lambda: gantt.index is not None)
            with open(live, "ab", buffering=0) as f:
                for ln in lines[1:]:
                    f.write(ln)
                    await asyncio.sleep(0.005)
            await until(pilot, lambda: gantt.index.timeline.n == 120, 400)  # up to 20 s on a loaded box
            assert gantt.index.timeline.n == 120
            # The stalls panel catches up too (a deferred analysis of the last update).
            await until(pilot, lambda: app._analysed_index is app.full_index, 400)
            assert app._analysed_index is app.full_index

    asyncio.run(go())


@pytest.mark.slow
def test_listen_shows_spans_posted_over_otlp_http(tmp_path, sample_2gpu):
    pytest.importorskip("grpc")
    import urllib.request

    from gputrace.tui.listen import start_receiver

    rec, path = start_receiver("127.0.0.1:0", str(tmp_path / "live.jsonl"))
    try:
        async def go():
            app = GputraceApp([path], follow=True)  # the default batch time, as `view --listen`
            async with app.run_test(size=SIZE) as pilot:
                lines = open(sample_2gpu, "rb").read().splitlines()

                def post(batch):
                    for line in batch:
                        req = urllib.request.Request(rec.http_endpoint, data=line,
                                                     headers={"Content-Type": "application/json"})
                        urllib.request.urlopen(req, timeout=10).read()

                gantt = app.query_one(Gantt)
                await asyncio.to_thread(post, lines[:1])
                await until(pilot, lambda: gantt.index is not None, 200)
                await asyncio.to_thread(post, lines[1:])  # one burst, then the sender goes quiet
                await until(pilot, lambda: gantt.index is not None and gantt.index.timeline.n == 120, 200)
                assert gantt.index.timeline.n == 120

        asyncio.run(go())
    finally:
        rec.stop()


def test_real_prover_trace_details_show_run_switches(sample_prove_cpu):
    async def go():
        app = GputraceApp([sample_prove_cpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            prove = int(np.flatnonzero(tl.phase == tl.phase_id("prove"))[0])
            gantt.select_row(prove)
            await pilot.pause()
            details = text_of(app.query_one(DetailsPanel))
            assert "config.backend" in details and "cpu" in details
            assert "children" in details
            await pilot.press("z")
            s = tl.start[prove] - gantt.index.origin
            assert gantt.view.t0 <= s

    asyncio.run(go())


@pytest.mark.slow
def test_summary_enter_searches_that_phase_on_that_device(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            await pilot.press("2")  # focuses the list (no invisible focus step)
            summary = app.query_one(SummaryPanel)
            assert summary.has_focus and summary.sort_column == "total"
            await pilot.press("s", "s", "s", "s", "s")  # total -> mean -> median -> p95 -> share -> phase
            assert summary.sort_column == "phase"
            await pilot.press("enter")  # first row: assemble on the CPU
            await pilot.pause()
            assert app.main.search_text == "phase=assemble device=cpu"
            assert len(app.main.search_rows) == 8
            assert all(tl.phases[p] == "assemble" for p in tl.phase[app.main.search_rows])
            assert gantt.selected in app.main.search_rows and summary.has_focus  # Enter keeps the focus
            assert app.query_one("#side").active == "summary"

    asyncio.run(go())


def test_follow_a_file_that_does_not_exist_yet(tmp_path, sample_2gpu):
    live = tmp_path / "later.jsonl"

    async def go():
        app = GputraceApp([str(live)], follow=True, batch_time=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.3)
            assert "waiting for spans" in text_of(app.query_one("#status"))
            assert app.error is None
            live.write_bytes(open(sample_2gpu, "rb").read())
            gantt = app.query_one(Gantt)
            await until(pilot, lambda: gantt.index is not None and gantt.index.timeline.n == 120)
            assert gantt.index.timeline.n == 120

    asyncio.run(go())


@pytest.mark.slow
def test_compact_stacking_one_row_per_lane(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = gantt.index.timeline
            n = len(gantt.rows)
            await pilot.press("c")
            lanes = [r for r in gantt.rows if r.kind == LANE]
            assert len(lanes) == len(tl.lanes) and all(r.level == -1 for r in lanes)
            assert len(gantt.rows) < n and not any(r.kind == "gpu" for r in gantt.rows)
            # The stream row now shows the depth-2 NTT children over their ntt parent.
            y = next(y for y, r in enumerate(gantt.rows) if r.kind == LANE and tl.lanes[r.lane].device == 0)
            stacked = gantt._row_cells(gantt.rows[y], gantt.timeline_width)
            ntt_kids = {tl.phase_id(p) for p in ("intt_abc", "coset_ntt", "h_eval", "intt_h")}
            assert ntt_kids & set(stacked.bg.tolist())
            assert tl.phase_id("msm_h") in set(stacked.bg.tolist())
            # Clicking picks the deepest span under the pointer.
            kid = int(np.flatnonzero((tl.phase == tl.phase_id("coset_ntt")) & (tl.lane == gantt.rows[y].lane))[0])
            gantt.set_view(gantt.view.centred_on((tl.start[kid] + tl.end[kid]) / 2 - gantt.index.origin,
                                                 gantt.timeline_width).zoom(8, (tl.start[kid] + tl.end[kid]) / 2 - gantt.index.origin))
            await pilot.pause()
            x = NAME_W + int(gantt.view.cell_of((tl.start[kid] + tl.end[kid]) / 2 - gantt.index.origin))
            await pilot.click(Gantt, offset=(x, y - int(gantt.scroll_offset.y)))
            assert gantt.selected == kid
            await pilot.press("c")
            assert len(gantt.rows) == n
            assert gantt.rows[gantt.cursor_row].kind == LANE and gantt.rows[gantt.cursor_row].depth == tl.depth[kid]

    asyncio.run(go())


def test_focus_selects_and_zooms_to_first_span_of_phase(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu], focus="msm_h")
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            tl = app.index.timeline
            rows = np.flatnonzero(tl.phase == tl.phase_id("msm_h"))
            first = int(rows[np.argmin(tl.start[rows])])
            assert gantt.selected == first
            s, e = int(tl.start[first]) - app.index.origin, int(tl.end[first]) - app.index.origin
            ge = int(tl.gpu_end[first])
            e = max(e, ge - app.index.origin) if ge >= 0 else e
            v = gantt.view
            # The span fills most of the timeline width (5 % margins), not the whole trace.
            assert v.t0 <= s and v.t0 + v.ns_per_cell * gantt.timeline_width >= e
            assert (e - s) / (v.ns_per_cell * gantt.timeline_width) > 0.8

    asyncio.run(go())


def test_focus_on_unknown_phase_keeps_fit_and_says_so(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu], focus="no-such-phase")
        notes = []
        app.notify = lambda msg, **kw: notes.append(msg)
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            assert gantt.selected == -1 and gantt.auto_fit
            assert any("no span named 'no-such-phase'" in n for n in notes)

    asyncio.run(go())


async def focused(app, pilot):
    """The Gantt, once --focus has selected a span (following a file there is no final update to wait for)."""
    gantt = app.query_one(Gantt)
    await until(pilot, lambda: gantt.selected >= 0)
    return gantt


def test_focus_while_following_a_live_file(tmp_path, sample_2gpu):
    """With --follow there is no final update: focus happens on the first update holding the phase."""
    live = tmp_path / "live.jsonl"
    live.write_bytes(open(sample_2gpu, "rb").read().splitlines(keepends=True)[0])

    async def go():
        app = GputraceApp([str(live)], follow=True, batch_time=0.05, focus="msm_h")
        async with app.run_test(size=SIZE) as pilot:
            gantt = await focused(app, pilot)
            tl = app.index.timeline
            assert gantt.selected >= 0
            assert tl.name_of(gantt.selected) == "msm_h"
            assert not gantt.auto_fit

    asyncio.run(go())


@pytest.mark.slow
def test_selection_follows_its_span_when_new_spans_renumber_the_rows(tmp_path, sample_2gpu):
    """Following a file: spans that arrive later but start earlier renumber the rows; the selected span
    (here chosen by --focus) stays selected, without pulling the side panel to Details."""
    first, second = open(sample_2gpu, "rb").read().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(second)  # the later batch first

    async def go():
        app = GputraceApp([str(live)], follow=True, batch_time=0.05, focus="msm_h")
        async with app.run_test(size=SIZE) as pilot:
            gantt = await focused(app, pilot)
            # --focus's own SpanSelected may still be queued: let it show Details first
            await until(pilot, lambda: app.query_one("#side").active == "details")
            assert app.query_one("#side").active == "details"
            tl = app.index.timeline
            row0 = gantt.selected
            sid, start = int(tl.span_id[row0]), int(tl.start[row0])
            app.query_one("#side").active = "stalls"
            with open(live, "ab") as f:
                f.write(first)
            await until(pilot, lambda: app.index.timeline.n == 120)
            await pilot.pause(0.1)
            tl = app.index.timeline
            assert tl.n == 120
            row = gantt.selected
            assert row != row0  # the earlier batch's spans now come first
            assert (int(tl.span_id[row]), int(tl.start[row])) == (sid, start)
            assert app.query_one("#side").active == "stalls"

    asyncio.run(go())
