"""Pilot tests of the keyboard story (issue 16): panels take focus from their number key, the
timeline follows the stalls list, measuring with the keyboard, the help built from the
bindings, the legend, a narrow terminal, the palette's actions."""

import asyncio
import io
import os

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import Static

from gputrace.tui.app import GputraceApp
from gputrace.tui.screenshots import preserve_space
from gputrace.tui.timeline_screen import TimelineScreen
from gputrace.tui.gantt import Gantt
from gputrace.tui.panels import RangePanel, StallsPanel, SummaryPanel
from gputrace.tui.legend import Legend
from gputrace.tui.widgets import HelpScreen, binding_rows

SIZE = (150, 44)


def text_of(widget) -> str:
    """Plain text of what a widget shows (a Static's content, or a widget's render())."""
    content = widget.content if isinstance(widget, Static) else widget.render()
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(content)
    return console.export_text()


async def press(pilot, *keys):
    """Press ``keys`` and let the app settle (every message handled) before the test looks."""
    await pilot.press(*keys)
    await pilot.pause()


async def ready(app, pilot):
    await app.wait_ready(60)
    await pilot.pause()
    return app.query_one(Gantt)


@pytest.mark.slow
def test_new_user_finds_selects_and_measures_a_stall_with_the_keyboard(sample_pinning):
    """3 (stalls, focused) · Down to the first GPU idle gap (the timeline follows) · Enter (zoom,
    focus stays) · x (measure it): the Range panel gives its length and what ran meanwhile."""

    async def go():
        app = GputraceApp([sample_pinning])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            await press(pilot, "3")
            stalls = app.query_one(StallsPanel)
            assert stalls.has_focus  # no invisible focus step
            idle = next(i for i, it in enumerate(stalls.items) if it.category == "idle")
            view0 = gantt.view
            for _ in range(idle):
                await pilot.press("down")
            await pilot.pause()
            assert stalls.cursor_row == idle and stalls.has_focus
            item = stalls.items[idle]
            o = gantt.index.origin
            assert gantt.cursor_t == item.start - o  # the timeline follows the list
            assert "GPU 0" in gantt.rows[gantt.cursor_row].label
            await press(pilot, "enter")
            assert stalls.has_focus  # Enter zooms and keeps focus
            assert gantt.view.ns_per_cell < view0.ns_per_cell
            t1 = gantt.view.t1(gantt.timeline_width)
            assert gantt.view.t0 <= item.start - o and item.end - o <= t1
            await press(pilot, "x")
            assert gantt.range == (item.start - o, item.end - o)
            text = text_of(app.query_one(RangePanel))
            assert "range" in text and "idle" in text and "busy" in text
            assert "range " in text_of(app.query_one("#status"))
            # From the timeline: Esc clears the range, x on the GPU row measures the gap under the cursor.
            await pilot.press("escape")
            assert app.focused is gantt
            await press(pilot, "escape")
            assert gantt.range is None
            await press(pilot, "3", "enter", "escape", "x")
            assert gantt.range is not None and gantt.range[1] - gantt.range[0] == stalls.items[idle].end - stalls.items[idle].start

    asyncio.run(go())


@pytest.mark.slow
def test_marks_cursor_keys_zoom_to_range_home_end(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            npc = gantt.view.ns_per_cell
            await press(pilot, "home")
            assert gantt.cursor_t == gantt.index.t_min
            await press(pilot, "b", *["greater_than_sign"] * 3, "full_stop", "b")
            a, b = gantt.range
            assert abs((b - a) - 31 * npc) < 1e-6 * npc  # 3 x 10 cells + 1
            await press(pilot, "r")
            assert gantt.view.t0 <= a and b <= gantt.view.t1(gantt.timeline_width)
            assert gantt.view.ns_per_cell < npc
            axis = app.query_one("#axis")
            assert "━" in text_of(axis) and "▼ +" in text_of(axis)  # range and cursor readout on the axis
            await press(pilot, "end")
            assert gantt.cursor_t == gantt.index.t_max
            # WASD: w zooms in, s out, a/d pan.
            v = gantt.view
            await pilot.press("w")
            assert gantt.view.ns_per_cell == v.ns_per_cell / 2
            await pilot.press("s", "d")
            assert gantt.view.ns_per_cell == v.ns_per_cell and gantt.view.t0 > v.t0
            await pilot.press("a")
            assert abs(gantt.view.t0 - v.t0) < 1e-6 * v.ns_per_cell

    asyncio.run(go())


@pytest.mark.slow
def test_summary_number_key_focuses_and_selection_follows_without_switching_tabs(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            await press(pilot, "2")
            assert app.query_one(SummaryPanel).has_focus
            await pilot.press("1")
            assert app.focused is gantt  # details follow the timeline's selection
            await press(pilot, "3", "down")
            assert app.query_one("#side").active == "stalls"  # a selection made by the list keeps the list

    asyncio.run(go())


def test_help_lists_every_binding_from_the_bindings():
    app = GputraceApp([])
    sections = TimelineScreen.help_sections()
    rows = binding_rows(app, sections)
    helped = {what for _, _, what in rows}
    for _, bindings in sections:
        for b in bindings:
            assert (b.tooltip or b.description) in helped, b
    # Several keys for one action share a line.
    assert any(keys.split() == ["+", "=", "w"] for _, keys, _ in rows)


@pytest.mark.slow
def test_help_screen_and_legend_toggle(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            await ready(app, pilot)
            legend = app.query_one(Legend)
            assert "msm_h" in text_of(legend) and "GPU idle" in text_of(legend)
            assert legend.display
            if legend.hidden_entries:  # cut to two lines: g first shows every line
                await press(pilot, "g")
                assert legend.display and legend.expanded and legend.size.height > 2
            await press(pilot, "g")
            assert not legend.display
            await press(pilot, "question_mark")
            assert isinstance(app.screen, HelpScreen)
            shown = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "measure" in shown and "time cursor" in shown

    asyncio.run(go())


def test_80x24_side_panel_collapses_and_comes_back_under_the_timeline(sample_2gpu):
    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=(80, 24)) as pilot:
            gantt = await ready(app, pilot)
            side = app.query_one("#side")
            assert not side.display and gantt.timeline_width >= 50
            await press(pilot, "3")
            assert side.display and app.query_one(StallsPanel).has_focus
            assert gantt.timeline_width >= 50 and side.region.y > gantt.region.y  # under, not beside
            await press(pilot, "escape")
            assert app.focused is gantt and not side.display

    asyncio.run(go())


def test_palette_screenshot_without_downloads_and_gputrace_actions(sample_2gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/Downloads here
    monkeypatch.chdir(tmp_path)

    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            await ready(app, pilot)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert titles.count("Screenshot") == 1
            next(c for c in app.get_system_commands(app.screen) if c.title == "Screenshot").callback()
            await pilot.pause()
            svgs = [p for p in os.listdir(tmp_path) if p.endswith(".svg")]
            assert len(svgs) == 1
            assert 'xml:space="preserve"' in (tmp_path / svgs[0]).read_text()[:300]

    asyncio.run(go())


@pytest.mark.slow
def test_palette_commands_come_from_the_screens_provider_and_run(sample_2gpu):
    """The gputrace commands are a command Provider of the timeline screen; each names an action that
    exists, and choosing one in the palette runs it (here: Compact, then Fit after a zoom)."""
    from textual.command import CommandPalette

    from gputrace.tui.commands import COMMANDS, TimelineCommands

    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            assert TimelineCommands in type(app.screen).COMMANDS
            hits = [h async for h in TimelineCommands(app.screen).discover()]
            assert [h.text for h in hits] == [c[0] for c in COMMANDS]
            for _, _, where, action in COMMANDS:
                name = action.split("(")[0]
                node = app if name.startswith("app.") else (gantt if where == "gantt" else app.screen)
                assert hasattr(node, "action_" + name.removeprefix("app.")), action
            await press(pilot, "ctrl+p")
            assert isinstance(app.screen, CommandPalette)
            await press(pilot, *"compact")
            await pilot.pause(0.3)  # the palette gathers hits in a worker
            await press(pilot, "enter")
            await pilot.pause()
            assert gantt.compact and not isinstance(app.screen, CommandPalette)
            v0 = gantt.view
            await press(pilot, "plus", "ctrl+p", *"fit")
            await pilot.pause(0.3)
            await press(pilot, "enter")
            await pilot.pause()
            assert gantt.view == v0

    asyncio.run(go())


def test_preserve_space_marks_the_root_once():
    svg = '<svg class="x" viewBox="0 0 1 1"><text>a  b</text></svg>'
    out = preserve_space(svg)
    assert out.startswith('<svg xml:space="preserve" class="x"') and preserve_space(out) == out
    assert np.char.count(out, "xml:space") == 1


@pytest.mark.slow
def test_drag_along_the_time_axis_measures_that_range(sample_2gpu):
    from gputrace.tui.gantt import NAME_W

    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            gantt = await ready(app, pilot)
            v = gantt.view
            await pilot.mouse_down("#axis", offset=(NAME_W + 10, 1))
            await pilot.hover("#axis", offset=(NAME_W + 30, 1))
            await pilot.mouse_up("#axis", offset=(NAME_W + 30, 1))
            await pilot.pause()
            a, b = gantt.range
            assert abs((b - a) - 20 * v.ns_per_cell) < 1e-6 * v.ns_per_cell
            assert abs(a - v.time_of(10.5)) < 1e-6 * v.ns_per_cell
            assert app.query_one("#side").active == "range"

    asyncio.run(go())


def test_summary_d_merges_devices_through_a_new_analysis(sample_2gpu):
    """``d`` in the summary asks the app for a new analysis (TimelineScreen.AnalysisWanted): the rows come
    back merged over devices, and ``d`` again splits them."""

    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=SIZE) as pilot:
            await ready(app, pilot)
            await press(pilot, "2")
            summary = app.query_one(SummaryPanel)
            split = len(summary.stats)
            assert any(s.device is not None and s.device >= 0 for s in summary.stats)
            await press(pilot, "d")
            for _ in range(100):
                await pilot.pause(0.05)
                if summary.stats and all(s.device is None for s in summary.stats):
                    break
            assert not app.by_device and summary.stats and all(s.device is None for s in summary.stats)
            assert len(summary.stats) < split and summary.row_count == len(summary.stats)
            await press(pilot, "d")
            for _ in range(100):
                await pilot.pause(0.05)
                if len(summary.stats) == split:
                    break
            assert app.by_device and len(summary.stats) == split

    asyncio.run(go())
