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


def _demo_args(tmp_path, backend="auto"):
    from gputrace.commands import demo

    return demo._parse(demo, ["demo", "--backend", backend, "--out", str(tmp_path / "demo"), "--no-view"])


def test_demo_hints_at_the_gpu_extra_when_a_driver_is_there_but_cupy_is_not(tmp_path, monkeypatch, capsys):
    """An NVIDIA driver (nvidia-smi or /proc/driver/nvidia) without CuPy: one line naming pip install -e '.[gpu]'
    before the CPU run; none with --backend cpu, without a driver, or with CuPy."""
    import importlib.util

    from gputrace.commands import demo, prove

    monkeypatch.setattr(prove, "run", lambda args: 7)  # stop after the hint: no proof run here
    real_find_spec = importlib.util.find_spec

    def find_spec(cupy):
        return lambda name, *a: cupy if name == "cupy" else real_find_spec(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec(None))
    monkeypatch.setattr(demo, "nvidia_driver_present", lambda: True)
    assert demo.run(_demo_args(tmp_path)) == 7
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[gpu]'" in err
    assert demo.run(_demo_args(tmp_path, backend="cpu")) == 7 and capsys.readouterr().err == ""
    monkeypatch.setattr(demo, "nvidia_driver_present", lambda: False)
    assert demo.run(_demo_args(tmp_path)) == 7 and capsys.readouterr().err == ""
    monkeypatch.setattr(demo, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec(object()))
    assert demo.run(_demo_args(tmp_path)) == 7 and capsys.readouterr().err == ""


def test_nvidia_driver_present_looks_for_nvidia_smi_or_the_proc_entry(monkeypatch, tmp_path):
    import shutil

    from gputrace.commands import demo

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    assert demo.nvidia_driver_present()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert demo.nvidia_driver_present() == demo.Path("/proc/driver/nvidia").exists()
