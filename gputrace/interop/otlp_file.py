"""Write any Timeline (an nsys or Chrome import, a filtered view) as an OTLP JSON Lines trace file.

The file is what gputrace's own recorder writes and ``gputrace.timeline.read_trace`` reads back into
the same lanes: one ``ExportTraceServiceRequest`` per line, one resource per line, at most
``max_spans`` spans per line. Row -> span:

* name = ``Timeline.name_of(row)``; ids: the row's span id and parent span id (rows without one
  get an id from their row number); trace id: the row's, else one derived from its resource;
* resource = the row's resource attributes with ``host.name`` / ``process.pid`` set from its lane
  (the reader rebuilds lanes from them);
* attributes: ``gputrace.lane``, ``gputrace.device`` (the lane's GPU; omitted on CPU lanes),
  ``gputrace.kind``, ``gputrace.circuit`` / ``batch`` / ``bytes`` where set,
  ``gputrace.gpu.start_ns`` / ``gpu.end_ns`` where the row has device times, then ``attrs``;
* status: the row's status code.

Pure; runs on the caller's thread.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

from gputrace.otlp.encode import encode_request
from gputrace.timeline.model import KIND_NAMES, Timeline

__all__ = ["timeline_requests", "write_otlp_jsonl"]


def _trace_for(resource: dict) -> str:
    return hashlib.blake2b(orjson.dumps(resource, option=orjson.OPT_SORT_KEYS, default=str), digest_size=16).hexdigest()


def timeline_requests(tl: Timeline, max_spans: int = 512, scope_name: str = "gputrace.interop") -> Iterator[bytes]:
    """Yield one encoded OTLP JSON request line (no newline) per resource chunk."""
    c = tl.cols
    n = tl.n
    span_ids = c["span_id"].astype(np.uint64).copy()
    missing = span_ids == 0
    if missing.any():  # ids from row numbers, above every id already present
        base = int(span_ids.max()) + 1 if n else 1
        span_ids[missing] = np.arange(base, base + int(missing.sum()), dtype=np.uint64)
    groups: dict[tuple[int, str, int], list[int]] = {}
    for r in range(n):
        lane = tl.lanes[int(c["lane"][r])]
        groups.setdefault((int(c["resource"][r]), lane.host, lane.pid), []).append(r)
    for (res_i, host, pid), rows in groups.items():
        res = dict(tl.resources[res_i]) if 0 <= res_i < len(tl.resources) else {"service.name": "gputrace"}
        res["host.name"] = host
        if pid >= 0:
            res["process.pid"] = pid
        fallback_trace = _trace_for(res)
        for k in range(0, len(rows), max_spans):
            yield encode_request(res, (_span(tl, r, span_ids, fallback_trace) for r in rows[k:k + max_spans]),
                                 scope_name=scope_name)


def _span(tl: Timeline, r: int, span_ids: np.ndarray, fallback_trace: str) -> dict:
    c = tl.cols
    lane = tl.lanes[int(c["lane"][r])]
    a: dict = {"gputrace.lane": lane.name}
    if lane.device >= 0:
        a["gputrace.device"] = lane.device
    a["gputrace.kind"] = KIND_NAMES.get(int(c["kind"][r]), "host")
    for col, key in (("circuit", "gputrace.circuit"), ("batch", "gputrace.batch"), ("nbytes", "gputrace.bytes")):
        v = int(c[col][r])
        if v >= 0:
            a[key] = v
    g0, g1 = int(c["gpu_start"][r]), int(c["gpu_end"][r])
    if g0 >= 0 and g1 >= 0:
        a["gputrace.gpu.start_ns"] = g0
        a["gputrace.gpu.end_ns"] = g1
    for k, v in tl.attrs.get(r, {}).items():
        a.setdefault(k, v)
    t = int(c["trace"][r])
    p = int(c["parent"][r])
    parent = int(span_ids[p]) if p >= 0 else int(c["parent_span_id"][r])
    return {
        "trace_id": tl.trace_ids[t] if 0 <= t < len(tl.trace_ids) and tl.trace_ids[t] else fallback_trace,
        "span_id": int(span_ids[r]),
        "parent_span_id": parent or None,
        "name": tl.name_of(r),
        "start_ns": int(c["start"][r]),
        "end_ns": int(c["end"][r]),
        "attributes": a,
        "status_code": max(0, int(c["status"][r])),  # -1 (a default-filled column) is unset
    }


def write_otlp_jsonl(tl: Timeline, path: str | Path, max_spans: int = 512) -> int:
    """Write the Timeline to ``path`` as OTLP JSON Lines; returns the number of lines written.

    Written through ``gputrace.atomic_write`` (a private temporary file renamed over ``path``), so a
    reader never sees half a file, a failure leaves nothing behind and no symlink is followed.
    """
    from gputrace.atomic_write import atomic_output

    lines = 0
    with atomic_output(path, "wb") as f:
        for line in timeline_requests(tl, max_spans=max_spans):
            f.write(line)
            f.write(b"\n")
            lines += 1
    return lines
