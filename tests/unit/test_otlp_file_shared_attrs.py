"""The OTLP JSONL writer's shortcut for shared attribute sets (``RowAttrs``) writes the same bytes as the
key-by-key merge, including where the shared dict clashes with the column attributes or the overlay."""

from __future__ import annotations

import numpy as np
import orjson

from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.otlp.encode import encode_request, encode_span
from gputrace.timeline.model import Lane, Timeline
from gputrace.timeline.row_attrs import RowAttrs


def test_attributes_json_span_key_encodes_like_attributes():
    attrs = {"a": "x", "n": 3, "big": 1 << 50, "arr": [1, 2, 3], "f": 0.5, "b": True}
    span = {"trace_id": "ab" * 16, "span_id": 7, "name": "k", "start_ns": 1, "end_ns": 2}
    from gputrace.otlp.encode import attributes_json

    plain = encode_request({"service.name": "s"}, [{**span, "attributes": attrs}])
    pre = encode_request({"service.name": "s"}, [{**span, "attributes_json": attributes_json(attrs)}])
    assert pre == plain
    pre_span = encode_span({**span, "attributes_json": attributes_json(attrs)})
    assert pre_span == encode_span({**span, "attributes": attrs})
    assert orjson.loads(pre)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][3] == {
        "key": "arr", "value": {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}, {"intValue": "3"}]}}}


def _timeline(attrs: dict) -> Timeline:
    n = 4
    cols = {
        "start": np.arange(n, dtype=np.int64) * 10, "end": np.arange(n, dtype=np.int64) * 10 + 5,
        "phase": np.zeros(n, np.int32), "lane": np.array([0, 1, 0, 1], np.int32),
        "gpu_start": np.array([-1, 10, -1, 30]), "gpu_end": np.array([-1, 15, -1, 35]),
        "nbytes": np.array([-1, 64, -1, -1]), "span_id": np.arange(1, n + 1, dtype=np.uint64),
        "parent_span_id": np.zeros(n, np.uint64), "resource": np.zeros(n, np.int32), "trace": np.zeros(n, np.int32),
    }
    lanes = [Lane("h", 1, -1, "thread:main"), Lane("h", 1, 0, "stream:7")]
    return Timeline.from_unsorted(cols, ["k"], lanes, [{"service.name": "t"}], ["cd" * 16], attrs)


def test_shared_sets_write_the_bytes_of_a_key_by_key_merge(tmp_path):
    shared = {"gputrace.activity": "kernel", "cuda.grid": [4, 1, 1], "cuda.stream": 7}
    clash_column = {"gputrace.bytes": 99, "cuda.stream": 7}  # a column key: the column's value wins
    clash_overlay = {"cuda.correlation_id": 5, "x": "y"}  # an overlay key: the overlay's value wins
    keys = ("cuda.correlation_id", "cuda.launch.api_start_ns")
    rows = {0: RowAttrs(shared, keys, (11, 1 << 60)), 1: RowAttrs(clash_column, keys[:1], (13,)),
            2: RowAttrs(shared, keys, (12, 2)), 3: RowAttrs(clash_overlay, keys, (14, 3))}
    fast, slow = tmp_path / "fast.jsonl", tmp_path / "slow.jsonl"
    write_otlp_jsonl(_timeline(rows), fast)
    write_otlp_jsonl(_timeline({r: dict(a) for r, a in rows.items()}), slow)
    assert fast.read_bytes() == slow.read_bytes()
    spans = [s for ln in slow.read_bytes().splitlines()
             for s in orjson.loads(ln)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    by_id = {int(s["spanId"], 16): {a["key"]: a["value"] for a in s["attributes"]} for s in spans}
    assert by_id[2]["gputrace.bytes"] == {"intValue": "64"}  # row 1 (span 2): the column's value
    assert by_id[4]["cuda.correlation_id"] == {"intValue": "14"}
    assert by_id[1]["cuda.launch.api_start_ns"] == {"intValue": str(1 << 60)}
