"""``gputrace view`` in a subprocess: --screenshot writes SVG without a terminal; errors are
one line on stderr with a non-zero exit, never a traceback. The error paths of the fast lane run the same
command line in this process (``view_here``: ``gputrace.cli.main``, a second or more less each than a
fresh interpreter); the subprocess keeps the end-to-end run and the slow cases."""

import subprocess
import sys
import traceback
from types import SimpleNamespace

import pytest


def gputrace(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gputrace", "view", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def view_here(capsys, *args):
    """``gputrace view ARGS`` run by ``gputrace.cli.main`` here: its exit status and stderr, where an exception
    that escaped main shows as its traceback (what the subprocess would print)."""
    from gputrace.cli import main

    capsys.readouterr()
    try:
        code = main(["view", *args])
    except SystemExit as e:  # argparse's usage errors, SystemExit("message"): what the interpreter does
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - the test asserts there is none
        print(traceback.format_exc(), file=sys.stderr)
        code = 1
    return SimpleNamespace(returncode=code, stderr=capsys.readouterr().err)


def test_screenshot_writes_svg(tmp_path, sample_2gpu):
    out = tmp_path / "shot.svg"
    r = gputrace("--screenshot", str(out), "--size", "120x36", sample_2gpu)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and "</svg>" in svg
    text = svg.replace("&#160;", " ")
    for word in ("120 spans", "GPU 0", "GPU 1", "synthesis", "idle"):
        assert word in text, word


def test_screenshot_of_a_bad_file_fails_cleanly(tmp_path, capsys):
    bad = tmp_path / "x.jsonl"
    bad.write_text("{not json\n")
    out = tmp_path / "shot.svg"
    r = view_here(capsys, "--screenshot", str(out), str(bad))
    assert r.returncode == 1
    assert "not an OTLP JSON Lines trace" in r.stderr and "Traceback" not in r.stderr
    assert out.exists()  # the screen with the message is still written


def test_unwritable_screenshot_fails_cleanly(tmp_path, sample_2gpu, capsys):
    out = tmp_path / "no-such-dir" / "shot.svg"
    r = view_here(capsys, "--screenshot", str(out), "--size", "80x24", sample_2gpu)
    assert r.returncode == 1 and f"cannot write {out}" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_missing_file_and_usage_errors(tmp_path):
    r = gputrace("--screenshot", str(tmp_path / "s.svg"), str(tmp_path / "missing.jsonl"))
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr
    r = gputrace()
    assert r.returncode == 2 and "give a TRACE" in r.stderr
    r = gputrace("--listen", "8.8.8.8:4317")
    assert r.returncode == 2 and "not loopback" in r.stderr
    r = gputrace("--screenshot", "a.svg", "--size", "big", "x.jsonl")
    assert r.returncode != 0 and "COLSxROWS" in r.stderr


@pytest.mark.slow
def test_focus_screenshot_of_the_two_gpu_h200_trace(tmp_path):
    """The committed 2-GPU H200 trace (benchmarks/traces): one lane group per GPU with device-time rows,
    zoomed to the prove root, whose details name both devices."""
    import os

    trace = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "traces", "multi-2_20-2gpu.jsonl.gz")
    out = tmp_path / "shot.svg"
    r = gputrace("--focus", "prove", "--screenshot", str(out), "--size", "160x40", trace)
    assert r.returncode == 0, r.stderr
    import re

    text = "".join(re.findall(r">([^<>]*)</text>", out.read_text())).replace("&#160;", " ")
    for word in ("GPU 0", "GPU 1", "device time", "■ prove", "devices           2", "config.backend    cuda"):
        assert word in text, word


def test_focus_with_compare_is_a_usage_error(tmp_path, sample_2gpu, capsys):
    """--compare draws no timeline: --focus there is refused, not silently ignored."""
    out = tmp_path / "cmp.svg"
    r = view_here(capsys, "--compare", sample_2gpu, "--vs", sample_2gpu, "--focus", "prove", "--screenshot", str(out))
    assert r.returncode == 2 and "--focus" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_view_into_a_file_or_pipe_says_so_instead_of_hanging(sample_2gpu, capsys):
    r = view_here(capsys, sample_2gpu)  # stdout is pytest's capture here, as it is a pipe in a subprocess
    assert r.returncode == 2 and "not a terminal" in r.stderr and "--screenshot" in r.stderr


def test_impossible_screenshot_sizes_are_errors(sample_2gpu, tmp_path, capsys):
    r = view_here(capsys, "--screenshot", str(tmp_path / "s.svg"), "--size", "100000x100000", sample_2gpu)
    assert r.returncode != 0 and "at most 1000x400" in r.stderr and not (tmp_path / "s.svg").exists()
