"""The typed decoder of gputrace's own Chrome exports (msgspec Structs -> numpy columns) gives the same
Timeline as the dict decoders (the streamed dict path and ``from_chrome`` of the parsed document), on the
committed fixtures and on exports with names, device times and attributes; events of any other shape
fall back to the dict paths with their exact results and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

import gputrace.timeline.formats.chrome.read as imp
import gputrace.timeline.formats.chrome.scan as scan
from gputrace.testing.synthetic import synthetic_timeline
from gputrace.timeline.formats.chrome.read import ChromeFormatError, from_chrome, read_chrome
from gputrace.timeline.formats.chrome.export import write_chrome
from gputrace.timeline.formats.chrome.batch import hex_int
from gputrace.timeline.formats.chrome.typed import OursTyped, hex_ids
from tests.unit.test_chrome import KINETO, sample_timeline
from tests.unit.timeline_equality import assert_same_timeline

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture
def typed_batches(monkeypatch):
    """Counts the batches the typed path took (so a test knows it ran)."""
    taken = []
    real = OursTyped._add_ours_typed

    def counting(self, events):
        ok = real(self, events)
        taken.append(ok)
        return ok

    monkeypatch.setattr(OursTyped, "_add_ours_typed", counting)
    return taken


def _dict_stream(p: Path, monkeypatch):
    """read_chrome through the streamed dict decoder (the reader before typed decoding)."""
    with monkeypatch.context() as m:
        m.setattr(imp, "_decoder_for", lambda head: orjson.loads)
        return read_chrome(p)


def _all_ways(p: Path, monkeypatch, host: str):
    typed = read_chrome(p)
    assert_same_timeline(typed, _dict_stream(p, monkeypatch))
    assert_same_timeline(typed, from_chrome(orjson.loads(p.read_bytes()), host=host, source=str(p)))
    return typed


def test_golden_file_same_timeline_as_the_dict_decoders(monkeypatch, typed_batches):
    tl = _all_ways(GOLDEN / "chrome_sample.json", monkeypatch, "chrome_sample")
    assert tl.n > 0 and typed_batches and all(typed_batches)


@pytest.mark.parametrize("reads", [997, 1 << 20])
def test_exports_same_timeline_as_the_dict_decoders(tmp_path, monkeypatch, typed_batches, reads):
    monkeypatch.setattr(scan, "READ_BYTES", reads)
    for i, tl in enumerate([sample_timeline(), synthetic_timeline(hosts=2, gpus=2, circuits=3, batches=2)]):
        p = tmp_path / f"t{i}.json"
        write_chrome(tl, p)
        back = _all_ways(p, monkeypatch, f"t{i}")
        assert back.n == tl.n
    assert any(typed_batches)


def test_kineto_trace_unchanged(tmp_path, monkeypatch, typed_batches):
    k = tmp_path / "kineto.json"
    k.write_text(json.dumps(KINETO, indent=2))
    _all_ways(k, monkeypatch, "kineto")
    assert not typed_batches  # not a gputrace export: the dict path, as before


def _export_events(tmp_path) -> tuple[dict, list]:
    write_chrome(synthetic_timeline(hosts=1, gpus=1, circuits=2, batches=1), tmp_path / "base.json")
    doc = json.loads((tmp_path / "base.json").read_text())
    return doc, [e for e in doc["traceEvents"] if e["ph"] == "X"]


# Each edit gives an X event a shape the typed Structs cannot hold, or one whose meaning differs
# between "absent" and "null"; the result must still equal the dict decoders'.
EDITS = {
    "extra attribute": lambda e: e["args"].update({"user.key": [1, {"a": None}]}),
    "name null": lambda e: e["args"].update({"name": None}),
    "kind null": lambda e: e["args"].update({"kind": None}),
    "phase number": lambda e: e["args"].update({"phase": 7}),
    "status number": lambda e: e["args"].update({"status": 3}),
    "status unknown": lambda e: e["args"].update({"status": "unset"}),
    "kind unknown": lambda e: e["args"].update({"kind": "tpu"}),
    "circuit float": lambda e: e["args"].update({"circuit": 1.5}),
    "circuit bool": lambda e: e["args"].update({"circuit": True}),
    "sort_index on X": lambda e: e["args"].update({"sort_index": 1}),
    "sort_index null on X": lambda e: e["args"].update({"sort_index": None}),
    "other event name": lambda e: e.update({"name": "renamed"}),
    "no phase, other name": lambda e: (e["args"].pop("phase"), e.update({"name": "renamed"})),
    "args null": lambda e: e.update({"args": None}),
    "short span id": lambda e: e["args"].update({"span_id": "abc"}),
    "non-hex span id": lambda e: e["args"].update({"span_id": "zz00000000000001"}),
    "non-ascii span id": lambda e: e["args"].update({"span_id": "é" * 16}),
    "ts int": lambda e: e.update({"ts": int(e["ts"])}),
    "dur missing": lambda e: e.pop("dur"),
    "gpu times": lambda e: e["args"].update({"gpu.ts_us": 1.5, "gpu.dur_us": 2}),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_other_shapes_same_as_the_dict_decoders(tmp_path, monkeypatch, typed_batches, edit):
    monkeypatch.setattr(scan, "READ_BYTES", 997)  # the edited event's batch falls back, the others not
    doc, xs = _export_events(tmp_path)
    EDITS[edit](xs[len(xs) // 2])
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(doc))
    _all_ways(p, monkeypatch, "edited")
    assert typed_batches.count(False) <= 1 < typed_batches.count(True)


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.pop("ts"), r"traceEvents\[\d+\] \('X' .*field 'ts' must be a number, got None"),
    (lambda e: e.update({"ts": "1"}), r"traceEvents\[\d+\] \('X' .*field 'ts' must be a number, got '1'"),
    (lambda e: e.update({"dur": -1}), r"traceEvents\[\d+\] .*negative 'dur'"),
    (lambda e: e.update({"pid": 99}), r"without lane info for pid 99 tid"),
    (lambda e: e.pop("pid"), r"without lane info for pid None tid"),
])
def test_bad_events_keep_their_errors(tmp_path, monkeypatch, edit, match):
    doc, xs = _export_events(tmp_path)
    j = len(xs) // 2
    edit(xs[j])
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ChromeFormatError, match=match) as typed:
        read_chrome(p)
    with pytest.raises(ChromeFormatError) as dicts:
        _dict_stream(p, monkeypatch)
    assert str(typed.value) == str(dicts.value)
    assert f"traceEvents[{doc['traceEvents'].index(xs[j])}]" in str(typed.value) or "lane info" in match


def test_typed_vocabularies_follow_the_model():
    """``kind`` and ``status`` are decoded as Literals: they must list exactly the codes the model knows."""
    from typing import get_args, get_type_hints

    from gputrace.timeline.formats.chrome.batch import STATUS
    from gputrace.timeline.formats.chrome.typed import OursArgs
    from gputrace.timeline.model import KIND_CODES

    hints = get_type_hints(OursArgs)

    def literal_values(tp):
        return {v for a in get_args(tp) for v in (get_args(a) or ()) if isinstance(v, str)}

    assert literal_values(hints["kind"]) == set(KIND_CODES)
    assert literal_values(hints["status"]) == set(STATUS)


def test_hex_ids_match_hex_int():
    vals = ["", "0000000000000001", "FFFFFFFFFFFFFFFF", "ffffffffffffffff", "abc", "g000000000000000",
            "00000000000000000", "é", "0123456789abcdef", " 123456789abcdef"]
    got = hex_ids(vals)
    assert got.dtype == np.uint64
    assert got.tolist() == [hex_int(v) for v in vals]
    sixteen = [v for v in vals if len(v) in (0, 16) and v.isascii()]  # the vectorised case
    assert hex_ids(sixteen).tolist() == [hex_int(v) for v in sixteen]
    assert hex_ids([]).tolist() == []
