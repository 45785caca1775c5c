"""One pass that rewrites a Kineto ``Timeline`` onto the GPU-activity conventions (``KinetoMapping``, run by
``kineto.map_kineto``, whose docstring states what each row becomes): the launch join (a device row's
``correlation`` -> its launching API call -> the innermost phase around it), the per-role rewrite of the
attributes, the ``api:THREAD`` lanes, and the new ``Timeline``.

The rules (which row is what) are in ``kineto_roles``; the device rows' attributes in ``kineto_device``. Pure
apart from the reader's own attribute dicts, which gain the new keys in place (see ``KinetoMapping.with_keys``);
any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gputrace import activity as A
from gputrace.timeline.formats.chrome.kineto_device import device_name_attrs, device_plan, template_plan
from gputrace.timeline.formats.chrome.kineto_roles import (
    API as _API,
    DEVICE as _DEVICE,
    KINETO_SYNC_APIS,
    OP as _OP,
    PHASE as _PHASE,
    PROFILER as _PROFILER,
    row_roles,
)
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.row_attrs import TemplateAttrs

__all__ = ["KinetoMapping"]


class KinetoMapping:
    """One mapping of a Kineto ``Timeline`` (``map_kineto``), run once, in this order: ``map_rows``,
    ``place_api_calls``, ``apply_updates``, ``build``. Holds the input, the copies of the columns and tables
    the mapping rewrites (the input's arrays and lists are never written; its attribute dicts are, see
    ``with_keys``), the column updates gathered as (row, value) and the caches of what depends only on a
    name or an args template."""

    def __init__(self, tl: Timeline) -> None:
        """Classifies the rows (``row_roles``) and copies what the mapping rewrites; ``tl`` has rows."""
        self.tl = tl
        c = tl.cols
        n = tl.n
        self.attrs_in: Mapping[int, Any] = tl.attrs  # dicts and TemplateAttrs
        self.start = c["start"].tolist()
        self.ph_list = c["phase"].tolist()
        self.tl_phases = tl.phases
        self.role_l, self.corr_api = row_roles(self.attrs_in, n)
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
        self.plans: dict[tuple, tuple[dict, tuple, Any, int]] = {}  # map_device's template_plan cache
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
            al = Lane(ln.host, ln.pid, ln.device, A.api_lane_name(ln.name))
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
        (category, name) (``kineto_device.device_name_attrs``). The dict is shared: callers copy it before
        changing it."""
        hit = self.dev_static.get((k, name_id))
        if hit is None:
            static, short = device_name_attrs(k, self.tl_phases[name_id])
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
        (``device_plan``; a ``TemplateAttrs`` stays shared, see ``template_plan``), the launching API call (found by
        ``correlation``) and its start, the span name, and as parent the innermost phase around the launching
        call (or around the row when no call launched it)."""
        nid = self.ph_list[r]
        tl_phases, ph_list, corr_api = self.tl_phases, self.ph_list, self.corr_api
        if type(a) is TemplateAttrs:  # the reader's shared args: stay shared (see template_plan)
            sh, ks, vals = a.shared, a.keys_, a.values_
            cr = vals[ks.index("correlation")] if "correlation" in ks else sh.get("correlation")
            launch = corr_api.get(cr) if type(cr) is int else None
            pk = (id(sh), ks, nid, launch is not None and ph_list[launch])
            plan = self.plans.get(pk)
            if plan is None:
                k = str(sh.get("chrome.cat"))
                api = tl_phases[ph_list[launch]] if launch is not None else None
                plan = self.plans[pk] = template_plan(self.device_static(k, nid), sh, ks, k, api, launch is not None)
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
            static, short_id, _ = device_plan(self.device_static(k, nid), a, (), k, api)
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

    def build(self, res: dict[str, Any]) -> Timeline:
        """The mapped ``Timeline``: the new columns (parents as span ids, so nesting is recomputed), tables and
        attributes, every row on one new resource (``res``, the header's resource attributes, gains
        ``gputrace.source``), the input's load report."""
        tl, c, n = self.tl, self.tl.cols, self.tl.n
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
