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
* ``cuda_runtime`` / ``cuda_driver`` -> API calls (``gputrace.role = "api"``, ``cuda.api``; Kineto's
  ``correlation`` stays in their args) on their own lane ``api:THREAD`` beside the thread's lane; a kernel
  or copy gets ``cuda.api`` and ``cuda.launch.api_start_ns`` from its launching call. ``cudaStreamSynchronize``,
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

A Kineto trace is recognised by its categories, not by its device rows: a CPU-only ``torch.profiler``
trace (``activities=[ProfilerActivity.CPU]``: annotations, operators and the ``Trace`` span, no kernel or
CUDA API row) is mapped as well, so its bookkeeping and operators are never phases either. A Chrome trace
with none of Kineto's own categories (the sets below except ``Trace`` / ``overhead``, which are common
words) is returned unchanged. Pure; any thread; attribute dicts of rewritten rows are new (the reader's
are never mutated).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from operator import itemgetter
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
#: Categories only Kineto writes: any one of them makes a Chrome trace a Kineto trace (see is_kineto).
_KINETO_CATS = frozenset(_DEVICE_CATS | _API_CATS | _PHASE_CATS | _OP_CATS | {"gpu_user_annotation"})
#: CUDA API calls that block the calling thread until the device catches up -> sync type.
KINETO_SYNC_APIS = {
    "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
    "cudaDeviceSynchronize": "context", "cuCtxSynchronize": "context",
    "cudaEventSynchronize": "event", "cuEventSynchronize": "event",
}
_MEMCPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w[\w ]*?)\s*->\s*(\w[\w ]*?)\))?")
_MEMSET = re.compile(r"Memset\s*\((\w[\w ]*?)\)")


def is_kineto(tl: Timeline) -> bool:
    """Whether ``tl`` (a Chrome trace read by the reader) holds a row of a category only Kineto writes
    (device, CUDA API, ``user_annotation``, operator rows): a CPU-only profile counts, having annotations
    and operators but no device row."""
    for a in tl.attrs.values():
        if a.get("chrome.cat") in _KINETO_CATS:
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


#: Kineto args of a device row -> activity attribute; the value is copied as Kineto wrote it (present or not).
#: Kineto's "shared memory" is static plus dynamic (a kernel CUPTI reports as 0 + 512 bytes reads 512 there).
_DEVICE_FIELDS: tuple[tuple[str, str], ...] = (
    ("stream", A.STREAM), ("correlation", A.CORRELATION), ("registers per thread", A.REGISTERS),
    ("shared memory", A.SHARED_TOTAL), ("grid", A.GRID), ("block", A.BLOCK))


def _plan(dev: tuple[dict, int], fixed: Mapping, per_row_keys: tuple, cat: str,
          api: str | None) -> tuple[dict, int, list]:
    """(static attributes, short-name id, per-row fields ``[(index in per_row_keys, attribute)]``) of a device
    row whose args are ``fixed`` apart from ``per_row_keys`` (a ``TemplateAttrs`` overlay). The attributes come
    in one order whichever of them are per-row (`_template_plan` keeps it): the source's, the API, the
    fields in ``_DEVICE_FIELDS`` order (the launch start is added last, by the caller)."""
    static, short_id = dev
    static = dict(static)
    if api is not None:
        static[A.API] = api
    fields = []
    for src, dst in _DEVICE_FIELDS:
        if cat != "kernel" and dst not in (A.STREAM, A.CORRELATION):
            continue
        if src in per_row_keys:
            fields.append((per_row_keys.index(src), dst))
            static[dst] = None  # its place in the order; the value is the row's
        elif src in fixed:
            static[dst] = fixed[src]
    return static, short_id, fields


def _template_plan(dev: tuple[dict, int], shared: Mapping, keys: tuple, cat: str, api: str | None,
                   launched: bool) -> tuple[dict, tuple, Any, int]:
    """How rows sharing one args template (``shared``, per-row ``keys``) become activity rows sharing one new
    template: (the template, the overlay's keys, ``itemgetter`` of the overlay values the new per-row
    attributes copy (None: none), short-name id). The overlay is the row's own values, then those copies,
    then the launching call's start when ``launched``; the template orders the keys as a plain dict of the
    same row gets them (`_plan`), so both iterate alike."""
    static, short_id, fields = _plan(dev, shared, keys, cat, api)
    new_keys = tuple(dst for _, dst in fields) + ((A.LAUNCH_API_START,) if launched else ())
    tpl = dict(shared)
    tpl.update(static)  # per-row fields hold None here: placeholders, as the reader's templates have
    if launched:
        tpl[A.LAUNCH_API_START] = 0
    idx = [i for i, _ in fields]
    pick: Any = None
    if len(idx) == 1:
        i0 = idx[0]
        pick = lambda v: (v[i0],)  # noqa: E731 (itemgetter of one index gives the value, not a tuple)
    elif idx:
        pick = itemgetter(*idx)
    return tpl, keys + new_keys, pick, short_id


_ROLE_CODE = {**dict.fromkeys(_DEVICE_CATS, 4), **dict.fromkeys(_API_CATS, 1), **dict.fromkeys(_OP_CATS, 2),
              **dict.fromkeys(_PROFILER_CATS, 3)}  # else 0: a phase


#: Row roles (``_roles``): what each becomes.
_PHASE, _API, _OP, _PROFILER, _DEVICE = 0, 1, 2, 3, 4


def map_kineto(tl: Timeline, head: Mapping[str, Any] | None = None) -> Timeline:
    """``tl`` with Kineto's rows mapped onto the GPU-activity conventions (see the module docstring);
    ``tl`` itself when it is not a Kineto trace.

    Cost: one pass over the rows with per-row work of a few dict operations; whatever depends only on a
    kernel's name, an API name or an args template is computed once per distinct value. The reader's own
    attribute dicts (which it owns, and which category-shared dicts share by category) gain the new keys
    in place; shared ``TemplateAttrs`` get one new template per (template, name)."""
    if tl.n == 0 or not is_kineto(tl):
        return tl
    m = _KinetoMapping(tl)
    m.map_rows()
    m.place_api_calls()
    m.apply_updates()
    return m.build(head or {})


def _roles(attrs_in: Mapping[int, Any], n: int) -> tuple[list[int], dict[int, int]]:
    """(role of each of the ``n`` rows by its ``chrome.cat``: ``_PHASE`` / ``_API`` / ``_OP`` / ``_PROFILER`` /
    ``_DEVICE``, rows without attributes being phases; Kineto ``correlation`` id -> row of the API call that
    carries it, the last such row winning). ``attrs_in`` (row < ``n`` -> dict or ``TemplateAttrs``, as the
    reader gives them) is not modified."""
    role_l = [0] * n
    corr_api: dict[int, int] = {}
    rcode = _ROLE_CODE.get
    for r, a in attrs_in.items():
        # (a shared template holds the category: reading it there skips the Mapping's per-key lookup)
        ro = rcode(str((a.shared if type(a) is TemplateAttrs else a).get("chrome.cat")), 0)
        if ro:
            role_l[r] = ro
            if ro == _API:
                cr = a.get("correlation")
                if type(cr) is int:
                    corr_api[cr] = r
    return role_l, corr_api


class _KinetoMapping:
    """One mapping of a Kineto ``Timeline`` (``map_kineto``), run once, in this order: ``map_rows``,
    ``place_api_calls``, ``apply_updates``, ``build``. Holds the input, the copies of the columns and tables
    the mapping rewrites (the input's arrays and lists are never written; its attribute dicts are, see
    ``with_keys``), the column updates gathered as (row, value) and the caches of what depends only on a
    name or an args template."""

    def __init__(self, tl: Timeline) -> None:
        """Classifies the rows (``_roles``) and copies what the mapping rewrites; ``tl`` has rows."""
        self.tl = tl
        c = tl.cols
        n = tl.n
        self.attrs_in: Mapping[int, Any] = tl.attrs  # dicts and TemplateAttrs
        self.start = c["start"].tolist()
        self.ph_list = c["phase"].tolist()
        self.tl_phases = tl.phases
        self.role_l, self.corr_api = _roles(self.attrs_in, n)
        self.role = np.asarray(self.role_l, np.int8)
        self.parent_l = c["parent"].tolist()
        self.phase_anc: dict[int, int] = {}  # row -> its innermost phase ancestor (phase_above's memo)
        self.phases = list(tl.phases)
        self.phase_ix = {p: i for i, p in enumerate(self.phases)}
        self.new_phase = c["phase"].copy()
        self.new_kind = c["kind"].copy()
        self.new_lane = c["lane"].copy()
        self.new_dev = c["device"].copy()
        self.gpu_start, self.gpu_end = c["gpu_start"].copy(), c["gpu_end"].copy()
        self.new_parent = c["parent"].copy()
        self.attrs: dict[int, Mapping] = dict(self.attrs_in)
        self.names = dict(tl.names)
        devices = sorted({int(d) for d in np.unique(c["device"][self.role == _DEVICE]).tolist() if d >= 0})
        self.only_dev = devices[0] if len(devices) == 1 else -1  # a sync span's device: the trace's only one
        self.lanes = list(tl.lanes)
        self.lane_ix = {ln: i for i, ln in enumerate(self.lanes)}
        self.api_lane_of: dict[int, int] = {}
        self.templates: dict[tuple, dict] = {}  # with_keys' new templates
        self.dev_static: dict[tuple[str, int], tuple[dict, int]] = {}  # device_static's cache
        self.plans: dict[tuple, tuple[dict, tuple, Any, int]] = {}  # map_device's _template_plan cache
        # Column updates are gathered as (row, value) and applied at once by apply_updates (a numpy item
        # assignment per row costs more than the rest of the row's work).
        self.set_parent: list[tuple[int, int]] = []
        self.set_phase: list[tuple[int, int]] = []
        self.set_kind: list[tuple[int, int]] = []
        self.set_dev: list[tuple[int, int]] = []
        self.no_gpu: list[int] = []

    def phase_above(self, r: int) -> int:
        """The innermost phase (user annotation) at or above row ``r``'s parent, -1 if none."""
        parent_l, role_l, phase_anc = self.parent_l, self.role_l, self.phase_anc
        path = []
        p = parent_l[r]
        while p >= 0 and role_l[p] != 0:
            q = phase_anc.get(p)
            if q is not None:
                p = q
                break
            path.append(p)
            p = parent_l[p]
        for q in path:
            phase_anc[q] = p
        return p

    def pid(self, name: str) -> int:
        """The id of ``name`` in the new phase (span name) table, appended on first use."""
        i = self.phase_ix.get(name)
        if i is None:
            i = self.phase_ix[name] = len(self.phases)
            self.phases.append(name)
        return i

    def api_lane(self, li: int) -> int:
        """The index of the ``api:THREAD`` lane beside lane ``li`` (appended on first use, same host, pid and
        device; a ``thread:`` prefix is dropped from the name)."""
        j = self.api_lane_of.get(li)
        if j is None:
            ln = self.lanes[li]
            base = ln.name[len("thread:"):] if ln.name.startswith("thread:") else ln.name
            al = Lane(ln.host, ln.pid, ln.device, A.API_LANE_PREFIX + base)
            j = self.lane_ix.get(al)
            if j is None:
                j = self.lane_ix[al] = len(self.lanes)
                self.lanes.append(al)
            self.api_lane_of[li] = j
        return j

    def with_keys(self, a: Mapping, key: tuple, static: dict, per_row: dict) -> Mapping:
        """``a`` plus ``static`` and ``per_row``. The reader's own dicts gain them in place; a shared
        ``TemplateAttrs`` stays shared: one template per (args template, ``key``), the per-row values (the
        args' own and ``per_row``) in the overlay, as the reader and the cache keep them."""
        if type(a) is dict:
            a.update(static)
            a.update(per_row)
            return a
        if isinstance(a, TemplateAttrs):
            tk = (id(a.shared), key, tuple(per_row))
            tpl = self.templates.get(tk)
            if tpl is None:
                tpl = dict(a.shared)
                tpl.update(static)
                tpl.update(dict.fromkeys(per_row, 0))
                self.templates[tk] = tpl
            return TemplateAttrs(tpl, a.keys_ + tuple(per_row), a.values_ + tuple(per_row.values()))
        out = dict(a)
        out.update(static)
        out.update(per_row)
        return out

    def device_static(self, k: str, name_id: int) -> tuple[dict, int]:
        """(the activity attributes that depend only on a device row's category ``k`` and name, the id of its
        span name: the kernel's short name, ``[CUDA memcpy KIND]``, ``[CUDA memset]``); computed once per
        (category, name). The dict is shared: callers copy it before changing it."""
        hit = self.dev_static.get((k, name_id))
        if hit is None:
            name = self.tl_phases[name_id]
            static: dict[str, Any] = {A.SOURCE: "kineto"}
            if k == "kernel":
                full = demangle(name)
                static[A.ACTIVITY], static[A.KERNEL_NAME] = "kernel", full
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
            hit = self.dev_static[(k, name_id)] = (static, self.pid(short))
        return hit

    def map_rows(self) -> None:
        """One pass over the rows with attributes: each non-phase row's attributes are rewritten (``self.attrs``)
        and its column changes gathered, by role (``map_device``, ``map_api``, ``map_host``)."""
        role_l = self.role_l
        map_device, map_api, map_host = self.map_device, self.map_api, self.map_host
        for r, a in self.attrs_in.items():
            ro = role_l[r]
            if ro == _PHASE:
                continue
            if ro == _DEVICE:
                map_device(r, a)
            elif ro == _API:
                map_api(r, a)
            else:
                map_host(r, a, ro)

    def map_device(self, r: int, a: Mapping) -> None:
        """Device row ``r`` (attributes ``a``) -> a kernel / memcpy / memset activity span: activity attributes
        (``_plan``; a ``TemplateAttrs`` stays shared, see ``_template_plan``), the launching API call (found by
        ``correlation``) and its start, the span name, and as parent the innermost phase around the launching
        call (or around the row when no call launched it)."""
        nid = self.ph_list[r]
        tl_phases, ph_list, corr_api = self.tl_phases, self.ph_list, self.corr_api
        if type(a) is TemplateAttrs:  # the reader's shared args: stay shared (see _template_plan)
            sh, ks, vals = a.shared, a.keys_, a.values_
            cr = vals[ks.index("correlation")] if "correlation" in ks else sh.get("correlation")
            launch = corr_api.get(cr) if type(cr) is int else None
            pk = (id(sh), ks, nid, launch is not None and ph_list[launch])
            plan = self.plans.get(pk)
            if plan is None:
                k = str(sh.get("chrome.cat"))
                api = tl_phases[ph_list[launch]] if launch is not None else None
                plan = self.plans[pk] = _template_plan(self.device_static(k, nid), sh, ks, k, api, launch is not None)
            tpl, keys, pick, short_id = plan
            extra = pick(vals) if pick is not None else ()
            if launch is not None:
                extra = (*extra, self.start[launch])
            self.attrs[r] = TemplateAttrs(tpl, keys, vals + extra)
        else:
            k = str(a.get("chrome.cat"))
            cr = a.get("correlation")
            launch = corr_api.get(cr) if type(cr) is int else None
            api = tl_phases[ph_list[launch]] if launch is not None else None
            static, short_id, _ = _plan(self.device_static(k, nid), a, (), k, api)
            per_row = {A.LAUNCH_API_START: self.start[launch]} if launch is not None else {}
            self.attrs[r] = self.with_keys(a, (nid, api, k), static, per_row)
        if launch is not None:
            p = launch if self.role_l[launch] == _PHASE else self.phase_above(launch)
        else:
            p = self.phase_above(r)
        self.set_parent.append((r, p))
        self.set_phase.append((r, short_id))  # the span's name (Kineto's own name: cuda.kernel.name / the copy kinds)
        self.names.pop(r, None)

    def map_api(self, r: int, a: Mapping) -> None:
        """CUDA API call ``r`` (attributes ``a``): a synchronising call (``KINETO_SYNC_APIS``) becomes a sync
        activity span on its thread's lane (device: the trace's only one, else -1; parent: the innermost phase
        around it); any other gets ``gputrace.role = "api"`` and ``cuda.api`` and keeps its name and Kineto's
        ``correlation`` (its kind and lane are set by ``place_api_calls``)."""
        nid = self.ph_list[r]
        name = self.tl_phases[nid]
        sync = KINETO_SYNC_APIS.get(name)
        if sync is not None:  # a host wait: an activity span on the thread's lane
            cr = a.get("correlation")
            per_row = {A.CORRELATION: cr} if type(cr) is int else {}
            self.attrs[r] = self.with_keys(a, (nid, "sync"), {A.API: name, A.SOURCE: "kineto", A.ACTIVITY: "sync",
                                                              A.SYNC_TYPE: sync}, per_row)
            self.set_kind.append((r, KIND_CODES["sync"]))
            self.set_dev.append((r, self.only_dev))
            self.set_phase.append((r, self.pid(A.sync_name(sync))))
            self.names.pop(r, None)
            self.set_parent.append((r, self.phase_above(r)))
        elif type(a) is dict:  # the reader's own dict: in place (the common case, inline)
            a[A.ROLE] = "api"
            a[A.API] = name
        else:
            self.attrs[r] = self.with_keys(a, (nid, "api"), {A.ROLE: "api", A.API: name}, {})

    def map_host(self, r: int, a: Mapping, ro: int) -> None:
        """Operator (``ro == _OP``) or profiler-bookkeeping (``_PROFILER``) row ``r``: ``gputrace.role`` set;
        a profiler row also becomes host kind with no GPU times."""
        role = "op" if ro == _OP else "profiler"
        if type(a) is dict:
            a[A.ROLE] = role
        else:
            self.attrs[r] = self.with_keys(a, (ro,), {A.ROLE: role}, {})
        if ro == _PROFILER:
            self.no_gpu.append(r)
            self.set_kind.append((r, KIND_CODES["host"]))

    def place_api_calls(self) -> None:
        """Every non-sync API call: host kind, moved to its thread's ``api:`` lane (``api_lane``, new lanes
        appended in the order of the threads' lane indices)."""
        c = self.tl.cols
        api = self.role == _API
        sync_ids = [i for i, p in enumerate(self.tl_phases) if p in KINETO_SYNC_APIS]
        if sync_ids:
            api &= ~np.isin(c["phase"], np.asarray(sync_ids))
        if api.any():
            self.new_kind[api] = KIND_CODES["host"]
            lanes_used = np.unique(c["lane"][api])
            to_api = np.arange(len(self.tl.lanes), dtype=np.int64)
            to_api[lanes_used] = [self.api_lane(int(li)) for li in lanes_used.tolist()]
            self.new_lane[api] = to_api[c["lane"][api]]

    def apply_updates(self) -> None:
        """Writes the gathered (row, value) updates into the new columns, and clears the GPU times of the
        profiler's rows."""
        for col, upd in ((self.new_parent, self.set_parent), (self.new_phase, self.set_phase),
                         (self.new_kind, self.set_kind), (self.new_dev, self.set_dev)):
            if upd:
                rows_, vals_ = zip(*upd, strict=True)
                col[np.asarray(rows_, np.int64)] = np.asarray(vals_, col.dtype)
        if self.no_gpu:
            self.gpu_start[self.no_gpu] = self.gpu_end[self.no_gpu] = -1

    def build(self, head: Mapping[str, Any]) -> Timeline:
        """The mapped ``Timeline``: the new columns (parents as span ids, so nesting is recomputed), tables and
        attributes, every row on one new resource (``kineto_resource(head)`` plus ``gputrace.source``), the
        input's load report."""
        tl, c, n = self.tl, self.tl.cols, self.tl.n
        res = kineto_resource(head)
        res[A.SOURCE] = "kineto"
        resources = [*tl.resources, res]
        span_id = c["span_id"]
        new_parent = self.new_parent
        psid = np.where(new_parent >= 0, span_id[np.maximum(new_parent, 0)], 0).astype(np.uint64)
        cols = {k: v for k, v in c.items() if k not in ("parent", "depth")}
        cols.update(phase=self.new_phase, kind=self.new_kind, lane=self.new_lane, device=self.new_dev,
                    gpu_start=self.gpu_start, gpu_end=self.gpu_end, parent_span_id=psid,
                    resource=np.full(n, len(resources) - 1, np.int32))
        out = Timeline.from_unsorted(cols, self.phases, self.lanes, resources, tl.trace_ids, self.attrs, self.names)
        out.load_report = tl.load_report
        return out
