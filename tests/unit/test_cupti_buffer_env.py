"""GPUTRACE_CUPTI_BUFFER_KB sets the size of the buffers handed to CUPTI; anything else keeps the default."""

import pytest

from gputrace.trace.recorder import CUPTI_BUFFER_ENV, cupti_buffer_bytes


@pytest.mark.parametrize(("raw", "want"), [("256", 256 << 10), ("16", 16 << 10), ("65536", 65536 << 10),
                                           ("", 2 << 20), ("15", 2 << 20), ("65537", 2 << 20), ("1e3", 2 << 20),
                                           ("-4", 2 << 20), (" 512 ", 512 << 10)])
def test_buffer_size_from_the_environment(monkeypatch, raw, want):
    monkeypatch.setenv(CUPTI_BUFFER_ENV, raw)
    assert cupti_buffer_bytes() == want


@pytest.mark.parametrize(("raw", "want"), [("0", 0), ("100", 100), ("", 500), ("-1", 500), ("x", 500),
                                           ("60001", 500)])
def test_flush_period_from_the_environment(monkeypatch, raw, want):
    from gputrace.trace.recorder import CUPTI_FLUSH_ENV, cupti_flush_ms

    monkeypatch.setenv(CUPTI_FLUSH_ENV, raw)
    assert cupti_flush_ms() == want
