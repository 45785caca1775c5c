"""One name for the lanes (issue 26): the TUI names devices and lanes as `gputrace report` does, ``GPU n``
and ``host`` (not ``CPU``), lanes as ``GPU 1 stream:0`` / ``host thread:main``."""

import asyncio
import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from gputrace.timeline import read_trace
from gputrace.tui.app import GputraceApp
from gputrace.tui.index import TimelineIndex
from gputrace.tui.panels import DetailsPanel, SummaryPanel
from gputrace.tui.rows import DEVICE, build_rows, device_name, lane_title

ROOT = Path(__file__).resolve().parents[2]


def test_device_and_lane_names():
    assert (device_name(-1), device_name(0), device_name(3)) == ("host", "GPU 0", "GPU 3")
    from gputrace.timeline.model import Lane

    assert lane_title(Lane("h", 1, 1, "stream:0")) == "GPU 1 stream:0"
    assert lane_title(Lane("h", 1, -1, "thread:cpu-worker-0")) == "host thread:cpu-worker-0"


def test_the_lane_tree_groups_host_lanes_under_host(sample_2gpu):
    idx = TimelineIndex.build(read_trace(sample_2gpu))
    assert [r.label.strip() for r in build_rows(idx) if r.kind == DEVICE] == ["▼ GPU 0", "▼ GPU 1", "▼ host"]


def test_summary_and_details_name_devices_as_the_report_does(sample_2gpu):
    report = subprocess.run([sys.executable, "-m", "gputrace", "report", sample_2gpu], capture_output=True,
                            text=True, cwd=ROOT, timeout=120).stdout
    lines = report.splitlines()
    table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Phases")):]
    table = table[:next(i for i, ln in enumerate(table) if ln.startswith("└"))]
    report_devices = {ln.split("│")[2].strip() for ln in table if ln.startswith("│")}  # the device column
    assert "host" in report_devices and "CPU" not in report_devices

    async def go():
        app = GputraceApp([sample_2gpu])
        async with app.run_test(size=(150, 44)) as pilot:
            await app.wait_ready(60)
            await pilot.pause()
            summary = app.query_one(SummaryPanel)
            shown = {str(summary.get_row_at(i)[1]) for i in range(summary.row_count)}
            assert shown == report_devices
            tl = app.index.timeline
            host_row = int((tl.device < 0).nonzero()[0][0])
            app.query_one(DetailsPanel).show(tl, host_row, app.index.origin)
            console = Console(width=200, file=io.StringIO(), record=True)
            console.print(app.query_one(DetailsPanel).content)
            assert any(ln.split()[:2] == ["device", "host"] for ln in console.export_text().splitlines())

    asyncio.run(go())
