"""The production CUPTI conversion (gputrace.trace.cupti_join) and the reference conversion the analysis and the
nsys-equivalence tests are built on (gputrace.testing.activity_records) give the same Timeline rows for the
records captured on the H200 (tests/data/cupti): so CUPTI traces and nsys imports read alike."""

from __future__ import annotations

import io
import json
from pathlib import Path

from gputrace.otlp.encode import encode_request
from gputrace.testing.activity_records import activity_timeline
from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader
from gputrace.trace.cupti_join import ActivityJoin
from gputrace.trace.cupti_spans import demangle
from gputrace.trace.records import IdSource

DATA = Path(__file__).resolve().parents[1] / "data" / "cupti"
RES = {"service.name": "t", "host.name": "h", "process.pid": 1}


def _timeline(spans):
    buf = io.BytesIO()
    buf.write(encode_request(RES, spans) + b"\n")
    loader = TraceLoader()
    for n, line in enumerate(buf.getvalue().split(b"\n"), 1):
        loader.feed("<t>", n, line)
    return loader.timeline()


def _rows(tl):
    out = []
    for r in range(tl.n):
        d = tl.span(r)
        parent = tl.name_of(d["parent"]) if d["parent"] >= 0 else None
        attrs = {k: v for k, v in d["attrs"].items() if k not in ("thread.id", "cuda.sync.event")}
        out.append((d["name"], d["start"], d["end"], d["gpu_start"], d["gpu_end"], d["lane_obj"].name, d["device"],
                    d["kind_name"], d["nbytes"], parent, json.dumps(attrs, sort_keys=True)))
    return sorted(out)


def test_production_and_reference_conversions_agree_on_device_records():
    meta = json.loads((DATA / "phases_meta.json").read_text())
    recs = [json.loads(x) for x in (DATA / "phases_records.jsonl").read_text().splitlines()]
    off = meta["offset_ns"]
    trace_id = meta["spans"][0]["trace_id"]
    phases = [{"trace_id": trace_id, "span_id": s["span_id"], "parent_span_id": s["parent_span_id"], "name": s["name"],
               "start_ns": s["start_ns"], "end_ns": s["end_ns"], "attributes": {"gputrace.lane": s["lane"]}}
              for s in meta["spans"] if s["activity"] is None]
    # production
    j = ActivityJoin(IdSource(1), thread_name=lambda tid: "MainThread")
    j.offset_ns = off
    sid_of = dict(meta["xids"])
    for xid, sid in meta["xids"]:
        j.register_phase(xid, trace_id, sid, 0)
    ours = j.add(recs) + j.take(final=True)
    # reference: the same records in its schema (epoch times, demangled names, phase = parent span id)
    ext = {r["correlation_id"]: sid_of[r["external_id"]] for r in recs if r["kind"] == "EXTERNAL_CORRELATION"}
    ref_recs = []
    for r in recs:
        k = r["kind"]
        if k in ("EXTERNAL_CORRELATION",):
            continue
        q = dict(r, start=r["start"] + off, end=r["end"] + off)
        if k in ("RUNTIME", "DRIVER"):
            q["kind"] = "RUNTIME"
        elif k == "CONCURRENT_KERNEL":
            q["kind"] = "KERNEL"
            q["name"] = demangle(r["name"])
        if k == "SYNCHRONIZATION":
            q["thread"] = "MainThread"
            q["device_id"] = 0
        if k not in ("RUNTIME", "DRIVER"):
            q["phase"] = ext[r["correlation_id"]]
        ref_recs.append(q)
    ref = activity_timeline(RES, phases, ref_recs, trace_id=f"{trace_id:032x}")
    mine = _timeline(phases + ours)
    assert mine.n == ref.n == 9
    assert _rows(mine) == _rows(ref)
