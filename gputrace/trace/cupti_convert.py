"""CUPTI activity records -> plain dicts (``cupti_spans``' format): the per-kind converters and the reference
conversion, for ``cupti_collect.CuptiCollector``.

``RecordConverter`` holds the enum-value -> member-name maps of the ``cupti`` module (or of a stand-in with the
same enums: tests, ``benchmarks/bench_cupti_convert.py``), the (kind, cbid) -> API call name cache, and the
converter table ``converters`` builds from them: int kind -> function of one record returning its dict, or
False for a kind not used. ``plain`` is the reference conversion, one record at a time; every converter gives
exactly the dict ``plain`` gives (tests/unit/test_cupti_collect.py holds them equal).

Threads: the converters run on CUPTI's thread (``CuptiCollector._completed``) or on a thread flushing CUPTI;
``load_names`` runs before collection starts (and starts the table afresh). Nothing here locks: between two
``load_names`` the table and the API name cache only grow, and two threads racing on one entry write the same
value. Imports no ``cupti``: the collector hands it the enums and a way to name API calls.

Raises: a converter or ``plain`` raises whatever reading a record's attribute raises (the collector counts
the record as dropped); ``api_name`` never raises (an unnamed call is named ``cbid N``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RecordConverter"]

_DEVICE_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id")
_KERNEL_FIELDS = _DEVICE_FIELDS + ("name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                   "registers_per_thread", "static_shared_memory", "dynamic_shared_memory")
_MEMCPY_FIELDS = _DEVICE_FIELDS + ("bytes",)
_MEMSET_FIELDS = _DEVICE_FIELDS + ("bytes",)
_SYNC_FIELDS = ("start", "end", "context_id", "stream_id", "correlation_id", "cuda_event_id")
_API_FIELDS = ("start", "end", "correlation_id", "cbid", "thread_id", "process_id")


class RecordConverter:
    """Record conversion for one collector. ``callback_name(domain, cbid)``: CUPTI's name of an API call
    (``cupti.get_callback_name`` of the collector's module at call time); called once per (kind, cbid), its
    failures caught."""

    def __init__(self, callback_name: Callable[[Any, int], Any]) -> None:
        self._callback_name = callback_name
        self._kind_names: dict = {}
        self._memcpy_names: dict = {}
        self._mem_names: dict = {}
        self._sync_names: dict = {}
        self._ext_names: dict = {}
        self._api_domain: dict = {}
        self._api_names: dict = {}
        #: record kind (int, as CUPTI gives it) -> converter (record -> plain dict), or False for a kind not
        #: used; built from the enum-name maps on the first buffer (``converters``).
        self._conv: dict | None = None

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

    @property
    def api_kinds(self) -> dict:
        """int kind -> callback domain of the API record kinds (RUNTIME, DRIVER); empty before ``load_names``."""
        return self._api_domain

    def table(self) -> dict:
        """The converter table, built on first use (``converters``). Once per buffer on CUPTI's thread."""
        return self._conv if self._conv is not None else self.converters()

    def converters(self) -> dict:
        """The per-kind converters (int kind -> function of one record returning its plain dict; False for
        kinds not used), built from the enum-name maps. Each gives exactly the dict ``plain`` gives."""
        table: dict = {}
        for k, name in self._kind_names.items():
            table[k] = self._converter(k, name) or False
        self._conv = table
        return table

    def resolve(self, kind) -> Any:
        """Converter of a kind value not in the table yet (an enum member hashing apart from its int, or a
        kind CUPTI's enum does not name): looked up by ``int``, remembered. Raises like ``int(kind)``."""
        table = self._conv if self._conv is not None else self.converters()
        f = table.get(int(kind))
        if f is None:
            f = False  # (a kind the enum does not name: not used, as plain)
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
            return _api_converter(k, kind, self._api_names, self.api_name)
        if kind == "EXTERNAL_CORRELATION":
            return _external_converter(self._ext_names)
        if kind == "MARKER":
            return _marker
        return None

    def plain(self, a) -> dict | None:
        """One CUPTI record object -> plain dict (``cupti_spans``' format), or None for kinds not used.

        The reference conversion, one record at a time: ``CuptiCollector._completed`` uses the per-kind
        ``converters`` (cheaper per record: see below); tests and ``benchmarks/bench_cupti_convert.py`` hold the
        two equal."""
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
            r["name"] = self.api_name(int(a.kind), int(a.cbid))
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

    def api_name(self, kind: int, cbid: int) -> str:
        """Name of API call ``cbid`` of record kind ``kind`` (RUNTIME, DRIVER), its ``_vNNNN`` suffix cut."""
        key = (kind, cbid)
        n = self._api_names.get(key)
        if n is None:
            try:
                n = str(self._callback_name(self._api_domain[kind], cbid))
            except Exception:  # noqa: BLE001 an unnamed call keeps its id as name
                n = f"cbid {cbid}"
            n = n.split("_v", 1)[0] if "_v" in n and n.rsplit("_v", 1)[-1].isdigit() else n
            self._api_names[key] = n
        return n


# The converters below spell each kind's fields out in a dict display, reading attributes directly: on
# CPython 3.11 that builds a 17-field kernel dict in ~0.33 us, where ``{f: getattr(a, f) for f in FIELDS}``
# takes ~0.73 us and ``dict(zip(FIELDS, attrgetter(*FIELDS)(a)))`` ~0.74 us (benchmarks/RESULTS.md, issue 24).
# Keys and order are ``plain``'s; tests/unit/test_cupti_collect.py holds every kind equal to it.


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

