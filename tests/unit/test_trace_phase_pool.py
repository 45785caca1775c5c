"""Recycled phase objects (hotpath.recycle / the pool): reuse must be invisible in the trace and never touch
a phase that anything still references."""

from __future__ import annotations

import threading

import pytest

from gputrace.trace import MemorySink, configure, current_context, hotpath, phase, shutdown, start_phase


@pytest.fixture
def rec():
    sink = MemorySink()
    r = configure(sinks=[sink], id_seed=11, collect_gpu_info=False)
    r._stop.set()  # park the exporter thread: the tests drain at chosen points
    r.sink = sink
    hotpath.clear_pool()
    try:
        yield r
    finally:
        shutdown()


def _in_pool(p) -> bool:
    return any(q is p for q in hotpath._pool)


def test_drained_phases_are_reused_with_no_state_left_over(rec):
    # First round: every kind of per-phase state a plain Phase can carry.
    with pytest.raises(ValueError):
        with phase("msm_h", device=1, bytes=64):
            raise ValueError("boom")
    with phase("ntt", device=0) as p:
        p.set("gputrace.note", "first")
    h = start_phase("load")
    h.end()
    del p, h
    with phase("prove", circuit=2, batch=9):
        with phase("ntt"):
            pass
    rec.drain()
    pooled = list(hotpath._pool)
    assert len(pooled) == 5  # all five: nothing holds them any more
    first = {s["name"]: s for s in rec.sink.spans}
    assert first["msm_h"]["status_code"] == 2

    # Second round takes its objects from the pool, and its spans show nothing of the first round.
    with phase("prove"):
        with phase("ntt"):
            with phase("intt_abc"):
                pass
    with phase("msm_h"):
        pass
    assert len(hotpath._pool) == 1  # four taken
    rec.drain()
    second = rec.sink.spans[5:]
    names = {s["name"]: s for s in second}
    assert set(names) == {"prove", "ntt", "intt_abc", "msm_h"}
    for s in second:
        assert "status_code" not in s and "gputrace.note" not in s["attributes"], s
        assert "gputrace.device" not in s["attributes"] and "gputrace.circuit" not in s["attributes"], s
    assert names["ntt"]["parent_span_id"] == names["prove"]["span_id"]
    assert names["intt_abc"]["parent_span_id"] == names["ntt"]["span_id"]
    assert names["msm_h"]["parent_span_id"] is None
    assert names["intt_abc"]["trace_id"] == names["prove"]["trace_id"] != names["msm_h"]["trace_id"]
    all_ids = [s["span_id"] for s in rec.sink.spans]
    assert len(set(all_ids)) == len(all_ids) == 9


def test_referenced_phases_are_never_recycled(rec):
    kept = []
    with phase("a") as p:
        kept.append(p)  # the user keeps the object
    with phase("b"):
        token = current_context()  # a parent token held by the program (e.g. for another thread)
    h = start_phase("c")
    h.end()  # handle still held
    with phase("d"):
        pass
    rec.drain()
    assert not _in_pool(kept[0]) and not _in_pool(token) and not _in_pool(h)
    assert len(hotpath._pool) == 1  # only "d"
    # The kept phases still carry their ids: a child made later in another thread links to its parent.
    done = threading.Event()

    def child():
        with phase("child", parent=token):
            pass
        done.set()

    t = threading.Thread(target=child)
    t.start()
    t.join()
    assert done.is_set()
    rec.drain()
    spans = {s["name"]: s for s in rec.sink.spans}
    assert spans["child"]["parent_span_id"] == spans["b"]["span_id"]
    assert spans["child"]["trace_id"] == spans["b"]["trace_id"]


def test_parent_recycled_only_after_its_children(rec):
    # The parent's open phase is referenced by its child's `up` until the child is recycled in the same pass.
    with phase("outer"):
        for _ in range(3):
            with phase("inner"):
                pass
    rec.drain()
    assert len(hotpath._pool) == 4


def test_pool_is_bounded_and_cleared_at_shutdown(rec, monkeypatch):
    monkeypatch.setattr(hotpath, "POOL_MAX", 3)
    for _ in range(10):
        with phase("x"):
            pass
    rec.drain()
    assert len(hotpath._pool) == 3
    shutdown()
    assert hotpath._pool == []


def test_recycle_counts_only_unreferenced_plain_phases():
    a = hotpath._phase("a")
    b = hotpath._phase("b")
    keep = b
    hotpath.clear_pool()
    try:
        lst = [a, b]
        del a, b
        assert hotpath.recycle(lst) == 1  # "b" is still referenced by `keep`
        assert keep not in hotpath._pool and len(hotpath._pool) == 1
    finally:
        hotpath.clear_pool()
