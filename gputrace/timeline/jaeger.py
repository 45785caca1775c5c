"""Jaeger JSON export: the ``{"data": [trace, ...]}`` document Jaeger UI's "Upload JSON" opens.

This is the shape Jaeger's query API returns (``/api/traces``), which the UI loads without a
backend: per trace ``traceID``, ``spans`` and ``processes``; per span ``traceID``, ``spanID``,
``operationName``, ``references`` (``CHILD_OF``), ``startTime`` and ``duration`` in integer
microseconds, typed ``tags`` (``string``/``bool``/``int64``/``float64``) and a ``processID``.

Mapping from a Timeline:

* one Jaeger trace per OTLP trace id; rows without one (imports from nsys or Chrome files) share a
  trace per resource whose id is derived from the resource attributes (stable across runs);
* one Jaeger *process* per (resource, lane): ``serviceName`` is the resource's ``service.name``,
  its tags are the resource attributes plus ``host.name``, ``gputrace.device`` and ``gputrace.lane``,
  so the UI shows each span's GPU and stream;
* span tags carry the gputrace columns under the ``gputrace.`` names the recorder uses (device,
  lane, kind, circuit, batch, bytes, ``gpu.start_ns``/``gpu.end_ns`` and ``gpu.duration_us``)
  plus every attribute; an error status becomes ``error=true`` and ``otel.status_code=ERROR``;
* times: start rounds down and end rounds up to the microsecond, so children stay inside parents.

Pure functions; no threads.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from gputrace.timeline.model import KIND_NAMES, Timeline

__all__ = ["to_jaeger", "write_jaeger", "jaeger_tag"]


def jaeger_tag(key: str, v: Any) -> dict:
    """One Jaeger tag dict with the type Jaeger's JSON model expects."""
    if isinstance(v, bool):
        return {"key": key, "type": "bool", "value": v}
    if isinstance(v, int):
        return {"key": key, "type": "int64", "value": v}
    if isinstance(v, float):
        return {"key": key, "type": "float64", "value": v}
    if isinstance(v, (bytes, bytearray)):
        return {"key": key, "type": "string", "value": bytes(v).hex()}
    item = getattr(v, "item", None)
    if callable(item) and not isinstance(v, (str, list, tuple, dict)):
        return jaeger_tag(key, item())
    if isinstance(v, str):
        return {"key": key, "type": "string", "value": v}
    return {"key": key, "type": "string", "value": orjson.dumps(v, default=str).decode()}


def _synthetic_trace_id(resource: dict) -> str:
    blob = orjson.dumps(resource, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def to_jaeger(tl: Timeline) -> dict:
    """The Timeline as a Jaeger JSON document (``{"data": [...]}``); see the module docstring."""
    c = tl.cols
    traces: dict[str, dict] = {}
    proc_ids: dict[tuple[str, int, int], str] = {}
    span_ids = [int(x) for x in c["span_id"]]
    # Rows without span ids get ids from their row number (offset to avoid colliding with real ids).
    used = set(span_ids)
    next_id = 1
    for r, sid in enumerate(span_ids):
        if sid == 0:
            while next_id in used:
                next_id += 1
            span_ids[r] = next_id
            used.add(next_id)
    row_trace: list[str] = []
    for r in range(tl.n):
        t = int(c["trace"][r])
        if 0 <= t < len(tl.trace_ids) and tl.trace_ids[t]:
            row_trace.append(tl.trace_ids[t])
        else:
            res = int(c["resource"][r])
            row_trace.append(_synthetic_trace_id(tl.resources[res] if 0 <= res < len(tl.resources) else {}))
    for r in range(tl.n):
        tid = row_trace[r]
        tr = traces.get(tid)
        if tr is None:
            tr = traces[tid] = {"traceID": tid, "spans": [], "processes": {}, "warnings": None}
        res_i = int(c["resource"][r])
        lane_i = int(c["lane"][r])
        pkey = (tid, res_i, lane_i)
        pid = proc_ids.get(pkey)
        if pid is None:
            pid = proc_ids[pkey] = f"p{sum(1 for k in proc_ids if k[0] == tid) + 1}"
            res = dict(tl.resources[res_i]) if 0 <= res_i < len(tl.resources) else {}
            lane = tl.lanes[lane_i]
            service = str(res.pop("service.name", "gputrace"))
            tags = [jaeger_tag(k, v) for k, v in res.items() if k != "host.name"]
            tags += [jaeger_tag("host.name", lane.host), jaeger_tag("gputrace.device", lane.device),
                     jaeger_tag("gputrace.lane", lane.name)]
            if lane.pid >= 0 and "process.pid" not in res:
                tags.append(jaeger_tag("process.pid", lane.pid))
            tr["processes"][pid] = {"serviceName": service, "tags": tags}
        start, end = int(c["start"][r]), int(c["end"][r])
        s_us, e_us = start // 1000, -(-end // 1000)
        span = {
            "traceID": tid,
            "spanID": f"{span_ids[r]:016x}",
            "flags": 1,
            "operationName": tl.name_of(r),
            "references": [],
            "startTime": s_us,
            "duration": max(0, e_us - s_us),
            "tags": _span_tags(tl, r),
            "logs": [],
            "processID": pid,
            "warnings": None,
        }
        p = int(c["parent"][r])
        psid = span_ids[p] if p >= 0 else int(c["parent_span_id"][r])
        if psid:
            ptrace = row_trace[p] if p >= 0 else tid
            span["references"].append({"refType": "CHILD_OF", "traceID": ptrace, "spanID": f"{psid:016x}"})
        tr["spans"].append(span)
    data = list(traces.values())
    for tr in data:
        tr["spans"].sort(key=lambda s: (s["startTime"], -s["duration"], s["spanID"]))
    data.sort(key=lambda tr: (tr["spans"][0]["startTime"], tr["traceID"]))
    return {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}


def _span_tags(tl: Timeline, r: int) -> list[dict]:
    c = tl.cols
    tags = [jaeger_tag("gputrace.kind", KIND_NAMES.get(int(c["kind"][r]), "host"))]
    phase = tl.phases[int(c["phase"][r])]
    if phase != tl.name_of(r):
        tags.append(jaeger_tag("gputrace.phase", phase))
    for col, key in (("device", "gputrace.device"), ("circuit", "gputrace.circuit"),
                     ("batch", "gputrace.batch"), ("nbytes", "gputrace.bytes")):
        v = int(c[col][r])
        if v >= 0:
            tags.append(jaeger_tag(key, v))
    tags.append(jaeger_tag("gputrace.lane", tl.lanes[int(c["lane"][r])].name))
    g0, g1 = int(c["gpu_start"][r]), int(c["gpu_end"][r])
    if g0 >= 0 and g1 >= g0:
        tags += [jaeger_tag("gputrace.gpu.start_ns", g0), jaeger_tag("gputrace.gpu.end_ns", g1),
                 jaeger_tag("gputrace.gpu.duration_us", round((g1 - g0) / 1000.0, 3))]
    for k, v in tl.attrs.get(r, {}).items():
        tags.append(jaeger_tag(k, v))
    st = int(c["status"][r])
    if st == 2:
        tags += [jaeger_tag("error", True), jaeger_tag("otel.status_code", "ERROR")]
    elif st == 1:
        tags.append(jaeger_tag("otel.status_code", "OK"))
    return tags


def write_jaeger(tl: Timeline, path: str | Path) -> int:
    """Write :func:`to_jaeger` to ``path``; returns the number of spans written."""
    doc = to_jaeger(tl)
    Path(path).write_bytes(orjson.dumps(doc))
    return sum(len(t["spans"]) for t in doc["data"])
