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
* ``collect()`` (the recorder's exporter thread) asks CUPTI to hand over completed buffers, re-measures the
  clock offset and swaps the list out. Nothing here runs on a caller's thread except ``push``/``pop`` of the
  external correlation id, which the hot path calls directly (``activity_push_external_correlation_id``).

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
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from gputrace.trace import clock

__all__ = ["CuptiCollector", "CuptiUnavailable", "available", "library_path"]


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot collect here (no cupti-python, no CUPTI library, no CUDA driver or GPU)."""


def available() -> str | None:
    """None when CUPTI can be imported, else a one-line reason."""
    try:
        import cupti  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or the library failing to load (OSError, RuntimeError)
        return f"cupti-python not usable: {type(e).__name__}: {e}"
    return None


def library_path() -> str | None:
    """Path of the CUPTI shared library (for ``NVTX_INJECTION64_PATH``), or None. Loads no CUDA driver."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("cupti").abs_path)
    except Exception:  # noqa: BLE001 any failure: fall back to the glob below
        pass
    import glob
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        for pat in ("**/lib/libcupti.so*", "**/lib64/libcupti.so*"):
            hits = sorted(glob.glob(f"{root}/{pat}", recursive=True))
            if hits:
                return hits[0]
    return None


# API calls kept (by callback-name substring): what launches device work, copies, sets or waits.
_API_KEEP = ("Launch", "Memcpy", "Memset", "Synchronize", "StreamWaitEvent", "GraphLaunch")
_DEVICE_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id")
_KERNEL_FIELDS = _DEVICE_FIELDS + ("name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                   "registers_per_thread", "static_shared_memory", "dynamic_shared_memory")
_MEMCPY_FIELDS = _DEVICE_FIELDS + ("bytes",)
_MEMSET_FIELDS = _DEVICE_FIELDS + ("bytes",)
_SYNC_FIELDS = ("start", "end", "context_id", "stream_id", "correlation_id", "cuda_event_id")
_API_FIELDS = ("start", "end", "correlation_id", "cbid", "thread_id", "process_id")
#: Paused intervals kept for the resource attribute ``gputrace.record.paused_ns`` (the first ones; all are
#: counted in ``gputrace.record.paused_count`` / ``paused_total_ns`` and each still becomes a span).
MAX_PAUSED_KEPT = 1024


class CuptiCollector:
    """One CUPTI activity session per process (CUPTI's activity API is process-wide).

    ``markers``: also collect NVTX markers (needs ``NVTX_INJECTION64_PATH`` pointing at the CUPTI library
    before the program's first NVTX call; ``gputrace record`` sets it). ``buffer_bytes``: size of each buffer
    handed to CUPTI. ``max_pending``: records held between two ``collect`` calls before new ones are dropped.
    """

    def __init__(self, *, markers: bool = False, buffer_bytes: int = 8 << 20, max_pending: int = 1 << 21) -> None:
        self.markers = markers
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
        self._api_names: dict = {}
        #: record kind (int, as CUPTI gives it) -> converter (record -> plain dict), or False for a kind not
        #: used; built from the enum-name maps on the first buffer (``converters``).
        self._conv: dict | None = None
        self.xkind = 0  # ExternalCorrelationKind.CUSTOM0 as an int (set by start)
        self.push = self.pop = None
        # -- pause/resume (any thread; serialised by _toggle) --
        # (re-entrant: a SIGTERM handler's shutdown can run stop() on a thread inside pause or resume)
        self._toggle = threading.RLock()
        #: (trace epoch ns, thread name) of the pause in force, or None while collecting.
        self._paused_at: tuple[int, str] | None = None
        #: (start ns, end ns, thread name) of the first MAX_PAUSED_KEPT pauses that ended, oldest first.
        self.paused: list[tuple[int, int, str]] = []
        self.paused_count = 0
        self.paused_total_ns = 0
        self.toggle_errors: list[str] = []
        self._paused_new: list[tuple[int, int, str]] = []  # ended, not yet taken by ``take_paused``

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
        self.version = _version()
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
        AK = cupti.ActivityKind
        self._kind_names = {int(m): m.name for m in AK}
        self._memcpy_names = {int(m): m.name for m in cupti.ActivityMemcpyKind}
        self._mem_names = {int(m): m.name for m in cupti.ActivityMemoryKind}
        self._sync_names = {int(m): m.name for m in cupti.ActivitySynchronizationType}
        self._ext_names = {int(m): m.name for m in cupti.ExternalCorrelationKind}
        self._api_domain = {int(AK.RUNTIME): cupti.CallbackDomain.RUNTIME_API,
                            int(AK.DRIVER): cupti.CallbackDomain.DRIVER_API}
        self._conv = None

    def _restrict_api(self, cupti, report: bool = True) -> None:
        """Switch off the API calls that neither launch, copy, set nor wait (fewer records, less overhead).
        Best effort: a CUPTI without per-callback control keeps every API record."""
        for _dom, enum_name, fn_name in ((cupti.CallbackDomain.RUNTIME_API, "RuntimeApiTraceCbid",
                                         "activity_enable_runtime_api"),
                                        (cupti.CallbackDomain.DRIVER_API, "DriverApiTraceCbid",
                                         "activity_enable_driver_api")):
            cbids = getattr(cupti, enum_name, None)
            enable = getattr(cupti, fn_name, None)
            if cbids is None or enable is None:
                continue
            failed = 0
            for m in cbids:
                name = m.name
                if name.endswith(("INVALID", "SIZE", "FORCE_INT")):
                    continue
                try:  # one at a time: CUPTI refuses ids it does not know (reserved, removed calls)
                    enable(int(m), 1 if any(s in name for s in _API_KEEP) else 0)
                except Exception:  # noqa: BLE001 counted and logged below
                    failed += 1
            if failed and report:
                self.errors.append(f"{fn_name}: {failed} callback ids refused")

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
            if self._paused_at is not None:
                self._end_pause(clock.now_ns())
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
            if self._paused_at is not None:
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
            self._paused_at = (t, threading.current_thread().name)
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
            if self._paused_at is None:
                return True
            api = False
            for k in self._kinds:
                try:
                    cupti.activity_enable(k)
                except Exception as e:  # noqa: BLE001 recorded in errors
                    self._toggle_error(f"resume: enable {k}: {type(e).__name__}: {e}")
                    continue
                api = api or int(k) in getattr(self, "_api_domain", {})
            if api:  # (whether enabling the API kinds resets CUPTI's per-call switches: set them again)
                try:
                    self._restrict_api(cupti, report=False)
                except Exception as e:  # noqa: BLE001 recorded in errors
                    self._toggle_error(f"resume: restrict API: {type(e).__name__}: {e}")
            self._end_pause(clock.now_ns())
            return True

    @property
    def is_paused(self) -> bool:
        return self._paused_at is not None

    def take_paused(self) -> list[tuple[int, int, str]]:
        """(start ns, end ns, thread name) of the pauses that ended since the last call (exporter thread)."""
        with self._toggle:
            out, self._paused_new = self._paused_new, []
        return out

    def _end_pause(self, t_end: int) -> None:  # (holding _toggle)
        assert self._paused_at is not None
        t0, name = self._paused_at
        self._paused_at = None
        iv = (t0, max(t0, t_end), name)
        self.paused_count += 1
        self.paused_total_ns += iv[1] - iv[0]
        if len(self.paused) < MAX_PAUSED_KEPT:
            self.paused.append(iv)
        self._paused_new.append(iv)

    def _toggle_error(self, msg: str) -> None:
        if len(self.toggle_errors) < 20:
            self.toggle_errors.append(msg)
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
        """Records completed since the last call (exporter thread). ``force`` also hands over the records of
        buffers not yet full (CUPTI's forced flush)."""
        cupti = self._cupti
        if cupti is None:
            return self._swap()
        try:
            cupti.activity_flush_all(1 if force else 0)
        except Exception as e:  # noqa: BLE001 recorded in self.errors
            self.errors.append(f"flush: {e}")
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
        self.buffers += 1
        table = self._conv if self._conv is not None else self.converters()
        get = table.get
        out: list = []
        app = out.append
        it = iter(activities)
        a: Any = _NOTHING
        while True:
            try:
                for a in it:
                    f = get(a.kind)
                    if f is None:
                        f = self._resolve(a.kind)
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
        """The per-kind converters (int kind -> function of one record returning its plain dict; False for
        kinds not used), built from the enum-name maps. Each gives exactly the dict ``_plain`` gives."""
        table: dict = {}
        for k, name in self._kind_names.items():
            table[k] = self._converter(k, name) or False
        self._conv = table
        return table

    def _resolve(self, kind) -> Any:
        """Converter of a kind value not in the table yet (an enum member hashing apart from its int, or a
        kind CUPTI's enum does not name): looked up by ``int``, remembered. Raises like ``int(kind)``."""
        table = self._conv if self._conv is not None else self.converters()
        f = table.get(int(kind))
        if f is None:
            f = False  # (a kind the enum does not name: not used, as _plain)
        table[kind] = f
        return f

    def _converter(self, k: int, kind: str) -> Callable[[Any], dict] | None:
        if kind == "CONCURRENT_KERNEL":
            return _kernel
        if kind == "KERNEL":
            return _kernel_legacy
        if kind == "MEMCPY":
            return _memcpy_converter(self._memcpy_names, self._mem_names)
        if kind == "MEMSET":
            return _memset_converter(self._mem_names)
        if kind == "SYNCHRONIZATION":
            return _sync_converter(self._sync_names)
        if kind in ("RUNTIME", "DRIVER"):
            return _api_converter(k, kind, self._api_names, self._api_name)
        if kind == "EXTERNAL_CORRELATION":
            return _external_converter(self._ext_names)
        if kind == "MARKER":
            return _marker
        return None

    def _plain(self, a) -> dict | None:
        """One CUPTI record object -> plain dict (``cupti_spans``' format), or None for kinds not used.

        The reference conversion, one record at a time: ``_completed`` uses the per-kind ``converters``
        (cheaper per record: see there); tests and ``benchmarks/bench_cupti_convert.py`` hold the two equal."""
        kind = self._kind_names.get(int(a.kind), str(a.kind))
        if kind in ("CONCURRENT_KERNEL", "KERNEL"):
            r = {f: getattr(a, f) for f in _KERNEL_FIELDS}
        elif kind == "MEMCPY":
            r = {f: getattr(a, f) for f in _MEMCPY_FIELDS}
            r["copy_kind"] = self._memcpy_names.get(int(a.copy_kind), "UNKNOWN")
            r["src_kind"] = self._mem_names.get(int(a.src_kind), "UNKNOWN")
            r["dst_kind"] = self._mem_names.get(int(a.dst_kind), "UNKNOWN")
        elif kind == "MEMSET":
            r = {f: getattr(a, f) for f in _MEMSET_FIELDS}
            r["memory_kind"] = self._mem_names.get(int(a.memory_kind), "UNKNOWN")
        elif kind == "SYNCHRONIZATION":
            r = {f: getattr(a, f) for f in _SYNC_FIELDS}
            r["type"] = self._sync_names.get(int(a.type), "UNKNOWN")
        elif kind in ("RUNTIME", "DRIVER"):
            r = {f: getattr(a, f) for f in _API_FIELDS}
            r["name"] = self._api_name(int(a.kind), int(a.cbid))
        elif kind == "EXTERNAL_CORRELATION":
            r = {"correlation_id": a.correlation_id, "external_id": a.external_id,
                 "external_kind": self._ext_names.get(int(a.external_kind), "UNKNOWN")}
        elif kind == "MARKER":
            try:
                thread = a.object_id.pt.thread_id
            except Exception:  # noqa: BLE001 a record without a thread id keeps thread None
                thread = None
            r = {"id": a.id, "timestamp": a.timestamp, "flags": int(a.flags_), "name": a.name or "",
                 "domain": a.domain or "", "thread_id": thread}
        else:
            return None
        r["kind"] = kind
        return r

    def _api_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        n = self._api_names.get(key)
        if n is None:
            try:
                n = str(self._cupti.get_callback_name(self._api_domain[kind], cbid))
            except Exception:  # noqa: BLE001 an unnamed call keeps its id as name
                n = f"cbid {cbid}"
            n = n.split("_v", 1)[0] if "_v" in n and n.rsplit("_v", 1)[-1].isdigit() else n
            self._api_names[key] = n
        return n

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
        """``gputrace.record.paused_*`` resource attributes (none before the first pause): count, total ns,
        and the intervals as a flat list ``[start0, end0, start1, end1, ...]`` of trace epoch ns (the first
        MAX_PAUSED_KEPT), plus ``gputrace.record.pause_errors`` when a toggle failed."""
        if not self.paused_count and self._paused_at is None and not self.toggle_errors:
            return {}
        out: dict = {
            "gputrace.record.paused_count": int(self.paused_count),
            "gputrace.record.paused_total_ns": int(self.paused_total_ns),
            "gputrace.record.paused_ns": [int(t) for iv in self.paused for t in iv[:2]],
        }
        if self.toggle_errors:
            out["gputrace.record.pause_errors"] = list(self.toggle_errors)
        return out


#: A value no record is: ``_completed``'s "between records".
_NOTHING = object()


# The converters below spell each kind's fields out in a dict display, reading attributes directly: on
# CPython 3.11 that builds a 17-field kernel dict in ~0.33 us, where ``{f: getattr(a, f) for f in FIELDS}``
# takes ~0.73 us and ``dict(zip(FIELDS, attrgetter(*FIELDS)(a)))`` ~0.74 us (benchmarks/RESULTS.md, issue 24).
# Keys and order are ``_plain``'s; tests/unit/test_cupti_collect.py holds every kind equal to it.


def _kernel(a) -> dict:
    return {"start": a.start, "end": a.end, "device_id": a.device_id, "context_id": a.context_id,
            "stream_id": a.stream_id, "correlation_id": a.correlation_id, "name": a.name, "grid_x": a.grid_x,
            "grid_y": a.grid_y, "grid_z": a.grid_z, "block_x": a.block_x, "block_y": a.block_y,
            "block_z": a.block_z, "registers_per_thread": a.registers_per_thread,
            "static_shared_memory": a.static_shared_memory, "dynamic_shared_memory": a.dynamic_shared_memory,
            "kind": "CONCURRENT_KERNEL"}


def _kernel_legacy(a) -> dict:  # (CUPTI's older, serialising KERNEL kind: same fields)
    r = _kernel(a)
    r["kind"] = "KERNEL"
    return r


def _memcpy_converter(copy_names: dict, mem_names: dict) -> Callable[[Any], dict]:
    copy = copy_names.get
    mem = mem_names.get

    def conv(a) -> dict:
        return {"start": a.start, "end": a.end, "device_id": a.device_id, "context_id": a.context_id,
                "stream_id": a.stream_id, "correlation_id": a.correlation_id, "bytes": a.bytes,
                "copy_kind": copy(int(a.copy_kind), "UNKNOWN"), "src_kind": mem(int(a.src_kind), "UNKNOWN"),
                "dst_kind": mem(int(a.dst_kind), "UNKNOWN"), "kind": "MEMCPY"}

    return conv


def _memset_converter(mem_names: dict) -> Callable[[Any], dict]:
    mem = mem_names.get

    def conv(a) -> dict:
        return {"start": a.start, "end": a.end, "device_id": a.device_id, "context_id": a.context_id,
                "stream_id": a.stream_id, "correlation_id": a.correlation_id, "bytes": a.bytes,
                "memory_kind": mem(int(a.memory_kind), "UNKNOWN"), "kind": "MEMSET"}

    return conv


def _sync_converter(sync_names: dict) -> Callable[[Any], dict]:
    sync = sync_names.get

    def conv(a) -> dict:
        return {"start": a.start, "end": a.end, "context_id": a.context_id, "stream_id": a.stream_id,
                "correlation_id": a.correlation_id, "cuda_event_id": a.cuda_event_id,
                "type": sync(int(a.type), "UNKNOWN"), "kind": "SYNCHRONIZATION"}

    return conv


def _api_converter(k: int, kind: str, cache: dict, api_name: Callable[[int, int], str]) -> Callable[[Any], dict]:
    """Runtime/driver API records; ``cache`` is the collector's (kind, cbid) -> name map ``api_name`` fills."""
    known = cache.get

    def conv(a) -> dict:
        cbid = a.cbid
        r = {"start": a.start, "end": a.end, "correlation_id": a.correlation_id, "cbid": cbid,
             "thread_id": a.thread_id, "process_id": a.process_id}
        key = (k, int(cbid))
        r["name"] = known(key) or api_name(*key)
        r["kind"] = kind
        return r

    return conv


def _external_converter(ext_names: dict) -> Callable[[Any], dict]:
    ext = ext_names.get

    def conv(a) -> dict:
        return {"correlation_id": a.correlation_id, "external_id": a.external_id,
                "external_kind": ext(int(a.external_kind), "UNKNOWN"), "kind": "EXTERNAL_CORRELATION"}

    return conv


def _marker(a) -> dict:
    try:
        thread = a.object_id.pt.thread_id
    except Exception:  # noqa: BLE001 a record without a thread id keeps thread None
        thread = None
    return {"id": a.id, "timestamp": a.timestamp, "flags": int(a.flags_), "name": a.name or "",
            "domain": a.domain or "", "thread_id": thread, "kind": "MARKER"}


def _version() -> str:
    from importlib import metadata

    parts = []
    for dist in ("cupti-python", "nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return "; ".join(parts) or "unknown"
