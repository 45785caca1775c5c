"""Chrome Trace Event / Perfetto JSON: write a Timeline as one, and read one into a Timeline.

Writer (:func:`to_chrome`, :func:`write_chrome`) — opens in ui.perfetto.dev and chrome://tracing:

* one *process* per host CPU and one per (host, GPU), named by ``process_name`` metadata and ordered
  by ``process_sort_index`` (GPUs of a host first, as in the TUI);
* one *thread* per lane (``stream:N`` / ``thread:NAME``) with ``thread_name`` / ``thread_sort_index``;
* one ``X`` complete event per span, ``ts``/``dur`` in microseconds as floats relative to the first
  span (so nanoseconds survive; the epoch origin is ``otherData.t0_epoch_ns``);
* spans with device times (``gpu_start``/``gpu_end``) on a GPU lane are drawn at device time, with
  the host enqueue times kept in ``args``;
* ``X`` events on one thread must nest (Perfetto drops or flags the others), so a span that only
  partly overlaps a span already on its thread goes to an extra thread ``<lane> (overlap N)``;
* flow arrows (``s``/``f`` pairs) from each span to its children on other lanes (host phase -> the
  GPU work under it), unless ``flows=False``.

Reader (:func:`read_chrome`, :func:`from_chrome`) — gputrace's own files round-trip (lanes, ids and
attributes are restored from ``otherData`` and ``args``); other tools' traces (PyTorch profiler /
Kineto, ``chrome://tracing`` recordings) map ``X`` events and ``B``/``E`` pairs onto lanes: events
with ``args.device`` and ``args.stream`` (Kineto GPU activity) go to that GPU's stream lane, the rest
to ``thread:<thread_name>``. Nesting comes from time containment per lane; a GPU event whose
``args.correlation`` matches a CPU runtime call gets that call's enclosing span as its parent.
Instant, counter, flow and async events are skipped (counted in the ``skipped`` entry of
:func:`from_chrome`'s ``stats``).

Pure functions; no threads. Errors name the file and the event index.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gputrace.phases import phase_hex, phase_kind
from gputrace.timeline.model import KIND_CODES, KIND_NAMES, Lane, Timeline

__all__ = ["ChromeFormatError", "to_chrome", "write_chrome", "read_chrome", "from_chrome", "nest_parents"]

GENERATOR = "gputrace"
#: Kineto categories of device activity (drawn on GPU stream lanes).
_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_op"}
#: Kineto categories of host-side CUDA API calls (carry ``args.correlation``).
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}


class ChromeFormatError(ValueError):
    """A Chrome trace that breaks the format; the message names file, event index and field."""


# ---------------------------------------------------------------------------------------------
# shared: nesting by time containment
# ---------------------------------------------------------------------------------------------
def nest_parents(start: np.ndarray, end: np.ndarray, group: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Parent row of each row by time containment within its group (-1 for roots).

    Rows are visited by (group, start, -end, tiebreak): of two ranges starting at the same instant
    the longer one is the parent; of two identical ranges the one with the smaller ``tiebreak``
    (then the smaller row number) is. A range that only partly overlaps the innermost open range is
    attached to the innermost open range that contains it. Python loop: O(n) with a stack, about
    1 µs per row; vectorising containment queries would need a segment tree and not be faster here.
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    keys = [np.arange(n)]
    if tiebreak is not None:
        keys.append(np.asarray(tiebreak))
    keys += [-np.asarray(end), np.asarray(start), np.asarray(group)]
    order = np.lexsort(keys).tolist()
    s_l, e_l, g_l = np.asarray(start).tolist(), np.asarray(end).tolist(), np.asarray(group).tolist()
    stack: list[int] = []
    prev = None
    for i in order:
        g = g_l[i]
        if g != prev:
            stack.clear()
            prev = g
        s, e = s_l[i], e_l[i]
        while stack and e_l[stack[-1]] <= s and not (s_l[stack[-1]] == s and e_l[stack[-1]] >= e):
            stack.pop()
        j = len(stack) - 1
        while j >= 0 and e_l[stack[j]] < e:
            j -= 1
        if j >= 0:
            parent[i] = stack[j]
        stack.append(i)
    return parent


# ---------------------------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------------------------
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
    """Write :func:`to_chrome` to ``path`` (gzip if it ends in ``.gz``); returns the event count."""
    doc = to_chrome(tl, flows=flows)
    data = orjson.dumps(doc)
    p = Path(path)
    if p.suffix == ".gz":
        data = gzip.compress(data)
    p.write_bytes(data)
    return len(doc["traceEvents"])


# ---------------------------------------------------------------------------------------------
# reader
# ---------------------------------------------------------------------------------------------
def read_chrome(path: str | Path, host: str | None = None) -> Timeline:
    """Read a Chrome Trace Event JSON file (``.json`` or ``.json.gz``; object or array form)."""
    p = Path(path)
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # The array form may legally lack its closing bracket (a trace cut short).
        text = raw.strip()
        if text.startswith(b"[") and not text.endswith(b"]"):
            try:
                doc = orjson.loads(text.rstrip(b",\n\r\t ") + b"]")
            except orjson.JSONDecodeError:
                raise ChromeFormatError(f"{p}: not JSON: {exc}") from None
        else:
            raise ChromeFormatError(f"{p}: not JSON: {exc}") from None
    return from_chrome(doc, host=host or p.name.split(".")[0], source=str(p))


def _num(ev: dict, key: str, src: str, idx: int) -> float:
    v = ev.get(key)
    if type(v) not in (int, float):
        raise ChromeFormatError(f"{src}: traceEvents[{idx}] ({ev.get('ph')!r} {ev.get('name')!r}): field {key!r} must be a number, got {v!r}")
    return v


def _hex_int(v: Any) -> int:
    if isinstance(v, str) and re.fullmatch(r"[0-9a-fA-F]{1,16}", v):
        return int(v, 16)
    return 0


def from_chrome(doc: Any, host: str = "chrome", source: str = "<chrome>", stats: dict | None = None) -> Timeline:
    """Build a Timeline from a parsed Chrome trace (dict with ``traceEvents`` or a bare list).

    ``stats`` (if given) receives ``events``, ``spans`` and ``skipped`` counts. Raises
    :class:`ChromeFormatError` naming ``source`` and the event index for malformed events.
    """
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        other = doc.get("otherData") or {}
        if not isinstance(events, list):
            raise ChromeFormatError(f"{source}: top-level object has no 'traceEvents' list")
    elif isinstance(doc, list):
        events, other = doc, {}
    else:
        raise ChromeFormatError(f"{source}: expected an object or an array at top level")
    ours = other.get("generator") == GENERATOR
    base = int(other.get("t0_epoch_ns", 0)) if ours else int(doc.get("baseTimeNanoseconds", 0)) if isinstance(doc, dict) else 0
    lane_map = other.get("lanes", {}) if ours else {}
    proc_names: dict[Any, str] = {}
    thread_names: dict[tuple, str] = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("ph") == "M":
            name, args = ev.get("name"), ev.get("args") or {}
            if name == "process_name":
                proc_names[ev.get("pid")] = str(args.get("name", ""))
            elif name == "thread_name":
                thread_names[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
    recs: list[tuple[int, int, str, str, Any, Any, dict]] = []  # start, end, name, cat, pid, tid, args
    open_b: dict[tuple, list[tuple[int, str, str, dict]]] = {}
    skipped = 0
    t_max = 0
    for idx, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ChromeFormatError(f"{source}: traceEvents[{idx}] is not an object")
        ph = ev.get("ph")
        if ph == "X":
            ts = round(_num(ev, "ts", source, idx) * 1000)
            dur = round(ev.get("dur", 0) * 1000) if type(ev.get("dur", 0)) in (int, float) else round(_num(ev, "dur", source, idx))
            if dur < 0:
                raise ChromeFormatError(f"{source}: traceEvents[{idx}] ({ev.get('name')!r}): negative 'dur'")
            recs.append((base + ts, base + ts + dur, str(ev.get("name", "")), str(ev.get("cat", "")), ev.get("pid"), ev.get("tid"), ev.get("args") or {}))
            t_max = max(t_max, base + ts + dur)
        elif ph == "B":
            ts = round(_num(ev, "ts", source, idx) * 1000)
            open_b.setdefault((ev.get("pid"), ev.get("tid")), []).append((base + ts, str(ev.get("name", "")), str(ev.get("cat", "")), ev.get("args") or {}))
        elif ph == "E":
            ts = round(_num(ev, "ts", source, idx) * 1000)
            stack = open_b.get((ev.get("pid"), ev.get("tid")))
            if not stack:
                skipped += 1  # an E without its B (trace started mid-range)
                continue
            s, name, cat, args = stack.pop()
            args = {**args, **(ev.get("args") or {})}
            recs.append((s, base + ts, name, cat, ev.get("pid"), ev.get("tid"), args))
            t_max = max(t_max, base + ts)
        elif ph != "M":
            skipped += 1
    for (pid, tid), stack in open_b.items():  # B without E: close at the end of the trace
        for s, name, cat, args in stack:
            recs.append((s, max(s, t_max), name, cat, pid, tid, {**args, "unterminated": True}))
    if stats is not None:
        stats.update(events=len(events), spans=len(recs), skipped=skipped)
    resources = [dict(r) for r in other.get("resources", [])] if ours else []
    return _build(recs, host, ours, lane_map, proc_names, thread_names, source, resources, base)


def _build(recs, host, ours, lane_map, proc_names, thread_names, source, resources, base) -> Timeline:
    n = len(recs)
    lanes: list[Lane] = []
    lane_ix: dict[Lane, int] = {}
    phases: list[str] = []
    phase_ix: dict[str, int] = {}
    cols = {k: np.full(n, -1, np.int64) for k in ("start", "end", "gpu_start", "gpu_end", "device", "circuit", "batch", "nbytes")}
    lane_col = np.zeros(n, np.int32)
    phase_col = np.zeros(n, np.int32)
    kind_col = np.zeros(n, np.int8)
    status_col = np.zeros(n, np.int8)
    span_id = np.arange(1, n + 1, dtype=np.uint64)
    parent_sid = np.zeros(n, np.uint64)
    trace_col = np.full(n, -1, np.int32)
    resource_col = np.full(n, -1, np.int32)
    trace_ids: list[str] = []
    trace_ix: dict[str, int] = {}
    attrs: dict[int, dict] = {}
    cpu_pids = {pid for (pid, _tid) in thread_names if not re.search(r"GPU\s*\d+", proc_names.get(pid, ""))}
    single_pid = next(iter(cpu_pids)) if len(cpu_pids) == 1 and isinstance(next(iter(cpu_pids)), int) else -1
    correlation: dict[int, int] = {}
    gpu_rows: list[tuple[int, int]] = []
    have_ids = ours
    for i, (s, e, name, cat, pid, tid, args) in enumerate(recs):
        a = dict(args)
        if ours:
            info = lane_map.get(f"{pid}/{tid}")
            if info is None:
                raise ChromeFormatError(f"{source}: gputrace export without lane info for pid {pid} tid {tid}")
            lane = Lane(str(info["host"]), int(info["pid"]), int(info["device"]), str(info["name"]))
            phase = str(a.pop("phase", name))
            kind = a.pop("kind", phase_kind(phase))
            a.pop("color", None)
            if "host.ts_us" in a:  # drawn at device time; host times in args
                cols["gpu_start"][i], cols["gpu_end"][i] = s, e
                s = base + round(float(a.pop("host.ts_us")) * 1000)
                e = s + round(float(a.pop("host.dur_us", 0)) * 1000)
            elif "gpu.ts_us" in a:  # drawn at host time; device times in args
                g = base + round(float(a.pop("gpu.ts_us")) * 1000)
                cols["gpu_start"][i], cols["gpu_end"][i] = g, g + round(float(a.pop("gpu.dur_us", 0)) * 1000)
            name_ = a.pop("name", name)
        else:
            dev, stream = a.get("device"), a.get("stream")
            if cat in _GPU_CATS and isinstance(dev, int) and stream is not None:
                lane = Lane(host, single_pid, dev, f"stream:{stream}")
                kind = "gpu"
                cols["gpu_start"][i], cols["gpu_end"][i] = s, e
                if isinstance(a.get("correlation"), int):
                    gpu_rows.append((i, a["correlation"]))
            else:
                tname = thread_names.get((pid, tid)) or str(tid)
                lane = Lane(host, pid if isinstance(pid, int) else -1, -1, f"thread:{tname}")
                kind = phase_kind(name) if name in _vocab() else "host"
                if cat in _RUNTIME_CATS and isinstance(a.get("correlation"), int):
                    correlation[a["correlation"]] = i
            phase, name_ = name, name
            if cat:
                a["chrome.cat"] = cat
        k = lane_ix.get(lane)
        if k is None:
            k = lane_ix[lane] = len(lanes)
            lanes.append(lane)
        lane_col[i] = k
        p = phase_ix.get(phase)
        if p is None:
            p = phase_ix[phase] = len(phases)
            phases.append(phase)
        phase_col[i] = p
        kind_col[i] = KIND_CODES.get(str(kind), 0)
        cols["start"][i], cols["end"][i] = s, e
        cols["device"][i] = lane.device
        for key, col in (("circuit", "circuit"), ("batch", "batch"), ("bytes", "nbytes")):
            v = a.pop(key, None) if ours else a.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                cols[col][i] = v
        if ours:
            a.pop("device", None)
            res = a.pop("resource", None)
            if isinstance(res, int) and 0 <= res < len(resources):
                resource_col[i] = res
            st = a.pop("status", None)
            status_col[i] = {"ok": 1, "error": 2}.get(st, 0)
            sid, psid = _hex_int(a.pop("span_id", "")), _hex_int(a.pop("parent_span_id", ""))
            if sid:
                span_id[i] = sid
            parent_sid[i] = psid
            t = a.pop("trace_id", None)
            if isinstance(t, str):
                if t not in trace_ix:
                    trace_ix[t] = len(trace_ids)
                    trace_ids.append(t)
                trace_col[i] = trace_ix[t]
            if name_ != phase:
                a["gputrace.name"] = name_
        if a:
            attrs[i] = a
    if not have_ids and n:
        par = nest_parents(cols["start"], cols["end"], lane_col)
        for i, corr in gpu_rows:  # a GPU event's parent: the span enclosing its launching call
            r = correlation.get(corr)
            if r is not None:
                par[i] = par[r] if par[r] >= 0 else r
        has = par >= 0
        parent_sid[has] = span_id[par[has]]
    out = {k: v for k, v in cols.items()}
    out.update(lane=lane_col, phase=phase_col, kind=kind_col, status=status_col, span_id=span_id,
               parent_span_id=parent_sid, trace=trace_col, resource=resource_col)
    tl = Timeline.from_unsorted(out, phases, lanes, resources, trace_ids, attrs)
    tl.names = {r: a.pop("gputrace.name") for r, a in tl.attrs.items() if "gputrace.name" in a}
    return tl


def _vocab() -> dict:
    from gputrace.phases import PHASES

    return PHASES
