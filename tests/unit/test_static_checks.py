"""ruff and mypy over the packages they cover (the read side and the OTLP codec; the paths and rules are in
pyproject.toml, [tool.ruff] and [tool.mypy]). Both come from the ``test`` extra; CONTRIBUTING.md says how to
run them by hand."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT, timeout=240)


def _require(module: str) -> None:
    probe = _run(module, "--version")
    if probe.returncode != 0:
        pytest.fail(f"{module} is not installed: pip install -e '.[test]'\n{probe.stderr}")


def test_ruff_finds_nothing():
    _require("ruff")
    out = _run("ruff", "check", "--no-cache", "--output-format", "concise")
    assert out.returncode == 0, "ruff check failed:\n" + out.stdout + out.stderr


def test_mypy_finds_nothing():
    _require("mypy")
    # The cache (.mypy_cache, ignored by git) makes a re-run take about a second instead of ten.
    out = _run("mypy", "--no-color-output")
    assert out.returncode == 0, "mypy failed:\n" + out.stdout + out.stderr
