"""The Chrome reader's accumulator (``_Events``): events, in file order and in batches, become columns at once;
``timeline()`` builds the Timeline.

Each event turns into column values as it is added (a few arrays and, per span, only the attributes it keeps),
so memory follows the Timeline, not the JSON document. A gputrace export's batches go through the typed and
batch mixins (``typed.OursTyped``, ``batch.OursBatch``), another tool's through ``foreign.ForeignBatch``; what
they decline, and ``B``/``E`` events, take the per-event path here (``_add_each``, ``_row``), whose errors
(:class:`~gputrace.timeline.formats.chrome.fields.ChromeFormatError`) name the file, the event index and the
field. Lanes of other tools' traces are resolved at the end (thread names may come after the events that use
them), and their rows are mapped onto the GPU-activity conventions (``kineto.map_kineto``).

Used by :mod:`gputrace.timeline.formats.chrome.read` (``read_chrome``, ``read_chrome_head``, ``from_chrome``).
Not thread-safe: one reader per accumulator, on the caller's thread.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np

from gputrace.activity import ANNOTATION_LANE_PREFIX
from gputrace.phases import phase_kind
from gputrace.timeline.formats.chrome.args_share import ArgsSharer
from gputrace.timeline.formats.chrome.batch import (
    STATUS as _STATUS,
    OursBatch,
    hex_int as _hex_int,
    ident_ok,
    meta_label,
)
from gputrace.timeline.formats.chrome.fields import ChromeFormatError, _args, _ident, _ns, _short, _us_ns, _where
from gputrace.timeline.formats.chrome.foreign import (
    ANNOTATION_CATS as _ANNOTATION_CATS,
    GPU_CATS as _GPU_CATS,
    RUNTIME_CATS as _RUNTIME_CATS,
    ForeignBatch,
    is_device,
)
from gputrace.timeline.formats.chrome.kineto import map_kineto
from gputrace.timeline.formats.chrome.stream import GENERATOR, KINETO_ARGS, KINETO_CATEGORIES
from gputrace.timeline.formats.chrome.typed import OursTyped, TypedBatch
from gputrace.timeline.model import KIND_CODES, Lane, Timeline
from gputrace.timeline.nesting import nest_parents

#: Runs of this many events or more between ``B``/``E`` events of another tool's trace go through
#: the batch path (``chrome_foreign``); shorter ones, and the ``B``/``E`` events, one by one.
_MIN_RUN = 64


#: A process Kineto labels as a GPU (``process_labels`` ``GPU 0``; older traces name the process so).
_GPU_LABEL = re.compile(r"\s*GPU\s*(\d{1,5})\s*")

#: The accumulator's column arrays (``_Events.__init__``).
_COLUMN_ARRAYS = ("start", "end", "gstart", "gend", "hasg", "circuit", "batch", "nbytes", "kind", "status", "phase",
                  "lane", "span_id", "parent_sid", "trace", "resource")


class _Events(OursBatch, OursTyped, ForeignBatch):
    """Accumulates events (in file order, in batches) as columns; ``timeline()`` builds the result."""

    @classmethod
    def for_header(cls, head: dict, host: str, source: str) -> _Events:
        """The accumulator for a document whose top-level keys other than ``traceEvents`` are ``head``.
        Raises ChromeFormatError for a base time or a gputrace export's tables of the wrong shape."""
        other = head.get("otherData") if isinstance(head, dict) else None
        other = other if isinstance(other, dict) else {}
        ours = other.get("generator") == GENERATOR
        field = "otherData.t0_epoch_ns" if ours else "baseTimeNanoseconds"
        base = other.get("t0_epoch_ns", 0) if ours else (head.get("baseTimeNanoseconds", 0) or 0)
        if type(base) is str and base.isascii() and base.isdigit() and len(base) < 20:  # 64-bit ints as strings
            base = int(base)
        if type(base) is not int or not 0 <= base < (1 << 62):
            raise ChromeFormatError(f"{source}: {field} must be an integer from 0 to 2**62 ns, got {_short(base)}")
        lanes, resources = (other.get("lanes", {}), other.get("resources", [])) if ours else ({}, [])
        if type(lanes) is not dict or type(resources) is not list or not all(type(r) is dict for r in resources):
            raise ChromeFormatError(f"{source}: otherData.lanes must be an object and otherData.resources a list "
                                    "of objects")
        acc = cls(host, source, ours, lanes, base, [dict(r) for r in resources])
        if not ours and isinstance(head, dict):  # Kineto's header (distributedInfo, versions): resource attributes
            acc.head = {k: v for k, v in head.items() if k != "traceEvents"}
        return acc

    def __init__(self, host: str, source: str, ours: bool, lane_map: dict, base: int, resources: list) -> None:
        self.host, self.source, self.ours, self.lane_map, self.base = host, source, ours, lane_map, base
        self.resources = resources
        self.head: dict = {}
        self.idx = 0  # events seen (for error messages)
        self.skipped = 0
        self.t_max = 0
        self.open_b: dict[tuple, list] = {}
        self.proc_names: dict[Any, str] = {}
        self.proc_labels: dict[Any, str] = {}
        self.thread_names: dict[tuple, str] = {}
        # columns (times relative to ``base``)
        self.start, self.end = array("q"), array("q")
        self.gstart, self.gend = array("q"), array("q")  # relative to base; valid where hasg
        self.hasg = array("b")
        self.circuit, self.batch, self.nbytes = array("q"), array("q"), array("q")
        self.kind, self.status = array("b"), array("b")
        self.phase, self.lane = array("i"), array("i")  # lane: index into lane_keys
        self.span_id, self.parent_sid = array("Q"), array("Q")
        self.trace, self.resource = array("i"), array("i")
        self.attrs: dict[int, Mapping] = {}  # dicts, and TemplateAttrs of shared args
        self.names: dict[int, str] = {}
        self.phases: list[str] = []
        self.phase_ix: dict[str, int] = {}
        self.lane_keys: list[Any] = []  # ours: Lane; others: ("gpu", dev, stream) or ("thr", pid, tid)
        self.lane_ix: dict[Any, int] = {}
        self.trace_ids: list[str] = []
        self.trace_ix: dict[str, int] = {}
        self.correlation: dict[int, int] = {}
        self.gpu_rows: list[tuple[int, int]] = []
        self.gpu_tracks: dict[tuple, tuple] = {}  # (pid, tid) of device rows -> (device, stream), the first's
        self.cat_attrs: dict[str, dict] = {}
        self.args_sharers: dict[str, ArgsSharer] = {}

    # ---- events ----------------------------------------------------------------------
    def add(self, events: list | TypedBatch) -> None:
        """Events in file order: a list of decoded JSON values, or a TypedBatch (re-decoded as a
        list when the typed path declines it). Raises ChromeFormatError."""
        if isinstance(events, TypedBatch):
            if self._add_ours_typed(events.events) if self.ours else self._add_foreign_typed(events.events):
                return
            evs: list = events.as_json()
        else:
            evs = events
        if self.ours:
            if not self._add_ours_batch(evs):
                self._add_each(evs)
            return
        start = 0  # another tool's trace: runs between B/E events as batches, the rest one by one
        for j in [j for j, ev in enumerate(evs) if type(ev) is dict and ev.get("ph") in ("B", "E")] + [len(evs)]:
            run = evs[start:j]
            if len(run) < _MIN_RUN or not self._add_foreign_batch(run):
                self._add_each(run)
            self._add_each(evs[j:j + 1])
            start = j + 1

    def _add_each(self, evs: list) -> None:
        """The per-event path (exact errors: file, event index, field)."""
        src = self.source
        for ev in evs:
            idx = self.idx
            self.idx += 1
            if not isinstance(ev, dict):
                raise ChromeFormatError(f"{src}: traceEvents[{idx}] is not an object")
            ph = ev.get("ph")
            if ph == "X":
                ts = _ns(ev, "ts", src, idx)
                dur = _ns(ev, "dur", src, idx, default=0)
                if dur < 0:
                    raise ChromeFormatError(f"{src}: traceEvents[{idx}] ({_short(ev.get('name'))}): negative 'dur'")
                self._row(ts, ts + dur, str(ev.get("name", "")), str(ev.get("cat", "")), _ident(ev, "pid", src, idx),
                          _ident(ev, "tid", src, idx), _args(ev, src, idx), _where(ev, src, idx))
                if ts + dur > self.t_max:
                    self.t_max = ts + dur
            elif ph == "B":
                ts = _ns(ev, "ts", src, idx)
                self.open_b.setdefault((_ident(ev, "pid", src, idx), _ident(ev, "tid", src, idx)), []).append(
                    (ts, str(ev.get("name", "")), str(ev.get("cat", "")), _args(ev, src, idx)))
            elif ph == "E":
                ts = _ns(ev, "ts", src, idx)
                pid, tid = _ident(ev, "pid", src, idx), _ident(ev, "tid", src, idx)
                stack = self.open_b.get((pid, tid))
                args = _args(ev, src, idx)
                if not stack:
                    self.skipped += 1  # an E without its B (trace started mid-range)
                    continue
                s, name, cat, b_args = stack.pop()
                if ts < s:
                    raise ChromeFormatError(f"{_where(ev, src, idx)}: ends at {ts} ns, before its 'B' {_short(name)} "
                                            f"began at {s} ns (a negative duration)")
                self._row(s, ts, name, cat, pid, tid, {**b_args, **args}, _where(ev, src, idx))
                if ts > self.t_max:
                    self.t_max = ts
            elif ph == "M":
                name, args = ev.get("name"), _args(ev, src, idx)
                if name == "process_name":
                    self.proc_names[_ident(ev, "pid", src, idx)] = meta_label(name, args)
                elif name == "process_labels":
                    self.proc_labels[_ident(ev, "pid", src, idx)] = meta_label(name, args)
                elif name == "thread_name":
                    self.thread_names[(_ident(ev, "pid", src, idx), _ident(ev, "tid", src, idx))] = str(
                        args.get("name", ""))
            else:
                self.skipped += 1

    def _lane(self, key) -> int:
        k = self.lane_ix.get(key)
        if k is None:
            k = self.lane_ix[key] = len(self.lane_keys)
            self.lane_keys.append(key)
        return k

    def _row(self, s: int, e: int, name: str, cat: str, pid, tid, args: dict, where: str = "") -> None:
        """One span; ``where`` names the event in errors (ChromeFormatError)."""
        i = len(self.start)
        a = dict(args)
        g0 = g1 = 0
        has_g = False
        if self.ours:
            info = self.lane_map.get(f"{pid}/{tid}")
            if info is None:
                raise ChromeFormatError(f"{self.source}: gputrace export without lane info for pid {pid} tid {tid}")
            try:
                lane = Lane(str(info["host"]), int(info["pid"]), int(info["device"]), str(info["name"]))
            except (KeyError, TypeError, ValueError, OverflowError):
                raise ChromeFormatError(f"{self.source}: otherData.lanes[{_short(f'{pid}/{tid}')}] must hold host, "
                                        "pid, device and name") from None
            lk = self._lane(lane)
            phase = str(a.pop("phase", name))
            kind = a.pop("kind", phase_kind(phase))
            a.pop("color", None)
            if a.get("gputrace.activity") in KINETO_CATEGORIES:  # written for Kineto tools; ours are in attrs
                for key in KINETO_ARGS:
                    a.pop(key, None)
            at = where or self.source
            if "host.ts_us" in a:  # drawn at device time; host times in args
                g0, g1, has_g = s, e, True
                s = _us_ns(a.pop("host.ts_us"), f"{at}: args.host.ts_us")
                e = s + _us_ns(a.pop("host.dur_us", 0), f"{at}: args.host.dur_us")
            elif "gpu.ts_us" in a:  # drawn at host time; device times in args
                g0 = _us_ns(a.pop("gpu.ts_us"), f"{at}: args.gpu.ts_us")
                g1 = g0 + _us_ns(a.pop("gpu.dur_us", 0), f"{at}: args.gpu.dur_us")
                has_g = True
            if e < s or g1 < g0:
                raise ChromeFormatError(f"{at}: a negative duration in args (host.dur_us or gpu.dur_us)")
            name_ = a.pop("name", name)
        else:
            dev, stream = a.get("device"), a.get("stream")
            ann = cat in _ANNOTATION_CATS
            if cat in _GPU_CATS and is_device(dev) and stream is not None:
                if not ident_ok(stream):  # a stream id is a lane key and a 64-bit column in the analyses
                    raise ChromeFormatError(f"{where or self.source}: field 'args.stream' must be a string or a "
                                            f"64-bit integer, got {_short(stream)}")
                lk = self._lane(("gpuann" if ann else "gpu", dev, stream))
                kind = "gpu"
                g0, g1, has_g = s, e, True
                if isinstance(a.get("correlation"), int):
                    self.gpu_rows.append((i, a["correlation"]))
                if not ann and (pid, tid) not in self.gpu_tracks:
                    self.gpu_tracks[(pid, tid)] = (dev, stream)
            else:
                lk = self._lane(("ann" if ann else "thr", pid, tid))
                kind = phase_kind(name) if name in _vocab() else "host"
                if cat in _RUNTIME_CATS and isinstance(a.get("correlation"), int):
                    self.correlation[a["correlation"]] = i
            phase, name_ = name, name
            if cat:
                a["chrome.cat"] = cat
        p = self.phase_ix.get(phase)
        if p is None:
            p = self.phase_ix[phase] = len(self.phases)
            self.phases.append(phase)
        nums = []
        for key in ("circuit", "batch", "bytes"):
            v = a.pop(key, None) if self.ours else a.get(key)
            nums.append(v if isinstance(v, int) and not isinstance(v, bool) else -1)
        res = st = -1
        sid = psid = 0
        tr = -1
        if self.ours:
            a.pop("device", None)
            r = a.pop("resource", None)
            if isinstance(r, int) and 0 <= r < len(self.resources):
                res = r
            st = _STATUS.get(a.pop("status", None), 0)
            sid, psid = _hex_int(a.pop("span_id", "")), _hex_int(a.pop("parent_span_id", ""))
            t = a.pop("trace_id", None)
            if isinstance(t, str):
                known = self.trace_ix.get(t)
                if known is None:
                    known = self.trace_ix[t] = len(self.trace_ids)
                    self.trace_ids.append(t)
                tr = known
            if name_ != phase:
                self.names[i] = str(name_)
        self.start.append(s)
        self.end.append(e)
        self.gstart.append(g0)
        self.gend.append(g1)
        self.hasg.append(has_g)
        self.circuit.append(nums[0])
        self.batch.append(nums[1])
        self.nbytes.append(nums[2])
        self.kind.append(KIND_CODES.get(str(kind), 0))
        self.status.append(max(st, 0))
        self.phase.append(p)
        self.lane.append(lk)
        self.span_id.append(sid or (i + 1))
        self.parent_sid.append(psid)
        self.trace.append(tr)
        self.resource.append(res)
        if a:
            self.attrs[i] = a

    # ---- result ----------------------------------------------------------------------
    def timeline(self, stats: dict | None = None) -> Timeline:
        """The Timeline of the events added; consumes the accumulator (call once)."""
        t_max = self.t_max
        for (pid, tid), stack in self.open_b.items():  # B without E: close at the end of the trace
            for s, name, cat, args in stack:
                self._row(s, max(s, t_max), name, cat, pid, tid, {**args, "unterminated": True})
        self.open_b = {}
        n = len(self.start)
        if stats is not None:
            stats.update(events=self.idx, spans=n, skipped=self.skipped)
        base = self.base
        start = np.frombuffer(self.start, np.int64) + base if n else np.zeros(0, np.int64)
        end = np.frombuffer(self.end, np.int64) + base if n else np.zeros(0, np.int64)
        g0 = np.frombuffer(self.gstart, np.int64) if n else np.zeros(0, np.int64)
        g1 = np.frombuffer(self.gend, np.int64) if n else np.zeros(0, np.int64)
        has_g = np.frombuffer(self.hasg, np.int8).astype(bool) if n else np.zeros(0, bool)
        lanes, key_to_lane = self._lanes()
        lane_col = key_to_lane[np.frombuffer(self.lane, np.int32)] if n else np.zeros(0, np.int32)
        span_id = np.frombuffer(self.span_id, np.uint64).copy() if n else np.zeros(0, np.uint64)
        parent_sid = np.frombuffer(self.parent_sid, np.uint64).copy() if n else np.zeros(0, np.uint64)
        if not self.ours:
            span_id = np.arange(1, n + 1, dtype=np.uint64)
        cols = {
            "start": start, "end": end,
            "gpu_start": np.where(has_g, g0 + base, -1), "gpu_end": np.where(has_g, g1 + base, -1),
            "device": (np.asarray([ln.device for ln in lanes] or [0], np.int64)[lane_col] if n
                       else np.zeros(0, np.int64)),
            "circuit": np.frombuffer(self.circuit, np.int64) if n else np.zeros(0, np.int64),
            "batch": np.frombuffer(self.batch, np.int64) if n else np.zeros(0, np.int64),
            "nbytes": np.frombuffer(self.nbytes, np.int64) if n else np.zeros(0, np.int64),
            "lane": lane_col, "phase": np.frombuffer(self.phase, np.int32) if n else np.zeros(0, np.int32),
            "kind": np.frombuffer(self.kind, np.int8) if n else np.zeros(0, np.int8),
            "status": np.frombuffer(self.status, np.int8) if n else np.zeros(0, np.int8),
            "span_id": span_id, "trace": np.frombuffer(self.trace, np.int32) if n else np.zeros(0, np.int32),
            "resource": np.frombuffer(self.resource, np.int32) if n else np.zeros(0, np.int32),
        }
        if not self.ours and n:
            par = nest_parents(start, end, lane_col)
            for i, corr in self.gpu_rows:  # a GPU event's parent: the span enclosing its launching call
                r = self.correlation.get(corr)
                if r is not None:
                    par[i] = par[r] if par[r] >= 0 else r
            has = par >= 0
            parent_sid[has] = span_id[par[has]]
        cols["parent_span_id"] = parent_sid
        for k in _COLUMN_ARRAYS:  # the columns now hold (views of) them; each is freed once sorted
            setattr(self, k, array(getattr(self, k).typecode))
        # Only ``cols`` may hold the unsorted columns now (this frame lives until from_unsorted returns).
        del start, end, g0, g1, has_g, lane_col, span_id, parent_sid
        if not self.ours and n:
            del par, has
        tl = Timeline.from_unsorted(cols, self.phases, lanes, self.resources, self.trace_ids, self.attrs, self.names,
                                    consume=True)
        return tl if self.ours else map_kineto(tl, self.head)  # PyTorch-profiler rows -> GPU-activity conventions

    def _lanes(self) -> tuple[list[Lane], np.ndarray]:
        """The distinct lanes, and lane key index -> lane index (keys of other tools' traces that
        resolve to the same lane, e.g. two tids with one thread name, share it)."""
        if self.ours:
            return list(self.lane_keys), np.arange(max(len(self.lane_keys), 1), dtype=np.int32)
        tn, pn = self.thread_names, self.proc_names
        cpu_pids = {pid for (pid, _tid) in tn if not re.search(r"GPU\s*\d+", pn.get(pid, ""))}
        single_pid = _pid(next(iter(cpu_pids))) if len(cpu_pids) == 1 else -1
        out: list[Lane] = []
        ix: dict[Lane, int] = {}
        remap = np.zeros(max(len(self.lane_keys), 1), np.int32)
        for k, key in enumerate(self.lane_keys):
            where = self._annotation_stream(key[1], key[2]) if key[0] == "ann" else key[1:]
            if key[0] == "gpu":
                lane = Lane(self.host, single_pid, key[1], f"stream:{key[2]}")
            elif key[0] != "thr" and where is not None:  # device-side annotations: beside their stream
                lane = Lane(self.host, single_pid, where[0], f"{ANNOTATION_LANE_PREFIX}{where[1]}")
            else:
                _, pid, tid = key
                tname = tn.get((pid, tid)) or str(tid)
                lane = Lane(self.host, _pid(pid), -1, f"thread:{tname}")
            j = ix.get(lane)
            if j is None:
                j = ix[lane] = len(out)
                out.append(lane)
            remap[k] = j
        return out, remap


    def _annotation_stream(self, pid: Any, tid: Any) -> tuple[int, Any] | None:
        """(GPU, stream) of Kineto's device-side annotations written on track (``pid``, ``tid``): the GPU stream
        of the trace's device rows on that track, else GPU N of a process the metadata labels ``GPU N`` (the
        stream: ``tid``, as Kineto writes it); None when the trace does not say (the rows stay on a thread
        lane)."""
        where = self.gpu_tracks.get((pid, tid))
        if where is not None:
            return where
        for label in (self.proc_labels.get(pid), self.proc_names.get(pid)):
            m = _GPU_LABEL.fullmatch(label) if label else None
            if m is not None and is_device(int(m.group(1))):
                return int(m.group(1)), tid
        return None


def _pid(v: Any) -> int:
    """A lane's process id: an event's integer pid within int64 (what an OTLP file can carry), else -1."""
    return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else -1


def _vocab() -> dict:
    from gputrace.phases import PHASES

    return PHASES
