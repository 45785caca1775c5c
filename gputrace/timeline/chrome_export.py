"""Chrome Trace Event / Perfetto JSON writer: :func:`to_chrome`, :func:`write_chrome`.

The format rules (processes, threads, overlap sub-threads, flow arrows) are described in
:mod:`gputrace.timeline.chrome`, the public module that re-exports these functions. Pure functions; no
threads.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gputrace.phases import phase_hex
from gputrace.timeline.model import KIND_NAMES, Timeline

__all__ = ["GENERATOR", "to_chrome", "write_chrome"]

#: ``otherData.generator`` of gputrace's own exports (the reader restores lanes and ids from them).
GENERATOR = "gputrace"


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, bool, int, float)) or v is None:
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    item = getattr(v, "item", None)
    return _jsonable(item()) if callable(item) else str(v)


class _Rows:
    """The columns as Python lists: the writer visits every row, and list indexing costs a tenth of
    numpy scalar indexing (this loop is the exporter's whole cost)."""

    COLS = ("start", "end", "gpu_start", "gpu_end", "phase", "kind", "span_id", "parent_span_id", "trace",
            "device", "circuit", "batch", "nbytes", "resource", "status")

    def __init__(self, tl: Timeline) -> None:
        for k in self.COLS:
            setattr(self, k, tl.cols[k].tolist())
        self.t0 = tl.t0
        self.phases = tl.phases
        self.hex = [phase_hex(p) for p in tl.phases]
        self.names = tl.names
        self.attrs = tl.attrs
        self.trace_ids = tl.trace_ids
        self.n_resources = len(tl.resources)

    def name(self, r: int) -> str:
        return self.names.get(r) or self.phases[self.phase[r]]


def _row_args(v: _Rows, r: int, device_time: bool) -> dict:
    p = v.phase[r]
    phase = v.phases[p]
    a: dict[str, Any] = {"phase": phase, "color": v.hex[p], "kind": KIND_NAMES.get(v.kind[r], "host")}
    sid = v.span_id[r]
    if sid:
        a["span_id"] = f"{sid:016x}"
    psid = v.parent_span_id[r]
    if psid:
        a["parent_span_id"] = f"{psid:016x}"
    t = v.trace[r]
    if 0 <= t < len(v.trace_ids):
        a["trace_id"] = v.trace_ids[t]
    for key, col in (("device", v.device), ("circuit", v.circuit), ("batch", v.batch), ("bytes", v.nbytes)):
        x = col[r]
        if x >= 0:
            a[key] = x
    res = v.resource[r]
    if 0 <= res < v.n_resources:
        a["resource"] = res
    st = v.status[r]  # 0 (or -1 from a default-filled column): unset
    if st in (1, 2):
        a["status"] = "ok" if st == 1 else "error"
    name = v.name(r)
    if name != phase:
        a["name"] = name
    g0, g1 = v.gpu_start[r], v.gpu_end[r]
    if device_time:
        a["host.ts_us"] = _us(v.start[r] - v.t0)
        a["host.dur_us"] = _us(v.end[r] - v.start[r])
    elif g0 >= 0 and g1 >= g0:
        a["gpu.ts_us"] = _us(g0 - v.t0)
        a["gpu.dur_us"] = _us(g1 - g0)
    extra = v.attrs.get(r)
    if extra:
        for k, x in extra.items():
            a.setdefault(k, _jsonable(x))
    return a


def to_chrome(tl: Timeline, flows: bool = True) -> dict:
    """The Timeline as a Chrome Trace Event JSON object (``{"traceEvents": [...], ...}``).

    ``flows``: draw an arrow (flow events ``s`` -> ``f``, binding to the enclosing slices) from each
    span to each child on another lane, e.g. from a host phase to the GPU work it launched.
    """
    t0 = tl.t0
    c = tl.cols
    v = _Rows(tl)
    n = tl.n
    track_of = np.zeros((n, 2), dtype=np.int64)  # (pid, tid) each row is drawn on
    drawn = np.zeros((n, 2), dtype=np.int64)  # (start, end) each row is drawn at
    meta: list[dict] = []
    events: list[dict] = []
    procs: dict[tuple[str, int], int] = {}
    lane_map: dict[str, dict] = {}
    pids_per_proc: dict[tuple[str, int], set[int]] = {}
    for lane in tl.lanes:
        pids_per_proc.setdefault((lane.host, lane.device), set()).add(lane.pid)
    next_tid: dict[int, int] = {}
    for k, lane in tl.iter_lanes():
        pkey = (lane.host, lane.device)
        pid = procs.get(pkey)
        if pid is None:
            pid = procs[pkey] = len(procs) + 1
            label = f"{lane.host} {lane.device_label}"
            meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        base_name = lane.name if len(pids_per_proc[pkey]) == 1 else f"{lane.name} [pid {lane.pid}]"
        rows = tl.lane_rows(k)
        device_time = lane.device >= 0
        if device_time:
            g0, g1 = c["gpu_start"][rows], c["gpu_end"][rows]
            use = (g0 >= 0) & (g1 >= g0)
            s = np.where(use, g0, c["start"][rows])
            e = np.where(use, g1, c["end"][rows])
        else:
            use = np.zeros(len(rows), bool)
            s, e = c["start"][rows], c["end"][rows]
        order = np.lexsort((-e, s)).tolist()
        # Sub-tracks: each keeps a stack of open end times; an event goes to the first sub-track
        # on which it nests (Perfetto requires proper nesting of X events per thread).
        tracks: list[list[int]] = []
        track_tids: list[int] = []
        s_l, e_l, use_l, rows_l = s.tolist(), e.tolist(), use.tolist(), rows.tolist()
        for i in order:
            si, ei = s_l[i], e_l[i]
            placed = -1
            for ti, stack in enumerate(tracks):
                while stack and stack[-1] <= si:
                    stack.pop()
                if not stack or stack[-1] >= ei:
                    placed = ti
                    break
            if placed < 0:
                tracks.append([])
                tid = next_tid[pid] = next_tid.get(pid, 0) + 1
                track_tids.append(tid)
                placed = len(tracks) - 1
                tname = base_name if placed == 0 else f"{base_name} (overlap {placed})"
                meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
                meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
                lane_map[f"{pid}/{tid}"] = {"host": lane.host, "pid": lane.pid, "device": lane.device, "name": lane.name}
            tracks[placed].append(ei)
            r = rows_l[i]
            track_of[r] = (pid, track_tids[placed])
            drawn[r] = (si, ei)
            events.append({
                "name": v.name(r),
                "cat": KIND_NAMES.get(v.kind[r], "host"),
                "ph": "X",
                "ts": _us(si - t0),
                "dur": _us(ei - si),
                "pid": pid,
                "tid": track_tids[placed],
                "args": _row_args(v, r, use_l[i]),
            })
    if flows and n:
        events += _flows(tl, track_of, drawn, t0)
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": GENERATOR,
            "t0_epoch_ns": str(t0),
            "lanes": lane_map,
            "resources": [_jsonable(r) for r in tl.resources],
        },
    }


def _flows(tl: Timeline, track_of: np.ndarray, drawn: np.ndarray, t0: int) -> list[dict]:
    """Flow event pairs parent -> child for children on another lane (vectorised selection).

    The start sits inside the parent's slice (at the child's host start, clamped to the slice) so
    Perfetto binds it to the parent; the finish (``bp: e``) binds to the child's enclosing slice.
    """
    c = tl.cols
    par = c["parent"]
    kids = np.nonzero(par >= 0)[0]
    if len(kids) == 0:
        return []
    ps = par[kids]
    kids = kids[c["lane"][kids] != c["lane"][ps]]
    ps = par[kids]
    at = np.clip(c["start"][kids], drawn[ps, 0], drawn[ps, 1])
    out = []
    for k, (r, p, a) in enumerate(zip(kids.tolist(), ps.tolist(), at.tolist()), 1):
        out.append({"name": "parent", "cat": "gputrace.flow", "ph": "s", "id": k, "ts": _us(a - t0),
                    "pid": int(track_of[p, 0]), "tid": int(track_of[p, 1])})
        out.append({"name": "parent", "cat": "gputrace.flow", "ph": "f", "bp": "e", "id": k,
                    "ts": _us(int(drawn[r, 0]) - t0), "pid": int(track_of[r, 0]), "tid": int(track_of[r, 1])})
    return out


def write_chrome(tl: Timeline, path: str | Path, flows: bool = True) -> int:
    """Write :func:`to_chrome` to ``path`` (gzip if it ends in ``.gz``; atomically, through
    ``gputrace.atomic_write``); returns the event count."""
    from gputrace.atomic_write import write_atomic

    doc = to_chrome(tl, flows=flows)
    data = orjson.dumps(doc)
    p = Path(path)
    if p.suffix == ".gz":
        data = gzip.compress(data)
    write_atomic(p, data)
    return len(doc["traceEvents"])
