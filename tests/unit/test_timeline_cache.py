"""The columnar cache: a re-open loads the same Timeline from columns; any change to the trace
is a miss; strict reads never get a lenient read's entry; a broken entry is only a miss."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gputrace.timeline import TraceFormatError, cache
from gputrace.timeline.load import load_steps, read_any
from tests.unit.timeline_equality import assert_same_timeline

DATA = os.path.join(os.path.dirname(__file__), "..", "data")



def _copy(tmp_path, name="sample_2gpu.jsonl"):
    p = tmp_path / name
    p.write_bytes(open(os.path.join(DATA, name), "rb").read())
    return p


def test_second_read_comes_from_the_cache_and_is_identical(tmp_path, small_cache, monkeypatch):
    p = _copy(tmp_path)
    first = read_any([p])
    assert len(list(small_cache.glob("*.gtc"))) == 1
    import gputrace.timeline.load as load

    def boom(*a, **k):
        raise AssertionError("read the file again instead of the cache")

    monkeypatch.setattr(load, "_read", boom)
    second = read_any([p])
    assert_same_timeline(first, second)
    assert second.load_report.spans == first.load_report.spans


def test_attributes_and_shared_dicts_survive(tmp_path, small_cache):
    from gputrace.timeline.formats.chrome.export import write_chrome

    src = read_any([os.path.join(DATA, "sample_2gpu.jsonl")])
    p = tmp_path / "c.json"
    write_chrome(src, p)
    a = read_any([p])
    b = read_any([p])
    assert_same_timeline(a, b)


def test_a_changed_trace_is_read_again(tmp_path, small_cache):
    p = _copy(tmp_path)
    n = read_any([p]).n
    data = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join(data[: len(data) // 2]))
    assert read_any([p]).n < n


def test_strict_reads_never_use_a_lenient_entry(tmp_path, small_cache):
    p = _copy(tmp_path)
    with open(p, "ab") as f:
        f.write(b"not json\n")
    assert read_any([p], lenient=True).load_report.lines_skipped == 1
    with pytest.raises(TraceFormatError):
        read_any([p])
    assert read_any([p], lenient=True).load_report.lines_skipped == 1  # the lenient entry is still used


def test_a_broken_entry_is_a_miss(tmp_path, small_cache):
    p = _copy(tmp_path)
    n = read_any([p]).n
    for e in small_cache.glob("*.gtc"):
        e.write_bytes(b"garbage")
    assert read_any([p]).n == n
    assert cache.clear() >= 1 and not list(small_cache.glob("*.gtc"))


def test_small_files_and_disabled_cache_are_not_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "c1"))
    p = _copy(tmp_path)
    read_any([p])  # below the default 16 MiB
    assert not (tmp_path / "c1").exists()
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    read_any([p])
    assert not (tmp_path / "c1").exists()


def test_viewer_steps_use_the_cache(tmp_path, small_cache):
    p = _copy(tmp_path)
    first = read_any([p])
    steps = [s for s in load_steps([str(p)]) if s.snapshot is not None]
    assert len(steps) == 1  # straight from the cache: one step with everything
    assert_same_timeline(first, steps[0].snapshot())


def test_a_big_cached_trace_shows_its_earliest_spans_first(tmp_path, small_cache, monkeypatch):
    import gputrace.timeline.load as load

    p = _copy(tmp_path)
    first = read_any([p])
    monkeypatch.setattr(load, "PREVIEW_SPANS", 10)
    steps = [s for s in load_steps([str(p)]) if s.snapshot is not None]
    assert len(steps) == 2
    pre, full = steps[0].snapshot(), steps[1].snapshot()
    assert pre.n <= 10 and pre.n > 0 and pre.t0 == first.t0
    assert np.sort(pre.cols["start"]).tolist() == np.sort(first.cols["start"])[:pre.n].tolist()
    assert_same_timeline(first, full)


def test_a_cached_trace_under_twice_the_preview_is_shown_whole_at_once(tmp_path, small_cache, monkeypatch):
    """A preview of most of a trace would cost its copy and index and show nothing sooner."""
    import gputrace.timeline.load as load

    p = _copy(tmp_path)
    first = read_any([p])
    monkeypatch.setattr(load, "PREVIEW_SPANS", first.n // 2)  # n > PREVIEW_SPANS, n <= 2 x PREVIEW_SPANS
    steps = [s for s in load_steps([str(p)]) if s.snapshot is not None]
    assert len(steps) == 1
    assert_same_timeline(first, steps[0].snapshot())
    monkeypatch.setattr(load, "PREVIEW_SPANS", first.n // 2 - 1)  # just over twice: a preview first
    assert len([s for s in load_steps([str(p)]) if s.snapshot is not None]) == 2


def test_nsys_launch_attributes_stay_shared_through_the_cache(tmp_path, small_cache, monkeypatch):
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    from test_nsys import build_report

    from gputrace.timeline.row_attrs import RowAttrs

    p = build_report(tmp_path / "r.sqlite")
    first = read_any([p])
    import gputrace.timeline.load as load

    def boom(*a, **k):
        raise AssertionError("read the report again instead of the cache")

    monkeypatch.setattr(load, "_read", boom)
    second = read_any([p])
    assert_same_timeline(first, second)
    launched = [r for r, a in second.attrs.items() if type(a) is RowAttrs]
    assert launched and [type(first.attrs[r]) for r in launched] == [RowAttrs] * len(launched)
    assert all(second.attrs[r].keys_ == first.attrs[r].keys_ for r in launched)


def test_overlays_that_are_not_64_bit_ints_are_stored_as_dicts(tmp_path, small_cache):
    from gputrace.timeline.model import Lane, Timeline
    from gputrace.timeline.row_attrs import RowAttrs

    src = tmp_path / "t.bin"
    src.write_bytes(b"x")
    shared = {"a": 1}
    attrs = {0: RowAttrs(shared, ("k",), ("text",)), 1: RowAttrs(shared, ("k",), (1 << 63,)),
             2: RowAttrs(shared, ("k", "j"), (5, -6)), 3: shared}
    cols = {"start": np.arange(4, dtype=np.int64), "end": np.arange(4, dtype=np.int64) + 1,
            "span_id": np.arange(1, 5, dtype=np.uint64)}
    tl = Timeline.from_unsorted(cols, ["p"], [Lane("h", 1, -1, "thread:main")], [{}], ["ab" * 16], attrs)
    assert cache.store(src, tl, cache.source_key(src))
    back = cache.load(src)
    assert back is not None and back.attrs == tl.attrs
    assert [type(back.attrs[r]).__name__ for r in range(4)] == ["dict", "dict", "RowAttrs", "dict"]
    assert back.attrs[2].shared is back.attrs[3]  # still one shared dict


def test_kineto_kernel_templates_stay_shared_and_exact_through_the_cache(tmp_path, small_cache, monkeypatch):
    import json

    import msgspec

    from gputrace.timeline.row_attrs import TemplateAttrs

    def kernel(i, regs):
        return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 2,
                "args": {"External id": i, "device": 0, "stream": 7, "correlation": i + 100, "grid": [64, 1, 1],
                         "block": [128, 1, 1], "registers per thread": regs, "warps per SM": 2.0}}

    doc = {"schemaVersion": 1, "traceEvents": [kernel(i, [24, 24.0][i % 2]) for i in range(200)]}
    p = tmp_path / "k.json"
    p.write_text(json.dumps(doc))
    first = read_any([p])
    assert {type(a) for a in first.attrs.values()} == {TemplateAttrs}
    import gputrace.timeline.load as load

    with monkeypatch.context() as m:
        m.setattr(load, "_read", lambda *a, **k: pytest.fail("read the trace again instead of the cache"))
        second = read_any([p])
    assert_same_timeline(first, second)
    for r in range(first.n):
        a, b = first.attrs[r], second.attrs[r]
        assert type(b) is TemplateAttrs and list(a) == list(b)
        assert msgspec.json.encode(dict(a)) == msgspec.json.encode(dict(b))  # 24 and 24.0 kept apart
    assert len({id(a.shared) for a in second.attrs.values()}) == 2
    # An entry whose template lacks a key of its rows is refused (a miss), never a wrong Mapping.
    [entry] = small_cache.glob("*.gtc")
    raw = entry.read_bytes()
    assert raw.count(b"correlation") >= 1
    entry.write_bytes(raw.replace(b"correlation", b"correlatioX", 1))
    assert cache.load(p) is None


def test_a_file_growing_past_the_threshold_while_read_is_shown_and_not_stored(tmp_path, monkeypatch):
    # A running job's trace crosses the 16 MiB threshold while `view` reads it: the cache was not wanted when the
    # read began, so nothing is stored (the view used to end in UnboundLocalError).
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    p = _copy(tmp_path)
    size = os.path.getsize(p)
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", str(size + 1))
    real = cache.wanted
    calls = []

    def grown(path):  # the first check sees the file as it was; it then grows past the threshold
        calls.append(path)
        if len(calls) > 1:
            with open(p, "ab") as f:
                f.write(b"\n")
        return real(path)

    monkeypatch.setattr(cache, "wanted", grown)
    steps = list(load_steps([p]))
    assert steps[-1].snapshot().n > 0
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("*.gtc"))
