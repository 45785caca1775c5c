"""Streaming Chrome import: the same Timeline as the whole-document reader, for our exports (otherData
first, and the older layout with otherData last), Kineto traces, gzip, truncated array form; events
split inside strings or nested objects never corrupt the result."""

from __future__ import annotations

import gzip
import json

import pytest

import gputrace.timeline.formats.chrome.scan as scan
from gputrace.testing.synthetic import synthetic_timeline
from gputrace.timeline.formats.chrome.read import from_chrome, read_chrome
from gputrace.timeline.formats.chrome.export import write_chrome
from tests.unit.test_chrome import KINETO
from tests.unit.timeline_equality import assert_same_timeline


@pytest.fixture(autouse=True)
def small_reads(monkeypatch):
    monkeypatch.setattr(scan, "READ_BYTES", 997)  # many batches, splits everywhere


def test_our_export_streams_to_the_same_timeline(tmp_path):
    tl = synthetic_timeline(hosts=1, gpus=2, circuits=3, batches=2)
    p = tmp_path / "t.json"
    write_chrome(tl, p)
    doc = json.loads(p.read_text())
    assert list(doc)[0] == "otherData"  # lanes and epoch before the events
    assert_same_timeline(read_chrome(p), from_chrome(doc, host="t", source=str(p)))


def test_old_layout_and_gzip_and_kineto(tmp_path):
    tl = synthetic_timeline(hosts=1, gpus=1, circuits=2, batches=1)
    p = tmp_path / "t.json"
    write_chrome(tl, p)
    doc = json.loads(p.read_text())
    old = {"traceEvents": doc["traceEvents"], "displayTimeUnit": "ns", "otherData": doc["otherData"]}
    q = tmp_path / "old.json"
    q.write_text(json.dumps(old))
    assert_same_timeline(read_chrome(q), from_chrome(doc, host="old", source=str(q)))
    g = tmp_path / "t.json.gz"
    g.write_bytes(gzip.compress(p.read_bytes()))
    assert_same_timeline(read_chrome(g), from_chrome(doc, host="t", source=str(g)))
    k = tmp_path / "kineto.json"
    k.write_text(json.dumps(KINETO, indent=2))  # Kineto's "},\n  {" separators
    assert_same_timeline(read_chrome(k), from_chrome(KINETO, host="kineto", source=str(k)))


def test_separators_inside_strings_and_nested_objects(tmp_path):
    events = [{"ph": "X", "name": 'a"},{"b', "pid": 1, "tid": 1, "ts": i, "dur": 1,
               "args": {"nested": [{"x": 1}, {"y": "]},{"}], "i": i}} for i in range(300)]
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"traceEvents": events}))
    tl = read_chrome(p)
    assert tl.n == 300 and tl.attrs[0]["nested"] == [{"x": 1}, {"y": "]},{"}]
    assert sorted(a["i"] for a in tl.attrs.values()) == list(range(300))


def test_truncated_array_form_and_bad_events(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text('[{"ph":"X","name":"a","pid":1,"tid":2,"ts":1,"dur":2},\n{"ph":"B","name":"b","pid":1,"tid":2,"ts":5},\n')
    assert read_chrome(p).n == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}] * 50
                              + [{"ph": "X", "name": "z", "pid": 1, "tid": 1, "ts": "x", "dur": 1}]}))
    from gputrace.timeline.formats.chrome.read import ChromeFormatError

    with pytest.raises(ChromeFormatError, match=r"traceEvents\[50\].*'ts'"):
        read_chrome(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, {"ph": ')
    with pytest.raises(ChromeFormatError, match="not JSON"):
        read_chrome(broken)
