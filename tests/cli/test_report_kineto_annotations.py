"""`gputrace report --json` on the committed PyTorch-profiler fixtures: GPU busy and idle, the idle gaps, the
findings, the phases and the stalls are the figures recorded in ``tests/golden/kineto_report_figures.json``
(written by the reader that left Kineto's ``gpu_user_annotation`` rows on a host thread lane; the idle stalls'
``host_busy_ns`` added since). Moving those rows to their GPU's ``annotations:stream N`` lane must not change any
of them: they are profiler bookkeeping, with no device time of their own, and stay out of every analysis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "kineto_report_figures.json"


@pytest.mark.parametrize("name", ["train_kineto", "dist_rank0", "dist_rank1"])
def test_annotation_lanes_change_no_report_figure(name):
    trace = ROOT / "tests" / "data" / "foreign" / f"{name}.json.gz"
    r = subprocess.run([sys.executable, "-m", "gputrace", "report", str(trace), "--json"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    got = {"gpu_devices": d["gpu_activity"]["devices"], "gpu_idle": d["gpu_idle"], "findings": d["findings"],
           "phases": d["phases"], "stalls": d["stalls"]}
    want = json.loads(GOLDEN.read_text())[name]
    for part in want:
        assert got[part] == want[part], f"{name}: {part} differs from {GOLDEN.name}"
