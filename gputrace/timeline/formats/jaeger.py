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

from gputrace.otlp.encode import capped
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
    return {"key": key, "type": "string", "value": orjson.dumps(capped(v), default=str).decode()}


def _synthetic_trace_id(resource: dict) -> str:
    blob = orjson.dumps(resource, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def to_jaeger(tl: Timeline) -> dict:
    """The Timeline as a Jaeger JSON document (``{"data": [...]}``); see the module docstring."""
    c = tl.cols
    # Python lists: the loop below visits every row, and list indexing is ~10x cheaper than numpy's.
    L = {k: c[k].tolist() for k in ("start", "end", "gpu_start", "gpu_end", "phase", "kind", "lane", "parent",
                                    "parent_span_id", "trace", "resource", "device", "circuit", "batch",
                                    "nbytes", "status")}
    traces: dict[str, dict] = {}
    proc_ids: dict[tuple[str, int, int], str] = {}
    n_procs: dict[str, int] = {}
    span_ids = c["span_id"].tolist()
    # Rows without span ids get fresh ids that collide with no real one.
    used = set(span_ids)
    next_id = 1
    for r, sid in enumerate(span_ids):
        if sid == 0:
            while next_id in used:
                next_id += 1
            span_ids[r] = next_id
            used.add(next_id)
    synthetic = [_synthetic_trace_id(res) for res in tl.resources] + [_synthetic_trace_id({})]
    row_trace: list[str] = []
    for t, res in zip(L["trace"], L["resource"], strict=True):
        if 0 <= t < len(tl.trace_ids) and tl.trace_ids[t]:
            row_trace.append(tl.trace_ids[t])
        else:
            row_trace.append(synthetic[res if 0 <= res < len(tl.resources) else -1])
    lane_names = [ln.name for ln in tl.lanes]
    for r in range(tl.n):
        tid = row_trace[r]
        tr = traces.get(tid)
        if tr is None:
            tr = traces[tid] = {"traceID": tid, "spans": [], "processes": {}, "warnings": None}
        res_i = L["resource"][r]
        lane_i = L["lane"][r]
        pkey = (tid, res_i, lane_i)
        pid = proc_ids.get(pkey)
        if pid is None:
            n_procs[tid] = n_procs.get(tid, 0) + 1
            pid = proc_ids[pkey] = f"p{n_procs[tid]}"
            res = dict(tl.resources[res_i]) if 0 <= res_i < len(tl.resources) else {}
            lane = tl.lanes[lane_i]
            service = str(res.pop("service.name", "gputrace"))
            tags = [jaeger_tag(k, v) for k, v in res.items() if k != "host.name"]
            tags += [jaeger_tag("host.name", lane.host), jaeger_tag("gputrace.device", lane.device),
                     jaeger_tag("gputrace.lane", lane.name)]
            if lane.pid >= 0 and "process.pid" not in res:
                tags.append(jaeger_tag("process.pid", lane.pid))
            tr["processes"][pid] = {"serviceName": service, "tags": tags}
        s_us, e_us = L["start"][r] // 1000, -(-L["end"][r] // 1000)
        phase = tl.phases[L["phase"][r]]
        span = {
            "traceID": tid,
            "spanID": f"{span_ids[r]:016x}",
            "flags": 1,
            "operationName": tl.names.get(r) or phase,
            "references": [],
            "startTime": s_us,
            "duration": max(0, e_us - s_us),
            "tags": _span_tags(tl, L, r, phase, lane_names[lane_i]),
            "logs": [],
            "processID": pid,
            "warnings": None,
        }
        p = L["parent"][r]
        psid = span_ids[p] if p >= 0 else L["parent_span_id"][r]
        if psid:
            ptrace = row_trace[p] if p >= 0 else tid
            span["references"].append({"refType": "CHILD_OF", "traceID": ptrace, "spanID": f"{psid:016x}"})
        tr["spans"].append(span)
    data = list(traces.values())
    for tr in data:
        tr["spans"].sort(key=lambda s: (s["startTime"], -s["duration"], s["spanID"]))
    data.sort(key=lambda tr: (tr["spans"][0]["startTime"], tr["traceID"]))
    return {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}


def _span_tags(tl: Timeline, L: dict, r: int, phase: str, lane_name: str) -> list[dict]:
    tags = [{"key": "gputrace.kind", "type": "string", "value": KIND_NAMES.get(L["kind"][r], "host")}]
    name = tl.names.get(r)
    if name and name != phase:
        tags.append(jaeger_tag("gputrace.phase", phase))
    for col, key in (("device", "gputrace.device"), ("circuit", "gputrace.circuit"),
                     ("batch", "gputrace.batch"), ("nbytes", "gputrace.bytes")):
        v = L[col][r]
        if v >= 0:
            tags.append({"key": key, "type": "int64", "value": v})
    tags.append({"key": "gputrace.lane", "type": "string", "value": lane_name})
    g0, g1 = L["gpu_start"][r], L["gpu_end"][r]
    if g0 >= 0 and g1 >= g0:
        tags += [{"key": "gputrace.gpu.start_ns", "type": "int64", "value": g0},
                 {"key": "gputrace.gpu.end_ns", "type": "int64", "value": g1},
                 {"key": "gputrace.gpu.duration_us", "type": "float64", "value": round((g1 - g0) / 1000.0, 3)}]
    extra = tl.attrs.get(r)
    if extra:
        tags += [jaeger_tag(k, v) for k, v in extra.items()]
    st = L["status"][r]
    if st == 2:
        tags += [jaeger_tag("error", True), jaeger_tag("otel.status_code", "ERROR")]
    elif st == 1:
        tags.append(jaeger_tag("otel.status_code", "OK"))
    return tags


def write_jaeger(tl: Timeline, path: str | Path) -> int:
    """Write :func:`to_jaeger` to ``path``; returns the number of spans written."""
    doc = to_jaeger(tl)
    from gputrace.atomic_write import write_atomic

    write_atomic(path, orjson.dumps(doc))
    return sum(len(t["spans"]) for t in doc["data"])
