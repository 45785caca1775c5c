"""One file, three views: the TUI's stalls and summary panels list what ``gputrace report``
prints and what ``report --json`` holds (they share `analysis.report.analyse_timeline`)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.tui.app import GputraceApp
from gputrace.tui.panels import StallsPanel, SummaryPanel

ROOT = Path(__file__).resolve().parents[2]


def report(*args) -> str:
    r = subprocess.run([sys.executable, "-m", "gputrace", "report", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("fixture", ["sample_pinning", "sample_2gpu", "sample_prove_cpu"])
@pytest.mark.slow
def test_tui_report_and_json_list_the_same_stalls_and_phases(fixture, request):
    path = request.getfixturevalue(fixture)
    doc = json.loads(report(path, "--json"))
    text = report(path)

    async def go():
        app = GputraceApp([path])
        async with app.run_test(size=(150, 44)) as pilot:
            await app.wait_ready(60)
            for _ in range(100):
                if app.analysed.is_set():
                    break
                await pilot.pause(0.05)
            assert app.analysed.is_set()
            stalls = app.query_one(StallsPanel)
            summary = app.query_one(SummaryPanel)
            return ([(it.category, it.text, it.amount_ns, it.start, it.end) for it in stalls.items],
                    list(app.main.overlays.notes), [(s.phase, s.device, s.count, s.total_ns) for s in summary.stats])

    items, notes, phases = asyncio.run(go())
    assert items, "the sample traces all have stalls"
    # The report's findings open the panel as they open the report (all rules: tests/tui/test_findings_tui.py
    # checks the GPU-activity ones on traces with kernels), then the same stalls.
    found = [(f["rule"], f["saving_ns"]) for f in doc["findings"]]
    assert [(it[1], it[2]) for it in items[:len(found)]] == [
        (f"{f['title']} ({f['evidence']})", f["saving_ns"]) for f in doc["findings"]]
    items = [it for it in items if it[0] != "finding"]
    assert items == [(s["category"], s["text"], s["lost_ns"], s["start"], s["end"]) for s in doc["stalls"]]
    assert notes[-1] == doc["listing"]["text"]
    assert phases == [(p["phase"], p["device"], p["count"], p["total_ns"]) for p in doc["phases"]]
    flat = " ".join(text.split())  # the table wraps long details
    for s in doc["stalls"]:
        assert " ".join(s["text"].split()[:6]) in flat
    assert doc["listing"]["text"] in flat
