"""Outputs are written whole or not at all, through a private temporary file in the target directory,
and never through a planted symlink (gputrace.atomic_write, used by export, screenshots, proofs, keys)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.atomic_write import atomic_output, write_atomic
import gputrace.timeline.formats.otlp_jsonl.write as otlp_file
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.testing.synth import make_timeline

ROOT = Path(__file__).resolve().parents[2]


def _tl():
    return make_timeline([{"name": "prove", "start": 0, "end": 10}, {"name": "ntt", "start": 1, "end": 5}], trace_id="ab" * 16)


def _leftovers(d: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name not in keep)


def test_export_never_writes_through_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out.jsonl"
    (tmp_path / "out.jsonl.tmp").symlink_to(victim)  # the old fixed temporary name
    write_otlp_jsonl(_tl(), out)
    assert victim.read_text() == "precious"
    out.unlink()
    out.symlink_to(victim)  # a symlink at the target itself is replaced, not followed
    write_otlp_jsonl(_tl(), out)
    assert victim.read_text() == "precious" and not out.is_symlink() and out.stat().st_size > 0
    assert _leftovers(tmp_path, {"victim.txt", "out.jsonl", "out.jsonl.tmp"}) == []


def test_a_failed_export_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")

    def broken(tl, max_spans, **_options):
        yield b"{}"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(otlp_file, "timeline_requests", broken)
    with pytest.raises(OSError):
        write_otlp_jsonl(_tl(), out)
    assert out.read_bytes() == b"old\n"
    assert _leftovers(tmp_path, {"out.jsonl"}) == []


def test_atomic_output_mode_and_errors(tmp_path):
    p = tmp_path / "a.txt"
    write_atomic(p, "hé")
    assert p.read_text(encoding="utf-8") == "hé"
    mask = os.umask(0)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(OSError):
        write_atomic(tmp_path / "missing" / "b.txt", b"x")
    d = tmp_path / "adir"
    d.mkdir()
    with pytest.raises(OSError):
        write_atomic(d, b"x")  # the target is a directory
    with pytest.raises(RuntimeError):
        with atomic_output(tmp_path / "c.txt") as f:
            f.write(b"half")
            raise RuntimeError("boom")
    assert _leftovers(tmp_path, {"a.txt", "adir"}) == []


def test_screenshot_and_proof_writers_are_atomic(tmp_path):
    from gputrace.commands.view import _write_screenshot
    from gputrace.prover import verify

    victim = tmp_path / "victim"
    victim.write_text("precious")
    svg = tmp_path / "shot.svg"
    svg.symlink_to(victim)
    assert _write_screenshot(str(svg), "<svg/>")
    assert victim.read_text() == "precious" and svg.read_text() == "<svg/>"
    assert not _write_screenshot(str(tmp_path / "nodir" / "x.svg"), "<svg/>")
    assert "write_atomic" in Path(verify.__file__).read_text()  # proofs go through the same helper


def test_export_cli_failure_leaves_no_partial_file(tmp_path):
    src = tmp_path / "in.jsonl"
    write_otlp_jsonl(_tl(), src)
    out = tmp_path / "out.json"
    out.mkdir()  # the rename over it fails after the data was written
    r = subprocess.run([sys.executable, "-m", "gputrace", "export", str(src), "-o", str(out), "--format", "chrome"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "gputrace export:" in r.stderr and "Traceback" not in r.stderr
    assert _leftovers(tmp_path, {"in.jsonl", "out.json"}) == [] and list(out.iterdir()) == []
