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
    from gputrace.timeline.formats.otlp_jsonl import read as otlp_read

    seen = []
    real = otlp_read._read_otlp
    monkeypatch.setattr(otlp_read, "_read_otlp", lambda *a: seen.append(gc.isenabled()) or real(*a))
    p = tmp_path / "t.jsonl"
    write_synthetic(p, target_spans=200)
    gc.enable()
    assert load.read_otlp(p).n == 200
    assert seen == [False] and gc.isenabled()


@pytest.mark.slow
def test_what_the_block_kept_goes_to_the_oldest_generation():
    """No young collection walks a read's objects after the block (they are handed to the oldest
    generation), unless something else holds frozen objects, whose freeze is left alone."""

    def generation_of(objs: list) -> set[int]:
        gc.disable()  # no collection may move them while they are looked up
        where = {g for g in range(3) for o in gc.get_objects(generation=g) if id(o) in {id(x) for x in objs[:5]}}
        gc.enable()
        return where

    gc.enable()
    gc.collect()
    with collector_paused():
        kept = [{"k": [i]} for i in range(2000)]
    assert generation_of(kept) == {2}
    assert gc.get_freeze_count() == 0

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            kept2 = [{"k": [i]} for i in range(2000)]
        assert gc.get_freeze_count() == frozen  # not unfrozen here
        assert generation_of(kept2) != {2}  # left to the young collections, as a plain pause leaves them
    finally:
        gc.unfreeze()
