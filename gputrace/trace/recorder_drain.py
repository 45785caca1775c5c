"""The exporter's drain: buffered phases and collected CUDA activity -> span records -> every sink.

``RecorderDrain`` is the base class of ``gputrace.trace.recorder.Recorder`` holding its draining half (split out
of ``recorder`` unchanged; the attributes it reads are set by ``Recorder.__init__``). Contract:

* Thread: ``drain()`` runs on the recorder's exporter thread, and on the thread calling ``Recorder.stop()``
  for the final drain; it is safe from any other thread (serialised by ``Recorder._drain_lock``). It never
  runs on a caller's thread inside a phase: CUDA events are resolved here, in batches.
* Raises: a sink that raises is counted in its stats (its batch dropped) and never stops the drain; span
  records that cannot be built (e.g. an unhashable ``device=``) are counted as dropped by the sinks that
  needed them. Errors of CUPTI collection or CUDA event resolution propagate to ``drain()``'s caller (the
  exporter thread logs them and goes on; ``stop()`` logs them and still closes the sinks).
* After a chunk of phases has gone to every sink it is handed to ``hotpath.recycle``: nothing may read
  those phase objects again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputrace.trace import gil_share, hotpath as _ph, records

if TYPE_CHECKING:
    import threading

    from gputrace.trace.cupti_join import ActivityJoin
    from gputrace.trace.sinks.base import Sink

#: Phases handed to the sinks per call (a multiple of JsonlFileSink's 2048 spans per line).
_DRAIN_CHUNK = 8192

#: Name of the span of each interval CUDA activity collection was paused (``gputrace.trace.record_control``).
PAUSED_SPAN = "gputrace.record.paused"


class RecorderDrain:
    """The draining half of ``Recorder`` (see the module docstring); never instantiated alone."""

    # Set by Recorder.__init__ (declared here for the type checker only).
    sinks: list[Sink]
    resource: dict[str, Any]
    ids: records.IdSource
    epoch_offset_ns: int
    cuda_timeout_s: float
    recorded: int
    cuda_unresolved: int
    activity_spans: int
    cupti: Any
    join: ActivityJoin | None
    sampler: Any
    sample_parent: Any
    sample_batches: int
    samples_written: int
    _pending_cuda: list
    _dropped_pruned: int
    _drop_base: int
    _drain_lock: threading.Lock

    # -- draining ----------------------------------------------------------------------------------
    def dropped(self) -> int:
        """Phases dropped so far because a thread's buffer was full."""
        return _ph.dropped_total() + self._dropped_pruned - self._drop_base

    def drain(self, final: bool = False) -> int:
        """Move everything buffered to the sinks now; returns the number of spans exported.

        Called by the exporter thread; also safe from any other thread (serialised by a lock).
        """
        with self._drain_lock, gil_share.shared():
            n = self._drain_phases(final)
            if self.cupti is not None:
                n += self._drain_activity(final)
            if self.sampler is not None:
                n += self._drain_samples()
            return n

    def _drain_samples(self) -> int:
        """The stack sampler's batch since the last drain -> one ``gputrace.samples`` span, to every sink (in the
        trace of the process's root span, whose (trace id, span id) ``sample_parent`` holds under ``record``)."""
        from gputrace.trace.stack_sampler import batch_span

        batch = self.sampler.take()
        if batch is None or not batch.t_ns:
            return 0
        sid = self.ids.next_span_id()
        # In the root span's trace (taken when the sampler started) but not its child: a batch explains none of
        # the root's time (unattributed time counts children), it only says what the threads ran in it.
        root = self.sample_parent
        tid, psid = (root[0] if root is not None else (self.ids.trace_salt << 64) | sid), None
        span = batch_span(batch, self.epoch_offset_ns, sid, tid, psid)
        self.recorded += 1
        self.sample_batches += 1
        self.samples_written += len(batch.t_ns)
        for s in self.sinks:
            try:
                s.export([span])
                s.flush()
            except Exception as e:  # noqa: BLE001 recorded in the sink's stats
                s.stats.add(dropped=1, error=f"{type(e).__name__}: {e}")
        return 1

    def _drain_activity(self, final: bool) -> int:
        """CUPTI records collected so far -> child spans of their phases, to every sink (exporter thread)."""
        if final:
            records = self.cupti.stop()
        else:
            records = self.cupti.collect()
        join = self.join
        assert join is not None  # (set with self.cupti)
        join.offset_ns = self.cupti.offset_ns
        spans = join.add(records)
        spans.extend(join.take(final))
        take_paused = getattr(self.cupti, "take_paused", None)
        if take_paused is not None:
            spans.extend(self._paused_span(*iv) for iv in take_paused())
        if final:
            # The last lines carry the final counters (dropped, records, clock drift).
            res = self.cupti.resource()
            self.resource.update(res)
            for s in self.sinks:
                try:
                    s.update_resource(res)
                except Exception as e:  # noqa: BLE001 recorded in the sink's stats
                    s.stats.add(error=f"update_resource: {type(e).__name__}: {e}")
        if not spans:
            return 0
        n = len(spans)
        self.activity_spans += n
        self.recorded += n
        for s in self.sinks:
            try:
                s.export(list(spans))
                s.flush()
            except Exception as e:  # noqa: BLE001 recorded in the sink's stats
                s.stats.add(dropped=n, error=f"{type(e).__name__}: {e}")
        return n

    def _paused_span(self, start_ns: int, end_ns: int, thread: str) -> dict:
        """One interval CUDA activity collection was paused (``record_control.pause``): a span named
        ``gputrace.record.paused`` under the process's root span (``gputrace record``) on a lane of its own, so
        a reader never takes the interval for an idle GPU."""
        sid = self.ids.next_span_id()
        root = self.join.root if self.join is not None else None
        tid, psid = (root[0], root[1]) if root is not None else ((self.ids.trace_salt << 64) | sid, None)
        return {"trace_id": tid, "span_id": sid, "parent_span_id": psid, "name": PAUSED_SPAN,
                "start_ns": int(start_ns), "end_ns": int(end_ns),
                "attributes": {"gputrace.lane": f"thread:{PAUSED_SPAN}", "gputrace.source": "gputrace",
                               "gputrace.record.paused": True, "gputrace.record.paused_by": thread}}

    def _drain_phases(self, final: bool) -> int:
        phases = self._collect()
        # CUDA timing is loaded only at the first phase with a stream: skip the scan for host-only runs.
        if self._pending_cuda or (_ph.cuda_timing_loaded() and any(p.ev0 is not None for p in phases)):
            phases = self._resolve_cuda(phases, final)
        n = len(phases)
        # In chunks, each recycled as soon as its sinks are done: the callers then reuse those phase
        # objects during a long drain instead of allocating (hotpath.recycle). The chunks leave
        # ``phases`` as they go, so a chunk's list holds the only exporter reference to its phases.
        while phases:
            chunk = phases[:_DRAIN_CHUNK]
            del phases[:_DRAIN_CHUNK]
            self._export_phases(chunk)
            _ph.recycle(chunk)  # last: nothing may read these phases again
            del chunk
        return n

    def _export_phases(self, phases: list) -> None:
        off = self.epoch_offset_ns
        ids = self.ids
        # Span records only for sinks that take them; a file sink encodes the phases directly
        # (same ids, same bytes: gputrace.trace.sinks.phase_json).
        spans = span_error = None
        if not all(s.takes_phases for s in self.sinks):
            try:
                spans = [records.to_span(p, ids, off) for p in phases]
            except Exception as e:  # noqa: BLE001 - e.g. an unhashable device=: count the batch, as a failing sink's
                span_error = f"{type(e).__name__}: {e}"
        n = len(phases)
        self.recorded += n
        for s in self.sinks:
            try:
                if s.takes_phases:
                    s.export_phases(phases, ids, off)
                elif spans is None:
                    s.stats.add(dropped=n, error=span_error)
                else:
                    s.export(list(spans))
                s.flush()
            except Exception as e:  # noqa: BLE001 recorded in the sink's stats
                s.stats.add(dropped=n, error=f"{type(e).__name__}: {e}")
        if self.join is not None:
            self._register_phases(phases)

    def _register_phases(self, phases: list) -> None:
        """Tell the activity join the ids of exported phases that pushed an external correlation id."""
        join = self.join
        assert join is not None  # (only called when set)
        ids = self.ids
        off = self.epoch_offset_ns
        for p in phases:
            x = p.xid
            if x:
                tid, sid = records._ids_of(p, ids)
                join.register_phase(x, tid, sid, p.t0 + off)

    def _collect(self) -> list:
        out: list = []
        dead = []
        for st in _ph.thread_states() or ():
            b = st.buf
            n = len(b)
            if n:
                out.extend(b[:n])
                del b[:n]  # atomic under the GIL; entries appended meanwhile stay for the next drain
            elif not st.thread.is_alive():
                dead.append(st)
        if dead:
            self._dropped_pruned += _ph.prune_states(dead)
        return out

    def _resolve_cuda(self, phases: list, final: bool) -> list:
        from gputrace.trace import cuda_timing

        plain = [p for p in phases if not _has_events(p)]
        todo = self._pending_cuda + [p for p in phases if _has_events(p)]
        ready, pending, failed = cuda_timing.resolve(todo, wait_s=self.cuda_timeout_s if final else 0.0)
        self._pending_cuda = pending
        self.cuda_unresolved += failed
        if final and pending:
            self.cuda_unresolved += len(pending)
            ready.extend(pending)
            self._pending_cuda = []
        return plain + ready  # (resolve() clears ev0 of what it resolved: split before, not after)


def _has_events(p) -> bool:
    return p.ev0 is not None
