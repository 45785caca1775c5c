"""The TUI's stalls panel lists the findings ``report --json`` lists (issue 24): the same rules, GPU-activity
ones included (launch-bound, pageable-copy, sync-wait), in the same order with the same savings, computed by
the same `analysis.report.TimelineAnalysis.findings` after the stalls (the panel fills in two steps)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.analysis.report import analyse_timeline
from gputrace.timeline import read_trace
from gputrace.tui.app import GputraceApp
from gputrace.tui.overlays import FINDINGS_PENDING, compute_overlays, with_findings
from gputrace.tui.panels import StallsPanel

ROOT = Path(__file__).resolve().parents[2]
KINETO = ROOT / "tests" / "data" / "foreign" / "train_kineto.json.gz"


def report_findings(path) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "gputrace", "report", "--json", str(path)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["findings"]


def tui_findings(path) -> tuple[list[tuple[str, int]], list[str]]:
    async def go():
        app = GputraceApp([str(path)])
        async with app.run_test(size=(150, 44)):
            await app.wait_ready(60)
            stalls = app.query_one(StallsPanel)
            return ([(it.text, it.amount_ns) for it in stalls.items if it.category == "finding"],
                    list(app.main.overlays.notes))

    return asyncio.run(go())


@pytest.mark.parametrize("which", ["kineto", "kernels"])
def test_tui_lists_report_json_findings_in_order(which, sample_kernels):
    path = KINETO if which == "kineto" else Path(sample_kernels)
    want = report_findings(path)
    rules = {f["rule"] for f in want}
    # The trace has kernels and the report finds GPU-activity rules on it: what the TUI used to leave out.
    assert rules & {"launch-bound", "pageable-copy", "sync-wait"}, rules
    got, notes = tui_findings(path)
    assert got == [(f"{f['title']} ({f['evidence']})", f["saving_ns"]) for f in want]
    assert FINDINGS_PENDING not in notes


def test_overlays_without_findings_are_pending_until_added(sample_kernels):
    tl = read_trace(sample_kernels)
    analysis = analyse_timeline(tl, critical=False)
    assert not analysis.gpu_activity
    ov = compute_overlays(tl, tl.t0, analysis, findings=False)
    assert ov.findings_pending and ov.notes[0] == FINDINGS_PENDING
    assert all(it.category != "finding" for it in ov.items)
    stalls = list(ov.items)
    full = compute_overlays(tl, tl.t0, analysis)  # adds the GPU-activity tables to `analysis`
    assert analysis.gpu_activity
    found = [it for it in full.items if it.category == "finding"]
    assert any(it.text.startswith("pin the host memory") for it in found)  # pageable-copy: a GPU-activity rule
    with_findings(ov, found)
    assert ov.items == found + stalls and not ov.findings_pending and FINDINGS_PENDING not in ov.notes
    assert ov.notes == full.notes
