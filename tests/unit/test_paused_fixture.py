"""A real recorded trace with collection paused (tests/data/foreign/train_record_toggle.jsonl.gz: train_step.py
--steps 60 --toggle-blocks 5 under ``gputrace record`` on an H200): the paused intervals are what the trace's
``gputrace.record.paused`` spans say, no GPU record falls inside one, and ``report`` counts them as unobserved,
neither busy nor idle."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "foreign" / "train_record_toggle.jsonl.gz"


def _spans():
    out = []
    with gzip.open(FIXTURE, "rt") as f:
        for line in f:
            for rs in json.loads(line).get("resourceSpans", []):
                for ss in rs["scopeSpans"]:
                    out += ss["spans"]
    return out


@pytest.fixture(scope="module")
def report():
    p = subprocess.run([sys.executable, "-m", "gputrace", "report", "--json", str(FIXTURE)], capture_output=True,
                       text=True, timeout=120, check=True)
    return json.loads(p.stdout)


def test_the_pauses_are_the_off_blocks_and_hold_no_gpu_record():
    spans = _spans()
    paused = sorted((int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])) for s in spans
                    if s["name"] == "gputrace.record.paused")
    # 12 blocks of 5 steps; off blocks 0, 2, 5-6, 9-10 (seed 24): consecutive off blocks are one pause.
    assert len(paused) == 4
    gpu = [s for s in spans if any(a["key"] == "gputrace.activity" for a in s.get("attributes", []))]
    assert len(gpu) > 1000
    for s in gpu:
        a, b = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
        assert not any(p0 < a < p1 or p0 < b < p1 for p0, p1 in paused), s["name"]


def test_report_counts_paused_time_as_unobserved_not_idle(report):
    spans = _spans()
    paused_ns = sum(int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) for s in spans
                    if s["name"] == "gputrace.record.paused")
    assert report["unobserved"]["ns"] == paused_ns > 300_000_000
    (dev,) = report["gpu_idle"]["per_device"]
    assert dev["unobserved_ns"] == paused_ns and dev["basis"] == "kernels"
    # busy + idle + unobserved is the device's whole window: no paused nanosecond is counted as idle.
    assert abs(dev["busy_ns"] + dev["idle_ns"] + paused_ns - report["wall_ns"]) < 0.001 * report["wall_ns"]
    assert "gputrace.record.paused" not in {p["phase"] for p in report["phases"]}
