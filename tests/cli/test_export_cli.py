"""`gputrace export` in a subprocess: every format, from OTLP JSONL and from an nsys SQLite report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from test_chrome import sample_timeline, validate_chrome  # noqa: E402
from test_jaeger import validate_jaeger  # noqa: E402
from test_nsys import build_report  # noqa: E402

from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl  # noqa: E402


def gputrace(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gputrace", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("exp") / "run.jsonl"
    write_otlp_jsonl(sample_timeline(), p)
    return p


def test_export_chrome(trace, tmp_path):
    out = tmp_path / "out.json"
    r = gputrace("export", "--format", "chrome", trace, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "chrome" in r.stdout
    doc = json.loads(out.read_text())
    validate_chrome(doc)
    xs = {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}
    assert set(xs) == {"prove", "synthesis", "pin", "ntt", "coset_ntt", "msm_h"}
    assert xs["ntt"]["ts"] == 500.0  # device time on the GPU track survives the OTLP round trip


def test_export_jaeger(trace, tmp_path):
    out = tmp_path / "j.json"
    r = gputrace("export", "-f", "jaeger", trace, "-o", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    validate_jaeger(doc)
    assert sum(len(t["spans"]) for t in doc["data"]) == 6


@pytest.mark.slow
def test_export_from_nsys_report(tmp_path):
    rep = build_report(tmp_path / "prove.sqlite")
    out = tmp_path / "p.json.gz"
    r = gputrace("export", "-f", "chrome", rep, "-o", out)
    assert r.returncode == 0, r.stderr
    import gzip

    doc = json.loads(gzip.decompress(out.read_bytes()))
    validate_chrome(doc)
    assert any(e["name"] == "ntt_kernel" for e in doc["traceEvents"])
    flows = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert flows, "kernels should have arrows from the NVTX range that launched them"
    r = gputrace("export", "-f", "chrome", "--no-flows", rep, "-o", tmp_path / "nf.json")
    assert r.returncode == 0 and '"ph":"s"' not in (tmp_path / "nf.json").read_text()
    r = gputrace("export", "-f", "otlp", rep, "-o", tmp_path / "p.jsonl")
    assert r.returncode == 0 and (tmp_path / "p.jsonl").read_bytes().count(b"\n") >= 1


def test_export_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 3}]}]}]}\n')
    r = gputrace("export", "-f", "chrome", bad, "-o", tmp_path / "o.json")
    assert r.returncode == 1 and "bad.jsonl" in r.stderr and "Traceback" not in r.stderr
    r = gputrace("export", "-f", "chrome", tmp_path / "missing.jsonl", "-o", tmp_path / "o.json")
    assert r.returncode == 1 and "missing.jsonl" in r.stderr
    r = gputrace("export", "-f", "svg", bad, "-o", tmp_path / "o.json")
    assert r.returncode == 2 and "invalid choice" in r.stderr
