"""The recorder: ``configure()``/``shutdown()`` and the background exporter thread.

Threading contract
------------------
* ``configure()`` and ``shutdown()`` may be called from any thread; they are serialised by a module lock.
  ``configure()`` while a recorder is active shuts the old one down first (its summary is logged).
* One exporter thread (daemon, named ``gputrace-exporter``) per active recorder wakes every
  ``flush_interval_s`` (default 0.5 s, capped at 1 s), drains every thread's buffer, resolves CUDA events
  (in batches, never on a caller's thread), turns phases into span records and hands them to each sink,
  then flushes the sinks. A sink that raises is counted (its batch dropped) and never stops the thread.
* ``shutdown()`` stops recording, runs a final drain (waiting up to ``cuda_timeout_s`` for outstanding CUDA
  events), closes the sinks and returns the ``RunSummary``. A second ``shutdown()`` returns the same summary.
  An ``atexit`` hook shuts an active recorder down at interpreter exit; SIGTERM does the same first
  (``gputrace.trace.signals``: open spans end with error status, then the signal's previous action).

Module layout: the ``Recorder`` lifecycle (start, exporter loop, stop) and the process-wide API live here, with
the hooks ``inherit``/``on_stop`` that ``gputrace record`` sets on this module; what a drain does (phases and
CUDA activity to span records to sinks) is in ``gputrace.trace.recorder_drain``. ``PAUSED_SPAN`` stays
importable from here.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gputrace.trace import clock, hotpath as _ph, records, signals as _signals
from gputrace.trace.recorder_drain import PAUSED_SPAN as PAUSED_SPAN, RecorderDrain
from gputrace.trace.sinks.base import Sink
from gputrace.trace.summary import RunSummary

if TYPE_CHECKING:
    from gputrace.trace.cupti_join import ActivityJoin

log = logging.getLogger("gputrace.trace")

_lock = threading.RLock()
_active: Recorder | None = None
_last_summary: RunSummary | None = None
_atexit_registered = False

#: Set while ``gputrace record`` runs this process (``gputrace.trace.launch.process``): ``inherit()`` returns
#: (sinks, resource) that every recorder configured here also gets (so a program that calls ``configure()``
#: itself still writes into the launch's trace), and ``on_stop(recorder, summary)`` is called at the end of
#: every recorder's ``stop()`` (it must not raise; it runs on the stopping thread, maybe a signal handler).
inherit: Callable[[], tuple[list[Sink], dict]] | None = None
on_stop: Callable[[Recorder, RunSummary], None] | None = None


class Recorder(RecorderDrain):
    """An active recording: its sinks, resource, counters and exporter thread. Made by ``configure()``.

    Draining (``drain()``, ``dropped()``) is inherited from ``gputrace.trace.recorder_drain.RecorderDrain``."""

    def __init__(
        self,
        sinks: list[Sink],
        resource: Mapping[str, Any],
        *,
        run_id: str,
        flush_interval_s: float = 0.5,
        buffer_size: int = 1 << 16,
        id_seed: int | None = None,
        cuda_timeout_s: float = 10.0,
    ) -> None:
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        if not flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s}")
        self.sinks = list(sinks)
        self.resource = dict(resource)
        self.run_id = run_id
        self.flush_interval_s = min(float(flush_interval_s), 1.0)
        self.buffer_size = int(buffer_size)
        self.cuda_timeout_s = cuda_timeout_s
        self.ids = records.IdSource(id_seed)
        self.epoch_offset_ns = clock.EPOCH_OFFSET_NS
        self.recorded = 0
        self.cuda_unresolved = 0
        self._pending_cuda: list = []
        self._dropped_pruned = 0
        self._drop_base = 0
        self._stop = threading.Event()
        self._drain_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._t_start = time.monotonic()
        self._summary: RunSummary | None = None
        self.record = True
        #: CUDA activity (CUPTI) collection: a started ``cupti_collect.CuptiCollector`` and its
        #: ``cupti_join.ActivityJoin``, or None (see ``enable_cuda_activity``).
        self.cupti: Any = None
        self.join: ActivityJoin | None = None
        self.activity_spans = 0
        self.cuda_activity_error: str | None = None  # why CUDA activity was asked for and not collected
        #: Whether phases with a stream record CUDA events while CUDA activity is collected (configure's
        #: ``cuda_events``; without CUDA activity they always do).
        self.cuda_events = False
        #: configure's ``gc_full_every``: while recording, CPython runs a full (generation 2) collection at most
        #: every this many generation-1 collections (None: the interpreter's thresholds stay as they are).
        self.gc_full_every: int | None = None
        self._gc_saved: tuple | None = None
        self._thread_names: dict[int, str] = {}
        #: A started ``stack_sampler.StackSampler`` whose batches every drain writes (``gputrace record``), and
        #: the (trace id, span id) its batch spans hang under (the process's root span), or None.
        self.sampler: Any = None
        self.sample_parent: Any = None
        self.sample_batches = 0  # batch spans handed to the sinks
        self.samples_written = 0  # samples in them

    def enable_cuda_activity(self, collector) -> None:
        """Collect CUDA activity with ``collector`` (a started ``CuptiCollector``, or any object with its
        ``collect``/``stop``/``resource``/``offset_ns``/``push``/``pop``/``xkind``): phases entered from now on
        push their external id, and every drain turns the collected records into child spans. Call before
        ``start()``."""
        from gputrace.trace.cupti_join import ActivityJoin

        self.cupti = collector
        self.join = ActivityJoin(self.ids, thread_name=self._thread_name)
        self.resource.update(collector.resource())

    def _thread_name(self, tid: int) -> str | None:
        name = self._thread_names.get(tid)
        if name is None:
            for st in _ph.thread_states() or ():
                self._thread_names[st.ident] = st.name
            name = self._thread_names.get(tid)
        return name

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        for s in self.sinks:
            s.start(self.resource)
        self._drop_base = _ph.dropped_total()
        _ph.start_recording(self.buffer_size if self.record else 0)
        if self.gc_full_every is not None and self.record:
            old = gc.get_threshold()
            if old[2] < self.gc_full_every:
                new = (old[0], old[1], self.gc_full_every)
                gc.set_threshold(*new)
                self._gc_saved = (old, new)
        if self.cupti is not None and self.record:
            _ph.start_external_ids(self.cupti.xkind, self.cupti.push, self.cupti.pop)
            _ph.cuda_settings(self.cuda_events, getattr(self.cupti, "stream_id", None))
        self._thread = threading.Thread(target=self._run, name="gputrace-exporter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.drain()
            except Exception:  # never let the exporter die: a dead exporter would fill every buffer
                log.exception("gputrace exporter: drain failed")

    def stop(self) -> RunSummary:
        """Stop recording, final drain, close sinks; returns the summary (idempotent)."""
        if self._summary is not None:
            return self._summary
        _ph.stop_recording()
        if _ph.stop_external_ids():
            _ph.cuda_settings(True, None)
        if self._gc_saved is not None:
            old, new = self._gc_saved
            self._gc_saved = None
            if gc.get_threshold() == new:  # unless the program set its own thresholds meanwhile
                gc.set_threshold(*old)
        self._stop.set()
        if self.sampler is not None:  # its last samples go out with the final drain below
            self.sampler.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        try:
            self.drain(final=True)
        except Exception:  # as in _run: the sinks must still be closed and the summary returned
            log.exception("gputrace: final drain failed")
        _ph.clear_pool()
        if self.cupti is not None:  # CUPTI is process-wide: never leave it collecting (stop is idempotent)
            try:
                self.cupti.stop()
            except Exception:
                log.exception("gputrace: stopping CUDA activity collection failed")
        for s in self.sinks:
            try:
                s.close()  # each sink's own default timeout (OtlpSink: close_timeout_s)
            except Exception as e:  # noqa: BLE001 recorded in the sink's stats
                s.stats.add(error=f"close: {type(e).__name__}: {e}")
        self._summary = RunSummary(
            run_id=self.run_id,
            spans_recorded=self.recorded,
            spans_dropped=self.dropped() + (self.cupti.dropped if self.cupti is not None else 0),
            sinks=tuple(s.summary() for s in self.sinks),
            cuda_unresolved=self.cuda_unresolved,
            duration_s=time.monotonic() - self._t_start,
        )
        if on_stop is not None:
            try:
                on_stop(self, self._summary)
            except Exception:  # noqa: BLE001 logged; the summary must still be returned
                log.exception("gputrace: the recorder's stop hook failed")
        return self._summary


# -- module-level API ------------------------------------------------------------------------------
def configure(
    trace_file: str | os.PathLike | None = None,
    otlp: str | bool | Mapping[str, Any] | None = None,
    service_name: str = "gputrace",
    config: Mapping[str, Any] | None = None,
    resource: Mapping[str, Any] | None = None,
    sinks: Iterable[Sink] | None = None,
    *,
    flush_interval_s: float = 0.5,
    buffer_size: int = 1 << 16,
    id_seed: int | None = None,
    collect_gpu_info: bool = True,
    cuda_activity: bool | None = None,
    cuda_markers: bool = False,
    cuda_events: bool = False,
    gc_full_every: int | None = 1000,
) -> Recorder:
    """Start recording phases of this process; returns the active ``Recorder``.

    trace_file: write OTLP JSON Lines there (truncated). otlp: also export over OTLP: ``True`` (endpoint
    and protocol from ``OTEL_EXPORTER_OTLP_*``), ``"grpc"``/``"http"``, an endpoint URL, or a mapping of
    ``OtlpSink`` arguments. config: the run's switches, recorded as resource attributes
    ``gputrace.config.<key>``. resource: extra resource attributes. sinks: further ``Sink`` objects
    (e.g. ``MemorySink()``). buffer_size: per-thread bound (phases past it are dropped and counted).
    id_seed: reproducible span/trace ids (tests). cuda_activity: collect CUDA kernels, copies, memsets and
    synchronizations with CUPTI as child spans of the phases that enqueued them (None: the
    ``GPUTRACE_CUDA_ACTIVITY`` environment variable decides; off by default, docs/tracer.md says why); when
    CUPTI cannot collect, the run goes on without it, logs one warning and records the reason as the resource
    attribute ``gputrace.cupti.unavailable``. cuda_markers: also turn NVTX ranges of other domains into spans
    (``gputrace record``). cuda_events: keep the per-phase CUDA events (``gputrace.gpu.start_ns``/``end_ns``)
    of phases with a stream while CUDA activity is collected (default off then: the kernels, copies and
    syncs under the phase say when the GPU worked, and two event records per phase cost most of a stream
    phase's host time, benchmarks/RESULTS.md). gc_full_every: while recording, let CPython run a full
    (generation 2) collection at most every this many generation-1 collections (its default is 10; restored at
    shutdown unless the program changed the thresholds meanwhile). Phases wait in buffers until the exporter
    takes them, get promoted to the oldest generation, and every full collection walks all of them: in a
    300k-phase burst that was about half of the caller's time (docs/tracer.md, "Performance"). None leaves the
    interpreter's thresholds alone. With GPUTRACE_DISABLE set (at import or now) nothing is
    recorded and phases are no-ops. Raises OSError if the trace file cannot be opened, ValueError for
    bad arguments.
    """
    global _active, _atexit_registered
    from gputrace.trace.resource import build_resource

    # Check the arguments before opening any file or connection.
    if buffer_size < 1:
        raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
    if not flush_interval_s > 0:
        raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s}")
    if config is not None and not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping of switch name -> value, got {type(config).__name__}")
    if gc_full_every is not None and gc_full_every < 1:
        raise ValueError(f"gc_full_every must be >= 1 or None, got {gc_full_every}")
    for s in sinks or ():
        if not isinstance(s, Sink):
            raise ValueError(f"sinks: expected gputrace Sink objects, got {type(s).__name__}")
    all_sinks: list[Sink] = []
    otlp_sink = None
    if otlp:  # before the file: a bad otlp= spec must not leave an opened file behind
        from gputrace.trace.sinks.otlp import otlp_sink_from

        otlp_sink = otlp_sink_from(otlp)
    if trace_file is not None:
        from gputrace.trace.sinks.jsonl import JsonlFileSink

        all_sinks.append(JsonlFileSink(trace_file))
    if otlp_sink is not None:
        all_sinks.append(otlp_sink)
    all_sinks.extend(sinks or ())
    if inherit is not None:  # under `gputrace record`: the launch's sink and resource come along
        more_sinks, more_res = inherit()
        all_sinks.extend(more_sinks)
        resource = {**(resource or {}), **more_res}
    disabled = _ph.DISABLED or _ph.env_disabled()
    if disabled and not _ph.DISABLED:
        _ph.disable()  # GPUTRACE_DISABLE set after import: honour it from here on
    run_id = os.urandom(8).hex()  # (as secrets.token_hex(8), without importing hmac and hashlib)
    res = build_resource(service_name, run_id, config, resource, collect_gpu_info=collect_gpu_info)
    rec = Recorder(
        all_sinks, res, run_id=run_id, flush_interval_s=flush_interval_s, buffer_size=buffer_size, id_seed=id_seed
    )
    rec.gc_full_every = gc_full_every
    if cuda_activity is None:
        cuda_activity = env_flag(CUDA_ACTIVITY_ENV)
    with _lock:
        if _active is not None:
            log.info("gputrace: configure() replaced an active recorder:\n%s", _active.stop())
        if cuda_activity and not disabled:
            rec.cuda_events = bool(cuda_events)
            _start_cuda_activity(rec, cuda_markers)  # after the old recorder stopped: CUPTI is process-wide
        _active = rec
        rec.record = not disabled  # disabled: sinks are opened (and closed at shutdown), nothing recorded
        rec.start()
        _signals.install(shutdown)  # SIGTERM: close open spans as failed, flush, then the signal's own action
        if not _atexit_registered:
            atexit.register(_shutdown_at_exit)
            _atexit_registered = True
    return rec


#: Environment variable that turns CUDA activity collection on when ``configure(cuda_activity=None)``.
CUDA_ACTIVITY_ENV = "GPUTRACE_CUDA_ACTIVITY"


def env_flag(name: str) -> bool:
    """True when the environment variable is set to something other than '', 0, false, no, off."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


#: Environment variable: the size of each buffer handed to CUPTI, in KiB (default 2048; 16 to 65536 accepted).
CUPTI_BUFFER_ENV = "GPUTRACE_CUPTI_BUFFER_KB"


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    """The integer the environment variable ``name`` holds, or ``default`` when it is unset, not an integer or
    outside [lo, hi]."""
    try:
        v = int(os.environ.get(name, "").strip())
    except ValueError:
        return default
    return v if lo <= v <= hi else default


def cupti_buffer_bytes(default: int = 2 << 20) -> int:
    """The CUPTI buffer size ``GPUTRACE_CUPTI_BUFFER_KB`` asks for, or ``default`` when it is unset or not an
    integer in [16, 65536] KiB."""
    kb = env_int(CUPTI_BUFFER_ENV, -1, 16, 65536)
    return kb << 10 if kb > 0 else default


#: Environment variable: CUPTI's worker-thread flush period in ms (default 500; 0 leaves CUPTI's heuristics).
CUPTI_FLUSH_ENV = "GPUTRACE_CUPTI_FLUSH_MS"


def cupti_flush_ms(default: int = 500) -> int:
    """The flush period ``GPUTRACE_CUPTI_FLUSH_MS`` asks for, or ``default`` when unset or not an integer in
    [0, 60000]."""
    return env_int(CUPTI_FLUSH_ENV, default, 0, 60_000)


def _start_cuda_activity(rec: Recorder, markers: bool) -> None:
    from gputrace.trace.cupti_collect import CuptiCollector, CuptiUnavailable

    col = CuptiCollector(markers=markers, buffer_bytes=cupti_buffer_bytes(), flush_period_ms=cupti_flush_ms())
    try:
        col.start()
    except CuptiUnavailable as e:
        rec.resource["gputrace.cupti.unavailable"] = str(e)
        rec.cuda_activity_error = str(e)
        log.warning("gputrace: CUDA activity not collected: %s", e)
        return
    rec.enable_cuda_activity(col)


def shutdown() -> RunSummary:
    """Stop recording, deliver what is buffered, close sinks; returns the ``RunSummary``.

    Without an active recorder returns the previous run's summary (or an empty one). Never raises for
    sink failures: they are in the summary.
    """
    global _active, _last_summary
    with _signals.deferred(), _lock:  # (a SIGTERM meanwhile is acted on once this flush is complete)
        rec, _active = _active, None
        if rec is None:
            _signals.uninstall()
            return _last_summary or RunSummary(run_id="", spans_recorded=0, spans_dropped=0)
        _last_summary = rec.stop()
        _signals.uninstall()
        return _last_summary


def get_recorder() -> Recorder | None:
    """The active recorder, or None when not configured."""
    return _active


def _shutdown_at_exit() -> None:
    if _active is not None:
        shutdown()


def _after_fork_in_child() -> None:
    # The exporter thread does not exist in a forked child and the sinks (open file, collector
    # connections) belong to the parent: stop recording in the child rather than corrupt the parent's
    # output. Phases still emit NVTX. Call configure() in the child to record there.
    global _active, _lock, _last_summary
    _ph.reset_after_fork()
    _active = None
    _last_summary = None
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
