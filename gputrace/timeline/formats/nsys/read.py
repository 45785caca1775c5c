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
tables, strings, columns) lives in :mod:`gputrace.timeline.formats.nsys.sqlite`; ``NsysFormatError`` and
``is_nsys_sqlite`` are re-exported here. The big tables are read as columns (Python runs once per
distinct thread, API name, kernel or copy kind, not per row): API calls here, kernels, copies,
memsets and syncs in :mod:`gputrace.timeline.formats.nsys.device`, the column tools in
:mod:`gputrace.timeline.formats.nsys.columns`. NVTX ranges (a few thousand) are read row by row.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from gputrace.activity import api_lane_name
from gputrace.phases import PHASES, phase_kind
from gputrace.timeline._gc import collector_paused
from gputrace.timeline._lines import is_gzip
from gputrace.timeline.formats.nsys.columns import PID_MASK, CorrIndex, Rows, groups, int_columns, shifted
from gputrace.timeline.formats.nsys.device import ApiCalls, Device
from gputrace.timeline.formats.nsys.sqlite import (
    NsysFormatError,
    NsysReport,
    is_nsys_sqlite,
    open_report,
    report_host_name,
    required_int,
    session_start,
)
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.nesting import nest_parents

__all__ = ["NsysFormatError", "read_nsys", "is_nsys_sqlite"]

#: Event type ids of reports that predate ENUM_NSYS_EVENT_TYPE (nsys 2020-2021 exporter docs).
_LEGACY_EVENT_TYPES = {"NvtxCategory": 33, "NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
_SYNC_API = re.compile(r"Synchronize|StreamWaitEvent")
_PIN_API = {"cudaHostRegister", "cudaHostUnregister", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost"}
_PID_MASK = 0xFFFFFFFFFF000000  # globalTid -> globalPid, as nsys's own reports join them


def read_nsys(path: str | os.PathLike[str], *, host: str | None = None, runtime: bool = True,
              correlation_ids: bool = False) -> Timeline:
    """Read an nsys SQLite export into a Timeline (see the module docstring for the mapping).

    ``host`` names the machine (default: the report's host name if recorded, else the file stem).
    ``runtime=False`` leaves CUDA API calls out of the result (they are still used for linking).
    ``correlation_ids=True`` also puts ``cuda.correlation_id`` on the API-call rows (device rows always
    carry it, with ``cuda.launch.api_start_ns``, on a small per-row ``RowAttrs`` over one dict shared by
    launches with identical static attributes).
    A gzip-compressed export (``rep.sqlite.gz``) is read through a temporary decompressed copy (``gunzip.py``).
    Raises :class:`NsysFormatError` for files that are not SQLite or have no nsys tables, and
    ``FileNotFoundError`` for a missing file.

    The cyclic garbage collector is paused while reading (process-wide; re-enabled afterwards if it
    was on): the read makes a million small objects and no cycles, and the collector's passes over
    them cost about a quarter of the read.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(p)
    if p.suffix in (".nsys-rep", ".qdrep"):
        raise NsysFormatError(f"{p}: this is an Nsight Systems report; export it first: "
                              f"nsys export --type sqlite -o {p.with_suffix('.sqlite')} {p}")
    if is_gzip(p):  # rep.sqlite.gz: read from a decompressed temporary copy, named as the file given
        from gputrace.timeline.formats.nsys.gunzip import gunzipped

        with gunzipped(p) as plain:
            return _read_file(plain, p, host, runtime, correlation_ids)
    if not is_nsys_sqlite(p):
        raise NsysFormatError(f"{p}: not a SQLite file (expected the output of `nsys export --type sqlite`)")
    return _read_file(p, p, host, runtime, correlation_ids)


def _read_file(real: Path, p: Path, host: str | None, runtime: bool, correlation_ids: bool) -> Timeline:
    """``read_nsys`` of the SQLite file ``real``, every message naming ``p`` (the file the user gave)."""
    rep = open_report(real)
    rep.path = p
    try:
        known = {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                 "CUPTI_ACTIVITY_KIND_MEMCPY"}
        if not rep.tables & known:
            raise NsysFormatError(f"{p}: no Nsight Systems tables (looked for {', '.join(sorted(known))})")
        try:
            with collector_paused():
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
    R = Rows()
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

    # ---- NVTX ranges (row by row: a report has few) ----------------------------------------
    if "NVTX_EVENTS" in rep.tables:
        types = rep.enum_names("ENUM_NSYS_EVENT_TYPE") or _LEGACY_EVENT_TYPES
        rng = {types.get("NvtxPushPopRange"): "push/pop", types.get("NvtxStartEndRange"): "start/end"}
        rng.pop(None, None)
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
        cols: dict[str, list] = {k: [] for k in ("start", "end", "lane", "phase", "kind", "proc", "nbytes", "device",
                                                 "thread")}
        base = R.n
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
            R.attrs[base + len(cols["start"])] = attrs
            for k, v in (("start", int(start) + off), ("end", int(end) + off),
                         ("lane", R.lane(thread_lane(gtid, device))), ("phase", R.phase(name)),
                         ("kind", KIND_CODES[phase_kind(name) if ours else "host"]), ("proc", gtid & _PID_MASK),
                         ("nbytes", payload if (payload is not None and dname == "gputrace") else -1),
                         ("device", device), ("thread", gtid)):
                cols[k].append(v)
        R.block("NVTX_EVENTS", tie=0, **cols)
    # ---- CUDA API calls (columns) ---------------------------------------------------------
    api = ApiCalls(base=R.n)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in rep.tables:
        api = _api_calls(rep, R, thread_lane, off, correlation_ids)
    # ---- device activity -----------------------------------------------------------------
    dev = Device(rep, R, api, host, off, R.phases)
    dev.kernels()
    # Enum names (CUDA_MEMCPY_KIND_HTOD, ..._MEMORY_KIND_PINNED) normalised by gputrace.activity.
    copy_kinds = rep.enum_by_name("ENUM_CUDA_MEMCPY_OPER")
    mem_kinds = rep.enum_by_name("ENUM_CUDA_MEM_KIND")
    dev.memcpys(copy_kinds, mem_kinds)
    dev.memsets(mem_kinds)
    dev.syncs(thread_lane)
    launched = (np.concatenate(dev.launched_dev) if dev.launched_dev else np.empty(0, np.int64),
                np.concatenate(dev.launched_api) if dev.launched_api else np.empty(0, np.int64))
    api_rows = np.arange(api.base, api.base + len(api.start), dtype=np.int64)
    return _assemble(R, launched, api_rows, runtime, proc_names, host, epoch, path)


def _api_calls(rep: NsysReport, R: Rows, thread_lane, off: int, correlation_ids: bool) -> ApiCalls:
    """CUDA API calls as one block: Python once per distinct thread and API name, not per row."""
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    c = int_columns(rep, t, ["start", "end", "globalTid", "correlationId", "nameId", "returnValue"])
    if c.null("globalTid").any():
        raise NsysFormatError(f"{rep.path}: table {t}: column globalTid is NULL")
    start, end = shifted(c.int("start"), off), shifted(c.int("end"), off)
    gtid = c.int("globalTid")
    if len(gtid) and int(gtid.min()) < 0:
        raise OverflowError("negative globalTid")  # its process part would not fit 64 bits
    nid_null, nid = c.null("nameId"), c.int("nameId", 0)
    first, g = groups(nid_null, nid)
    phase_of = np.empty(len(first), np.int32)
    kind_of = np.empty(len(first), np.int8)
    for i, r in enumerate(first.tolist()):
        if nid_null[r]:
            name = "<api>"
        else:
            name = re.sub(r"_v\d+$", "", rep.strings.get(int(nid[r]), f"<api {int(nid[r])}>"))
        phase_of[i] = R.phase(name)
        kind_of[i] = KIND_CODES["sync" if _SYNC_API.search(name) else "pin" if name in _PIN_API else "host"]
    tfirst, tg = groups(gtid)
    lane_of = np.array([R.lane(_api_lane(thread_lane(int(gtid[r])))) for r in tfirst.tolist()], dtype=np.int32)
    ret_null, ret = c.null("returnValue"), c.int("returnValue", 0)
    failed = ~ret_null & (ret != 0)
    has_corr = ~c.null("correlationId")
    corr = c.int("correlationId", 0)
    kind = kind_of[g]
    base = R.block(t, start=start, end=end, lane=lane_of[tg], phase=phase_of[g], kind=kind, proc=gtid & PID_MASK,
                   tie=1, status=np.where(failed, 2, 0), thread=gtid)
    kind = R.blocks[-1]["kind"]  # the block's own column: a sync later marks its call ``host``
    rows = np.flatnonzero((has_corr if correlation_ids else failed) | failed)
    for r in rows.tolist():
        a: dict = {"cuda.correlation_id": int(corr[r])} if (correlation_ids and has_corr[r]) else {}
        if failed[r]:
            a["cuda.return"] = int(ret[r])
        R.attrs[base + r] = a
    q = np.flatnonzero(has_corr)
    return ApiCalls(base=base, start=start, gtid=gtid, phase=phase_of[g], kind=kind,
                    index=CorrIndex(gtid[q] & PID_MASK, corr[q], base + q))


def _api_lane(thread: Lane) -> Lane:
    """The lane of a thread's CUDA API calls (``api:NAME`` beside ``thread:NAME``): API calls are not phases
    (gputrace.analysis.api_calls); they still nest under the thread's NVTX ranges (nesting is per OS thread)."""
    return Lane(thread.host, thread.pid, thread.device, api_lane_name(thread.name))


def _assemble(R: Rows, launched, api_rows, runtime, proc_names, host, epoch, path) -> Timeline:
    n = R.n
    start, end = R.column("start"), R.column("end")
    back = np.flatnonzero(end < start)
    if back.size:  # a trace no reader accepts: refuse it here, naming the table
        r = int(back[0])
        table = next(t for first, t in reversed(R.tables) if first <= r)
        raise NsysFormatError(f"{path}: table {table}: {back.size} row(s) end before they start "
                              f"(first: start {int(start[r]) - (epoch or 0)}, end {int(end[r]) - (epoch or 0)})")
    tie = R.column("tie")
    gpu = R.column("gpu")
    # Host side: NVTX ranges and API calls nest per OS thread; device rows are placed by correlation.
    parent = np.full(n, -1, np.int64)
    host_rows = np.flatnonzero(~gpu)
    if len(host_rows):
        sub = nest_parents(start[host_rows], end[host_rows], R.column("thread")[host_rows], tiebreak=tie[host_rows])
        parent[host_rows] = np.where(sub >= 0, host_rows[np.maximum(sub, 0)], -1)
    dev_rows, api_of = launched
    if len(dev_rows):
        # Innermost range around the launching call: walk up past API calls, all launches at once.
        api_kind = tie == 1
        p = parent[api_of]
        while True:
            up = np.flatnonzero(p >= 0)
            up = up[api_kind[p[up]]]
            if not len(up):
                break
            p[up] = parent[p[up]]
        ok = p >= 0
        parent[dev_rows[ok]] = p[ok]
    proc = R.column("proc")
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
        "phase": R.column("phase"),
        "lane": R.column("lane"),
        "device": R.column("device").astype(np.int16),
        "kind": R.column("kind"),
        "status": R.column("status"),
        "nbytes": R.column("nbytes"),
        "resource": proc_col,
        "trace": proc_col,
        "span_id": span_id,
        "parent_span_id": psid,
    }
    attrs: dict = R.attrs  # dicts and RowAttrs (read-only Mappings), as Timeline.attrs holds them
    R.blocks.clear()
    if not runtime and len(api_rows):
        # API calls leave before the Timeline is built (they were needed for nesting and linking);
        # the other rows keep their span ids and parent ids, as a select() of the whole Timeline would.
        keep = np.ones(n, bool)
        keep[api_rows] = False
        new_row = np.cumsum(keep) - 1
        cols = {k: v[keep] for k, v in cols.items()}
        attrs = {int(new_row[r]): a for r, a in attrs.items() if keep[r]}
    return Timeline.from_unsorted(cols, R.phases, R.lanes, resources, trace_ids, attrs, consume=True)
