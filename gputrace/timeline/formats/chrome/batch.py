"""The batch path of the Chrome reader for gputrace's own exports: a batch of events becomes columns
through one list comprehension per field (the per-event path costs about 10 us an event).

A mixin of ``events._Events`` (its columns, tables and ``_lane``); used only while reading a
file that announced itself as a gputrace export (``otherData.generator``) before its events. Not
thread-safe (one reader per accumulator).
"""

from __future__ import annotations

import re
from array import array
from typing import Any

import numpy as np

from gputrace.phases import phase_kind
from gputrace.timeline.model import KIND_CODES, Lane

__all__ = ["ColumnState", "MAX_TIME_US", "OursBatch", "STATUS", "hex_int", "ident_ok", "times_ok"]

#: Chrome times (microseconds, ``ts``/``dur`` and the like) must be finite and below this in magnitude: their
#: nanoseconds then stay below 2**62 (146 years), so a start plus a duration, or a base time plus a start, stays
#: inside int64 (beyond it numpy casts wrap to -2**63 with a mere warning). Larger values are refused.
MAX_TIME_US = 4e15


def ident_ok(v: Any) -> bool:
    """Whether ``v`` may be an event's ``pid`` or ``tid``: absent, a string, a 64-bit integer or a finite number."""
    t = type(v)
    return (v is None or t is str or (t in (int, bool) and -(1 << 63) <= v < (1 << 63))
            or (t is float and abs(v) < float("inf")))


def times_ok(*us: np.ndarray) -> bool:
    """Whether every value of these float arrays (microseconds) is finite and below ``MAX_TIME_US``."""
    return all(bool((np.abs(a) < MAX_TIME_US).all()) for a in us)  # NaN compares False

STATUS: dict[Any, int] = {"ok": 1, "error": 2}
_OURS_PH = {"X", "M", "s", "f"}
_NUM = {int, float}
_NUM_OR_NONE = {int, float, type(None)}
#: The args gputrace's writer puts on a span that has no attributes of its own.
_OURS_ARGS = frozenset(("phase", "color", "kind", "span_id", "parent_span_id", "trace_id", "device", "circuit", "batch",
                        "bytes", "resource", "status", "name", "host.ts_us", "host.dur_us", "gpu.ts_us", "gpu.dur_us"))
_HEX = re.compile(r"[0-9a-fA-F]{1,16}")


def hex_int(v: Any) -> int:
    """A span id written as 1-16 hex digits -> int; 0 for anything else."""
    if type(v) is str and _HEX.fullmatch(v):
        return int(v, 16)
    return 0


def meta_label(name: Any, args: dict) -> str:
    """The label a metadata event gives its track: ``args.labels`` of a ``process_labels`` event (Kineto's
    ``GPU 0`` / ``CPU``), else ``args.name`` (``process_name``, ``thread_name``); ``""`` when absent."""
    return str(args.get("labels" if name == "process_labels" else "name", ""))


def dict_meta_names(metas: list[dict]) -> list[tuple[Any, Any, Any, str]]:
    """(name, pid, tid, label) of metadata events decoded as dicts (``ColumnState._finish_batch``)."""
    return [(ev.get("name"), ev.get("pid"), ev.get("tid"), meta_label(ev.get("name"), ev.get("args") or {}))
            for ev in metas]


class ColumnState:
    """The accumulator state the column paths (this module's and ``chrome_typed``'s) share with
    ``events._Events``, which sets all of it in its ``__init__`` and defines ``_lane``."""

    source: str
    ours: bool
    lane_map: dict
    resources: list
    idx: int  # events seen (for error messages)
    skipped: int
    t_max: int
    proc_names: dict[Any, str]
    proc_labels: dict[Any, str]
    thread_names: dict[tuple, str]
    start: array[int]
    end: array[int]
    gstart: array[int]
    gend: array[int]
    hasg: array[int]
    circuit: array[int]
    batch: array[int]
    nbytes: array[int]
    kind: array[int]
    status: array[int]
    phase: array[int]
    lane: array[int]
    span_id: array[int]
    parent_sid: array[int]
    trace: array[int]
    resource: array[int]
    names: dict[int, str]
    phases: list[str]
    phase_ix: dict[str, int]
    trace_ids: list[str]
    trace_ix: dict[str, int]

    def _finish_batch(self, n_events: int, ends: np.ndarray | None, names: list[tuple[Any, Any, Any, str]]) -> None:
        """Close a batch the column paths took: ``ends`` (its spans' end times, None when it had none)
        raise ``t_max``; the events neither spans nor metadata count as skipped; ``names`` are the
        metadata events as (name, pid, tid, label), of which process_name/thread_name name tracks and
        process_labels label processes (``meta_label``)."""
        n_spans = 0
        if ends is not None:
            n_spans = len(ends)
            t_end = int(ends.max())
            if t_end > self.t_max:
                self.t_max = t_end
        self.skipped += n_events - n_spans - len(names)
        self.idx += n_events
        for name, pid, tid, label in names:
            if name == "process_name":
                self.proc_names[pid] = label
            elif name == "process_labels":
                self.proc_labels[pid] = label
            elif name == "thread_name":
                self.thread_names[(pid, tid)] = label

    def _lane(self, key: Any) -> int:
        """Index of a lane key in the accumulator's lane table (added if new)."""
        raise NotImplementedError

    @property
    def _track_lanes(self) -> dict:
        """(pid, tid) of a gputrace export -> lane index, as learnt so far."""
        d = self.__dict__.get("_tl_cache")
        if d is None:
            d = self.__dict__["_tl_cache"] = {}
        return d

    def _learn_tracks(self, keys: list) -> bool:
        """Map unseen (pid, tid) tracks to lane indices through ``lane_map``; False if one is unknown."""
        d = self._track_lanes
        try:
            todo = [k for k in dict.fromkeys(keys) if k not in d]
        except TypeError:  # an unhashable pid/tid: the per-event path reports it
            return False
        for k in todo:
            info = self.lane_map.get(f"{k[0]}/{k[1]}")
            if not isinstance(info, dict):
                return False
            try:
                lane = Lane(str(info["host"]), int(info["pid"]), int(info["device"]), str(info["name"]))
            except (KeyError, TypeError, ValueError):
                return False
            d[k] = self._lane(lane)
        return True


class OursBatch(ColumnState):
    def _add_ours_batch(self, events: list) -> bool:
        """A batch of a gputrace export turned into columns with one list comprehension per field
        (the per-event path costs ~10 us an event). Only for the plain case: every event a dict,
        ``X`` events with numeric ``ts``/``dur >= 0``, args holding only what the writer puts
        there, known tracks; metadata and flow events. Returns False, having changed nothing, for
        anything else (the per-event path then handles the batch, with its exact errors)."""
        if not all(type(ev) is dict for ev in events):
            return False
        phs = [ev.get("ph") for ev in events]
        if not set(phs) <= _OURS_PH:
            return False
        xs = [ev for ev, ph in zip(events, phs, strict=True) if ph == "X"]
        metas = [ev for ev, ph in zip(events, phs, strict=True) if ph == "M"]
        e = None
        if xs:
            e = self._add_ours_spans(xs)
            if e is None:
                return False
        self._finish_batch(len(events), e, dict_meta_names(metas))
        return True

    def _add_ours_spans(self, xs: list[dict]) -> np.ndarray | None:
        """Append the columns of the ``X`` events ``xs`` (non-empty dicts); returns their ends (``ts + dur``,
        ns), or None where ``_add_ours_batch`` refuses the batch (tracks learnt and phases registered
        on the way are kept, as they always were)."""
        ts_l = [ev.get("ts") for ev in xs]
        dur_l = [ev.get("dur", 0) for ev in xs]
        args = [ev.get("args") or {} for ev in xs]
        if not ({type(v) for v in ts_l} | {type(v) for v in dur_l}) <= _NUM or not all(
                type(a) is dict and a.keys() <= _OURS_ARGS for a in args):
            return None
        lane_of = self._track_lanes
        keys = [(ev.get("pid"), ev.get("tid")) for ev in xs]
        try:
            lanes = [lane_of[k] for k in keys]
        except (KeyError, TypeError):
            if not self._learn_tracks(keys):
                return None
            lanes = [lane_of[k] for k in keys]
        ts_us, dur_us = np.asarray(ts_l, np.float64), np.asarray(dur_l, np.float64)
        if not times_ok(ts_us, dur_us):
            return None  # the per-event path raises its error
        ts = np.rint(ts_us * 1000).astype(np.int64)
        dur = np.rint(dur_us * 1000).astype(np.int64)
        if (dur < 0).any():
            return None
        names = [str(ev.get("name", "")) for ev in xs]
        phases = [str(a.get("phase", nm)) for a, nm in zip(args, names, strict=True)]
        pix = self.phase_ix
        for ph in dict.fromkeys(phases):  # first appearance order, as the per-event path
            if ph not in pix:
                pix[ph] = len(self.phases)
                self.phases.append(ph)
        kinds = [KIND_CODES.get(str(a["kind"]), 0) if "kind" in a else
                 KIND_CODES.get(phase_kind(ph), 0) for a, ph in zip(args, phases, strict=True)]
        e = ts + dur
        times = _dict_times(args, ts, e)
        if times is None:
            return None
        self._extend_ours(args, names, phases, kinds, lanes, times)
        return e

    def _extend_ours(self, args: list[dict], names: list[str], phases: list[str], kinds: list[int],
                     lanes: list[int], times: tuple[np.ndarray, ...]) -> None:
        """Append the columns of spans with these ``args``, event names, phases (registered), kind codes,
        lanes and ``_dict_times``; registers new trace ids in first appearance order. Refuses nothing."""
        start, end, g0, g1, hasg = times

        def ints(key):
            return [v if type(v) is int else -1 for v in (a.get(key) for a in args)]

        nres = len(self.resources)
        res = [r if type(r) is int and 0 <= r < nres else -1 for r in (a.get("resource") for a in args)]
        status = [STATUS.get(a.get("status"), 0) for a in args]
        sid = [hex_int(a.get("span_id", "")) for a in args]
        psid = [hex_int(a.get("parent_span_id", "")) for a in args]
        tix = self.trace_ix
        trs = [a.get("trace_id") for a in args]
        for t in dict.fromkeys(trs):
            if type(t) is str and t not in tix:
                tix[t] = len(self.trace_ids)
                self.trace_ids.append(t)
        trace = [tix[t] if type(t) is str else -1 for t in trs]
        i0 = len(self.start)
        for j, (a, nm, ph) in enumerate(zip(args, names, phases, strict=True)):
            n_ = a.get("name", nm)
            if n_ != ph:
                self.names[i0 + j] = str(n_)
        self.start.frombytes(start.tobytes())
        self.end.frombytes(end.tobytes())
        self.gstart.frombytes(g0.tobytes())
        self.gend.frombytes(g1.tobytes())
        self.hasg.frombytes(hasg.astype(np.int8).tobytes())
        self.circuit.extend(ints("circuit"))
        self.batch.extend(ints("batch"))
        self.nbytes.extend(ints("bytes"))
        self.kind.extend(kinds)
        self.status.extend(status)
        pix = self.phase_ix
        self.phase.extend([pix[ph] for ph in phases])
        self.lane.extend(lanes)
        self.span_id.extend([x or (i0 + j + 1) for j, x in enumerate(sid)])
        self.parent_sid.extend(psid)
        self.trace.extend(trace)
        self.resource.extend(res)


def _dict_times(args: list[dict], s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """(start, end, gpu start, gpu end, has GPU times) in ns of spans with these ``args`` and event times
    ``s``/``e`` (ns): a span with ``host.ts_us`` is its host times and the event's its GPU times; one with
    only ``gpu.ts_us`` the event's times and those GPU times. None where such a time is not a number,
    not finite, too large (``times_ok``) or a duration negative. Pure."""
    h_ts = [a.get("host.ts_us") for a in args]
    g_ts = [a.get("gpu.ts_us") for a in args]
    if not ({type(v) for v in h_ts} | {type(v) for v in g_ts}) <= _NUM_OR_NONE:
        return None
    h_dur = [a.get("host.dur_us", 0) if h is not None else 0 for a, h in zip(args, h_ts, strict=True)]
    g_dur = [a.get("gpu.dur_us", 0) if g is not None else 0 for a, g in zip(args, g_ts, strict=True)]
    if not ({type(v) for v in h_dur} | {type(v) for v in g_dur}) <= _NUM:
        return None
    host = np.array([h is not None for h in h_ts])
    gpu = np.array([g is not None for g in g_ts]) & ~host
    hs_us = np.asarray([h if h is not None else 0 for h in h_ts], np.float64)
    gs_us = np.asarray([g if g is not None else 0 for g in g_ts], np.float64)
    hd_us, gd_us = np.asarray(h_dur, np.float64), np.asarray(g_dur, np.float64)
    if not times_ok(hs_us, gs_us, hd_us, gd_us) or (hd_us < 0).any() or (gd_us < 0).any():
        return None  # the per-event path raises its error
    hs = np.rint(hs_us * 1000).astype(np.int64)
    hd = np.rint(hd_us * 1000).astype(np.int64)
    gs = np.rint(gs_us * 1000).astype(np.int64)
    gd = np.rint(gd_us * 1000).astype(np.int64)
    start = np.where(host, hs, s)
    end = np.where(host, hs + hd, e)
    g0 = np.where(host, s, np.where(gpu, gs, 0))
    g1 = np.where(host, e, np.where(gpu, gs + gd, 0))
    return start, end, g0, g1, host | gpu
