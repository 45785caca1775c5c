"""Plain CUPTI-like activity records -> GPU activity spans -> a Timeline (through the real reader).

A reference conversion for tests, fixtures and benchmarks: it applies the conventions of
:mod:`gputrace.activity` to records shaped like CUPTI's activity records (field names as
``cupti-python`` spells them, enum values as CUPTI's enum names), so a test can say "this is the
work" once and build the Timeline that a CUPTI trace of it gives. The in-process collector
(``gputrace.trace``) has its own, production conversion; tests check the two agree.

Record dicts (times are already on the trace's epoch-ns clock; ``phase``: span id of the
gputrace phase that enqueued it, from the external correlation id; optional everywhere):

* ``{"kind": "KERNEL", "start", "end", "device_id", "stream_id", "correlation_id", "name"
  (demangled), "grid_x".."grid_z", "block_x".."block_z", "registers_per_thread",
  "static_shared_memory", "dynamic_shared_memory", "phase"}``
* ``{"kind": "MEMCPY", ..., "copy_kind": "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "src_kind":
  "CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE", "dst_kind": ..., "bytes"}``
* ``{"kind": "MEMSET", ..., "memory_kind": ..., "bytes"}``
* ``{"kind": "SYNCHRONIZATION", "start", "end", "device_id", "type":
  "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "stream_id", "event_id",
  "correlation_id", "thread": "main", "thread_id", "phase"}`` (host-side; on ``thread:<thread>``)
* ``{"kind": "RUNTIME", "start", "end", "name": "cudaLaunchKernel", "correlation_id"}``: not a
  span; gives the launched record ``cuda.api`` and ``cuda.launch.api_start_ns``.

Pure functions; any thread. Raises KeyError naming the missing field for a record without
``kind``, ``start`` or ``end``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from gputrace import activity as A
from gputrace.otlp.encode import encode_request

__all__ = ["activity_spans", "activity_timeline"]


def _common(rec: dict, source: str, apis: dict) -> dict:
    a = {"gputrace.kind": "gpu", A.SOURCE: source, "gputrace.device": int(rec.get("device_id", 0)),
         "gputrace.lane": f"stream:{int(rec.get('stream_id', 0))}", A.STREAM: int(rec.get("stream_id", 0)),
         "gputrace.gpu.start_ns": int(rec["start"]), "gputrace.gpu.end_ns": int(rec["end"])}
    corr = rec.get("correlation_id")
    if corr is not None:
        a[A.CORRELATION] = int(corr)
        api = apis.get(int(corr))
        if api is not None:
            a[A.API] = str(api["name"])
            a[A.LAUNCH_API_START] = int(api["start"])
    return a


def activity_spans(records: Iterable[dict], *, source: str = "cupti", first_id: int = 1 << 48) -> list[dict]:
    """Span dicts (``gputrace.otlp.ids.SpanDict`` shape, no ``trace_id``) for the records, in record order.

    Span ids count up from ``first_id``; ``parent_span_id`` is the record's ``phase``.
    """
    records = list(records)
    apis = {
        int(r["correlation_id"]): r
        for r in records
        if r["kind"] == "RUNTIME" and r.get("correlation_id") is not None
    }
    out = []
    sid = first_id
    for rec in records:
        kind = rec["kind"]
        if kind == "RUNTIME":
            continue
        start, end = int(rec["start"]), int(rec["end"])
        if kind == "KERNEL":
            a = _common(rec, source, apis)
            full = str(rec.get("name", "<kernel>"))
            name = A.short_kernel_name(full)
            a.update({A.ACTIVITY: "kernel", A.KERNEL_NAME: full})
            if "grid_x" in rec:
                a[A.GRID] = [int(rec[f"grid_{c}"]) for c in "xyz"]
                a[A.BLOCK] = [int(rec[f"block_{c}"]) for c in "xyz"]
            for k, key in (("registers_per_thread", A.REGISTERS), ("static_shared_memory", A.SHARED_STATIC),
                           ("dynamic_shared_memory", A.SHARED_DYNAMIC)):
                if rec.get(k) is not None:
                    a[key] = int(rec[k])
        elif kind == "MEMCPY":
            a = _common(rec, source, apis)
            ck = A.copy_kind(rec.get("copy_kind"))
            a.update({A.ACTIVITY: "memcpy", A.MEMCPY_KIND: ck, A.MEMCPY_SRC: A.memory_kind(rec.get("src_kind")),
                      A.MEMCPY_DST: A.memory_kind(rec.get("dst_kind")), "gputrace.bytes": int(rec.get("bytes", 0))})
            name = A.memcpy_name(ck)
        elif kind == "MEMSET":
            a = _common(rec, source, apis)
            a.update({A.ACTIVITY: "memset", A.MEMSET_KIND: A.memory_kind(rec.get("memory_kind")),
                      "gputrace.bytes": int(rec.get("bytes", 0))})
            name = A.MEMSET_NAME
        elif kind == "SYNCHRONIZATION":
            st = A.sync_type(rec.get("type"))
            a = {"gputrace.kind": "sync", A.ACTIVITY: "sync", A.SOURCE: source, A.SYNC_TYPE: st,
                 "gputrace.lane": f"thread:{rec.get('thread', 'main')}"}
            if rec.get("device_id") is not None:
                a["gputrace.device"] = int(rec["device_id"])
            for k, key in (("stream_id", A.SYNC_STREAM), ("event_id", A.SYNC_EVENT), ("correlation_id", A.CORRELATION)):
                if rec.get(k) is not None:
                    a[key] = int(rec[k])
            api = apis.get(int(rec["correlation_id"])) if rec.get("correlation_id") is not None else None
            if api is not None:
                a[A.API] = str(api["name"])
            if rec.get("thread_id") is not None:
                a["thread.id"] = int(rec["thread_id"])  # the OS thread id, as the collector records it
            name = A.sync_name(st)
        else:
            raise ValueError(f"activity record {sid - first_id}: unknown kind {kind!r}")
        out.append({"span_id": sid, "parent_span_id": rec.get("phase"), "name": name, "start_ns": start,
                    "end_ns": end, "attributes": a})
        sid += 1
    return out


def activity_timeline(resource: dict, phases: list[dict], records: Iterable[dict], *, source: str = "cupti",
                      trace_id: str = "0123456789abcdef0123456789abcdef", spans_per_line: int = 2048):
    """A Timeline of ``phases`` (span dicts; ``trace_id`` filled in where absent) plus the activity
    spans of ``records``, encoded as OTLP JSON Lines and read back by the real reader."""
    from gputrace.timeline.formats.otlp_jsonl._loader import TraceLoader

    spans = [dict(p, trace_id=p.get("trace_id", trace_id)) for p in phases]
    spans += [dict(s, trace_id=trace_id) for s in activity_spans(records, source=source)]
    buf = io.BytesIO()
    for i in range(0, max(len(spans), 1), spans_per_line):
        buf.write(encode_request(resource, spans[i:i + spans_per_line]) + b"\n")
    loader = TraceLoader()
    for n, line in enumerate(buf.getvalue().split(b"\n"), 1):
        loader.feed("<activity>", n, line)
    return loader.timeline()
