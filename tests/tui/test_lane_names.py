"""One name for the lanes (issue 26): the TUI names devices as `gputrace report` does, through the one
function both use (`gputrace.analysis.lanes.device_name`: ``GPU n``, ``CPU`` for host-only lanes), with
the CPU's threads as lanes ``thread:NAME`` under ``CPU``."""

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
from gputrace.analysis.lanes import device_name
from gputrace.tui.rows import DEVICE, build_rows

ROOT = Path(__file__).resolve().parents[2]


def test_the_lane_tree_groups_host_lanes_under_the_report_s_name(sample_2gpu):
    idx = TimelineIndex.build(read_trace(sample_2gpu))
    groups = [r.label.strip() for r in build_rows(idx) if r.kind == DEVICE]
    assert groups == [f"▼ {device_name(d)}" for d in (0, 1, -1)] == ["▼ GPU 0", "▼ GPU 1", "▼ CPU"]
    lanes = [r.label.strip() for r in build_rows(idx) if r.kind == "lane" and r.label.strip().startswith("thread:")]
    assert lanes and all(lab.startswith("thread:") for lab in lanes)


def test_summary_and_details_name_devices_as_the_report_does(sample_2gpu):
    report = subprocess.run([sys.executable, "-m", "gputrace", "report", sample_2gpu], capture_output=True,
                            text=True, cwd=ROOT, timeout=120).stdout
    lines = report.splitlines()
    table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("Phases")):]
    table = table[:next(i for i, ln in enumerate(table) if ln.startswith("└"))]
    report_devices = {ln.split("│")[2].strip() for ln in table if ln.startswith("│")}  # the device column
    assert device_name(-1) in report_devices and "host" not in report_devices

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
            assert any(ln.split()[:2] == ["device", device_name(-1)] for ln in console.export_text().splitlines())

    asyncio.run(go())
