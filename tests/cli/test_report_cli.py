"""`gputrace report` in a subprocess: tables, JSON numbers, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.testing.synth import make_timeline
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


def gputrace(*args):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Seed-shaped: an unrecorded 8.6 ms gap under prove (pinning without a span on this
    side), a recorded pin on GPU 0, GPU 1 idle during synthesis."""
    tl = make_timeline(
        [
            {"id": "p", "name": "prove", "start": 0, "end": 100 * MS},
            {"name": "synthesis", "start": 0, "end": 40 * MS, "parent": "p"},
            {"name": "pin", "start": 40 * MS, "end": 48 * MS, "device": 0, "bytes": 2 << 30, "parent": "p"},
            {"name": "h2d", "start": 48 * MS, "end": 50 * MS, "gpu_start": 48 * MS, "gpu_end": 50 * MS, "device": 0, "bytes": 2 << 30, "parent": "p"},
            {"name": "msm_l", "start": 50 * MS, "end": 70 * MS, "gpu_start": 50 * MS, "gpu_end": 70 * MS, "device": 0, "parent": "p"},
            {"name": "msm_a", "start": 45 * MS, "end": 60 * MS, "gpu_start": 45 * MS, "gpu_end": 60 * MS, "device": 1, "parent": "p", "lane": "stream:1"},
            {"name": "sync", "start": 70 * MS, "end": 75 * MS, "parent": "p"},
            {"name": "unpin", "start": 91 * MS, "end": 91_400_000, "device": 0, "bytes": 2 << 30, "parent": "p"},
        ],
        resource={"gputrace.run_id": "r1", "service.name": "t"},
        trace_id="ab" * 16,
    )
    p = tmp_path_factory.mktemp("rep") / "run.jsonl"
    write_otlp_jsonl(tl, p)
    return p


def test_report_tables(trace):
    r = gputrace("report", trace, "--pageable-gbps", "4")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for title in ("Phases", "GPU idle (every gap counted", "Stalls", "Pinning economics", "Critical path"):
        assert title in out, title
    assert "GPU 1 idle 45 ms (leading) while synthesis and pin ran on the host" in out
    assert "24.6 ms" in out  # prove: 100 ms minus children covering 0-75 ms and 91-91.4 ms
    assert "totals count every gap" in out


def test_report_json_numbers(trace):
    r = gputrace("report", trace, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["spans"] == 8 and d["wall_ns"] == 100 * MS
    ph = {(p["phase"], p["device"]): p for p in d["phases"]}
    assert ph[("msm_l", 0)]["gpu_total_ns"] == 20 * MS
    un = {u["path"]: u for u in d["unattributed"]}
    assert un["prove"]["unattributed_ns"] == (100 - 75) * MS - 400_000
    pin = {p["device"]: p for p in d["pinning"]}
    assert pin[0]["pin_ns"] == 8 * MS and pin[0]["unpin_ns"] == 400_000
    waits = {w["phase"]: w for w in d["host_waits"]}
    assert waits["sync"]["wait_ns"] == 5 * MS
    idle = {x["device"]: x for x in d["gpu_idle"]["per_device"]}
    assert idle[1] == {"device": 1, "busy_ns": 15 * MS, "idle_ns": 85 * MS, "idle_share": 0.85, "gaps": 2,
                       "longest_ns": 45 * MS, "basis": "brackets", "unobserved_ns": 0}
    stalls = d["stalls"]
    assert [s["lost_ns"] for s in stalls] == sorted((s["lost_ns"] for s in stalls), reverse=True)
    assert {"idle", "wait", "pin", "unattributed"} <= {s["category"] for s in stalls}
    assert d["listing"]["min_lost_ns"] == 100_000 and "totals count every gap" in d["listing"]["text"]
    assert d["critical_path"][0]["phase"] == "synthesis"


def test_report_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [\n')
    r = gputrace("report", bad)
    assert r.returncode == 1 and "gputrace report:" in r.stderr and "bad.jsonl" in r.stderr
    r = gputrace("report", tmp_path / "missing.jsonl")
    assert r.returncode == 1 and "missing.jsonl" in r.stderr
    r = gputrace("report", bad, "--min-gap", "soon")
    assert r.returncode == 2 and "duration" in r.stderr


def test_report_off_a_terminal_takes_its_width_from_columns(trace):
    import os

    def widest(env_columns):
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        if env_columns is not None:
            env["COLUMNS"] = env_columns
        r = subprocess.run([sys.executable, "-m", "gputrace", "report", str(trace)], capture_output=True, text=True,
                           cwd=ROOT, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        return max(len(line) for line in r.stdout.splitlines())

    assert widest("90") <= 90
    assert 90 < widest(None) <= 160  # the default for a file or a pipe
    assert 90 < widest("wide") <= 160  # not a number: the default
