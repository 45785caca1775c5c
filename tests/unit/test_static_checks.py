"""ruff and mypy over the packages they cover (the paths and rules are in pyproject.toml, [tool.ruff] and
[tool.mypy]), and whether those lists cover all of gputrace/ yet (issue 23 widens them one package at a time).
Both tools come from the ``test`` extra; CONTRIBUTING.md says how to run them by hand."""

import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mypy (the ``test`` extra) depends on tomli there
    import tomli as tomllib

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


def test_mypy_finds_nothing(mypy_started):
    _require("mypy")
    # The cache (.mypy_cache, ignored by git) makes a re-run take about a second instead of ten; from a cold
    # cache the run started in the background at collection (tests/unit/conftest.py) has had the other
    # tests' time to finish.
    if mypy_started is not None:
        stdout, stderr = mypy_started.communicate(timeout=240)
        out = subprocess.CompletedProcess(mypy_started.args, mypy_started.returncode, stdout, stderr)
    else:
        out = _run("mypy", "--no-color-output")
    assert out.returncode == 0, "mypy failed:\n" + out.stdout + out.stderr


def _ruff_files() -> set[str]:
    """The files `ruff check` (no arguments) checks, as paths relative to the repository: ruff resolves its own
    `include` globs, so this is what it covers, not a re-reading of the globs."""
    out = _run("ruff", "check", "--show-files", "--no-cache")
    assert out.returncode == 0, out.stderr
    return {str(PurePosixPath(Path(line).resolve().relative_to(ROOT))) for line in out.stdout.splitlines() if line}


def _mypy_covers(path: str, entries: list[str]) -> bool:
    """Whether `mypy` (no arguments) checks ``path``: `files` entries are files or directories (mypy walks a
    directory's .py files)."""
    return any(path == e.rstrip("/") or path.startswith(e.rstrip("/") + "/") for e in entries)


def _uncovered() -> dict[str, list[str]]:
    """Package files (gputrace/**/*.py) that ruff or mypy leaves out, per tool."""
    files = sorted(str(p.relative_to(ROOT).as_posix()) for p in (ROOT / "gputrace").rglob("*.py"))
    mypy_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    ruff = _ruff_files()
    return {
        "ruff": [f for f in files if f not in ruff],
        "mypy": [f for f in files if not _mypy_covers(f, mypy_files)],
    }


def _by_package(paths: list[str]) -> list[str]:
    return sorted({"/".join(p.split("/")[:2]) for p in paths})


def test_the_coverage_check_reads_both_tools():
    # What the coverage test below relies on: ruff reports paths of package files, a package already in both
    # lists shows as covered, and a directory entry covers its files and no file merely sharing its prefix.
    package = {str(p.relative_to(ROOT).as_posix()) for p in (ROOT / "gputrace").rglob("*.py")}
    ruff = _ruff_files()
    assert "gputrace/timeline/load.py" in ruff and ruff <= package
    missing = _uncovered()
    assert "gputrace/timeline/load.py" not in missing["ruff"] + missing["mypy"]
    assert _mypy_covers("gputrace/timeline/load.py", ["gputrace/timeline/"])
    assert not _mypy_covers("gputrace/timeline_x.py", ["gputrace/timeline"])


def test_the_checks_cover_the_whole_package():
    missing = _uncovered()
    assert missing == {"ruff": [], "mypy": []}, (
        "not yet checked by ruff: " + ", ".join(_by_package(missing["ruff"])) + "\n"
        "not yet checked by mypy: " + ", ".join(_by_package(missing["mypy"]))
    )
