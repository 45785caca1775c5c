"""examples/seed_story: the README's worked example runs, in both modes, and names the switch behind the slowdown."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "seed_story" / "seed_story.py"


def run(*args, timeout=300):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_synthetic_mode_names_b1_and_a2(tmp_path):
    r = run("--synthetic", "--runs", "6", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    summary = (tmp_path / "summary.md").read_text()
    lines = {ln.split(":")[0].lstrip("* "): ln for ln in summary.splitlines() if ln.startswith("* ")}
    assert "slower, through prove/pin" in lines["all vs none"]
    assert "(slower) through prove/pin" in lines["b1"]
    assert "(slower) through prove/synthesis" in lines["a2"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ab"]["switches"] == ["a1", "a2", "a4", "b1", "d4"]


@pytest.mark.slow
def test_real_prover_mode_runs_and_keeps_every_trace(tmp_path):
    r = run("--runs", "2", "--constraints", "1024", "--batch", "1", "--devices", "1", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["injected"]
    traces = sorted((tmp_path / "experiment").glob("*/run-*.jsonl"))
    assert len(traces) >= 12 * 2  # 12 variants x 2 measured runs (warm-ups kept too)
    summary = (tmp_path / "summary.md").read_text()
    assert "injected: True" in summary  # the emulated costs are labelled
    assert "phases that did move: prove/pin" in summary  # B1's pinning shows as its own, new phase
    # The traces themselves say what was emulated (compare, ab --analyze and view read it back).
    from gputrace.timeline import read_trace

    emu = {p.parent.name: {k for t in [read_trace(p)] for r in t.resources for k in r if k.startswith("gputrace.emulated.")}
           for p in traces}
    assert emu["b1"] == {"gputrace.emulated.b1"} and emu["a2"] == {"gputrace.emulated.a2"} and emu["none"] == set()


@pytest.mark.slow
def test_a_second_run_into_the_same_folder_asks_for_force_then_replaces_it(tmp_path):
    assert run("--synthetic", "--runs", "3", "--out", str(tmp_path)).returncode == 0
    again = run("--synthetic", "--runs", "2", "--out", str(tmp_path))
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stderr.count("\n") == 1 and "--force" in again.stderr and "already holds an experiment" in again.stderr
    forced = run("--synthetic", "--runs", "2", "--out", str(tmp_path), "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    runs = sorted(p.name for p in (tmp_path / "experiment" / "none").glob("run-*.jsonl"))
    assert runs == ["run-000.jsonl", "run-001.jsonl"]  # the earlier run's third trace is gone, not mixed in
    assert "2 runs" in (tmp_path / "summary.md").read_text()
