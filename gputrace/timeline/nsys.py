"""Nsight Systems SQLite export (``nsys export --type sqlite``) read into a Timeline.

What is read (tables are optional; a report has the ones its ``-t`` options collected):

* ``NVTX_EVENTS`` push/pop and start/end ranges, names from ``text`` or ``textId`` -> ``StringIds``,
  domain names from the domain-create rows, category names (``gpu N`` for gputrace ranges sets the
  device), the integer payload (gputrace's ``bytes``; whichever of ``uint64Value``/``int64Value``/
  ``uint32Value``/``int32Value`` holds it) and the ARGB colour. Event type ids are resolved
  through ``ENUM_NSYS_EVENT_TYPE`` when the report has it; older reports without the table use the
  ids those versions documented (59/60 ranges, 75 domain create, 33 category).
* ``CUPTI_ACTIVITY_KIND_RUNTIME`` CUDA API calls (``nameId`` -> ``StringIds``) on host-thread lanes.
* ``CUPTI_ACTIVITY_KIND_KERNEL`` kernels (``shortName``/``demangledName`` -> ``StringIds``) on the lane
  ``stream:<streamId>`` of GPU ``deviceId``, with grid, block, registers and shared memory as attributes.
* ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET`` on the same GPU stream lanes; the copy direction and
  the source/destination memory kinds are the report's own ``ENUM_CUDA_MEMCPY_OPER`` /
  ``ENUM_CUDA_MEM_KIND`` names (never hard-coded ids), normalised to ``HtoD`` / ``PAGEABLE`` / ...
* ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` syncs (type from ``ENUM_CUPTI_SYNC_TYPE``) on the lane of the
  thread whose synchronising API call they belong to (that call then has kind ``host``).

Kernels, copies, memsets and syncs follow gputrace's GPU activity conventions (:mod:`gputrace.activity`,
docs/trace-format.md): ``gputrace.activity``, ``gputrace.source = "nsys"``, ``cuda.stream``,
``cuda.correlation_id``, ``cuda.api`` and ``cuda.launch.api_start_ns`` (the launching call's start), ...

Lanes and parents: host threads come from ``globalTid`` (pid = bits 24..47, tid = bits 0..23) named
from ``ThreadNames`` (threads sharing a name get ``(tid)`` appended, except the main thread); NVTX ranges
and API calls nest by time containment per thread (of ranges that start at the same instant the longer
is the parent; an NVTX range wins a tie with an API call). A
kernel, copy or memset is linked through its ``correlationId`` (scoped by process) to the API call
that launched it, and its parent is the innermost NVTX range around that call.

Times: nsys stores nanoseconds since the session start; ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``
is added where present, so rows land on the epoch clock gputrace uses. Without it, times stay
session-relative and each resource says so (``nsys.clock = "session"``).

``read_nsys`` opens the file read-only; errors name the file and table. Not thread-safe per call
(one sqlite connection), but calls on different threads are independent. File access (tables, enum
tables, strings) lives in :mod:`gputrace.timeline.nsys_sqlite`; ``NsysFormatError`` and
``is_nsys_sqlite`` are re-exported here.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from pathlib import Path

import numpy as np

from gputrace import activity as A
from gputrace.phases import PHASES, phase_kind
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.nesting import nest_parents
from gputrace.timeline.nsys_sqlite import (
    NsysFormatError,
    NsysReport,
    is_nsys_sqlite,
    open_report,
    report_host_name,
    required_int,
    session_start,
)
from gputrace.timeline.row_attrs import RowAttrs

__all__ = ["NsysFormatError", "read_nsys", "is_nsys_sqlite"]

#: Event type ids of reports that predate ENUM_NSYS_EVENT_TYPE (nsys 2020-2021 exporter docs).
_LEGACY_EVENT_TYPES = {"NvtxCategory": 33, "NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
_SYNC_API = re.compile(r"Synchronize|StreamWaitEvent")
_PIN_API = {"cudaHostRegister", "cudaHostUnregister", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost"}
_PID_MASK = 0xFFFFFFFFFF000000  # globalTid -> globalPid, as nsys's own reports join them
_INVALID = {None, 0xFFFFFFFF, -1}  # CUPTI_SYNCHRONIZATION_INVALID_VALUE: stream/event not applicable
_SOURCE = {A.SOURCE: "nsys"}
_CORR_KEYS = (A.CORRELATION,)  # per-row attribute keys of device rows (one tuple shared by all rows)
_LAUNCH_KEYS = (A.CORRELATION, A.LAUNCH_API_START)


class _Rows:
    """Column lists for the rows being built (appended per record, turned into numpy once)."""

    def __init__(self) -> None:
        # array('q'): 8 bytes a value where a list of ints costs ~36 (reports reach millions of rows).
        self.start, self.end, self.nbytes = array("q"), array("q"), array("q")
        self.gpu, self.kind, self.status, self.tie = array("b"), array("b"), array("b"), array("b")
        self.lane, self.phase, self.device = array("i"), array("i"), array("i")
        self.proc = array("q")  # globalPid
        self.thread = array("q")  # globalTid of host rows (nesting is per OS thread), -1 on GPUs
        # tie: 0 NVTX, 1 API call, 2 device activity
        self.attrs: dict[int, dict] = {}
        self.lanes: list[Lane] = []
        self.lane_ix: dict[Lane, int] = {}
        self.phases: list[str] = []
        self.phase_ix: dict[str, int] = {}
        self.tables: list[tuple[int, str]] = [(0, "?")]  # (first row, table) in the order read

    def begin(self, table: str) -> None:
        self.tables.append((len(self.start), table))

    def add(self, start, end, lane: Lane, phase: str, kind: str, proc: int, tie: int, *, gpu=False,
            nbytes=-1, device=-1, status=0, attrs=None, thread=-1) -> int:
        r = len(self.start)
        k = self.lane_ix.get(lane)
        if k is None:
            k = self.lane_ix[lane] = len(self.lanes)
            self.lanes.append(lane)
        p = self.phase_ix.get(phase)
        if p is None:
            p = self.phase_ix[phase] = len(self.phases)
            self.phases.append(phase)
        self.start.append(start)
        self.end.append(end)
        self.gpu.append(gpu)
        self.lane.append(k)
        self.phase.append(p)
        self.kind.append(KIND_CODES[kind])
        self.status.append(status)
        self.nbytes.append(nbytes)
        self.device.append(device)
        self.proc.append(proc)
        self.tie.append(tie)
        self.thread.append(thread)
        if attrs:
            self.attrs[r] = attrs
        return r


def read_nsys(path: str | os.PathLike[str], *, host: str | None = None, runtime: bool = True,
              correlation_ids: bool = False) -> Timeline:
    """Read an nsys SQLite export into a Timeline (see the module docstring for the mapping).

    ``host`` names the machine (default: the report's host name if recorded, else the file stem).
    ``runtime=False`` leaves CUDA API calls out of the result (they are still used for linking).
    ``correlation_ids=True`` also puts ``cuda.correlation_id`` on the API-call rows (device rows always
    carry it, with ``cuda.launch.api_start_ns``, on a small per-row ``RowAttrs`` over one dict shared by
    launches with identical static attributes).
    Raises :class:`NsysFormatError` for files that are not SQLite or have no nsys tables, and
    ``FileNotFoundError`` for a missing file.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(p)
    if p.suffix in (".nsys-rep", ".qdrep"):
        raise NsysFormatError(f"{p}: this is an Nsight Systems report; export it first: "
                              f"nsys export --type sqlite -o {p.with_suffix('.sqlite')} {p}")
    if not is_nsys_sqlite(p):
        raise NsysFormatError(f"{p}: not a SQLite file (expected the output of `nsys export --type sqlite`)")
    rep = open_report(p)
    try:
        known = {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                 "CUPTI_ACTIVITY_KIND_MEMCPY"}
        if not rep.tables & known:
            raise NsysFormatError(f"{p}: no Nsight Systems tables (looked for {', '.join(sorted(known))})")
        try:
            return _read(rep, host, runtime, correlation_ids)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
            if isinstance(exc, NsysFormatError):
                raise
            # A value of the wrong type (SQLite columns take any type) or out of range.
            what = "a value is outside the 64-bit range" if isinstance(exc, OverflowError) else f"bad value ({exc})"
            raise NsysFormatError(f"{p}: table {rep.table}: {what}") from None
    finally:
        rep.conn.close()


def _read(rep: NsysReport, host: str | None, runtime: bool, correlation_ids: bool) -> Timeline:
    path = rep.path
    epoch = session_start(rep)
    off = epoch or 0
    host = host or report_host_name(rep) or path.name.split(".")[0]
    R = _Rows()
    # ---- processes and threads ------------------------------------------------------------
    proc_names: dict[int, str] = {}
    if "PROCESSES" in rep.tables:
        _, rows = rep.select("PROCESSES", ["globalPid", "pid", "name"])
        proc_names = {int(g): str(n) for g, _pid, n in rows if g is not None and n}
    thread_names: dict[int, str] = {}
    if "ThreadNames" in rep.tables:
        _, rows = rep.select("ThreadNames", ["globalTid", "nameId"])
        for gtid, nid in rows:
            if gtid is not None and nid is not None:
                thread_names[int(gtid)] = rep.strings.get(int(nid), str(nid))
    name_count: dict[tuple[int, str], int] = {}
    for gtid, name in thread_names.items():
        key = ((gtid >> 24) & 0xFFFFFF, name)
        name_count[key] = name_count.get(key, 0) + 1
    thread_lanes: dict[int, Lane] = {}

    def thread_lane(gtid: int, device: int = -1) -> Lane:
        lane = thread_lanes.get(gtid)
        if lane is None:
            pid, tid = (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF
            name = thread_names.get(gtid)
            if name is None:
                name = str(tid)
            elif name_count.get((pid, name), 0) > 1 and tid != pid:  # the main thread keeps its name
                name = f"{name} ({tid})"
            lane = thread_lanes[gtid] = Lane(host, pid, -1, f"thread:{name}")
        # A gputrace phase with a device but no stream sits on its thread's lane under that GPU,
        # as the recorder's own trace places it.
        return lane if device < 0 else Lane(lane.host, lane.pid, device, lane.name)

    # ---- NVTX ranges ---------------------------------------------------------------------
    if "NVTX_EVENTS" in rep.tables:
        types = rep.enum_names("ENUM_NSYS_EVENT_TYPE") or _LEGACY_EVENT_TYPES
        rng = {types.get("NvtxPushPopRange"): "push/pop", types.get("NvtxStartEndRange"): "start/end"}
        rng.pop(None, None)
        R.begin("NVTX_EVENTS")
        _, rows = rep.select("NVTX_EVENTS", ["start", "end", "eventType", "text", "textId", "domainId",
                                                "globalTid", "color", "category", "uint64Value", "int64Value",
                                                "uint32Value", "int32Value"])
        nvtx_rows = list(rows)  # read twice (domains and categories first); NVTX tables are small
        domains = {0: "default"}
        categories: dict[tuple[int, int], str] = {}
        for _start, _end, et, text, tid_, dom, _gtid, _color, cat, *_ in nvtx_rows:
            if et == types.get("NvtxDomainCreate") and dom is not None:
                domains[int(dom)] = rep.text(text, tid_)
            elif et == types.get("NvtxCategory") and cat is not None:
                categories[(int(dom or 0), int(cat))] = rep.text(text, tid_)
        for start, end, et, text, tid_, dom, gtid, color, cat, *payloads in nvtx_rows:
            if et not in rng or end is None or start is None:
                continue
            gtid = required_int(path, "NVTX_EVENTS", "globalTid", gtid)
            name = rep.text(text, tid_)
            dname = domains.get(int(dom or 0), f"domain {dom}")
            attrs: dict = {"nvtx.domain": dname, "nvtx.range": rng[et]}
            device = -1
            if cat:
                cname = categories.get((int(dom or 0), int(cat)), str(cat))
                attrs["nvtx.category"] = cname
                m = re.fullmatch(r"gpu (\d+)", cname)
                if m and dname == "gputrace":
                    device = int(m.group(1))
            if color is not None:
                attrs["nvtx.color"] = "#%06x" % (int(color) & 0xFFFFFF)
            # The payload lands in the column of its NVTX type (the nvtx package sends ints as int64).
            payload = next((int(v) for v in payloads if v is not None), None)
            ours = dname == "gputrace" or name in PHASES
            kind = phase_kind(name) if ours else "host"
            R.add(int(start) + off, int(end) + off, thread_lane(gtid, device), name, kind, gtid & _PID_MASK, 0,
                  nbytes=payload if (payload is not None and dname == "gputrace") else -1, device=device, attrs=attrs,
                  thread=gtid)
    # ---- CUDA API calls ------------------------------------------------------------------
    api_by_corr: dict[tuple[int, int], int] = {}
    api_names: dict[int, str] = {}
    api_kinds: dict = {}  # nameId -> (name, kind)
    api_rows: list[int] = []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in rep.tables:
        R.begin("CUPTI_ACTIVITY_KIND_RUNTIME")
        _, rows = rep.select("CUPTI_ACTIVITY_KIND_RUNTIME",
                             ["start", "end", "globalTid", "correlationId", "nameId", "returnValue"])
        for start, end, gtid, corr, nid, ret in rows:
            gtid = required_int(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", gtid)
            nk = api_kinds.get(nid)
            if nk is None:
                name = "<api>" if nid is None else re.sub(r"_v\d+$", "", rep.strings.get(int(nid), f"<api {nid}>"))
                kind = "sync" if _SYNC_API.search(name) else "pin" if name in _PIN_API else "host"
                nk = api_kinds[nid] = (name, kind)
            name, kind = nk
            api_attrs = {"cuda.correlation_id": int(corr)} if (corr is not None and correlation_ids) else None
            status = 0
            if ret:
                api_attrs = {**(api_attrs or {}), "cuda.return": int(ret)}
                status = 2
            r = R.add(int(start) + off, int(end) + off, thread_lane(gtid), name, kind, gtid & _PID_MASK, 1,
                      status=status, attrs=api_attrs, thread=gtid)
            api_rows.append(r)
            if corr is not None:
                api_by_corr[(gtid & _PID_MASK, int(corr))] = r
                api_names[r] = name
    # ---- device activity -----------------------------------------------------------------
    launched: list[tuple[int, int]] = []  # (device row, api row)
    # Enum names (CUDA_MEMCPY_KIND_HTOD, ..._MEMORY_KIND_PINNED) normalised by gputrace.activity.
    copy_kinds = rep.enum_by_name("ENUM_CUDA_MEMCPY_OPER")
    mem_kinds = rep.enum_by_name("ENUM_CUDA_MEM_KIND")

    shared: dict[tuple, dict] = {}
    gpu_lanes: dict[tuple, Lane] = {}

    def gpu_row(table, start, end, dev, stream, gpid, corr, phase, nbytes, attrs):
        dev = required_int(path, table, "deviceId", dev)
        gpid = int(gpid or 0)
        stream = int(stream or 0)
        lane = gpu_lanes.get((gpid, dev, stream))
        if lane is None:
            lane = gpu_lanes[(gpid, dev, stream)] = Lane(host, (gpid >> 24) & 0xFFFFFF, dev, f"stream:{stream}")
        a = api_by_corr.get((gpid & _PID_MASK, int(corr))) if corr is not None else None
        attrs[A.STREAM] = stream
        attrs.update(_SOURCE)
        if a is not None:
            attrs[A.API] = api_names[a]
        # Identical static attribute sets share one dict (a Timeline is immutable); the per-launch
        # values ride on a RowAttrs: a million launches of a few kernels cost a few dicts.
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items())
        attrs = shared.setdefault(key, attrs)
        if corr is None:
            row_attrs = attrs
        elif a is None:
            row_attrs = RowAttrs(attrs, _CORR_KEYS, (int(corr),))
        else:
            row_attrs = RowAttrs(attrs, _LAUNCH_KEYS, (int(corr), int(R.start[a])))
        r = R.add(int(start) + off, int(end) + off, lane, phase, "gpu", gpid & _PID_MASK, 2, gpu=True,
                  nbytes=nbytes, device=dev, attrs=row_attrs)
        if a is not None:
            launched.append((r, a))

    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if t in rep.tables:
        R.begin(t)
        cols = ["start", "end", "deviceId", "streamId", "globalPid", "correlationId", "shortName", "demangledName",
                "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
                "dynamicSharedMemory"]
        _, rows = rep.select(t, cols)
        for row in rows:
            start, end, dev, stream, gpid, corr, short, full = row[:8]
            full_s = rep.strings.get(int(full), f"<kernel {full}>") if full is not None else None
            short_s = rep.strings.get(int(short)) if short is not None else None
            phase = short_s or (full_s.split("(")[0] if full_s else "<kernel>")
            attrs = {"gputrace.activity": "kernel", A.KERNEL_NAME: full_s or phase}
            if row[8] is not None:
                attrs[A.GRID] = [int(x) for x in row[8:11]]
                attrs[A.BLOCK] = [int(x) for x in row[11:14]]
            for v, akey in ((row[14], A.REGISTERS), (row[15], A.SHARED_STATIC), (row[16], A.SHARED_DYNAMIC)):
                if v is not None:
                    attrs[akey] = int(v)
            gpu_row(t, start, end, dev, stream, gpid, corr, phase, -1, attrs)
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if t in rep.tables:
        R.begin(t)
        _, rows = rep.select(t, ["start", "end", "deviceId", "streamId", "globalPid", "correlationId", "bytes",
                                 "copyKind", "srcKind", "dstKind"])
        for start, end, dev, stream, gpid, corr, nb, ck, sk, dk in rows:
            label = A.copy_kind(copy_kinds.get(int(ck))) if ck is not None else "unknown"
            attrs = {A.ACTIVITY: "memcpy", A.MEMCPY_KIND: label,
                     A.MEMCPY_SRC: A.memory_kind(mem_kinds.get(int(sk)) if sk is not None else None),
                     A.MEMCPY_DST: A.memory_kind(mem_kinds.get(int(dk)) if dk is not None else None)}
            gpu_row(t, start, end, dev, stream, gpid, corr, A.memcpy_name(label), -1 if nb is None else int(nb), attrs)
    t = "CUPTI_ACTIVITY_KIND_MEMSET"
    if t in rep.tables:
        R.begin(t)
        _, rows = rep.select(t, ["start", "end", "deviceId", "streamId", "globalPid", "correlationId", "bytes",
                                 "memKind"])
        for start, end, dev, stream, gpid, corr, nb, mk in rows:
            mem = A.memory_kind(mem_kinds.get(int(mk)) if mk is not None else None)
            attrs = {A.ACTIVITY: "memset", A.MEMSET_KIND: mem}
            gpu_row(t, start, end, dev, stream, gpid, corr, A.MEMSET_NAME, -1 if nb is None else int(nb), attrs)
    t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if t in rep.tables:
        sync_types = rep.enum_by_name("ENUM_CUPTI_SYNC_TYPE")
        _, rows = rep.select(t, ["start", "end", "deviceId", "streamId", "globalPid", "correlationId", "syncType",
                                 "eventId"])
        for start, end, dev, stream, gpid, corr, st, ev in rows:
            # Host-side: the thread is the one of the synchronising API call (same correlation id).
            gpid = int(gpid or 0)
            a = api_by_corr.get((gpid & _PID_MASK, int(corr))) if corr is not None else None
            kind = A.sync_type(sync_types.get(int(st)) if st is not None else None)
            attrs = {A.ACTIVITY: "sync", A.SOURCE: "nsys", A.SYNC_TYPE: kind}
            if stream not in _INVALID:
                attrs[A.SYNC_STREAM] = int(stream)
            if ev not in _INVALID:
                attrs[A.SYNC_EVENT] = int(ev)
            if corr is not None:
                attrs[A.CORRELATION] = int(corr)
            device = int(dev) if dev not in _INVALID else -1
            if a is not None:
                attrs[A.API] = api_names[a]
                gtid = int(R.thread[a])
                attrs["thread.id"] = gtid & 0xFFFFFF  # the OS thread id, as the CUPTI collector records it
                lane = thread_lane(gtid, device)
                gpid = gtid & _PID_MASK
            else:
                gtid = -(1 << 40) - len(R.start)  # a group of its own: nothing nests under it
                lane = Lane(host, (gpid >> 24) & 0xFFFFFF, device, "thread:(unknown)")
            r = R.add(int(start) + off, int(end) + off, lane, A.sync_name(kind), "sync", gpid & _PID_MASK, 2,
                      device=device, attrs=attrs, thread=gtid)
            if a is not None:
                launched.append((r, a))  # parent: the range around the synchronising call, as for launches
                R.kind[a] = KIND_CODES["host"]  # the sync span carries the wait; the call is not counted twice
    return _assemble(R, launched, api_rows, runtime, proc_names, host, epoch, path)


def _assemble(R: _Rows, launched, api_rows, runtime, proc_names, host, epoch, path) -> Timeline:
    n = len(R.start)
    start = np.asarray(R.start, dtype=np.int64)
    end = np.asarray(R.end, dtype=np.int64)
    back = np.flatnonzero(end < start)
    if back.size:  # a trace no reader accepts: refuse it here, naming the table
        r = int(back[0])
        table = next(t for first, t in reversed(R.tables) if first <= r)
        raise NsysFormatError(f"{path}: table {table}: {back.size} row(s) end before they start "
                              f"(first: start {int(start[r]) - (epoch or 0)}, end {int(end[r]) - (epoch or 0)})")
    lane = np.asarray(R.lane, dtype=np.int32)
    tie = np.asarray(R.tie, dtype=np.int8)
    gpu = np.asarray(R.gpu, dtype=bool)
    # Host side: NVTX ranges and API calls nest per OS thread; device rows are placed by correlation.
    group = np.where(gpu, -1 - np.arange(n), np.asarray(R.thread, dtype=np.int64))
    parent = nest_parents(start, end, group, tiebreak=tie) if n else np.empty(0, np.int64)
    parent[gpu] = -1
    api_kind = tie == 1
    for r, a in launched:
        p = int(parent[a])  # innermost range around the launching call
        while p >= 0 and api_kind[p]:
            p = int(parent[p])
        if p >= 0:
            parent[r] = p
    proc = np.asarray(R.proc, dtype=np.int64)
    procs = sorted(set(np.unique(proc).tolist()))
    resources, trace_ids = [], []
    for g in procs:
        pid = (g >> 24) & 0xFFFFFF
        res = {"service.name": proc_names.get(g, "nsys"), "host.name": host, "process.pid": pid,
               "nsys.report": path.name}
        if epoch is None:
            res["nsys.clock"] = "session"
        resources.append(res)
        trace_ids.append(hashlib.blake2b(f"{path.name}:{epoch}:{g}".encode(), digest_size=16).hexdigest())
    proc_col = np.searchsorted(np.asarray(procs, dtype=np.int64), proc).astype(np.int32)
    span_id = np.arange(1, n + 1, dtype=np.uint64)
    psid = np.where(parent >= 0, span_id[np.maximum(parent, 0)], 0).astype(np.uint64)
    cols = {
        "start": start,
        "end": end,
        "gpu_start": np.where(gpu, start, -1),
        "gpu_end": np.where(gpu, end, -1),
        "phase": np.asarray(R.phase, dtype=np.int32),
        "lane": lane,
        "device": np.asarray(R.device, dtype=np.int16),
        "kind": np.asarray(R.kind, dtype=np.int8),
        "status": np.asarray(R.status, dtype=np.int8),
        "nbytes": np.asarray(R.nbytes, dtype=np.int64),
        "resource": proc_col,
        "trace": proc_col,
        "span_id": span_id,
        "parent_span_id": psid,
    }
    tl = Timeline.from_unsorted(cols, R.phases, R.lanes, resources, trace_ids, R.attrs)
    if not runtime and api_rows:
        # Rows were re-sorted by from_unsorted; find the API calls again by their span ids.
        drop = span_id[np.asarray(api_rows, dtype=np.int64)]
        tl = tl.select(~np.isin(tl.cols["span_id"], drop))
    return tl
