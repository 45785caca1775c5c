"""Finished ``Phase`` objects -> span records (``gputrace.otlp_json.SpanDict`` dicts). Exporter thread only.

Ids
---
Span ids come from a counter mixed through a bijection of 64-bit integers (multiply by an odd constant,
xor a per-run salt), so they are unique within a run, never zero, and reproducible when the salt is
given (golden tests). Every root phase (no parent) starts a new trace: its trace id is the run's 64-bit
trace salt followed by the root's span id. Children take their parent's trace id. Ids are assigned the
first time the exporter meets a phase, either as a record or as the parent of one.

Times: ``start_ns``/``end_ns`` are epoch nanoseconds: ``perf_counter_ns()`` readings plus one offset
taken once (``clock.EPOCH_OFFSET_NS``), so times are monotonic within a run.
"""

from __future__ import annotations

import secrets

from gputrace.phases import phase_kind
from gputrace.otlp_json import STATUS_ERROR
from gputrace.trace.hotpath import Phase

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # odd, so n -> n * _GOLDEN mod 2**64 is a bijection

# kw name -> span attribute key for the shared vocabulary
_KNOWN = {
    "device": "gputrace.device",
    "circuit": "gputrace.circuit",
    "batch": "gputrace.batch",
    "bytes": "gputrace.bytes",
}
_SKIP = frozenset(("stream", "lane", "kind", "parent", "device", "circuit", "batch", "bytes"))


class IdSource:
    """Span/trace id generator. ``seed`` makes ids reproducible; default is random per run."""

    __slots__ = ("span_salt", "trace_salt", "n")

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            self.span_salt = secrets.randbits(64)
            self.trace_salt = secrets.randbits(64) or 1
        else:
            self.span_salt = (seed * 0xD6E8FEB86659FD93) & _MASK64
            self.trace_salt = ((seed + 1) * 0xA0761D6478BD642F) & _MASK64 or 1
        self.n = 0

    def next_span_id(self) -> int:
        while True:
            self.n += 1
            v = ((self.n * _GOLDEN) & _MASK64) ^ self.span_salt
            if v:
                return v


def _ids_of(p, ids: IdSource) -> tuple[int, int]:
    """(trace_id, span_id) of a phase, assigning them (and its ancestors') on first sight."""
    try:
        return p.tid, p.sid
    except AttributeError:
        pass
    # Walk up to the first ancestor that already has ids (or the root), then assign downwards.
    chain = []
    q = p
    while q is not None:
        try:
            q.sid
            break
        except AttributeError:
            chain.append(q)
            q = _parent_of(q)
    for node in reversed(chain):
        parent = _parent_of(node)
        node.sid = ids.next_span_id()
        node.tid = parent.tid if parent is not None else (ids.trace_salt << 64) | node.sid
    return p.tid, p.sid


def _parent_of(p):
    parent = p.kw.get("parent") if p.kw else None
    if parent is None:
        try:
            parent = p.up
        except AttributeError:
            return None
    # Anything that is not a phase (a no-op phase, a foreign object) means "no parent": start a trace.
    return parent if type(parent) is Phase else None


def to_span(p, ids: IdSource, epoch_offset_ns: int, thread_ident=None, thread_name=None) -> dict:
    """One finished ``Phase`` -> span dict (keys as ``gputrace.otlp_json.SpanDict``).

    Attributes: ``gputrace.device/circuit/batch/bytes`` when given, ``gputrace.lane``
    (``stream:N`` for a stream, ``lane=`` if given, else ``thread:NAME``), ``gputrace.kind``,
    ``gputrace.gpu.start_ns``/``gpu.end_ns`` when CUDA events resolved, ``thread.id``/``thread.name``,
    user attributes, and ``exception.type`` on error (status ERROR, message = exception text).
    """
    tid, sid = _ids_of(p, ids)
    parent = _parent_of(p)
    psid = _ids_of(parent, ids)[1] if parent is not None else None
    kw = p.kw
    st = p.st
    attrs: dict = {}
    device = kw.get("device") if kw else None
    if kw:
        for k, key in _KNOWN.items():
            v = kw.get(k)
            if v is not None:
                attrs[key] = v
    lane = None
    try:
        lane = p.cdev  # (device, "stream:N", gpu_start_ns, gpu_end_ns) once resolved
    except AttributeError:
        pass
    if lane is not None:
        if device is None and lane[0] is not None:
            attrs["gputrace.device"] = lane[0]
        attrs["gputrace.lane"] = lane[1]
        if lane[2] is not None:
            attrs["gputrace.gpu.start_ns"] = lane[2] + epoch_offset_ns
            attrs["gputrace.gpu.end_ns"] = lane[3] + epoch_offset_ns
    elif kw and kw.get("lane") is not None:
        attrs["gputrace.lane"] = str(kw["lane"])
    else:
        attrs["gputrace.lane"] = "thread:" + (thread_name or st.name)
    kind = kw.get("kind") if kw else None
    attrs["gputrace.kind"] = kind if kind is not None else phase_kind(p.name)
    attrs["thread.id"] = thread_ident if thread_ident is not None else st.ident
    attrs["thread.name"] = thread_name or st.name
    if kw:
        for k, v in kw.items():
            if k not in _SKIP:
                attrs[k] = v
    try:
        attrs.update(p.extra)
    except AttributeError:
        pass
    span = {
        "trace_id": tid,
        "span_id": sid,
        "parent_span_id": psid,
        "name": p.name,
        "start_ns": p.t0 + epoch_offset_ns,
        "end_ns": p.t1 + epoch_offset_ns,
        "attributes": attrs,
    }
    try:
        err = p.err
    except AttributeError:
        err = None
    if err is not None:
        attrs["exception.type"] = getattr(err, "__qualname__", str(err))
        span["status_code"] = STATUS_ERROR
        span["status_message"] = f"{attrs['exception.type']}: {p.errmsg}" if p.errmsg else attrs["exception.type"]
    return span
