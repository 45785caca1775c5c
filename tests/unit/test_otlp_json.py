"""OTLP JSON encoding: spec shape, fast path == orjson reference, golden bytes, value round trips."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from gputrace.otlp import (
    AnyValueError,
    attr_value,
    decode_attributes,
    decode_value,
    encode_attributes,
    encode_request,
    encode_request_reference,
    hex_id,
)

DATA = Path(__file__).resolve().parents[1] / "data"
TID = bytes.fromhex("0123456789abcdef0123456789abcdef")

RESOURCE = {"service.name": "prover", "host.name": "node-1", "process.pid": 4242, "gputrace.config.fused_msm": True}


def golden_spans() -> list[dict]:
    return [
        dict(trace_id=TID, span_id=1, parent_span_id=None, name="prove", start_ns=1767225600000000000,
             end_ns=1767225601000000000, attributes={"gputrace.lane": "thread:main", "gputrace.batch": 0}),
        dict(trace_id=TID.hex(), span_id=bytes.fromhex("00000000000000ff"), parent_span_id=1, name="ntt",
             start_ns=1767225600100000000, end_ns=1767225600200000000,
             attributes={"gputrace.device": 0, "gputrace.lane": "stream:1", "gputrace.bytes": 1 << 33,
                         "gputrace.gpu.start_ns": 1767225600100005000, "gputrace.gpu.end_ns": 1767225600199990000}),
        dict(trace_id=TID, span_id="00000000000000AB", parent_span_id="00000000000000ff", name="coset_ntt \"q\" é",
             start_ns=1767225600110000000, end_ns=1767225600120000000, kind=1, status_code=2,
             status_message="ValueError", attributes={"ratio": 0.5, "ok": False, "tags": ["a", 1], "raw": b"\x00\xff",
                                                      "nested": {"k": 1.5}, "none": None, "np": np.int64(7)}),
    ]


def test_request_shape_follows_otlp_json_mapping():
    line = encode_request(RESOURCE, golden_spans(), scope_version="0.1.0")
    assert b"\n" not in line
    req = orjson.loads(line)
    (rs,) = req["resourceSpans"]
    assert rs["resource"]["attributes"][2] == {"key": "process.pid", "value": {"intValue": "4242"}}
    assert rs["resource"]["attributes"][3] == {"key": "gputrace.config.fused_msm", "value": {"boolValue": True}}
    (ss,) = rs["scopeSpans"]
    assert ss["scope"] == {"name": "gputrace", "version": "0.1.0"}
    root, ntt, coset = ss["spans"]
    assert root == {
        "traceId": "0123456789abcdef0123456789abcdef", "spanId": "0000000000000001", "name": "prove", "kind": 1,
        "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601000000000",
        "attributes": [{"key": "gputrace.lane", "value": {"stringValue": "thread:main"}},
                       {"key": "gputrace.batch", "value": {"intValue": "0"}}],
    }
    assert "parentSpanId" not in root and "status" not in root
    assert ntt["spanId"] == "00000000000000ff" and ntt["parentSpanId"] == "0000000000000001"
    assert {"key": "gputrace.bytes", "value": {"intValue": str(1 << 33)}} in ntt["attributes"]
    assert coset["spanId"] == "00000000000000ab"  # lowercase
    assert coset["status"] == {"message": "ValueError", "code": 2}
    vals = {kv["key"]: kv["value"] for kv in coset["attributes"]}
    assert vals["ratio"] == {"doubleValue": 0.5}
    assert vals["ok"] == {"boolValue": False}
    assert vals["tags"] == {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "1"}]}}
    assert vals["raw"] == {"bytesValue": "AP8="}
    assert vals["nested"] == {"kvlistValue": {"values": [{"key": "k", "value": {"doubleValue": 1.5}}]}}
    assert vals["none"] == {}
    assert vals["np"] == {"intValue": "7"}


def test_fast_path_matches_reference_encoder():
    spans = golden_spans()
    for extra in ({}, {"x": float("nan")}, {"y": float("-inf")}, {"b": True}, {"big": -(1 << 62)}, {"s": "a\nb\x01"}):
        s = dict(spans[1], attributes={**spans[1]["attributes"], **extra})
        assert encode_request(RESOURCE, [s]) == encode_request_reference(RESOURCE, [s])
    assert encode_request(RESOURCE, spans) == encode_request_reference(RESOURCE, spans)
    assert encode_request({}, []) == encode_request_reference({}, [])


def test_golden_file():
    # The committed golden line is the contract; regenerate only on a deliberate format change.
    line = encode_request(RESOURCE, golden_spans(), scope_version="0.1.0") + b"\n"
    assert line == (DATA / "otel_gputrace_golden.jsonl").read_bytes()


def test_non_finite_doubles_use_protobuf_json_spelling():
    assert attr_value(float("nan")) == {"doubleValue": "NaN"}
    assert attr_value(float("inf")) == {"doubleValue": "Infinity"}
    assert math.isnan(decode_value({"doubleValue": "NaN"}))
    assert decode_value({"doubleValue": "-Infinity"}) == float("-inf")


@pytest.mark.parametrize("value", ["s", "", 0, -5, 1 << 63, 2.5, True, False, None, [1, "a", [True]], {"a": {"b": 2}}, b"\x01"])
def test_attribute_round_trip(value):
    kvs = encode_attributes({"k": value})
    back = decode_attributes(orjson.loads(orjson.dumps(kvs)))
    assert back == {"k": value} and type(back["k"]) is type(value)


def test_decode_accepts_int_as_json_number_and_rejects_garbage():
    assert decode_value({"intValue": 12}) == 12
    assert decode_value({"intValue": "12"}) == 12
    with pytest.raises(AnyValueError) as ei:
        decode_value({"intValue": "twelve"}, "attributes[3].value")
    assert ei.value.field == "attributes[3].value.intValue"
    assert str(ei.value) == "expected integer string, got 'twelve'"
    with pytest.raises(AnyValueError, match="unknown AnyValue key 'fooValue'"):
        decode_value({"fooValue": 1})
    with pytest.raises(AnyValueError, match="expected list of key/value objects"):
        decode_attributes({"k": 1})


@pytest.mark.parametrize(
    "value,nbytes,expected",
    [(b"\x00" * 7 + b"\x01", 8, "0000000000000001"), ("00000000000000AB", 8, "00000000000000ab"), (255, 8, "00000000000000ff"),
     (None, 8, ""), (0, 8, ""), (TID, 16, TID.hex())],
)
def test_hex_id(value, nbytes, expected):
    assert hex_id(value, nbytes) == expected


@pytest.mark.parametrize("value", [b"\x01\x02", "xyz", "zz" * 8, -1, 1 << 64, 1.5,
                                   # int(s, 16) accepts these, and they used to be written out as ids:
                                   "0x23456789abcdef", "01234567_9abcdef", " 123456789abcdef", "+123456789abcdef"])
def test_hex_id_rejects_bad_ids(value):
    with pytest.raises(ValueError):
        hex_id(value, 8)


def test_encode_request_rejects_bad_span_id():
    with pytest.raises(ValueError, match="16 hex characters"):
        encode_request({}, [dict(trace_id=TID, span_id="nothex", name="x", start_ns=1, end_ns=2)])
    with pytest.raises(ValueError, match="must not be empty"):
        encode_request({}, [dict(trace_id=TID, span_id=0, name="x", start_ns=1, end_ns=2)])


def test_fast_path_matches_reference_on_random_attribute_mixes():
    import random

    rnd = random.Random(1)
    choices = [1, -5, 2**70, True, False, "s", "%d", '"q"\n', 1.5, float("nan"), None, [1], {"z": 1}, b"x", np.float32(0.5)]
    for i in range(1500):
        attrs = {rnd.choice(["a", "b%", 'c"', "gputrace.lane", "x"]): rnd.choice(choices) for _ in range(rnd.randrange(6))}
        span = dict(trace_id=TID, span_id=i + 1, name="n", start_ns=1, end_ns=2, attributes=attrs)
        assert encode_request({}, [span]) == encode_request_reference({}, [span]), attrs


def test_cached_int_lists_never_stand_in_for_equal_bool_or_float_lists():
    """The encoder caches short lists of exact ints (a kernel's grid and block) by value: a list that compares
    equal but holds bools or floats must still be encoded as its own types."""
    from gputrace.otlp.encode import attributes_json, encode_attributes

    for first, second in (([1, 2], [True, 2]), ([1, 2], [1.0, 2]), ([True, 1], [1, 1])):
        attributes_json({"cuda.grid": first})
        got = orjson.loads(f"[{attributes_json({'cuda.grid': second})}]")
        assert got == encode_attributes({"cuda.grid": second})
