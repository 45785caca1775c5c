"""CUPTI activity collection (CUDA only; imports ``cupti`` from the ``cupti-python`` package).

``CuptiCollector`` enables CUPTI's activity API for concurrent kernels, memcpy, memset, synchronization,
external correlation, the CUDA runtime/driver calls that launch, copy, set or wait (the other API calls are
switched off per callback id, so a program's thousands of ``cudaGetDevice`` calls cost no records) and, for
``gputrace record``, NVTX markers.

Threads
-------
* CUPTI calls ``_requested``/``_completed`` on its own worker thread (or on the thread calling
  ``activity_flush_all``). ``_completed`` turns each record into a plain dict (``cupti_spans`` documents
  them: the record objects are views into CUPTI's buffer, valid only inside the callback) and appends them to
  a bounded list; records past ``max_pending`` are counted in ``dropped`` and not kept.
* ``collect()`` (the recorder's exporter thread) re-measures the clock offset and swaps the list out. It
  flushes CUPTI (``activity_flush_all``) only when forced or after ``idle_flush_s`` without a delivery: an
  exporter flush while the program launches runs the conversion on the exporter thread and stalls the
  launching thread (up to seconds on the H200; docs/tracer.md). Full buffers come from CUPTI's worker thread;
  ``pause``, ``stop`` and ``collect(force=True)`` flush everything. Nothing here runs on a caller's thread
  except ``push``/``pop`` of the external correlation id, which the hot path calls directly.

Clock: ``offset_ns`` = trace epoch ns - CUPTI timestamp, measured by bracketing ``cupti.get_timestamp()``
between two reads of the trace clock (best of several: the narrowest bracket), re-measured at every
``collect`` so drift never accumulates; ``offset_first_ns`` and ``max_drift_ns`` say how far it moved.

Pause and resume (``pause``/``resume``, public as ``gputrace.trace.record_control``): from any thread, CUPTI's
buffers are flushed and every activity kind ``start`` enabled is disabled, later enabled again (with the same
per-call API restriction); nothing is registered again. Each pause is kept as an interval on the trace clock
(``paused``; the recorder writes one ``gputrace.record.paused`` span per interval and the resource attributes
of ``resource()``), so a reader never takes a paused interval for an idle GPU. Toggle failures never raise:
they are kept in ``errors`` and ``toggle_errors`` (resource ``gputrace.record.pause_errors``).

Raises ``CuptiUnavailable`` from ``start()`` when the package, the library or a GPU is missing.

Parts kept in their own modules: ``cupti_convert`` (record -> plain dict: the per-kind converters ``_completed``
uses, the reference ``_plain``, the enum-name maps), ``cupti_pause`` (the paused intervals and toggle errors),
``cupti_probe`` (``available``, ``library_path``, the package versions; re-exported here), ``cupti_api_filter``
(which API calls are recorded). None imports
``cupti`` at import time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gputrace.trace import clock, gil_share
from gputrace.trace.cupti_api_filter import restrict_api
from gputrace.trace.cupti_convert import RecordConverter
from gputrace.trace.cupti_pause import MAX_PAUSED_KEPT, PauseLog
from gputrace.trace.cupti_probe import available, library_path, version

__all__ = ["MAX_PAUSED_KEPT", "CuptiCollector", "CuptiUnavailable", "available", "library_path"]


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot collect here (no cupti-python, no CUPTI library, no CUDA driver or GPU)."""


# API calls kept (by callback-name substring): what launches device work, copies, sets or waits.
class CuptiCollector:
    """One CUPTI activity session per process (CUPTI's activity API is process-wide).

    ``markers``: also collect NVTX markers (needs ``NVTX_INJECTION64_PATH`` pointing at the CUPTI library
    before the program's first NVTX call; ``gputrace record`` sets it). ``buffer_bytes``: size of each buffer
    handed to CUPTI (2 MiB: some 10,000-20,000 records, so CUPTI's worker hands buffers over often in a busy
    program). ``max_pending``: records held between two ``collect`` calls before new ones are dropped.
    ``idle_flush_s``: ``collect`` flushes CUPTI only after this long without a delivery. ``flush_period_ms``:
    CUPTI's worker-thread flush period (``cuptiActivityFlushPeriod``; 0 leaves CUPTI's heuristics).
    """

    def __init__(self, *, markers: bool = False, buffer_bytes: int = 2 << 20, max_pending: int = 1 << 21,
                 idle_flush_s: float = 2.0, flush_period_ms: int = 500) -> None:
        self.markers = markers
        self.idle_flush_s = float(idle_flush_s)
        self.flush_period_ms = int(flush_period_ms)
        #: time.monotonic() of the last buffer delivery or flush (``collect`` flushes after idle_flush_s of none).
        self._last_delivery = time.monotonic()
        #: Also append every plain record to this file as JSON lines (``GPUTRACE_CUPTI_DUMP``); None: off.
        self.dump_path = os.environ.get("GPUTRACE_CUPTI_DUMP") or None
        self.buffer_bytes = int(buffer_bytes)
        self.max_pending = int(max_pending)
        self.dropped = 0
        self.records = 0
        self.buffers = 0
        self.offset_ns = 0
        self.offset_first_ns: int | None = None
        self.max_drift_ns = 0
        self.offset_bracket_ns = 0
        self.version = ""
        self.errors: list[str] = []
        self._pending: list = []
        self._lock = threading.Lock()
        self._cupti: Any = None  # the cupti module once start() imported it
        self._kinds: list = []
        #: enum-name maps, API call names and the per-kind converter table (``cupti_convert``).
        self._convert = RecordConverter(self._callback_name)
        self.xkind = 0  # ExternalCorrelationKind.CUSTOM0 as an int (set by start)
        self.push = self.pop = None
        # -- pause/resume (any thread; serialised by _toggle) --
        # (re-entrant: a SIGTERM handler's shutdown can run stop() on a thread inside pause or resume)
        self._toggle = threading.RLock()
        #: the pause in force, the pauses that ended and the toggle errors (``cupti_pause``).
        self._pauses = PauseLog()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Enable collection. Raises CuptiUnavailable (nothing left enabled) when CUPTI cannot collect."""
        try:
            from cupti import cupti
        except Exception as e:  # noqa: BLE001 reported as CuptiUnavailable
            raise CuptiUnavailable(f"cupti-python not usable: {type(e).__name__}: {e}") from None
        self._cupti = cupti
        AK = cupti.ActivityKind
        self.load_names(cupti)
        self.version = version()
        try:
            cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)  # OS thread ids, as phases record
        except Exception as e:  # noqa: BLE001 recorded in self.errors
            self.errors.append(f"set_thread_id_type: {e}")
        kinds = [AK.CONCURRENT_KERNEL, AK.MEMCPY, AK.MEMSET, AK.SYNCHRONIZATION, AK.EXTERNAL_CORRELATION,
                 AK.RUNTIME, AK.DRIVER]
        if self.markers:
            kinds.append(AK.MARKER)
        try:
            cupti.activity_register_callbacks(self._requested, self._completed)
            for k in kinds:
                cupti.activity_enable(k)
                self._kinds.append(k)
        except Exception as e:  # noqa: BLE001 reported as CuptiUnavailable
            self._disable()
            raise CuptiUnavailable(f"CUPTI activity API refused: {type(e).__name__}: {e}") from None
        self._restrict_api(cupti)
        period = getattr(cupti, "activity_flush_period", None)
        if self.flush_period_ms > 0 and period is not None:
            try:
                period(self.flush_period_ms)
            except Exception as e:  # noqa: BLE001 recorded in self.errors (CUPTI's heuristics then decide)
                self.errors.append(f"activity_flush_period: {e}")
        self.xkind = int(cupti.ExternalCorrelationKind.CUSTOM0)
        self.push = cupti.activity_push_external_correlation_id
        self.pop = cupti.activity_pop_external_correlation_id
        try:
            self.measure_offset()
        except Exception as e:  # noqa: BLE001 reported as CuptiUnavailable
            self._disable()
            raise CuptiUnavailable(f"CUPTI timestamp unavailable: {type(e).__name__}: {e}") from None

    def load_names(self, cupti) -> None:
        """Enum value -> member name maps of ``cupti`` (or a stand-in with the same enums), and the per-kind
        converters built from them (``converters``)."""
        self._convert.load_names(cupti)

    def _restrict_api(self, cupti, report: bool = True) -> None:
        """Switch off the API calls that neither launch, copy, set nor wait (``cupti_api_filter``); refusals go
        to ``errors`` when ``report``."""
        problems = restrict_api(cupti)
        if report:
            self.errors.extend(problems)

    def stop(self) -> list:
        """Flush everything CUPTI holds, disable collection; returns the last records. A pause in force ends
        here (its interval is closed at this time)."""
        with self._toggle:
            cupti = self._cupti
            if cupti is None:
                return []
            try:
                cupti.activity_flush_all(1)
            except Exception as e:  # noqa: BLE001 recorded in self.errors
                self.errors.append(f"flush: {e}")
            self._disable()
            if self._pauses.at is not None:
                self._pauses.end(clock.now_ns())
            out = self._swap()
            self._cupti = None
            return out

    # -- pause / resume (any thread) ----------------------------------------------------------------
    def pause(self) -> bool:
        """Stop collecting until ``resume``: flush CUPTI's buffers (records made so far are kept; their
        conversion runs on this thread), then disable every activity kind ``start`` enabled. Any thread.
        Returns True when collection is paused after the call (also when it already was: idempotent), False
        when this collector is not collecting (never started, or stopped). Never raises: a refused flush or
        disable is kept in ``errors`` and ``toggle_errors``, and the pause still counts (``resume`` enables
        every kind again). Work already enqueued on the GPU may or may not be recorded: pause where the GPU is
        synchronised (after a step's ``loss.item()``, say)."""
        with self._toggle:
            cupti = self._cupti
            if cupti is None:
                return False
            if self._pauses.at is not None:
                return True
            try:
                cupti.activity_flush_all(1)
            except Exception as e:  # noqa: BLE001 recorded in errors
                self._toggle_error(f"pause: flush: {type(e).__name__}: {e}")
            t = clock.now_ns()
            for k in self._kinds:
                try:
                    cupti.activity_disable(k)
                except Exception as e:  # noqa: BLE001 recorded in errors
                    self._toggle_error(f"pause: disable {k}: {type(e).__name__}: {e}")
            self._pauses.begin(t, threading.current_thread().name)
            return True

    def resume(self) -> bool:
        """Collect again after ``pause``: enable every activity kind ``start`` enabled (the same kinds, the
        same per-call API restriction; no callback is registered again). Any thread. Returns True when
        collecting after the call (also when it was not paused: idempotent), False when this collector is not
        collecting. Never raises (failures as in ``pause``)."""
        with self._toggle:
            cupti = self._cupti
            if cupti is None:
                return False
            if self._pauses.at is None:
                return True
            api = False
            for k in self._kinds:
                try:
                    cupti.activity_enable(k)
                except Exception as e:  # noqa: BLE001 recorded in errors
                    self._toggle_error(f"resume: enable {k}: {type(e).__name__}: {e}")
                    continue
                api = api or int(k) in self._convert.api_kinds
            if api:  # (whether enabling the API kinds resets CUPTI's per-call switches: set them again)
                try:
                    self._restrict_api(cupti, report=False)
                except Exception as e:  # noqa: BLE001 recorded in errors
                    self._toggle_error(f"resume: restrict API: {type(e).__name__}: {e}")
            self._pauses.end(clock.now_ns())
            return True

    @property
    def is_paused(self) -> bool:
        return self._pauses.at is not None

    @property
    def paused(self) -> list[tuple[int, int, str]]:
        """(start ns, end ns, thread name) of the first MAX_PAUSED_KEPT pauses that ended, oldest first."""
        return self._pauses.paused

    @property
    def paused_count(self) -> int:
        return self._pauses.count

    @property
    def paused_total_ns(self) -> int:
        return self._pauses.total_ns

    @property
    def toggle_errors(self) -> list[str]:
        return self._pauses.toggle_errors

    def take_paused(self) -> list[tuple[int, int, str]]:
        """(start ns, end ns, thread name) of the pauses that ended since the last call (exporter thread)."""
        with self._toggle:
            return self._pauses.take()

    def _toggle_error(self, msg: str) -> None:
        if self._pauses.error(msg):
            self.errors.append(msg)

    def _disable(self) -> None:
        for k in self._kinds:
            try:
                self._cupti.activity_disable(k)
            except Exception as e:  # noqa: BLE001 recorded in self.errors
                self.errors.append(f"disable {k}: {e}")
        self._kinds = []

    def stream_id(self, device: int, stream_ptr: int) -> int:
        """CUPTI's id of a CUDA stream (a pointer) on ``device``; called once per stream by CUDA timing, so a
        phase opened with that stream sits on the lane of its kernels. Raises on CUDA/CUPTI errors."""
        import cupy

        with cupy.cuda.Device(device):
            ctx = cupy.cuda.driver.ctxGetCurrent()
        return int(self._cupti.get_stream_id_ex(ctx, stream_ptr, 0))

    # -- exporter thread ----------------------------------------------------------------------------
    def collect(self, force: bool = False) -> list:
        """Records delivered since the last call (exporter thread). CUPTI is flushed here only when ``force``
        (every buffer, full or not: CUPTI's forced flush) or when nothing was delivered for ``idle_flush_s``
        (the buffers with completed records; see the module docstring for why not at every call)."""
        cupti = self._cupti
        if cupti is None:
            return self._swap()
        if force or time.monotonic() - self._last_delivery >= self.idle_flush_s:
            try:
                cupti.activity_flush_all(1 if force else 0)
            except Exception as e:  # noqa: BLE001 recorded in self.errors
                self.errors.append(f"flush: {e}")
            self._last_delivery = time.monotonic()
        self.measure_offset()
        return self._swap()

    def _swap(self) -> list:
        with self._lock:
            out, self._pending = self._pending, []
        if self.dump_path and out:
            self._dump(out)
        return out

    def _dump(self, records: list) -> None:
        """Append the plain records as JSON lines (``GPUTRACE_CUPTI_DUMP``: fixtures and debugging)."""
        import json

        try:
            with open(str(self.dump_path), "a") as f:
                for r in records:
                    f.write(json.dumps(r, default=str) + "\n")
        except OSError as e:
            self.errors.append(f"dump: {e}")

    def measure_offset(self, tries: int = 5) -> int:
        """Re-measure trace-epoch-ns minus CUPTI timestamp (narrowest of ``tries`` brackets)."""
        get = self._cupti.get_timestamp
        now = clock.now_ns
        best: tuple[int, int] | None = None
        for _ in range(max(1, tries)):
            a = now()
            c = get()
            b = now()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - c)
        assert best is not None  # (at least one try)
        self.offset_bracket_ns = best[0]
        self.offset_ns = best[1]
        if self.offset_first_ns is None:
            self.offset_first_ns = best[1]
        self.max_drift_ns = max(self.max_drift_ns, abs(best[1] - self.offset_first_ns))
        return best[1]

    # -- CUPTI's threads ----------------------------------------------------------------------------
    def _requested(self):
        return self.buffer_bytes, 0

    def _completed(self, activities) -> None:
        """CUPTI's buffer-completed callback (CUPTI's thread, holding the GIL: kept short). Never raises into
        CUPTI: a record that fails to convert is counted in ``dropped`` and conversion goes on with the next.
        One ``try`` per buffer, not per record: after a failure the loop resumes on the same iterator. (A
        buffer whose iteration itself raises counts one drop and keeps what came before.)"""
        with gil_share.shared():  # the program's launching threads get the GIL back within 0.1 ms meanwhile
            self._convert_buffer(activities)

    def _convert_buffer(self, activities) -> None:
        self.buffers += 1
        self._last_delivery = time.monotonic()
        convert = self._convert
        get = convert.table().get
        resolve = convert.resolve
        out: list = []
        app = out.append
        it = iter(activities)
        a: Any = _NOTHING
        while True:
            try:
                for a in it:
                    f = get(a.kind)
                    if f is None:
                        f = resolve(a.kind)
                    if f:
                        app(f(a))
                    a = _NOTHING  # (so an exception with a is _NOTHING came from the iteration itself)
                break
            except Exception as e:  # noqa: BLE001 counted as dropped, recorded in self.errors
                self.dropped += 1
                if len(self.errors) < 20:
                    self.errors.append(f"{'record' if a is not _NOTHING else 'buffer'}: {type(e).__name__}: {e}")
                if a is _NOTHING:  # the buffer's iteration failed: the rest of it is lost
                    break
                a = _NOTHING
        with self._lock:
            room = self.max_pending - len(self._pending)
            if room < len(out):
                self.dropped += len(out) - max(room, 0)
                out = out[: max(room, 0)]
            self._pending.extend(out)
            self.records += len(out)

    def converters(self) -> dict:
        """The per-kind converters (``RecordConverter.converters``): int kind -> function of one record returning
        its plain dict, False for kinds not used. Each gives exactly the dict ``_plain`` gives."""
        return self._convert.converters()

    @property
    def _plain(self) -> Callable[[Any], dict | None]:
        """The reference conversion of one record (``RecordConverter.plain``)."""
        return self._convert.plain

    def _callback_name(self, domain: Any, cbid: int) -> Any:
        return self._cupti.get_callback_name(domain, cbid)

    # -- resource -----------------------------------------------------------------------------------
    def resource(self) -> dict:
        """The resource attributes of this collection (GPU activity conventions)."""
        return {
            "gputrace.cupti.version": self.version,
            "gputrace.cupti.clock_offset_ns": int(self.offset_ns),
            "gputrace.cupti.clock_offset_first_ns": int(self.offset_first_ns or 0),
            "gputrace.cupti.clock_max_drift_ns": int(self.max_drift_ns),
            "gputrace.cupti.clock_bracket_ns": int(self.offset_bracket_ns),
            "gputrace.cupti.dropped": int(self.dropped),
            "gputrace.cupti.records": int(self.records),
            **self.paused_resource(),
        }

    def paused_resource(self) -> dict:
        """``gputrace.record.paused_*`` resource attributes (``PauseLog.resource``; none before the first
        pause)."""
        return self._pauses.resource()


#: A value no record is: ``_completed``'s "between records".
_NOTHING = object()

