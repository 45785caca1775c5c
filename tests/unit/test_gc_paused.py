"""``collector_paused``: the collector is off inside, and back to its earlier state afterwards, errors included."""

from __future__ import annotations

import gc

import pytest

from gputrace.timeline._gc import collector_paused


@pytest.fixture(autouse=True)
def _restore_gc():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_off_inside_and_restored_after(enabled):
    (gc.enable if enabled else gc.disable)()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled() is enabled
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled() is enabled


def test_readers_run_with_the_collector_off_and_restore_it(tmp_path, monkeypatch):
    from gputrace.testing.synthetic import write_synthetic
    from gputrace.timeline import load

    seen = []
    real = load._read_otlp
    monkeypatch.setattr(load, "_read_otlp", lambda *a: seen.append(gc.isenabled()) or real(*a))
    p = tmp_path / "t.jsonl"
    write_synthetic(p, target_spans=200)
    gc.enable()
    assert load.read_otlp(p).n == 200
    assert seen == [False] and gc.isenabled()
