"""Ctrl-C quits the viewers as ctrl+q and q do (issue 26: Textual's own ctrl+c only says to press
ctrl+q), from the timeline, from the query box, from the error screen and from the compare view."""

import asyncio

import pytest

from gputrace.tui.app import GputraceApp
from gputrace.tui.timeline_screen import TimelineScreen


async def _quits_on_ctrl_c(app, *before):
    async with app.run_test(size=(120, 30)) as pilot:
        await app.wait_ready(60)
        await pilot.pause()
        for key in before:
            await pilot.press(key)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit, "ctrl+c did not quit"
    assert app.return_code == 0


@pytest.mark.parametrize("before", [(), ("slash", "m"), ("3",)], ids=["timeline", "query-box", "stalls-list"])
def test_ctrl_c_quits_the_timeline(sample_2gpu, before):
    asyncio.run(_quits_on_ctrl_c(GputraceApp([sample_2gpu]), *before))


def test_ctrl_c_quits_the_error_screen(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a trace\n")
    asyncio.run(_quits_on_ctrl_c(GputraceApp([str(bad)])))


def test_ctrl_c_quits_the_compare_view(sample_2gpu):
    from gputrace.timeline import read_trace
    from gputrace.tui.compare_view import CompareApp

    tl = read_trace(sample_2gpu)
    asyncio.run(_quits_on_ctrl_c(CompareApp(base_runs=[tl, tl, tl], variant_runs=[tl, tl, tl])))


def test_help_names_ctrl_c():
    from gputrace.tui.widgets import binding_rows

    rows = binding_rows(GputraceApp(), TimelineScreen.help_sections())
    assert any("ctrl+c" in keys.lower() or "^c" in keys.lower() for _, keys, _ in rows), rows
