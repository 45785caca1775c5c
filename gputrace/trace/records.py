"""Finished ``Phase`` objects -> span records (``gputrace.otlp.ids.SpanDict`` dicts). Exporter thread only.

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

import os

from gputrace.otlp.ids import STATUS_ERROR
from gputrace.phases import phase_kind
from gputrace.trace.hotpath import Phase

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # odd, so n -> n * _GOLDEN mod 2**64 is a bijection

# Names in Phase.kw that map to shared-vocabulary attributes; "lane", "kind", "parent" are handled apart.
_KNOWN = {"circuit": "gputrace.circuit", "batch": "gputrace.batch"}
_SPECIAL = frozenset(("lane", "kind", "parent"))
_kind_cache: dict = {}


class IdSource:
    """Span/trace id generator. ``seed`` makes ids reproducible; default is random per run."""

    __slots__ = ("span_salt", "trace_salt", "n")

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            self.span_salt = int.from_bytes(os.urandom(8), "big")  # (secrets.randbits: hmac, hashlib)
            self.trace_salt = int.from_bytes(os.urandom(8), "big") or 1
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
    sid = p.sid
    if sid is not None:
        return p.tid, sid
    # Walk up to the first ancestor that already has ids (or the root), then assign downwards.
    chain = []
    q = p
    while q is not None and q.sid is None:
        chain.append(q)
        q = _parent_of(q)
    for node in reversed(chain):
        parent = _parent_of(node)
        node.sid = ids.next_span_id()
        node.tid = parent.tid if parent is not None else (ids.trace_salt << 64) | node.sid
    return p.tid, p.sid


def _parent_of(p):
    kw = p.kw
    parent = kw.get("parent") if kw else None
    if parent is None:
        return p.up
    # Anything that is not a phase (a no-op phase, a foreign object) means "no parent": start a trace.
    return parent if isinstance(parent, Phase) else None


def to_span(p, ids: IdSource, epoch_offset_ns: int) -> dict:
    """One finished ``Phase`` -> span dict (keys as ``gputrace.otlp.ids.SpanDict``).

    Attributes: ``gputrace.device/bytes/circuit/batch`` when given, ``gputrace.lane`` (``stream:N`` for a
    stream, ``lane=`` if given, else ``thread:NAME``), ``gputrace.kind``, ``gputrace.gpu.start_ns`` /
    ``gpu.end_ns`` when CUDA events resolved, ``thread.id`` (OS thread id), ``thread.name`` (only when the
    lane is not ``thread:NAME``: each attribute costs ~0.7 us to encode), user attributes, and
    ``exception.type`` on error (status ERROR, message = type and exception text).
    This runs once per span on the exporter thread (it bounds file-writing throughput), hence the
    plain, branchy code.
    """
    kw = p.kw
    parent = kw.get("parent") if kw else None
    if parent is None:
        parent = p.up
    elif not isinstance(parent, Phase):
        parent = None
    sid = p.sid
    if sid is None:
        # A root seen for the first time (the common case for top-level phases) starts a trace; a
        # phase whose parent was already met (later siblings) inherits its parent's trace.
        if parent is None or parent.tid is not None:
            ids.n += 1
            sid = ((ids.n * _GOLDEN) & _MASK64) ^ ids.span_salt
            if not sid:
                sid = ids.next_span_id()
            p.sid = sid
            p.tid = tid = (ids.trace_salt << 64) | sid if parent is None else parent.tid
        else:  # first child met before its parent (children end first): assign up the chain
            tid, sid = _ids_of(p, ids)
    else:
        tid = p.tid
    if parent is None:
        psid = None
    else:
        psid = parent.sid
        if psid is None:
            psid = _ids_of(parent, ids)[1]
    st = p.st
    if not kw and p.cdev is None:
        # The common shape (no extra keywords, no stream): every attribute is fixed by (thread, name,
        # device, bytes), so copy a cached dict (one C call) instead of building it key by key.
        tkey = (st, p.name, p.device, p.nbytes)
        tmpl = _templates.get(tkey)
        if tmpl is None:
            tmpl = _template(st, p.name, p.device, p.nbytes)
            if len(_templates) >= _TEMPLATES_MAX:
                _templates.clear()
            _templates[tkey] = tmpl
        attrs = tmpl.copy()
    else:
        attrs = _attributes(p, kw, st, epoch_offset_ns)
    if p.extra:
        attrs.update(p.extra)
    span = {
        "trace_id": tid,
        "span_id": sid,
        "parent_span_id": psid,
        "name": p.name,
        "start_ns": p.t0 + epoch_offset_ns,
        "end_ns": p.t1 + epoch_offset_ns,
        "attributes": attrs,
    }
    if p.err is not None:
        _set_error(span, attrs, p)
    return span


def _attributes(p, kw, st, epoch_offset_ns: int) -> dict:
    """Attributes of a phase with keywords or a stream (before ``p.extra``), in ``to_span``'s key order."""
    attrs: dict = {}
    device = p.device
    if device is not None:
        attrs["gputrace.device"] = device
    if p.nbytes is not None:
        attrs["gputrace.bytes"] = p.nbytes
    lane = kind = None
    user = None
    if kw:
        for k, v in kw.items():
            key = _KNOWN.get(k)
            if key is not None:
                if v is not None:
                    attrs[key] = v
            elif k in _SPECIAL:
                if k == "lane":
                    lane = v
                elif k == "kind":
                    kind = v
            else:
                if user is None:
                    user = {}
                user[k] = v
    cd = p.cdev  # (device, "stream:N", gpu_start, gpu_end) for a phase with a stream
    thread_lane = False
    if cd is not None:
        if device is None and cd[0] is not None:
            attrs["gputrace.device"] = cd[0]
        attrs["gputrace.lane"] = cd[1]
        if cd[2] is not None:
            attrs["gputrace.gpu.start_ns"] = cd[2] + epoch_offset_ns
            attrs["gputrace.gpu.end_ns"] = cd[3] + epoch_offset_ns
    elif lane is not None:
        attrs["gputrace.lane"] = str(lane)
    else:
        attrs["gputrace.lane"] = st.lane
        thread_lane = True
    if kind is None:
        name = p.name
        kind = _kind_cache.get(name)
        if kind is None:
            kind = _kind_cache[name] = phase_kind(name)
    attrs["gputrace.kind"] = kind
    attrs["thread.id"] = st.ident
    if not thread_lane:  # on a thread lane the name is already in gputrace.lane ("thread:NAME")
        attrs["thread.name"] = st.name
    if user:
        attrs.update(user)
    return attrs


def _set_error(span: dict, attrs: dict, p) -> None:
    err = p.err
    et = getattr(err, "__qualname__", None) or str(err)
    attrs["exception.type"] = et
    span["status_code"] = STATUS_ERROR
    span["status_message"] = f"{et}: {p.errmsg}" if p.errmsg else et


_TEMPLATES_MAX = 4096
_templates: dict = {}


def _template(st, name, device, nbytes) -> dict:
    """Attributes of a phase without extra keywords or stream (same keys, same order as to_span)."""
    attrs: dict = {}
    if device is not None:
        attrs["gputrace.device"] = device
    if nbytes is not None:
        attrs["gputrace.bytes"] = nbytes
    attrs["gputrace.lane"] = st.lane
    kind = _kind_cache.get(name)
    if kind is None:
        kind = _kind_cache[name] = phase_kind(name)
    attrs["gputrace.kind"] = kind
    attrs["thread.id"] = st.ident
    return attrs
