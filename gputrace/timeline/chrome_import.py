"""Chrome Trace Event JSON reader: :func:`read_chrome`, :func:`from_chrome`.

How events map onto lanes (gputrace's own exports round-trip; Kineto / ``chrome://tracing`` recordings
are mapped by ``args.device``/``args.stream`` and thread names) is described in
:mod:`gputrace.timeline.chrome`, the public module that re-exports these names. Pure functions; no
threads. Errors (:class:`ChromeFormatError`) name the file and the event index.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gputrace.phases import phase_kind
from gputrace.timeline.chrome_stream import GENERATOR, KINETO_ARGS, KINETO_CATEGORIES
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.nesting import nest_parents

__all__ = ["ChromeFormatError", "read_chrome", "from_chrome"]

#: Kineto categories of device activity (drawn on GPU stream lanes).
_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_op"}
#: Kineto categories of host-side CUDA API calls (carry ``args.correlation``).
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}


class ChromeFormatError(ValueError):
    """A Chrome trace that breaks the format; the message names file, event index and field."""


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
            if a.get("gputrace.activity") in KINETO_CATEGORIES:  # written for Kineto tools; ours are in attrs
                for key in KINETO_ARGS:
                    a.pop(key, None)
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
