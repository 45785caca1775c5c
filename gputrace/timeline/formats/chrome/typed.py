"""Typed decoding of gputrace's own Chrome exports: event batches straight into msgspec Structs, then
columns with numpy, without a dict per event.

``decode_ours(text)`` decodes one batch (``[...]`` JSON text) into a :class:`TypedBatch` when every
event has the shape gputrace's writer produces (``X``/``M``/flow events; ``args`` holding only the
keys the writer puts there, with their JSON types), else into plain ``orjson`` objects. A mixin
(:class:`OursTyped`, of ``events._Events``) turns a ``TypedBatch`` into columns; it returns
False, having changed nothing, for anything its columns cannot express exactly (e.g. ``ts`` missing on
an ``X`` event), and the caller then re-decodes ``TypedBatch.text`` with orjson for the dict paths,
which also raise the exact errors (file, event index, field). The result is the same Timeline as the
dict paths (``tests/unit/test_chrome_typed.py`` compares them).

Columns come from one C-level pass per field (``np.fromiter(map(attrgetter(field), ...))``), strings
through a dict of their few distinct values; absent times are NaN (JSON has no NaN). Why typed
Structs rather than orjson dicts: decoding 2.24 M events into dicts was about a third of
the import of a 1 M-span export, and the per-field dict look-ups another third. Structs are
``gc=False`` (scalars only), so a batch of them does not trigger the cyclic collector, which cost as
much as the decode itself. Pure functions; not thread-safe (one accumulator per reader).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import attrgetter, ne
from typing import Any, Literal

import msgspec
import numpy as np
import orjson
from msgspec import UNSET, UnsetType, field

from gputrace.phases import phase_kind
from gputrace.timeline.formats.chrome.batch import STATUS, ColumnState, hex_int, times_ok
from gputrace.timeline.model import KIND_CODES

__all__ = ["Decode", "TypedBatch", "decode_ours", "OursTyped", "hex_ids"]


class OursArgs(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``args`` of a gputrace export's events (any other key: not this shape). UNSET where the dict
    paths distinguish an absent key from a present one; NaN or None where they treat null as absent
    (a null time is refused here, so such an event takes the dict path)."""

    phase: str | UnsetType = UNSET
    color: Any = None  # unused by the reader
    kind: Literal["host", "gpu", "sync", "pin"] | UnsetType = UNSET  # KIND_CODES; decoded without a new str
    span_id: str = ""
    parent_span_id: str = ""
    trace_id: str | None = None
    device: Any = None  # unused: the lane gives the device
    circuit: int = -1
    batch: int = -1
    bytes: int = -1
    resource: int = -1
    status: Literal["ok", "error"] | None = None  # STATUS
    name: str | UnsetType = UNSET
    host_ts: float = field(default=math.nan, name="host.ts_us")
    host_dur: float = field(default=0.0, name="host.dur_us")
    gpu_ts: float = field(default=math.nan, name="gpu.ts_us")
    gpu_dur: float = field(default=0.0, name="gpu.dur_us")


class MetaArgs(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``args`` of a metadata event as the writer puts them."""

    name: str | UnsetType = UNSET
    sort_index: Any = None


class XEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    name: str = ""
    ts: float = math.nan  # absent: the dict paths raise the error
    dur: float = 0.0
    pid: int | None = None
    tid: int | None = None
    args: OursArgs = field(default_factory=OursArgs)  # null: not this shape


class MEvent(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: Any = None
    pid: Any = None
    tid: Any = None
    args: MetaArgs | None = None


class FlowStart(msgspec.Struct, tag_field="ph", tag="s", gc=False):
    """Flow events are skipped by the reader; no field is kept."""


class FlowEnd(msgspec.Struct, tag_field="ph", tag="f", gc=False):
    """See FlowStart."""


_DECODER = msgspec.json.Decoder(list[XEvent | MEvent | FlowStart | FlowEnd])
_NO_META_ARGS = MetaArgs()


class TypedBatch:
    """Decoded events of one batch, and the text between the batch's brackets (a view: see
    ``chrome_scan._decode_at``) to re-decode them as dicts if needed (``as_json``)."""

    __slots__ = ("events", "inner")

    def __init__(self, events: list, inner: memoryview) -> None:
        self.events = events
        self.inner = inner

    def as_json(self) -> Any:
        """The events as orjson objects."""
        return orjson.loads(b"".join((b"[", self.inner, b"]")))


#: A batch decoder: the text of a JSON array (bytes-like) -> its events. Raises ValueError if not JSON.
Decode = Callable[[bytes | bytearray | memoryview], Any]


def decode_ours(text: bytes | bytearray | memoryview) -> TypedBatch | Any:
    """``text`` (bytes-like: a JSON array of events) as a TypedBatch, or as orjson objects when the
    events are valid JSON of another shape. Raises ValueError (orjson.JSONDecodeError) when it is
    not JSON. The TypedBatch keeps a view of ``text`` without its brackets."""
    try:
        events = _DECODER.decode(text)
    except msgspec.ValidationError:
        return orjson.loads(text)
    except msgspec.DecodeError as e:
        raise ValueError(str(e)) from None
    return TypedBatch(events, memoryview(text)[1:-1])


# Hex digit value per byte; 255 for a byte that is not a hex digit.
_HEXVAL = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEXVAL[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEXVAL[_c] = 10 + _i


def hex_ids(vals: list[str]) -> np.ndarray:
    """``hex_int`` of each value as uint64, vectorised for the writer's 16-digit ids (and empty
    strings, for absent ids); other lengths go through ``hex_int`` one by one."""
    n = len(vals)
    lens = np.fromiter(map(len, vals), np.int64, n)
    full = lens == 16
    if not (full | (lens == 0)).all():
        return np.fromiter(map(hex_int, vals), np.uint64, n)
    try:
        raw = "".join(vals).encode("ascii")  # the 16-digit ids, in order (empty ones add nothing)
    except UnicodeEncodeError:  # not ASCII, hence not hex
        return np.fromiter(map(hex_int, vals), np.uint64, n)
    nib = _HEXVAL[np.frombuffer(raw, np.uint8).reshape(-1, 16)]
    byts = np.ascontiguousarray((nib[:, 0::2] << 4) | (nib[:, 1::2] & 15))
    vals16 = byts.view(">u8").ravel().astype(np.uint64)
    vals16[~(nib < 16).all(axis=1)] = 0
    if full.all():
        return vals16
    out = np.zeros(n, np.uint64)
    out[full] = vals16
    return out


def _meta_label(a: MetaArgs) -> str:
    return str(a.name) if a.name is not UNSET else ""


def _col(objs: list, name: str, dtype: type) -> np.ndarray:
    """One field of every Struct as an array. Raises TypeError (a None) or OverflowError."""
    return np.fromiter(map(attrgetter(name), objs), dtype, len(objs))


def _ns(us: np.ndarray) -> np.ndarray:
    return np.rint(us * 1000).astype(np.int64)


def _codes(vals: list, code: Callable[[Any], int], dtype: type, distinct: dict | None = None) -> np.ndarray:
    """``code(v)`` of each value, computed once per distinct value (``distinct``: their dict, if known)."""
    table = {v: code(v) for v in (dict.fromkeys(vals) if distinct is None else distinct)}
    return np.fromiter(map(table.__getitem__, vals), dtype, len(vals))


def _typed_times(args: list, ts_us: np.ndarray, dur_us: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """(start, end, gpu start, gpu end, has GPU times, event end) in ns of spans with these ``args`` and
    ``X`` times (us): a span with ``host.ts_us`` is its host times and the event's its GPU times; one with
    only ``gpu.ts_us`` the event's times and those GPU times. None where a time is not finite, too large
    (``times_ok``) or a duration negative. Pure."""
    hs_us, gs_us = _col(args, "host_ts", np.float64), _col(args, "gpu_ts", np.float64)
    hd_us, gd_us = _col(args, "host_dur", np.float64), _col(args, "gpu_dur", np.float64)
    host = ~np.isnan(hs_us)
    has_gpu = ~np.isnan(gs_us)
    hd_us, gd_us = np.where(host, hd_us, 0.0), np.where(has_gpu, gd_us, 0.0)
    if not times_ok(ts_us, dur_us, hs_us[host], gs_us[has_gpu], hd_us, gd_us) or (
            (dur_us < 0) | (hd_us < 0) | (gd_us < 0)).any():
        return None
    ts, dur = _ns(ts_us), _ns(dur_us)
    gpu = has_gpu & ~host
    hs = _ns(np.where(host, hs_us, 0.0))
    hd = _ns(hd_us)
    gs = _ns(np.where(has_gpu, gs_us, 0.0))
    gd = _ns(gd_us)
    s, e = ts, ts + dur
    start = np.where(host, hs, s)
    end = np.where(host, hs + hd, e)
    g0 = np.where(host, s, np.where(gpu, gs, 0))
    g1 = np.where(host, e, np.where(gpu, gs + gd, 0))
    return start, end, g0, g1, host | gpu, e


class OursTyped(ColumnState):
    """Mixin of ``events._Events``: a TypedBatch of a gputrace export into columns."""

    def _add_ours_typed(self, events: list) -> bool:
        """The columns of a TypedBatch's events (same values as ``_add_ours_batch`` of the same
        events as dicts). Returns False, having changed nothing, when an ``X`` event lacks ``ts``,
        ``pid`` or ``tid``, has a negative ``dur`` or an unknown track (the dict paths then raise or
        handle it)."""
        types = set(map(type, events))
        if types == {XEvent}:
            xs, metas = events, []
        else:
            xs = [e for e in events if type(e) is XEvent] if XEvent in types else []
            metas = [e for e in events if type(e) is MEvent] if MEvent in types else []
        e = None
        if xs:
            e = self._add_typed_spans(xs)
            if e is None:
                return False
        self._finish_batch(len(events), e, [
            (ev.name, ev.pid, ev.tid, _meta_label(ev.args if ev.args is not None else _NO_META_ARGS)) for ev in metas])
        return True

    def _add_typed_spans(self, xs: list) -> np.ndarray | None:
        """Append the columns of the ``X`` events ``xs`` (non-empty); returns their ends (``ts + dur``, ns),
        or None, having changed nothing, where ``_add_ours_typed`` refuses the batch."""
        nx = len(xs)
        try:
            ts_us, dur_us = _col(xs, "ts", np.float64), _col(xs, "dur", np.float64)
            pid, tid = _col(xs, "pid", np.int64), _col(xs, "tid", np.int64)
        except (TypeError, OverflowError):  # pid/tid absent, or beyond int64
            return None
        args = list(map(attrgetter("args"), xs))
        times = _typed_times(args, ts_us, dur_us)
        if times is None:
            return None  # the per-event path raises its error
        lanes = self._typed_lanes(pid, tid)
        if lanes is None:
            return None
        # From here on nothing is refused.
        start, end, g0, g1, hasg, e = times
        ev_names = list(map(attrgetter("name"), xs))
        phases, phase_col, kinds = self._typed_phases(args, ev_names)
        nres = len(self.resources)
        res = _col(args, "resource", np.int64)
        res = np.where((res >= 0) & (res < nres), res, -1).astype(np.int32)
        status = _codes(list(map(attrgetter("status"), args)), lambda v: STATUS.get(v, 0), np.int8)
        i0 = len(self.start)
        sid = hex_ids(list(map(attrgetter("span_id"), args)))
        sid = np.where(sid != 0, sid, np.arange(i0 + 1, i0 + nx + 1, dtype=np.uint64))
        psid = hex_ids(list(map(attrgetter("parent_span_id"), args)))
        trace = self._typed_traces(args)
        # The span's name where it differs from its phase: args.name, else the event's name.
        arg_names = list(map(attrgetter("name"), args))
        names = ev_names if dict.fromkeys(arg_names).keys() == {UNSET} else [
            ev if n_ is UNSET else n_ for n_, ev in zip(arg_names, ev_names, strict=True)]
        if names != phases:
            for j in np.flatnonzero(np.fromiter(map(ne, names, phases), bool, nx)).tolist():
                self.names[i0 + j] = names[j]
        self.start.frombytes(start.tobytes())
        self.end.frombytes(end.tobytes())
        self.gstart.frombytes(g0.tobytes())
        self.gend.frombytes(g1.tobytes())
        self.hasg.frombytes(hasg.astype(np.int8).tobytes())
        self.circuit.frombytes(_col(args, "circuit", np.int64).tobytes())
        self.batch.frombytes(_col(args, "batch", np.int64).tobytes())
        self.nbytes.frombytes(_col(args, "bytes", np.int64).tobytes())
        self.kind.frombytes(kinds.tobytes())
        self.status.frombytes(status.tobytes())
        self.phase.frombytes(phase_col.tobytes())
        self.lane.frombytes(lanes.tobytes())
        self.span_id.frombytes(sid.astype(np.uint64).tobytes())
        self.parent_sid.frombytes(psid.tobytes())
        self.trace.frombytes(trace.tobytes())
        self.resource.frombytes(res.tobytes())
        return e

    def _typed_phases(self, args: list, ev_names: list) -> tuple[list, np.ndarray, np.ndarray]:
        """Each span's phase (``args.phase``, else the event's name), registering new phases in first
        appearance order (as the per-event path); returns (phases, phase column int32, kind codes int8;
        ``args.kind``, else the phase's kind)."""
        phases = list(map(attrgetter("phase"), args))
        uniq = dict.fromkeys(phases)
        if UNSET in uniq:
            phases = [ev if p is UNSET else p for p, ev in zip(phases, ev_names, strict=True)]
            uniq = dict.fromkeys(phases)
        pix = self.phase_ix
        for ph in uniq:  # first appearance order, as the per-event path
            if ph not in pix:
                pix[ph] = len(self.phases)
                self.phases.append(ph)
        phase_col = np.fromiter(map(pix.__getitem__, phases), np.int32, len(phases))
        kinds_l = list(map(attrgetter("kind"), args))
        uniq = dict.fromkeys(kinds_l)
        if UNSET in uniq:
            kinds_l = [phase_kind(ph) if k is UNSET else k for k, ph in zip(kinds_l, phases, strict=True)]
            uniq = dict.fromkeys(kinds_l)
        return phases, phase_col, _codes(kinds_l, lambda k: KIND_CODES.get(k, 0), np.int8, uniq)

    def _typed_traces(self, args: list) -> np.ndarray:
        """Each span's trace index (int32; -1: none), registering new trace ids in first appearance order."""
        tix = self.trace_ix
        trs = list(map(attrgetter("trace_id"), args))
        uniq = dict.fromkeys(trs)
        for t in uniq:
            if t is not None and t not in tix:
                tix[t] = len(self.trace_ids)
                self.trace_ids.append(t)
        return _codes(trs, lambda t: tix[t] if t is not None else -1, np.int32, uniq)

    def _typed_lanes(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray | None:
        """Lane index (int32) per event from its (pid, tid) track; None if a track is unknown."""
        lane_of = self._track_lanes
        if len(pid) and min(pid.min(), tid.min()) >= 0 and max(pid.max(), tid.max()) < (1 << 31):
            u, first, inv = np.unique((pid << 31) | tid, return_index=True, return_inverse=True)
            keys = [(k >> 31, k & ((1 << 31) - 1)) for k in u.tolist()]
            if any(k not in lane_of for k in keys):  # learnt in order of first appearance, as the dict paths
                self._learn_tracks([keys[i] for i in np.argsort(first, kind="stable").tolist()])
        else:
            keys = list(zip(pid.tolist(), tid.tolist(), strict=True))
            inv = None
        if any(k not in lane_of for k in keys) and not self._learn_tracks(keys):
            return None
        per_key = np.fromiter(map(lane_of.__getitem__, keys), np.int32, len(keys))
        return per_key[inv] if inv is not None else per_key
