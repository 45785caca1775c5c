"""Jaeger JSON export (gputrace.timeline.formats.jaeger): the document Jaeger UI's "Upload JSON" opens."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from gputrace.timeline import Lane, Timeline
from gputrace.timeline.formats.jaeger import to_jaeger, write_jaeger
from test_chrome import T0, TRACE, sample_timeline

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
_TYPES = {"string": str, "bool": bool, "int64": int, "float64": float}


def validate_jaeger(doc: dict) -> None:
    """Jaeger UI upload rules: the fields its JSON model reads, with the right types."""
    assert isinstance(doc["data"], list) and doc["data"]
    for tr in doc["data"]:
        assert re.fullmatch(r"[0-9a-f]{32}|[0-9a-f]{16}", tr["traceID"])
        ids = {s["spanID"] for s in tr["spans"]}
        assert len(ids) == len(tr["spans"]), "duplicate span ids"
        for pid, proc in tr["processes"].items():
            assert isinstance(proc["serviceName"], str) and proc["serviceName"]
            _check_tags(proc["tags"])
        for s in tr["spans"]:
            assert s["traceID"] == tr["traceID"]
            assert re.fullmatch(r"[0-9a-f]{16}", s["spanID"])
            assert isinstance(s["operationName"], str)
            assert isinstance(s["startTime"], int) and isinstance(s["duration"], int) and s["duration"] >= 0
            assert s["processID"] in tr["processes"]
            _check_tags(s["tags"])
            for ref in s["references"]:
                assert ref["refType"] in ("CHILD_OF", "FOLLOWS_FROM")
                assert re.fullmatch(r"[0-9a-f]{16}", ref["spanID"])


def _check_tags(tags):
    for t in tags:
        assert set(t) == {"key", "type", "value"}
        typ = _TYPES[t["type"]]
        assert isinstance(t["value"], typ) and (typ is not int or not isinstance(t["value"], bool)), t


def _tags(span) -> dict:
    return {t["key"]: t["value"] for t in span["tags"]}


def test_jaeger_document_shape_and_mapping():
    doc = to_jaeger(sample_timeline())
    validate_jaeger(doc)
    (tr,) = doc["data"]
    assert tr["traceID"] == TRACE
    spans = {s["operationName"]: s for s in tr["spans"]}
    assert tr["spans"][0]["operationName"] == "prove" and not spans["prove"]["references"]
    assert spans["prove"]["startTime"] == T0 // 1000 and spans["prove"]["duration"] == 1000
    # pin: 400.0 .. 480.5 us -> floor start, ceil end.
    assert spans["pin"]["startTime"] - spans["prove"]["startTime"] == 400 and spans["pin"]["duration"] == 81
    ref = spans["coset_ntt"]["references"][0]
    assert ref == {"refType": "CHILD_OF", "traceID": TRACE, "spanID": spans["ntt"]["spanID"]}
    t = _tags(spans["ntt"])
    assert t["gputrace.device"] == 0 and t["gputrace.lane"] == "stream:7" and t["gputrace.kind"] == "gpu"
    assert t["gputrace.gpu.start_ns"] == T0 + 500_000 and t["gputrace.gpu.duration_us"] == 200.0
    assert _tags(spans["pin"])["gputrace.bytes"] == 1 << 30 and _tags(spans["pin"])["error"] is True
    assert "error" not in _tags(spans["prove"]) and _tags(spans["msm_h"])["otel.status_code"] == "OK"
    assert _tags(spans["msm_h"])["gputrace.windows"] == 17
    proc = tr["processes"][spans["msm_h"]["processID"]]
    assert proc["serviceName"] == "prover"
    ptags = {t["key"]: t["value"] for t in proc["tags"]}
    assert ptags["gputrace.device"] == 1 and ptags["host.name"] == "node1" and ptags["gputrace.config.pin"] is True
    assert spans["msm_h"]["processID"] != spans["ntt"]["processID"]


def test_jaeger_matches_golden(tmp_path):
    out = tmp_path / "j.json"
    assert write_jaeger(sample_timeline(), out) == 6
    got = json.loads(out.read_text())
    golden = GOLDEN / "jaeger_sample.json"
    if os.environ.get("GPUTRACE_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())


def test_rows_without_ids_get_a_stable_trace_and_unique_span_ids():
    lanes = [Lane("h", 7, -1, "thread:main"), Lane("h", 7, 0, "stream:1")]
    cols = {
        "start": np.array([0, 10, 20]) + T0,
        "end": np.array([100, 30, 40]) + T0,
        "phase": np.array([0, 1, 2]),
        "lane": np.array([0, 0, 1]),
        "status": np.array([0, 2, 0]),
    }
    res = [{"service.name": "nsys", "host.name": "h"}]
    cols["resource"] = np.zeros(3, int)
    tl = Timeline.from_unsorted(cols, ["prove", "cudaLaunchKernel", "k"], lanes, res)
    doc = to_jaeger(tl)
    validate_jaeger(doc)
    (tr,) = doc["data"]
    assert tr["traceID"] == to_jaeger(tl)["data"][0]["traceID"]
    err = next(s for s in tr["spans"] if s["operationName"] == "cudaLaunchKernel")
    assert _tags(err)["error"] is True and _tags(err)["otel.status_code"] == "ERROR"
