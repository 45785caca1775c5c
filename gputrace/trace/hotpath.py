"""The hot path: ``phase()`` (context manager and decorator), ``start_phase()`` and per-thread buffers.

Threading contract
------------------
* ``with phase(...)`` / ``@phase(...)`` open and close on the calling thread. The open phases of a thread form
  a linked stack (``_ThreadState.cur`` -> ``Phase.up``); the innermost one is the parent of the next phase
  opened on that thread unless ``parent=`` says otherwise.
* ``current_context()`` returns an opaque token (the innermost open phase of the calling thread, or None).
  Hand it to another thread and pass it as ``parent=`` there to keep the parent across threads.
* ``start_phase(...)`` opens a phase that is *not* pushed on the thread's stack (it may end elsewhere);
  ``handle.end()`` closes it from any thread. Its parent is the caller's innermost phase or ``parent=``.
  The handle may itself be passed as ``parent=``.
* A finished phase is appended, as the ``Phase`` object itself, to the buffer of the thread that closed it.
  Buffers are plain lists bounded by ``_ROOM`` entries: past that the phase is counted in
  ``_ThreadState.dropped`` and not stored. Only the recorder's exporter thread removes entries
  (``del buf[:n]``, atomic under the GIL, so concurrent appends are never lost).
* Once every sink has taken a finished plain phase, the exporter may put it in the shared pool
  (``recycle``), from which ``phase()`` on any thread takes it again; only phases that nothing else
  references are recycled, so a phase object the program can still reach is never reused.

Why hand-written: this path runs per phase on the caller's thread with a budget of ~0.5 us; the OTel SDK
costs ~9 us per span. Here a phase costs: one object (taken from the pool of recycled phases when the
exporter has returned some, see ``recycle``), one thread-local read, two ``perf_counter_ns`` reads, two
attribute-linked stack updates and one list append (+ NVTX push/pop when a tool is attached, + the CUPTI
external id push/pop while CUDA activity is collected, + two CUDA event records when a stream is given).
Span ids, trace ids, attributes and epoch times are all derived later on the exporter thread
(``gputrace.trace.records``). Where the nanoseconds go: docs/tracer.md, "Performance".

``GPUTRACE_DISABLE=1`` (read at import) binds ``phase``/``start_phase`` to functions returning one shared no-op
object; the decorator form then returns the function unchanged (``gputrace.trace.noop_phase``).

Module layout: this module owns the globals the hot path reads without a lock and every function that reads or
rebinds them (``Phase``, the pool's ``recycle``, the control API, ``disable``), because a function reads the
globals of the module it is defined in. Its parts without such state live below it and are bound here at
import: the per-thread state record (``gputrace.trace.thread_state``) and the no-op phase
(``gputrace.trace.noop_phase``); both names stay importable from here.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
from time import perf_counter_ns as _pc
from typing import Any

from gputrace.trace import nvtx_support as _nv
from gputrace.trace.noop_phase import (
    NOOP as NOOP,
    _disabled_current_context,
    _disabled_phase,
    _disabled_start_phase,
    env_disabled as env_disabled,
)
from gputrace.trace.thread_state import _ThreadState

__all__ = ["Phase", "phase", "start_phase", "current_context", "DISABLED"]

DISABLED: bool = os.environ.get("GPUTRACE_DISABLE", "").strip().lower() not in ("", "0", "false", "no", "off")
# (read again by configure(): see disable())

# Set by the recorder (gputrace.trace.recorder) under its lock; read without a lock on the hot path.
# _ROOM is the per-thread buffer bound while recording and 0 otherwise, so the exit path tests one
# bound (``len(buf) < _ROOM``) instead of a flag and a bound; _RECORDING only decides, on the rare
# branch, whether a phase that found no room is counted as dropped. Set both (recorder, signals).
_RECORDING = False
_ROOM = 0

_NV = _nv.ENABLED
_nv_push = _nv.push_range
_nv_pop = _nv.pop_range
_nv_attrs = _nv.attributes
_nv_cache = _nv.cache
_nv_h = _nv.handle

_local = threading.local()
_states: list = []  # every _ThreadState ever created and not yet pruned by the exporter
_states_lock = threading.Lock()
_cuda: Any = None  # gputrace.trace.cuda_timing, imported on the first phase with a stream

# CUPTI external correlation (set by the recorder when it collects CUDA activity; see cupti_collect): every
# ``with`` phase gets a fresh external id ``xid``, pushed at entry and popped at exit on its thread, so CUPTI
# tags each CUDA API call inside the phase with it. ``start_phase`` handles push nothing (they may end on
# another thread, and CUPTI's stack is per thread).
_XC = False
_XKIND = 0
_xpush: Any = None  # (kind, id) -> None; bound with _XC by start_external_ids
_xpop: Any = None
_xnext = itertools.count(1).__next__
# True while a tool is attached to NVTX or once CUPTI external ids were ever pushed (it stays True after
# collection stops: phases still open must pop what they pushed). False: enter/exit take the plain path,
# which tests this one flag instead of three.
_SLOW = _NV


def _new_state() -> _ThreadState:
    st = _ThreadState()
    _local.st = st
    with _states_lock:
        _states.append(st)
    return st


def _state() -> _ThreadState:
    try:
        return _local.st
    except AttributeError:
        return _new_state()


class Phase:
    """One traced phase. Create with ``phase(...)``/``start_phase(...)``; fields are read by the exporter.

    Keyword arguments (all optional): ``device`` (GPU index), ``stream`` (an object with ``.ptr``, e.g. a CuPy
    stream: device times are taken with CUDA events on it), ``lane`` (a lane name overriding
    ``thread:NAME``), ``circuit``, ``batch``, ``bytes`` (also the NVTX payload), ``kind``
    (gpu/host/sync/pin; default from the phase vocabulary), ``parent`` (a token from
    ``current_context()`` or a handle), and any other attribute as ``key=value``.
    """

    # Slots for the fields every phase sets (fastest to create and read); a __dict__ for the rest, which
    # default to the class attributes below so the exporter reads them without catching AttributeError
    # (an unset slot raises, ~1 us per catch). stream, kw and xid are dict fields because a plain phase
    # never sets them: each slot is one more store on the caller's thread and one more reference the
    # cyclic GC visits for every buffered phase (docs/tracer.md, Performance, entry 25).
    __slots__ = ("name", "device", "nbytes", "st", "up", "t0", "t1", "__dict__")
    stream = None
    kw = None
    xid = 0
    extra: dict[str, Any] | None = None
    err = None
    errmsg = None
    rid = None
    ev0 = None
    ev1 = None
    cdev = None
    sid = None
    tid = None
    _ended = None  # None: not a start_phase handle; False: open handle; True: ended

    def __init__(self, name: str, *, device=None, bytes=None, stream=None, **kw) -> None:
        # device/bytes/stream are named parameters because the hot path needs them (NVTX category and
        # payload, CUDA events): reading attributes is cheaper than dict lookups in a **kw dict.
        self.name = name
        self.device = device
        self.nbytes = bytes
        if stream is not None:
            self.__class__ = _StreamPhase
            self.stream = stream
        if kw:
            self.kw = kw

    # -- context manager (same thread) -------------------------------------------------------------
    # A phase without a stream (this class) and one with a stream (_StreamPhase) have their own
    # enter/exit, so the plain path tests no stream; with no NVTX tool and no CUPTI (_SLOW False) it is
    # one thread-local read, the stack link, two clock reads and the append.
    def __enter__(self) -> Phase:
        try:
            st = _local.st
        except AttributeError:
            st = _new_state()
        self.st = st
        if _SLOW:
            if _NV:  # before the stack push: building the attributes may raise (bytes= not a number)
                a = _nv_cache.get((self.name, self.device, self.nbytes))
                _nv_push(a if a is not None else _nv_attrs(self.name, self.device, self.nbytes), _nv_h)
            self.up = st.cur
            st.cur = self
            if _XC:
                x = self.xid = _xnext()
                _xpush(_XKIND, x)
        else:
            self.up = st.cur
            st.cur = self
        self.t0 = _pc()
        return self

    def __exit__(self, et, ev, tb) -> None:
        # Inlined _close(): this is the common path and a call costs ~60 ns.
        self.t1 = _pc()
        st = self.st
        st.cur = self.up
        if _SLOW:
            if self.xid:
                _xpop(_XKIND)
            if _NV:
                _nv_pop(_nv_h)
        if et is not None:
            self.err = et
            self.errmsg = _message(ev)
        b = st.buf
        if len(b) < _ROOM:
            b.append(self)
        elif _RECORDING:
            st.dropped += 1

    def _close(self, et, ev) -> None:
        self.t1 = _pc()
        st = self.st
        st.cur = self.up
        if self.xid:
            _xpop(_XKIND)
        if _NV:
            _nv_pop(_nv_h)
        if et is not None:
            self.err = et
            self.errmsg = _message(ev)
        b = st.buf
        if len(b) < _ROOM:
            b.append(self)
        elif _RECORDING:
            st.dropped += 1

    # -- decorator --------------------------------------------------------------------------------
    def __call__(self, fn):
        """``@phase("name", ...)``: every call of ``fn`` runs inside a fresh phase with these arguments."""
        name, device, nbytes, stream, kw = self.name, self.device, self.nbytes, self.stream, self.kw or {}

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            with _phase(name, device=device, bytes=nbytes, stream=stream, **kw):
                return fn(*args, **kwargs)

        return traced

    # -- attributes -------------------------------------------------------------------------------
    def set(self, key: str, value) -> Phase:
        """Add or replace one span attribute. Call before the phase ends (later calls may be lost)."""
        extra = self.extra
        if extra is None:
            extra = self.extra = {}
        extra[key] = value
        return self

    # -- start/end form ---------------------------------------------------------------------------
    def _start(self) -> Phase:
        st = _state()
        self.st = st
        self.up = st.cur  # parent only; the handle is not pushed on the thread's stack
        if _NV:
            self.rid = _nv.start_range(_nv_attrs(self.name, self.device, self.nbytes), _nv_h)
        self.t0 = _pc()
        if self.stream is not None:
            try:
                _cuda_start(self)
            except BaseException:
                if _NV:
                    _nv.end_range(self.rid, _nv_h)
                raise
        self._ended = False
        return self

    def end(self, error: BaseException | None = None) -> bool:
        """Close a ``start_phase`` handle from any thread. Returns False (and does nothing) if already ended.

        ``error``: mark the span as failed with this exception's type and message.
        """
        with _states_lock:  # two threads ending the same handle must not both append it
            if self._ended is None:
                raise RuntimeError(f"end() is for start_phase() handles; {self.name!r} is a with/decorator phase")
            if self._ended:
                return False
            self._ended = True
        try:
            if self.ev0 is not None:
                _cuda.record_end(self)
        finally:
            self.t1 = _pc()
            if _NV:
                _nv.end_range(self.rid, _nv_h)
            if error is not None:
                self.err = type(error)
                self.errmsg = _message(error)
            st = _state()
            b = st.buf
            if len(b) < _ROOM:
                b.append(self)
            elif _RECORDING:
                st.dropped += 1
        return True

    def __repr__(self) -> str:
        return (
            f"Phase({self.name!r}, device={self.device!r}, bytes={self.nbytes!r}, stream={self.stream!r}, "
            f"**{self.kw!r})"
        )


class _StreamPhase(Phase):
    """A phase given ``stream=``: device times from CUDA events on that stream (``gputrace.trace.cuda_timing``).
    Same fields as ``Phase`` (``stream`` lives in the instance dict); only enter/exit differ."""

    __slots__ = ()

    def __enter__(self) -> Phase:
        try:
            st = _local.st
        except AttributeError:
            st = _new_state()
        self.st = st
        if _NV:  # before the stack push: building the attributes may raise (bytes= not a number)
            a = _nv_cache.get((self.name, self.device, self.nbytes))
            _nv_push(a if a is not None else _nv_attrs(self.name, self.device, self.nbytes), _nv_h)
        self.up = st.cur
        st.cur = self
        if _XC:
            x = self.xid = _xnext()
            _xpush(_XKIND, x)
        self.t0 = _pc()
        try:
            _cuda_start(self)
        except BaseException:
            st.cur = self.up
            if self.xid:
                _xpop(_XKIND)
            if _NV:
                _nv_pop(_nv_h)
            raise
        return self

    def __exit__(self, et, ev, tb) -> None:
        # A stream phase without events (as while CUDA activity is collected) has nothing to record at the end.
        if self.ev0 is not None:
            try:
                _cuda.record_end(self)
            finally:
                self._close(et, ev)
            return
        self._close(et, ev)


def _message(exc) -> str:
    """str(exc), never raising: a broken __str__ must not replace the user's exception."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 a broken __str__ must not replace the user's exception
        return f"<unprintable {type(exc).__name__}>"


#: (EVENTS, stream_id_hook) for gputrace.trace.cuda_timing, set by the recorder (see cuda_settings()).
_cuda_settings = (True, None)


def cuda_settings(events: bool, stream_id_hook) -> None:
    """Whether phases with a stream record CUDA events, and the CUPTI stream-id hook for their lanes. Applied
    now if CUDA timing is loaded, else when the first phase with a stream loads it (recorder only)."""
    global _cuda_settings
    _cuda_settings = (events, stream_id_hook)
    if _cuda is not None:
        _cuda.EVENTS, _cuda.stream_id_hook = _cuda_settings


def _cuda_start(p: Phase) -> None:
    global _cuda
    if _cuda is None:
        from gputrace.trace import cuda_timing

        cuda_timing.EVENTS, cuda_timing.stream_id_hook = _cuda_settings
        _cuda = cuda_timing
    _cuda.record_start(p, p.stream, p.device)


_new = object.__new__

# Recycled plain phases (``Phase`` exactly, no stream). The exporter returns a finished phase here once
# every sink has taken it and nothing else references it (``recycle``); ``phase()`` takes one before
# allocating. Why: a buffered phase is a fresh GC-tracked object that survives the young collections
# until the exporter takes it, and those collections walking it cost the caller ~150-250 ns per phase
# on the CI box; a recycled object sits in the oldest generation and allocates nothing. ``list.pop`` and
# ``list.extend`` are atomic under the GIL, so callers on any thread and the exporter share one list.
_pool: list = []
_pool_pop = _pool.pop
POOL_MAX = 1 << 16  # at ~160 bytes a phase (object + emptied dict), at most ~10 MB kept for reuse
_refcount = sys.getrefcount


def recycle(phases: list) -> int:
    """Exporter thread, after every sink has taken ``phases``: put the plain phases that nothing else
    references (not the user, not a child's ``up``, not a token or handle) in the pool; returns how many.

    A phase is reused only when its reference count shows that this call's list, loop variable and the
    count's own argument are its only references, so no one can observe the reuse. Children come before
    their parents in a thread's buffer; clearing a recycled child's ``up`` drops its reference to the
    parent, which may then be recycled in the same pass."""
    room = POOL_MAX - len(_pool)
    if room <= 0:
        return 0
    out: list = []
    keep = out.append
    rc = _refcount
    cls = Phase
    base = _UNREFERENCED
    for p in phases:
        if type(p) is cls and rc(p) == base:  # only `phases`, `p` and getrefcount's argument hold it
            p.__dict__.clear()  # ids, set(), error, handle state: back to the class defaults
            p.up = None  # (st stays: overwritten at the next enter)
            keep(p)
    if len(out) > room:
        del out[room:]
    _pool.extend(out)
    return len(out)


def _count_in_loop(objs: list) -> list:
    # The same loop shape as recycle()'s: what getrefcount reads there for an object only `objs` holds.
    out = []
    rc = _refcount
    for p in objs:
        out.append(rc(p))
    return out


# The count recycle() sees for a phase nothing else references (3 on CPython 3.10-3.13: the list, the loop
# variable, the argument), measured rather than assumed, so an interpreter that counts differently (a
# borrowed argument, say) recycles nothing rather than something still referenced. No pool at all where
# reference counts do not mean exclusive ownership (the free-threaded build).
_UNREFERENCED = _count_in_loop([object()])[0]
if not getattr(sys, "_is_gil_enabled", lambda: True)():
    POOL_MAX = 0


def clear_pool() -> None:
    """Drop the recycled phases (recorder shutdown: give the memory back)."""
    del _pool[:]


# -- control API (the recorder and the signal handler; never the caller's hot path) -------------------
# The globals above are read without a lock on the hot path; these functions are the only writers outside
# this module. Each documents the order it writes in, which is what keeps a concurrently ending phase safe.


def start_recording(room: int) -> None:
    """Phases ending from now on are buffered, up to ``room`` per thread (past it they are counted as dropped).

    Room first, flag second (``stop_recording`` the other way round): a phase ending in between is then
    appended, never counted as dropped."""
    global _ROOM, _RECORDING
    _ROOM = room
    _RECORDING = room > 0


def stop_recording() -> bool:
    """Phases ending from now on are neither buffered nor counted. Returns whether recording was on."""
    global _ROOM, _RECORDING
    was = _RECORDING
    _RECORDING = False
    _ROOM = 0
    return was


def recording() -> bool:
    """Whether phases that end now are buffered."""
    return _RECORDING


def start_external_ids(kind: int, push, pop) -> None:
    """Every ``with`` phase entered from now on pushes a fresh external correlation id with ``push(kind, id)``
    and pops it with ``pop(kind)`` at exit (CUPTI, ``cupti_collect``). The slow path stays on after
    ``stop_external_ids``: phases still open pop what they pushed with the ``pop`` bound here."""
    global _XKIND, _xpush, _xpop, _XC, _SLOW
    _XKIND = kind
    _xpush = push
    _xpop = pop
    _XC = True
    _SLOW = True


def stop_external_ids() -> bool:
    """Phases entered from now on push no external id. Returns whether they did until now."""
    global _XC
    was = _XC
    _XC = False
    return was


def external_ids() -> bool:
    """Whether phases entered now push an external correlation id."""
    return _XC


def cuda_timing_loaded() -> bool:
    """Whether any phase with a stream ran yet (CUDA timing is imported at the first one)."""
    return _cuda is not None


def thread_states(timeout: float = -1) -> list[_ThreadState] | None:
    """A snapshot of every thread's state (buffer, open-phase stack, drop count, name, OS id).

    ``timeout`` as ``Lock.acquire``'s: None when the registry lock was not taken in time (a signal handler
    must not wait on a lock the interrupted thread may hold)."""
    if not _states_lock.acquire(timeout=timeout):
        return None
    try:
        return list(_states)
    finally:
        _states_lock.release()


def dropped_total() -> int:
    """Phases dropped so far by the threads still registered (``prune_states`` hands back the rest)."""
    with _states_lock:
        return sum(st.dropped for st in _states)


def prune_states(dead: list[_ThreadState]) -> int:
    """Forget the states of ended threads whose buffers are empty; returns the drops they had counted."""
    n = 0
    with _states_lock:
        for st in dead:
            if not st.buf and st in _states:
                _states.remove(st)
                n += st.dropped
    return n


def now_ns() -> int:
    """The hot path's clock (``perf_counter_ns``): what ``Phase.t0``/``t1`` hold."""
    return _pc()


def reset_after_fork() -> None:
    """In a forked child: recording off, no external ids (CUPTI's state is the parent's), fresh locks and no
    thread state (the parent's threads do not exist here; the forking thread's buffer held the parent's
    phases). Phases still emit NVTX."""
    global _RECORDING, _ROOM, _XC, _states_lock
    _RECORDING = False
    _ROOM = 0
    _XC = False
    _states_lock = threading.Lock()
    _states[:] = []
    try:
        del _local.st
    except AttributeError:
        pass


def _phase(name: str, *, device=None, bytes=None, stream=None, **kw) -> Phase:
    """``phase(name, *, device=None, bytes=None, stream=None, lane=None, circuit=None, batch=None,
    kind=None, parent=None, **attrs)``: a new phase, to use as ``with phase(...)`` or ``@phase(...)``.

    A plain function rather than the class: calling a class with keyword arguments makes CPython pack
    them into a dict for ``__init__`` (type_call -> slot_tp_init); a function receives them directly.
    Measured: 430 -> 267 ns (min) per construction with two keyword arguments.
    """
    if stream is None:
        if _pool:  # (an empty pool must not cost a caught IndexError per phase: ~300 ns)
            try:
                p = _pool_pop()
            except IndexError:  # another thread took the last one since the test
                p = _new(Phase)
        else:
            p = _new(Phase)
    else:
        p = _new(_StreamPhase)
        p.stream = stream
    p.name = name
    p.device = device
    p.nbytes = bytes
    if kw:  # no empty dict kept: one GC-tracked object per buffered phase instead of two
        p.kw = kw
    return p


def start_phase(name: str, **kw) -> Phase:
    """Open a phase now and return its handle; call ``handle.end()`` (from any thread) to close it."""
    return _phase(name, **kw)._start()


def current_context():
    """Opaque token for the calling thread's innermost open phase (None outside any phase).

    Pass it as ``parent=`` to a phase on another thread to keep the parent/child relation.
    """
    try:
        return _local.st.cur
    except AttributeError:
        return None


def disable() -> None:
    """Switch to the no-op phase from now on (what GPUTRACE_DISABLE=1 at import does).

    Rebinds ``phase``/``start_phase``/``current_context`` here, in ``gputrace.trace`` and in ``gputrace``;
    references taken earlier (``from gputrace import phase``) keep the real phase, which still emits
    NVTX but records nothing while recording is off. Called by ``configure()`` when GPUTRACE_DISABLE is set.
    """
    import sys

    global DISABLED, phase, start_phase, current_context
    DISABLED = True
    phase, start_phase, current_context = _disabled_phase, _disabled_start_phase, _disabled_current_context
    for modname in ("gputrace.trace", "gputrace"):
        mod = sys.modules.get(modname)
        if mod is None:
            continue
        for name, fn in (("phase", phase), ("start_phase", start_phase), ("current_context", current_context)):
            if name in vars(mod):
                setattr(mod, name, fn)


if DISABLED:
    phase = _disabled_phase
    start_phase = _disabled_start_phase  # noqa: F811
    current_context = _disabled_current_context  # noqa: F811
else:
    phase = _phase
