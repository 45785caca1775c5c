"""`gputrace demo` end to end in a subprocess (off a terminal: it writes the timeline as SVG)."""

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_proves_verifies_reports_and_writes_the_timeline(tmp_path):
    out = tmp_path / "demo"
    r = subprocess.run(
        [sys.executable, "-m", "gputrace", "demo", "--constraints", "2^9", "--batch", "1", "--devices", "2",
         "--backend", "cpu", "--out", str(out)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "verified 2/2" in r.stdout
    assert "Pinning economics" in r.stdout or "GPU idle" in r.stdout  # the report's tables
    svg = (out / "timeline.svg").read_text()
    assert svg.startswith("<svg") and "trace.jsonl" in svg and "prove" in svg  # title and the root bar
    assert (out / "trace.jsonl").stat().st_size > 0
    assert sorted(p.name for p in out.glob("proof-*.json")) == ["proof-0.json", "proof-1.json"]
    # No GPU here: the committed H200 run is shown too, labelled as recorded elsewhere.
    assert "2 × NVIDIA H200" in r.stdout
    h200 = (out / "h200-timeline.svg").read_text()
    assert "NVIDIA&#160;H200" in h200 and "not&#160;on&#160;this&#160;machine" in h200 and "GPU&#160;1" in h200
