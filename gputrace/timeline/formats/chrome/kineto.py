"""PyTorch-profiler (Kineto) traces onto gputrace's GPU-activity conventions (docs/trace-format.md,
"GPU activity"; docs/interop.md, "PyTorch profiler traces").

The Chrome reader turns a Kineto trace into spans that keep Kineto's ``args`` and category
(``chrome.cat``); :func:`map_kineto` then rewrites that Timeline so that every analysis sees the same
rows a CUPTI recording or an Nsight import gives:

* ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` -> kernel / memcpy / memset activity spans
  (``gputrace.activity``, ``gputrace.source = "kineto"``, ``cuda.kernel.name`` (demangled full name),
  ``cuda.stream``, ``cuda.correlation_id``, grid/block/registers, ``cuda.memcpy.kind`` and the source and
  destination memory kinds parsed from ``Memcpy HtoD (Pageable -> Device)``, ``cuda.memset.kind``;
  span name: the kernel's short name, ``[CUDA memcpy HtoD]``, ``[CUDA memset]``), each a child of the
  innermost *phase* around its launching API call (found through the call's ``correlation``).
* ``cuda_runtime`` / ``cuda_driver`` -> API calls (``gputrace.role = "api"``, ``cuda.api``) on their own
  lane ``api:THREAD`` beside the thread's lane; a kernel or copy gets ``cuda.api`` and
  ``cuda.launch.api_start_ns`` from its launching call. ``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize`` (and the driver's ``cuStream/Ctx/EventSynchronize``)
  are also sync activity spans (``[CUDA sync stream]`` ...) on the thread's lane, with the trace's device
  when it has one.
* ``user_annotation`` (``record_function``, ``ProfilerStep#N``) -> phases, as NVTX ranges are.
* ``cpu_op`` / ``python_function`` -> framework operators (``gputrace.role = "op"``): kept, drawn and
  used for nesting and for "what the host ran", but not phases.
* profiler bookkeeping -> ``gputrace.role = "profiler"``: the ``Trace`` span ``PyTorch Profiler (0)``,
  ``overhead`` rows (``Activity Buffer Request``), ``gpu_user_annotation`` (the device-side copy of an
  annotation: no device time of its own). Rows of any other category (or none) are phases, as in any
  Chrome trace.

The header's ``distributedInfo`` becomes resource attributes (``gputrace.rank``,
``gputrace.world_size``, ``distributedInfo.*``), with ``gputrace.source = "kineto"``.

A Chrome trace with none of Kineto's device or API categories is returned unchanged. Pure; any
thread; attribute dicts of rewritten rows are new (the reader's are never mutated).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from gputrace import activity as A
from gputrace.kernel_names import demangle
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.row_attrs import TemplateAttrs

__all__ = ["KINETO_SYNC_APIS", "is_kineto", "map_kineto", "kineto_resource"]

_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_API_CATS = {"cuda_runtime", "cuda_driver"}
_PHASE_CATS = {"user_annotation"}
_OP_CATS = {"cpu_op", "python_function", "cpu_instant_event"}
#: The profiler's own rows: its ``Trace`` span, buffer requests, the device-side copy of annotations.
_PROFILER_CATS = {"Trace", "overhead", "gpu_user_annotation"}
#: CUDA API calls that block the calling thread until the device catches up -> sync type.
KINETO_SYNC_APIS = {
    "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
    "cudaDeviceSynchronize": "context", "cuCtxSynchronize": "context",
    "cudaEventSynchronize": "event", "cuEventSynchronize": "event",
}
_MEMCPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w[\w ]*?)\s*->\s*(\w[\w ]*?)\))?")
_MEMSET = re.compile(r"Memset\s*\((\w[\w ]*?)\)")
# Kineto's kernel args -> activity attribute names.
_KERNEL_ARGS = (("registers per thread", A.REGISTERS), ("shared memory", A.SHARED_STATIC))


def is_kineto(tl: Timeline) -> bool:
    """Whether ``tl`` (a Chrome trace read by the reader) holds Kineto device or CUDA-API rows."""
    for a in tl.attrs.values():
        c = a.get("chrome.cat")
        if c in _DEVICE_CATS or c in _API_CATS:
            return True
    return False


def kineto_resource(head: Mapping[str, Any]) -> dict:
    """Resource attributes from a Kineto header (``distributedInfo``, versions); ``{}`` for none."""
    res: dict[str, Any] = {}
    di = head.get("distributedInfo") if isinstance(head, Mapping) else None
    if isinstance(di, Mapping):
        for k in ("backend", "rank", "world_size", "pg_count"):
            v = di.get(k)
            if isinstance(v, (int, str)) and not isinstance(v, bool):
                res[f"distributedInfo.{k}"] = v
        if isinstance(di.get("rank"), int):
            res["gputrace.rank"] = di["rank"]
        if isinstance(di.get("world_size"), int):
            res["gputrace.world_size"] = di["world_size"]
    for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version"):  # not trace_id: it differs every run
        v = head.get(k) if isinstance(head, Mapping) else None
        if isinstance(v, (int, str)) and not isinstance(v, bool):
            res[f"kineto.{k}"] = v
    return res


def _memcpy_attrs(name: str) -> dict:
    m = _MEMCPY.match(name)
    if not m:
        return {A.MEMCPY_KIND: "unknown", A.MEMCPY_SRC: "UNKNOWN", A.MEMCPY_DST: "UNKNOWN"}
    kind = A.copy_kind(m.group(1))
    src, dst = A.memory_kind(m.group(2)), A.memory_kind(m.group(3))
    # Kineto writes the device side as "Device"; a copy without the bracket names no kinds.
    return {A.MEMCPY_KIND: kind, A.MEMCPY_SRC: src, A.MEMCPY_DST: dst}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def map_kineto(tl: Timeline, head: Mapping[str, Any] | None = None) -> Timeline:
    """``tl`` with Kineto's rows mapped onto the GPU-activity conventions (see the module docstring);
    ``tl`` itself when it is not a Kineto trace."""
    if tl.n == 0 or not is_kineto(tl):
        return tl
    head = head or {}
    c = tl.cols
    n = tl.n
    attrs_in = tl.attrs
    cat = [""] * n
    for r, a in attrs_in.items():
        cat[r] = str(a.get("chrome.cat", ""))
    parent = c["parent"]
    start = c["start"]
    # role per row: 0 phase, 1 api, 2 op, 3 profiler, 4 device activity
    role = np.zeros(n, np.int8)
    corr_api: dict[int, int] = {}
    for r in range(n):
        k = cat[r]
        if k in _DEVICE_CATS:
            role[r] = 4
        elif k in _API_CATS:
            role[r] = 1
            cr = _int(attrs_in[r].get("correlation"))
            if cr is not None:
                corr_api[cr] = r
        elif k in _PHASE_CATS:
            role[r] = 0
        elif k in _OP_CATS:
            role[r] = 2
        elif k in _PROFILER_CATS:
            role[r] = 3
    phase_anc: dict[int, int] = {}

    def phase_above(r: int) -> int:
        """The innermost phase (user annotation) at or above row ``r``'s parent, -1 if none."""
        path = []
        p = int(parent[r])
        while p >= 0 and role[p] != 0:
            if p in phase_anc:
                p = phase_anc[p]
                break
            path.append(p)
            p = int(parent[p])
        for q in path:
            phase_anc[q] = p
        return p

    phases = list(tl.phases)
    phase_ix = {p: i for i, p in enumerate(phases)}

    def pid(name: str) -> int:
        i = phase_ix.get(name)
        if i is None:
            i = phase_ix[name] = len(phases)
            phases.append(name)
        return i

    new_phase = c["phase"].copy()
    new_kind = c["kind"].copy()
    new_lane = c["lane"].copy()
    new_dev = c["device"].copy()
    gpu_start, gpu_end = c["gpu_start"].copy(), c["gpu_end"].copy()
    new_parent = parent.copy()
    attrs: dict[int, Mapping] = dict(attrs_in)
    names = dict(tl.names)
    devices = sorted({int(d) for d in np.unique(c["device"][role == 4]).tolist() if d >= 0})
    only_dev = devices[0] if len(devices) == 1 else -1
    lanes = list(tl.lanes)
    lane_ix = {ln: i for i, ln in enumerate(lanes)}

    def api_lane(li: int) -> int:
        ln = lanes[li]
        base = ln.name[len("thread:"):] if ln.name.startswith("thread:") else ln.name
        al = Lane(ln.host, ln.pid, ln.device, A.API_LANE_PREFIX + base)
        j = lane_ix.get(al)
        if j is None:
            j = lane_ix[al] = len(lanes)
            lanes.append(al)
        return j

    templates: dict[tuple, dict] = {}

    def shared_attrs(a: Mapping, key: tuple, static: dict, per_row: dict) -> Mapping:
        """The row's attributes: Kineto's args (less ``chrome.cat``), ``static`` and ``per_row``. Rows whose args
        the reader shares (``TemplateAttrs``) stay shared: one template per (args template, ``key``), the
        per-row values (the args' own and ``per_row``) in the overlay, as the reader and the cache keep them."""
        if isinstance(a, TemplateAttrs):
            tk = (id(a.shared), key, tuple(per_row))
            tpl = templates.get(tk)
            if tpl is None:
                tpl = {kk: v for kk, v in a.shared.items() if kk != "chrome.cat"}
                tpl.update(static)
                tpl.update(dict.fromkeys(per_row, 0))
                templates[tk] = tpl
            own = [(kk, v) for kk, v in zip(a.keys_, a.values_, strict=True) if kk != "chrome.cat"]
            own += list(per_row.items())
            return TemplateAttrs(tpl, tuple(kk for kk, _ in own), tuple(v for _, v in own))
        out = {kk: v for kk, v in a.items() if kk != "chrome.cat"}
        out.update(static)
        out.update(per_row)
        return out

    host_kind, sync_kind = KIND_CODES["host"], KIND_CODES["sync"]
    for r in range(n):
        ro = int(role[r])
        a = attrs_in.get(r, {})
        if ro == 4:
            k = cat[r]
            name = tl.name_of(r)
            st, cr = _int(a.get("stream")), _int(a.get("correlation"))
            launch = corr_api.get(cr) if cr is not None else None
            api = tl.name_of(launch) if launch is not None else None
            static: dict[str, Any] = {A.SOURCE: "kineto"}
            if k == "kernel":
                full = demangle(name)
                static[A.ACTIVITY], static[A.KERNEL_NAME] = "kernel", full
                for src, dst in _KERNEL_ARGS:
                    if _int(a.get(src)) is not None:
                        static[dst] = a[src]
                for src, dst in (("grid", A.GRID), ("block", A.BLOCK)):
                    if isinstance(a.get(src), list):
                        static[dst] = list(a[src])
                short = A.short_kernel_name(full)
            elif k == "gpu_memcpy":
                static[A.ACTIVITY] = "memcpy"
                static.update(_memcpy_attrs(name))
                short = A.memcpy_name(static[A.MEMCPY_KIND])
            else:
                static[A.ACTIVITY] = "memset"
                m = _MEMSET.match(name)
                static[A.MEMSET_KIND] = A.memory_kind(m.group(1)) if m else "UNKNOWN"
                short = A.MEMSET_NAME
            per_row: dict[str, Any] = {}
            if st is not None:
                per_row[A.STREAM] = st
            if cr is not None:
                per_row[A.CORRELATION] = cr
            if launch is not None:
                static[A.API] = api
                per_row[A.LAUNCH_API_START] = int(start[launch])
                p = launch if role[launch] == 0 else phase_above(launch)
            else:
                p = phase_above(r)
            new_parent[r] = p
            new_phase[r] = pid(short)  # the span's name (Kineto's own name is in the attributes)
            names.pop(r, None)
            attrs[r] = shared_attrs(a, (name, api, k), static, per_row)
        elif ro == 1:
            name = tl.name_of(r)
            na = {kk: v for kk, v in a.items() if kk != "chrome.cat"}
            na[A.ROLE], na[A.API], na[A.SOURCE] = "api", name, "kineto"
            cr = _int(a.get("correlation"))
            if cr is not None:
                na[A.CORRELATION] = cr
            sync = KINETO_SYNC_APIS.get(name)
            if sync is not None:  # a host wait: an activity span on the thread's lane
                na[A.ACTIVITY], na[A.SYNC_TYPE] = "sync", sync
                na.pop(A.ROLE)
                new_kind[r] = sync_kind
                new_dev[r] = only_dev
                new_phase[r] = pid(A.sync_name(sync))
                names.pop(r, None)
                new_parent[r] = phase_above(r)
            else:
                new_kind[r] = host_kind
                new_lane[r] = api_lane(int(c["lane"][r]))
            attrs[r] = na
        elif ro == 2 or ro == 3:
            attrs[r] = {**a, A.ROLE: "op" if ro == 2 else "profiler"}
            if ro == 3:
                gpu_start[r] = gpu_end[r] = -1
                new_kind[r] = host_kind
    res = kineto_resource(head)
    res[A.SOURCE] = "kineto"
    resources = [*tl.resources, res]
    span_id = c["span_id"]
    psid = np.where(new_parent >= 0, span_id[np.maximum(new_parent, 0)], 0).astype(np.uint64)
    cols = {k: v for k, v in c.items() if k not in ("parent", "depth")}
    cols.update(phase=new_phase, kind=new_kind, lane=new_lane, device=new_dev, gpu_start=gpu_start, gpu_end=gpu_end,
                parent_span_id=psid, resource=np.full(n, len(resources) - 1, np.int32))
    out = Timeline.from_unsorted(cols, phases, lanes, resources, tl.trace_ids, attrs, names)
    out.load_report = tl.load_report
    return out
