"""Fixtures shared by the unit tests."""

import pytest


@pytest.fixture
def small_cache(tmp_path, monkeypatch):
    """The timeline cache in ``tmp_path/cache``, storing files of any size; the cache folder."""
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")
    return tmp_path / "cache"
