"""Fixtures shared by the unit tests."""

import gzip
import shutil
from pathlib import Path

import pytest

from gputrace.timeline.load import read_any

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
