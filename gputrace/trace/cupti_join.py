"""Join CUPTI activity records into spans under the phase (or NVTX range) that enqueued them. Pure Python.

``ActivityJoin`` runs on the recorder's exporter thread only (not thread-safe). It is fed plain records
(``gputrace.trace.cupti_spans`` documents them) in any order and batch sizes, and returns span records
(``gputrace.otlp.ids.SpanDict`` dicts) ready for the sinks.

Parents, exact rather than by time overlap:

* **gputrace phases**: the hot path pushes the phase's external id (``Phase.xid``) as a CUPTI external
  correlation id at phase entry and pops it at exit, so CUPTI writes an ``EXTERNAL_CORRELATION`` record
  (correlation id -> external id) for every CUDA API call made inside the phase; the recorder registers each
  exported phase's ids (``register_phase``). A record whose phase has not closed yet waits.
* **NVTX ranges** (``gputrace record``): MARKER start/end records become spans themselves (parent: the
  innermost range open on their thread when they started); a device record's parent is the innermost range
  open on the launching thread at the launching API call's start (the API record gives thread and time).
* Where both exist, the one that started later (the inner one) wins. Without either, the span's parent is
  ``root`` when set, else it starts a trace.

Waiting is bounded: a record waits for its API/external-correlation record at most ``max_wait`` calls of
``take``, and for its phase at most ``max_phase_wait`` calls (a phase open longer, or dropped from a full
buffer, loses its activity children: they go out without a parent); at most ``max_waiting`` records wait
(beyond, the oldest go out without a parent). ``take(final=True)`` resolves everything with what is known.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from gputrace.phases import phase_kind
from gputrace.trace.cupti_spans import (
    API_KINDS,
    DEVICE_KINDS,
    KIND_SYNC,
    MARKER_END,
    MARKER_INSTANTANEOUS,
    MARKER_START,
    device_attributes,
    span_name,
    sync_attributes,
)

__all__ = ["ActivityJoin"]

_CAP = 1 << 20  # entries kept in each correlation map and in the phase registry


class ActivityJoin:
    """Correlation state of one recording. ``ids``: the run's ``records.IdSource``; ``thread_name(tid)``: the
    name of an OS thread id, or None; ``skip_domains``: NVTX domains not turned into spans (gputrace's own:
    its phases are recorded directly)."""

    def __init__(self, ids, *, thread_name: Callable[[int], str | None] | None = None,
                 skip_domains=("gputrace",), max_wait: int = 3, max_phase_wait: int = 600,
                 max_waiting: int = 1 << 18) -> None:
        self.ids = ids
        self.offset_ns = 0  # CUPTI timestamp + offset_ns = trace epoch ns (set by the collector)
        self.thread_name = thread_name or (lambda tid: None)
        self.skip_domains = frozenset(skip_domains)
        self.max_wait = max_wait
        self.max_phase_wait = max_phase_wait
        self.max_waiting = max_waiting
        self.ext: dict[int, int] = {}  # correlation id -> external id (innermost pushed phase)
        self.api: dict[int, tuple] = {}  # correlation id -> (api name, start ts, thread id)
        self.ctx_dev: dict[int, int] = {}  # context id -> device ordinal
        self.phases: dict[int, tuple] = {}  # phase xid -> (trace id, span id, start epoch ns)
        self.open_ranges: dict[int, list] = {}  # thread id -> [[marker id, start ts, tid, sid, name, domain]]
        self.closed_ranges: dict[int, list] = {}  # thread id -> [(start ts, end ts, trace id, span id)]
        self.waiting: list = []  # [record, takes waited]
        self.records = 0  # records fed
        #: (trace id, span id, start epoch ns) adopting what has no other parent (``gputrace record``'s root
        #: span), or None: then such spans start traces of their own.
        self.root: tuple | None = None
        self.spans_out = 0

    # -- input ------------------------------------------------------------------------------------
    def register_phase(self, xid: int, trace_id: int, span_id: int, start_ns: int) -> None:
        """A phase with external id ``xid`` was exported with these ids (recorder, after its sinks ran)."""
        ph = self.phases
        ph[xid] = (trace_id, span_id, start_ns)
        if len(ph) > _CAP:
            # Oldest registrations first (dict order; no sort: this runs on the exporter thread). Records of an
            # evicted phase then wait like those of an unknown one, and go out without a parent.
            for k in list(itertools.islice(ph, _CAP // 4)):
                del ph[k]

    def add(self, records) -> list:
        """Feed plain records; returns the spans that became complete (NVTX ranges). Device and sync records
        come out of ``take``."""
        out: list = []
        waiting = self.waiting
        for r in records:
            self.records += 1
            k = r.get("kind")
            if k in DEVICE_KINDS:
                c = r.get("context_id")
                if c is not None and r.get("device_id") is not None:
                    self.ctx_dev[int(c)] = int(r["device_id"])
                waiting.append([r, 0])
            elif k == KIND_SYNC:
                waiting.append([r, 0])
            elif k == "EXTERNAL_CORRELATION":
                _put(self.ext, int(r["correlation_id"]), int(r["external_id"]))
            elif k in API_KINDS:
                corr = int(r["correlation_id"])
                old = self.api.get(corr)
                # Runtime and driver records of one call may share a correlation id: keep the outer (earlier).
                if old is None or int(r["start"]) < old[1]:
                    _put(self.api, corr, (str(r.get("name") or "?"), int(r["start"]), r.get("thread_id")))
            elif k == "MARKER":
                span = self._marker(r)
                if span is not None:
                    out.append(span)
        self.spans_out += len(out)
        return out

    # -- output -----------------------------------------------------------------------------------
    def take(self, final: bool = False) -> list:
        """Spans of every waiting record that can be resolved now (all of them when ``final``)."""
        out: list = []
        keep: list = []
        over = len(self.waiting) - self.max_waiting
        for i, w in enumerate(self.waiting):
            r = w[0]
            corr = r.get("correlation_id")
            corr = int(corr) if corr is not None else None
            api = self.api.get(corr) if corr is not None else None
            force = final or i < over
            if api is None and not force and w[1] < self.max_wait:
                w[1] += 1
                keep.append(w)
                continue
            xid = self.ext.get(corr) if corr is not None else None
            parent = None
            if xid is not None:
                parent = self.phases.get(xid)
                if parent is None and not force and w[1] < self.max_phase_wait:
                    w[1] += 1
                    keep.append(w)  # its phase is still open (or not yet exported): wait for it
                    continue
            rng = self._range_at(api) if api is not None else None
            if rng is not None and (parent is None or rng[2] > parent[2]):
                parent = rng
            if parent is None:
                parent = self.root
            out.append(self._span(r, api, parent))
        self.waiting = keep
        self.spans_out += len(out)
        return out

    def _span(self, r: dict, api, parent) -> dict:
        off = self.offset_ns
        if r["kind"] == KIND_SYNC:
            c = r.get("context_id")
            dev = self.ctx_dev.get(int(c)) if c is not None else None
            tname = self.thread_name(api[2]) if api is not None and api[2] is not None else None
            attrs = sync_attributes(r, api, dev, tname)
        else:
            attrs = device_attributes(r, api, off)
        sid = self.ids.next_span_id()
        if parent is None:
            tid, psid = (self.ids.trace_salt << 64) | sid, None
        else:
            tid, psid = parent[0], parent[1]
        return {
            "trace_id": tid,
            "span_id": sid,
            "parent_span_id": psid,
            "name": span_name(r),
            "start_ns": int(r["start"]) + off,
            "end_ns": int(r["end"]) + off,
            "attributes": attrs,
        }

    # -- NVTX ranges ------------------------------------------------------------------------------
    def _marker(self, r: dict) -> dict | None:
        flags = int(r.get("flags") or 0)
        if flags & MARKER_INSTANTANEOUS:
            return None
        domain = r.get("domain") or ""
        if domain in self.skip_domains:
            return None
        thread = r.get("thread_id")
        thread = int(thread) if thread is not None else -1
        ts = int(r["timestamp"])
        mid = r.get("id")
        if flags & MARKER_START:
            stack = self.open_ranges.setdefault(thread, [])
            sid = self.ids.next_span_id()
            if stack:
                tid, psid = stack[-1][2], stack[-1][3]
            elif self.root is not None:
                tid, psid = self.root[0], self.root[1]
            else:
                tid, psid = (self.ids.trace_salt << 64) | sid, None
            stack.append([mid, ts, tid, sid, str(r.get("name") or ""), domain, psid])
            return None
        if not flags & MARKER_END:
            return None
        found = _find(self.open_ranges.get(thread), mid)
        if found is None:  # a start/end range may end on another thread than the one that started it
            for t, stk in self.open_ranges.items():
                found = _find(stk, mid)
                if found is not None:
                    thread = t
                    break
            else:
                return None
        stack, j = found
        m = stack.pop(j)
        _mid, t0, tid, sid, name, dom, psid = m
        closed = self.closed_ranges.setdefault(thread, [])
        closed.append((t0, ts, tid, sid))
        if len(closed) > 8192:
            del closed[:4096]
        off = self.offset_ns
        tname = self.thread_name(thread)
        attrs = {
            "gputrace.kind": phase_kind(name),
            "gputrace.lane": f"thread:{tname if tname is not None else thread}",
            "gputrace.source": "cupti",
            "nvtx.domain": dom,
            "thread.id": thread,
        }
        return {"trace_id": tid, "span_id": sid, "parent_span_id": psid, "name": name,
                "start_ns": t0 + off, "end_ns": ts + off, "attributes": attrs}

    def _range_at(self, api) -> tuple | None:
        """(trace id, span id, start epoch ns) of the innermost NVTX range around an API call, or None."""
        thread, t = api[2], api[1]
        if thread is None:
            return None
        best = None
        for m in self.open_ranges.get(int(thread), ()):
            if m[1] <= t and (best is None or m[1] > best[0]):
                best = (m[1], m[2], m[3])
        for t0, t1, tid, sid in reversed(self.closed_ranges.get(int(thread), ())):
            if t0 <= t <= t1 and (best is None or t0 > best[0]):
                best = (t0, tid, sid)
        if best is None:
            return None
        return best[1], best[2], best[0] + self.offset_ns


def _find(stack, mid):
    """(stack, index) of the open range ``mid`` in one thread's stack (innermost first), or None."""
    if stack:
        for j in range(len(stack) - 1, -1, -1):
            if stack[j][0] == mid:
                return stack, j
    return None


def _put(d: dict, k, v) -> None:
    d[k] = v
    if len(d) > _CAP:
        for key in list(itertools.islice(d, _CAP // 4)):  # oldest first (insertion order)
            del d[key]
