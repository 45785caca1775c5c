"""The first screen of a big Chrome trace: ``read_chrome_head`` and its step in ``load_steps``."""

from __future__ import annotations

import json

import pytest

import gputrace.timeline.load as load
from gputrace.timeline.formats.chrome.read import read_chrome_head
from gputrace.timeline.load import load_steps, read_any
from tests.unit.test_chrome_foreign import _kineto
from tests.unit.timeline_equality import assert_same_timeline


def _spans(tl) -> set:
    ph, lanes = tl.cols["phase"].tolist(), tl.cols["lane"].tolist()
    return {(tl.phases[p], tl.lanes[ln].name, s, e)
            for p, ln, s, e, r in zip(ph, lanes, tl.cols["start"].tolist(), tl.cols["end"].tolist(), range(tl.n),
                                      strict=True)
            if "unterminated" not in tl.attrs.get(r, {})}


@pytest.mark.parametrize("indent", [None, 1])
def test_head_is_the_first_events_of_the_whole_read(tmp_path, indent):
    p = tmp_path / "k.json"
    p.write_text(json.dumps(_kineto(3000, seed=5), indent=indent))
    whole = read_any([p])
    head = read_chrome_head(p, 500)
    assert head is not None and 500 <= head.n < whole.n
    assert _spans(head) <= _spans(whole)
    assert read_chrome_head(p, 10**9) is None  # fewer events than asked: the whole read is as quick


def test_a_head_that_cannot_be_read_is_none_and_a_missing_file_raises(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}, nope')
    assert read_chrome_head(bad, 1) is None
    with pytest.raises(OSError):
        read_chrome_head(tmp_path / "missing.json", 1)


def test_load_steps_show_the_head_then_the_whole_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    monkeypatch.setattr(load, "CHROME_HEAD_BYTES", 0)
    monkeypatch.setattr(load, "CHROME_HEAD_EVENTS", 400)
    p = tmp_path / "k.json"
    p.write_text(json.dumps(_kineto(2000, seed=9)))
    shots = [s.snapshot() for s in load_steps([p]) if s.snapshot is not None]
    whole = read_any([p])
    assert len(shots) == 2 and 400 <= shots[0].n < whole.n
    assert_same_timeline(shots[-1], whole)
    monkeypatch.setattr(load, "CHROME_HEAD_BYTES", p.stat().st_size + 1)  # a small file: read whole at once
    assert len([s for s in load_steps([p]) if s.snapshot is not None]) == 1
