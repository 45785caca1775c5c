"""Device activity of an Nsight SQLite export (kernels, copies, memsets, syncs) appended to the rows of
:mod:`gputrace.timeline.formats.nsys.read` as column blocks.

Each kernel, copy and memset table is read as columns; Python runs once per distinct *static*
attribute set (kernel + launch geometry + stream + launching API, copy kind + memory kinds, ...),
and every row of one set shares one attribute dict, with its correlation id and launch-call start on
a ``RowAttrs`` overlay. Syncs (a few per API sync call) are read row by row. The mapping itself
(names, attributes, lanes, parents through the correlation id) is described in ``nsys``'s docstring
and docs/nsight.md. Not thread-safe (one read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from gputrace import activity as A
from gputrace.timeline.formats.nsys.columns import (
    PID_MASK,
    CorrIndex,
    IntColumns,
    Rows,
    groups,
    int_columns,
    ints,
    nulls,
    shifted,
)
from gputrace.timeline.formats.nsys.sqlite import NsysFormatError, NsysReport
from gputrace.timeline.model import KIND_CODES, Lane
from gputrace.timeline.row_attrs import RowAttrs

_INVALID = {None, 0xFFFFFFFF, -1}  # CUPTI_SYNCHRONIZATION_INVALID_VALUE: stream/event not applicable
_CORR_KEYS = (A.CORRELATION,)  # per-row attribute keys of device rows (one tuple shared by all rows)
_LAUNCH_KEYS = (A.CORRELATION, A.LAUNCH_API_START)


@dataclass
class ApiCalls:
    """The API-call rows already added: first row, starts (epoch clock), globalTids, names, the
    correlation index and the kind column (a sync turns its call's kind to ``host``)."""

    base: int = 0
    start: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    gtid: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    names: list[str] = field(default_factory=list)  # per row, only where needed (api_name)
    phase: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    index: CorrIndex | None = None
    kind: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))

    def find(self, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Global row of the launching call per (process, correlation id), -1 where none."""
        if self.index is None:
            return np.full(len(proc), -1, np.int64)
        return self.index.find(proc, corr)


class Device:
    """Appends one report's device tables to ``rows``; ``launched`` collects (device row, API row)."""

    def __init__(self, rep: NsysReport, rows: Rows, api: ApiCalls, host: str, off: int, phases: list[str]) -> None:
        self.rep, self.R, self.api, self.host, self.off, self.phases = rep, rows, api, host, off, phases
        self.launched_dev: list[np.ndarray] = []
        self.launched_api: list[np.ndarray] = []
        self._shared: dict[tuple, dict] = {}
        self._gpu_lanes: dict[tuple, int] = {}

    # ---- common part of kernels, copies and memsets -------------------------------------------
    def _common(self, table: str, c: IntColumns):
        """Times, device, stream, process, correlation id and launching call of a device table."""
        rep = self.rep
        rep.table = table
        if c.null("deviceId").any():
            raise NsysFormatError(f"{rep.path}: table {table}: column deviceId is NULL")
        start, end = shifted(c.int("start"), self.off), shifted(c.int("end"), self.off)
        dev = c.int("deviceId")
        stream = c.int("streamId", 0)
        gpid = c.int("globalPid", 0)
        has_corr = ~c.null("correlationId")
        corr = c.int("correlationId", 0)
        a = np.full(len(start), -1, np.int64)
        if has_corr.any():
            q = np.flatnonzero(has_corr)
            a[q] = self.api.find(gpid[q] & PID_MASK, corr[q])
        # Lanes: one per (process, GPU, stream), registered in order of first appearance.
        first, g = groups(gpid, dev, stream)
        lane_of = np.empty(len(first), np.int32)
        for i, r in enumerate(first.tolist()):
            key = (int(gpid[r]), int(dev[r]), int(stream[r]))
            k = self._gpu_lanes.get(key)
            if k is None:
                k = self._gpu_lanes[key] = self.R.lane(Lane(self.host, (key[0] >> 24) & 0xFFFFFF, key[1],
                                                            f"stream:{key[2]}"))
            lane_of[i] = k
        # The launching API's phase (its name) is part of the static attributes.
        api_phase = np.where(a >= 0, self.api.phase[np.maximum(a - self.api.base, 0)], -1) if len(a) else a
        return start, end, dev, stream, gpid, has_corr, corr, a, lane_of[g], api_phase

    def _add(self, table, common, static: tuple[np.ndarray, ...], make, nbytes=-1) -> None:
        """One block of device rows: ``static`` key columns (besides stream and API) group the rows;
        ``make(first_row)`` -> (phase name, attribute dict without stream/source/API) per group."""
        start, end, dev, stream, gpid, has_corr, corr, a, lane, api_phase = common
        n = len(start)
        first, g = groups(*static, stream, api_phase)
        phase_of = np.empty(len(first), np.int32)
        shared_of = []
        for i, r in enumerate(first.tolist()):
            name, attrs = make(r)
            phase_of[i] = self.R.phase(name)
            attrs[A.STREAM] = int(stream[r])
            attrs[A.SOURCE] = "nsys"
            if a[r] >= 0:
                attrs[A.API] = self.phases[int(api_phase[r])]
            # Identical attribute sets share one dict (a Timeline is immutable).
            key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items())
            shared_of.append(self._shared.setdefault(key, attrs))
        base = self.R.block(table, start=start, end=end, lane=lane, phase=phase_of[g], kind="gpu",
                            proc=gpid & PID_MASK, tie=2, gpu=True, nbytes=nbytes, device=dev)
        # Per-row attributes: the shared dict, overlaid with the correlation id (and the launch call's start).
        shared = [shared_of[i] for i in g.tolist()]
        launched = a >= 0
        api_start = np.where(launched, self.api.start[np.maximum(a - self.api.base, 0)], 0) if n else a
        if launched.all():
            pairs = zip(corr.tolist(), api_start.tolist(), strict=True)
            objs = list(map(RowAttrs, shared, repeat(_LAUNCH_KEYS), pairs))
        else:
            objs = [s if not hc else RowAttrs(s, _LAUNCH_KEYS, (c, t)) if la else RowAttrs(s, _CORR_KEYS, (c,))
                    for s, hc, la, c, t in zip(shared, has_corr.tolist(), launched.tolist(), corr.tolist(),
                                               api_start.tolist(), strict=True)]
        self.R.attrs.update(zip(range(base, base + n), objs, strict=True))
        if launched.any():
            q = np.flatnonzero(launched)
            self.launched_dev.append(base + q)
            self.launched_api.append(a[q])

    def _table(self, table: str, wanted: list[str]) -> IntColumns | None:
        if table not in self.rep.tables:
            return None
        return int_columns(self.rep, table, ["start", "end", "deviceId", "streamId", "globalPid", "correlationId"]
                           + wanted)

    # ---- the tables -------------------------------------------------------------------------------
    def kernels(self) -> None:
        t = "CUPTI_ACTIVITY_KIND_KERNEL"
        geo = ["gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"]
        opt = ["registersPerThread", "staticSharedMemory", "dynamicSharedMemory"]
        c = self._table(t, ["shortName", "demangledName"] + geo + opt)
        if c is None:
            return
        common = self._common(t, c)
        strings = self.rep.strings
        static = []
        for col in ["shortName", "demangledName"] + geo + opt:
            static += [c.null(col), c.int(col, 0)]
        has_geo = ~c.null("gridX")
        if (has_geo[:, None] & np.stack([c.null(k) for k in geo[1:]], axis=1)).any():
            raise TypeError("NULL grid or block size")  # int(None), as a row-by-row read would fail
        vals = {col: static[2 * i + 1] for i, col in enumerate(["shortName", "demangledName"] + geo + opt)}
        isnull = {col: static[2 * i] for i, col in enumerate(["shortName", "demangledName"] + geo + opt)}

        def make(r):
            full = int(vals["demangledName"][r]) if not isnull["demangledName"][r] else None
            short = int(vals["shortName"][r]) if not isnull["shortName"][r] else None
            full_s = strings.get(full, f"<kernel {full}>") if full is not None else None
            short_s = strings.get(short) if short is not None else None
            phase = short_s or (full_s.split("(")[0] if full_s else "<kernel>")
            attrs: dict[str, object] = {"gputrace.activity": "kernel", A.KERNEL_NAME: full_s or phase}
            if has_geo[r]:
                attrs[A.GRID] = [int(vals[k][r]) for k in geo[:3]]
                attrs[A.BLOCK] = [int(vals[k][r]) for k in geo[3:]]
            for col, akey in zip(opt, (A.REGISTERS, A.SHARED_STATIC, A.SHARED_DYNAMIC), strict=True):
                if not isnull[col][r]:
                    attrs[akey] = int(vals[col][r])
            return phase, attrs

        self._add(t, common, tuple(static), make)

    def memcpys(self, copy_kinds: dict[int, str], mem_kinds: dict[int, str]) -> None:
        t = "CUPTI_ACTIVITY_KIND_MEMCPY"
        c = self._table(t, ["bytes", "copyKind", "srcKind", "dstKind"])
        if c is None:
            return
        common = self._common(t, c)
        nb = c.int("bytes", -1)
        kn = {k: (c.null(k), c.int(k, 0)) for k in ("copyKind", "srcKind", "dstKind")}

        def kind(k, r, table):
            return None if kn[k][0][r] else table.get(int(kn[k][1][r]))

        def make(r):
            label = A.copy_kind(kind("copyKind", r, copy_kinds)) if not kn["copyKind"][0][r] else "unknown"
            attrs = {A.ACTIVITY: "memcpy", A.MEMCPY_KIND: label,
                     A.MEMCPY_SRC: A.memory_kind(kind("srcKind", r, mem_kinds)),
                     A.MEMCPY_DST: A.memory_kind(kind("dstKind", r, mem_kinds))}
            return A.memcpy_name(label), attrs

        self._add(t, common, tuple(x for k in kn for x in kn[k]), make, nbytes=nb)

    def memsets(self, mem_kinds: dict[int, str]) -> None:
        t = "CUPTI_ACTIVITY_KIND_MEMSET"
        c = self._table(t, ["bytes", "memKind"])
        if c is None:
            return
        common = self._common(t, c)
        nb = c.int("bytes", -1)
        mk_null, mk = c.null("memKind"), c.int("memKind", 0)

        def make(r):
            mem = A.memory_kind(None if mk_null[r] else mem_kinds.get(int(mk[r])))
            return A.MEMSET_NAME, {A.ACTIVITY: "memset", A.MEMSET_KIND: mem}

        self._add(t, common, (mk_null, mk), make, nbytes=nb)

    def syncs(self, thread_lane) -> None:
        """Sync rows on the lane of the thread of their synchronising API call (row by row: a few per
        sync call). ``thread_lane(gtid, device)`` -> Lane."""
        t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        if t not in self.rep.tables:
            return
        rep, api = self.rep, self.api
        sync_types = rep.enum_by_name("ENUM_CUPTI_SYNC_TYPE")
        c = rep.arrays(t, ["start", "end", "deviceId", "streamId", "globalPid", "correlationId", "syncType", "eventId"])
        rep.table = t
        n = len(c["start"])
        if not n:
            return
        start, end = shifted(ints(c["start"]), self.off), shifted(ints(c["end"]), self.off)
        gpid_all = ints(c["globalPid"], 0)
        has_corr = ~nulls(c["correlationId"])
        corr_all = ints(c["correlationId"], 0)
        a_all = np.full(n, -1, np.int64)
        q = np.flatnonzero(has_corr)
        if len(q):
            a_all[q] = api.find(gpid_all[q] & PID_MASK, corr_all[q])
        # The kind: from the synchronising call's name where the row is joined to it, else from the enum. Nsight
        # 2025.3 writes syncType 2 (ENUM_CUPTI_SYNC_TYPE: STREAM_WAIT_EVENT) for cudaStreamSynchronize and 1 (EVENT_
        # SYNCHRONIZE) for cudaEventQuery; the call says what the host did. A poll (cudaEventQuery, cudaStreamQuery)
        # is not a sync: its row is dropped and the call stays a plain API call.
        api_kind = [A.sync_type_of_api(self.phases[int(api.phase[a - api.base])]) if a >= 0 else None
                    for a in a_all.tolist()]
        keep = np.asarray([k != "poll" for k in api_kind], bool)
        if not keep.all():
            for key in list(c):
                c[key] = c[key][keep]
            start, end, gpid_all, has_corr = start[keep], end[keep], gpid_all[keep], has_corr[keep]
            corr_all, a_all = corr_all[keep], a_all[keep]
            api_kind = [k for k, ok in zip(api_kind, keep.tolist(), strict=True) if ok]
            n = len(start)
            if not n:
                return
        lane, phase, proc, device, thread = [], [], [], [], []
        attrs_rows = []
        base = self.R.n
        for i, (dev, stream, st, ev) in enumerate(zip(c["deviceId"].tolist(), c["streamId"].tolist(),
                                                      c["syncType"].tolist(), c["eventId"].tolist(), strict=True)):
            gpid, a = int(gpid_all[i]), int(a_all[i])
            kind = api_kind[i] or A.sync_type(sync_types.get(int(st)) if st is not None else None)
            attrs: dict[str, object] = {A.ACTIVITY: "sync", A.SOURCE: "nsys", A.SYNC_TYPE: kind}
            if stream not in _INVALID:
                attrs[A.SYNC_STREAM] = int(stream)
            if ev not in _INVALID:
                attrs[A.SYNC_EVENT] = int(ev)
            if has_corr[i]:
                attrs[A.CORRELATION] = int(corr_all[i])
            d = int(dev) if dev not in _INVALID else -1
            if a >= 0:
                attrs[A.API] = self.phases[int(api.phase[a - api.base])]
                gtid = int(api.gtid[a - api.base])
                attrs["thread.id"] = gtid & 0xFFFFFF  # the OS thread id, as the CUPTI collector records it
                ln = thread_lane(gtid, d)
                gpid = gtid & ~0xFFFFFF
                api.kind[a - api.base] = KIND_CODES["host"]  # the sync span carries the wait; not counted twice
            else:
                gtid = -(1 << 40) - (base + i)  # a group of its own: nothing nests under it
                ln = Lane(self.host, (gpid >> 24) & 0xFFFFFF, d, "thread:(unknown)")
            lane.append(self.R.lane(ln))
            phase.append(self.R.phase(A.sync_name(kind)))
            proc.append(gpid & ~0xFFFFFF)
            device.append(d)
            thread.append(gtid)
            attrs_rows.append(attrs)
        self.R.block(t, start=start, end=end, lane=lane, phase=phase, kind="sync", proc=proc, tie=2, device=device,
                     thread=thread)
        self.R.attrs.update(zip(range(base, base + n), attrs_rows, strict=True))
        ok = a_all >= 0
        if ok.any():  # parent: the range around the synchronising call, as for launches
            self.launched_dev.append(base + np.flatnonzero(ok))
            self.launched_api.append(a_all[ok])
