"""SVG snapshot tests (pytest-textual-snapshot, textual pinned in pyproject) over committed
sample traces. Update after a deliberate visual change with ``pytest tests/tui --snapshot-update``
and look at the report first."""

import pytest

from gputrace.tui.app import GputraceApp

SIZE = (150, 44)


async def _ready(pilot):
    await pilot.app.wait_ready(60)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def test_first_screen_2gpu(snap_compare, sample_2gpu):
    assert snap_compare(GputraceApp([sample_2gpu], title="sample_2gpu.jsonl"), terminal_size=SIZE, run_before=_ready)


def test_first_screen_pinning_two_hosts(snap_compare, sample_pinning):
    assert snap_compare(GputraceApp([sample_pinning], title="sample_pinning.jsonl"), terminal_size=SIZE,
                        run_before=_ready)


@pytest.mark.slow
def test_selected_span_zoomed_with_details(snap_compare, sample_2gpu):
    async def run_before(pilot):
        await _ready(pilot)
        await pilot.press("slash", *"msm_h", "enter")  # search selects the first msm_h
        await pilot.press("z", "minus", "minus")
        await pilot.pause()

    assert snap_compare(GputraceApp([sample_2gpu], title="sample_2gpu.jsonl"), terminal_size=SIZE,
                        run_before=run_before)


@pytest.mark.slow
def test_summary_panel(snap_compare, sample_2gpu):
    async def run_before(pilot):
        await _ready(pilot)
        await pilot.press("2")
        await pilot.pause()

    assert snap_compare(GputraceApp([sample_2gpu], title="sample_2gpu.jsonl"), terminal_size=SIZE,
                        run_before=run_before)


def test_error_message(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the message names the file as given: keep it the same every run
    (tmp_path / "notes.jsonl").write_text("this is not a trace\n")
    assert snap_compare(GputraceApp(["notes.jsonl"]), terminal_size=(100, 20), run_before=_ready)


def test_first_screen_real_prover_cpu(snap_compare, sample_prove_cpu):
    assert snap_compare(GputraceApp([sample_prove_cpu], title="sample_prove_cpu.jsonl"), terminal_size=SIZE,
                        run_before=_ready)


def test_kernels_copies_and_launch_gaps(snap_compare, sample_kernels):
    async def run_before(pilot):
        await _ready(pilot)
        await pilot.press("3")  # stalls panel: launch gaps listed
        await pilot.pause()

    assert snap_compare(GputraceApp([sample_kernels], title="sample_kernels.jsonl"), terminal_size=SIZE,
                        run_before=run_before)


@pytest.mark.slow
def test_80x24_stall_measured_from_the_keyboard(snap_compare, sample_pinning):
    """An 80x24 terminal: the side panel under the timeline, a GPU idle gap found in the stalls
    list (3, Down, Down), zoomed (Enter) and measured (x): the Range panel and the status bar."""

    async def run_before(pilot):
        await _ready(pilot)
        await pilot.press("3", "down", "down", "enter", "x")
        await pilot.pause()

    assert snap_compare(GputraceApp([sample_pinning], title="sample_pinning.jsonl"), terminal_size=(80, 24),
                        run_before=run_before)
