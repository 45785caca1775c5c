"""CUPTI activity records (plain dicts) -> span attributes and names. Pure: no CUDA, no ``cupti`` import.

A *plain record* is a dict holding one CUPTI activity record's fields under CUPTI's own field names (as the
``cupti`` package spells them), with enum fields given by their enum member *name*, so the conversion can be
tested from committed fixtures on a machine without CUDA:

=========================  ===========================================================================================
``kind``                   fields read here
=========================  ===========================================================================================
``CONCURRENT_KERNEL``      start, end, device_id, context_id, stream_id, correlation_id, name (mangled), grid_x/y/z,
                           block_x/y/z, registers_per_thread, static_shared_memory, dynamic_shared_memory
``MEMCPY``                 start, end, device_id, context_id, stream_id, correlation_id, bytes, copy_kind ("HTOD"),
                           src_kind / dst_kind ("PAGEABLE", "PINNED", "DEVICE", ...)
``MEMSET``                 start, end, device_id, context_id, stream_id, correlation_id, bytes, memory_kind
``SYNCHRONIZATION``        start, end, context_id, stream_id, correlation_id, cuda_event_id, type ("STREAM_SYNCHRONIZE")
``RUNTIME`` / ``DRIVER``   start, end, correlation_id, name (the API function), thread_id (OS thread id), process_id
``EXTERNAL_CORRELATION``   correlation_id, external_id, external_kind
``MARKER``                 id, timestamp, flags (CUPTI_ACTIVITY_FLAG_MARKER_* bits), name, domain, thread_id
=========================  ===========================================================================================

Times are CUPTI timestamps (ns); ``offset_ns`` maps them onto the trace's epoch clock. Attribute names and
vocabularies are the GPU activity conventions of ``gputrace.activity`` (docs/trace-format.md), shared with the
Nsight Systems importer. Device spans also carry ``gputrace.gpu.start_ns``/``gpu.end_ns`` (= the span's times),
the device-time attributes every GPU span of gputrace has.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

from gputrace import activity as A

__all__ = [
    "KIND_KERNEL", "KIND_MEMCPY", "KIND_MEMSET", "KIND_SYNC", "API_KINDS", "DEVICE_KINDS",
    "memcpy_kind", "memory_kind", "sync_type", "demangle", "short_name", "kernel_names", "device_attributes",
    "sync_attributes", "span_name",
]

KIND_KERNEL = "CONCURRENT_KERNEL"
KIND_MEMCPY = "MEMCPY"
KIND_MEMSET = "MEMSET"
KIND_SYNC = "SYNCHRONIZATION"
API_KINDS = frozenset(("RUNTIME", "DRIVER"))
DEVICE_KINDS = frozenset((KIND_KERNEL, "KERNEL", KIND_MEMCPY, KIND_MEMSET))
#: CUPTI_ACTIVITY_FLAG_MARKER_* bits of a MARKER record's ``flags``.
MARKER_INSTANTANEOUS, MARKER_START, MARKER_END = 1, 2, 4
#: CUPTI's "no such stream/event" value in 32-bit id fields.
INVALID_ID = 0xFFFFFFFF

memcpy_kind = A.copy_kind
memory_kind = A.memory_kind
sync_type = A.sync_type
short_name = A.short_kernel_name


# -- kernel names -----------------------------------------------------------------------------------
_demangle_lock = threading.Lock()
_demangled: dict[str, str] = {}
_cxa: Any = None  # False: no demangler found; else the C function


def _cxa_demangle():
    """``__cxa_demangle`` from the C++ runtime (libstdc++), or False when there is none.

    Why ctypes and not a library: the Itanium demangler ships with every C++ runtime and no maintained Python
    package wraps it without a compiler; ``c++filt`` would be a process per batch."""
    global _cxa
    if _cxa is None:
        _cxa = False
        for lib in (ctypes.util.find_library("stdc++"), "libstdc++.so.6", "libc++.so.1"):
            if not lib:
                continue
            try:
                fn = ctypes.CDLL(lib).__cxa_demangle
            except (OSError, AttributeError):
                continue
            fn.restype = ctypes.c_void_p  # a malloc'ed char*: freed below
            fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            _cxa = fn
            break
    return _cxa


_free = ctypes.CDLL(None).free if hasattr(ctypes.CDLL(None), "free") else None
if _free is not None:
    _free.argtypes = [ctypes.c_void_p]


def demangle(name: str) -> str:
    """The demangled C++ name of a kernel symbol (``_Z...``); any other name is returned unchanged. Cached,
    thread-safe."""
    if not name.startswith("_Z"):
        return name
    out = _demangled.get(name)
    if out is not None:
        return out
    with _demangle_lock:
        fn = _cxa_demangle()
        out = name
        if fn and _free is not None:
            status = ctypes.c_int(0)
            p = fn(name.encode(), None, None, ctypes.byref(status))
            if p:
                try:
                    if status.value == 0:
                        out = ctypes.string_at(p).decode("utf-8", "replace")
                finally:
                    _free(p)
        if len(_demangled) < 65536:
            _demangled[name] = out
    return out


# -- attributes -------------------------------------------------------------------------------------
def _int(r: dict, key: str, default: int = 0) -> int:
    v = r.get(key)
    return int(v) if v is not None else default


#: kernel symbol as CUPTI gives it -> (demangled name, short name). A program launches a few hundred distinct
#: kernels thousands of times each; naming each span anew was a third of the exporter's time (py-spy --gil on a
#: recorded CNN step, benchmarks/RESULTS.md "record's cost on a launch-bound step"). Bounded; racy fills are
#: harmless (both threads store the same value).
_kernel_names: dict[str, tuple[str, str]] = {}
_KERNEL_NAMES_MAX = 65536


def kernel_names(symbol: str) -> tuple[str, str]:
    """(demangled, short) name of a kernel symbol; cached, thread-safe."""
    got = _kernel_names.get(symbol)
    if got is None:
        full = demangle(symbol)
        got = (full, short_name(full))
        if len(_kernel_names) >= _KERNEL_NAMES_MAX:
            _kernel_names.clear()
        _kernel_names[symbol] = got
    return got


def span_name(r: dict) -> str:
    """The span name of a device or sync record (GPU activity conventions)."""
    kind = r["kind"]
    if kind in (KIND_KERNEL, "KERNEL"):
        return kernel_names(str(r.get("name") or "kernel"))[1]
    if kind == KIND_MEMCPY:
        return A.memcpy_name(memcpy_kind(r.get("copy_kind")))
    if kind == KIND_MEMSET:
        return A.MEMSET_NAME
    return A.sync_name(sync_type(r.get("type")))


def device_attributes(r: dict, api: tuple | None, offset_ns: int) -> dict:
    """Attributes of a kernel/memcpy/memset record. ``api``: (name, start CUPTI ns, thread id) of the launching
    API call, when its record was seen."""
    kind = r["kind"]
    stream = _int(r, "stream_id")
    a: dict = {
        "gputrace.kind": "gpu",
        "gputrace.activity": "kernel" if kind in (KIND_KERNEL, "KERNEL") else kind.lower(),
        "gputrace.device": _int(r, "device_id"),
        "gputrace.lane": f"stream:{stream}",
        "gputrace.source": "cupti",
        "gputrace.gpu.start_ns": int(r["start"]) + offset_ns,
        "gputrace.gpu.end_ns": int(r["end"]) + offset_ns,
    }
    if kind in (KIND_KERNEL, "KERNEL"):
        a["cuda.kernel.name"] = kernel_names(str(r.get("name") or "kernel"))[0]
        a["cuda.grid"] = [_int(r, "grid_x", 1), _int(r, "grid_y", 1), _int(r, "grid_z", 1)]
        a["cuda.block"] = [_int(r, "block_x", 1), _int(r, "block_y", 1), _int(r, "block_z", 1)]
        a["cuda.registers_per_thread"] = _int(r, "registers_per_thread")
        a["cuda.shared_memory.static"] = _int(r, "static_shared_memory")
        a["cuda.shared_memory.dynamic"] = _int(r, "dynamic_shared_memory")
    elif kind == KIND_MEMCPY:
        a["gputrace.bytes"] = _int(r, "bytes")
        a["cuda.memcpy.kind"] = memcpy_kind(r.get("copy_kind"))
        a["cuda.memcpy.src_kind"] = memory_kind(r.get("src_kind"))
        a["cuda.memcpy.dst_kind"] = memory_kind(r.get("dst_kind"))
    else:
        a["gputrace.bytes"] = _int(r, "bytes")
        a["cuda.memset.kind"] = memory_kind(r.get("memory_kind"))
    a["cuda.stream"] = stream
    a["cuda.correlation_id"] = _int(r, "correlation_id")
    if api is not None:
        a["cuda.api"] = api[0]
        a["cuda.launch.api_start_ns"] = int(api[1]) + offset_ns
    return a


def sync_attributes(r: dict, api: tuple | None, device: int | None, thread_name: str | None) -> dict:
    """Attributes of a SYNCHRONIZATION record (host thread lane: from the API record's thread)."""
    st = sync_type(r.get("type"))
    tid = api[2] if api is not None else None
    if thread_name is None:
        thread_name = str(tid) if tid is not None else "cuda-sync"
    a: dict = {"gputrace.kind": "sync", "gputrace.activity": "sync"}
    if device is not None:
        a["gputrace.device"] = device
    a["gputrace.lane"] = f"thread:{thread_name}"
    a["gputrace.source"] = "cupti"
    a["cuda.sync.type"] = st
    stream = r.get("stream_id")
    if st in ("stream", "stream_wait_event") and stream is not None and int(stream) != INVALID_ID:
        a["cuda.sync.stream"] = int(stream)
    ev = r.get("cuda_event_id")
    if st in ("event", "stream_wait_event") and ev is not None and int(ev) != INVALID_ID:
        a["cuda.sync.event"] = int(ev)
    a["cuda.correlation_id"] = _int(r, "correlation_id")
    if api is not None:
        a["cuda.api"] = api[0]
    if tid is not None:
        a["thread.id"] = int(tid)
    return a
