"""Fixtures shared by the unit tests."""

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputrace.timeline.load import read_any

ROOT = Path(__file__).resolve().parents[2]
#: The mypy run of test_static_checks.test_mypy_finds_nothing, started in the background once collection has
#: selected that test: from a cold cache (a fresh clone, CI) mypy takes 10-60 s, which then overlap the other
#: tests on the second core instead of adding to the run.
_MYPY = pytest.StashKey[subprocess.Popen]()
MYPY_TEST = "test_static_checks.py::test_mypy_finds_nothing"


def pytest_collection_finish(session):
    if any(item.nodeid.endswith(MYPY_TEST) for item in session.items):
        session.config.stash[_MYPY] = subprocess.Popen(
            [sys.executable, "-m", "mypy", "--no-color-output"], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)


def pytest_unconfigure(config):
    proc = config.stash.get(_MYPY, None)
    if proc is not None and proc.poll() is None:  # the run stopped before the test (-x, Ctrl-C)
        proc.kill()
        proc.communicate()


@pytest.fixture
def mypy_started(request) -> "subprocess.Popen | None":
    """The background mypy run (its output not read yet), or None when it was not started (the test was
    selected some other way): the test then runs mypy itself. Taken once."""
    return request.config.stash.get(_MYPY, None)

#: Traces captured by other tools on the device (tests/data/foreign/README.md says how).
FOREIGN = Path(__file__).resolve().parents[1] / "data" / "foreign"


@pytest.fixture
def small_cache(tmp_path, monkeypatch):
    """The timeline cache in ``tmp_path/cache``, storing files of any size; the cache folder."""
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def foreign_nsys_sqlite(tmp_path_factory) -> Path:
    """The committed Nsight Systems export of the training step, unpacked once (SQLite cannot read a .gz)."""
    p = tmp_path_factory.mktemp("foreign") / "train_nsys.sqlite"
    with gzip.open(FOREIGN / "train_nsys.sqlite.gz") as f, open(p, "wb") as out:
        shutil.copyfileobj(f, out)
    return p


@pytest.fixture(scope="module")
def kineto():
    """The training step as torch.profiler (Kineto) recorded it."""
    return read_any([FOREIGN / "train_kineto.json.gz"])


@pytest.fixture(scope="module")
def nsys(foreign_nsys_sqlite):
    """The same training step as Nsight Systems recorded it."""
    return read_any([foreign_nsys_sqlite])
