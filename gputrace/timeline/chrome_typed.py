"""Typed decoding of gputrace's own Chrome exports: event batches straight into msgspec Structs, then
columns with numpy, without a dict per event.

``decode_ours(text)`` decodes one batch (``[...]`` JSON text) into a :class:`TypedBatch` when every
event has the shape gputrace's writer produces (``X``/``M``/flow events; ``args`` holding only the
keys the writer puts there, with their JSON types), else into plain ``orjson`` objects. A mixin
(:class:`OursTyped`, of ``chrome_import._Events``) turns a ``TypedBatch`` into columns; it returns
False, having changed nothing, for anything its columns cannot express exactly (e.g. ``ts`` missing on
an ``X`` event), and the caller then re-decodes ``TypedBatch.text`` with orjson for the dict paths,
which also raise the exact errors (file, event index, field). The result is the same Timeline as the
dict paths (``tests/unit/test_chrome_typed.py`` compares them).

Why hand-written rather than orjson dicts: decoding 2.24 M events into dicts was about a third of
the import of a 1 M-span export, and the per-field dict look-ups another third. Structs are
``gc=False`` (scalars only), so a batch of them does not trigger the cyclic collector, which cost as
much as the decode itself. Pure functions; not thread-safe (one accumulator per reader).
"""

from __future__ import annotations

from typing import Any, Callable, Union

import msgspec
import numpy as np
import orjson
from msgspec import UNSET, UnsetType, field

from gputrace.phases import phase_kind
from gputrace.timeline.chrome_batch import STATUS, hex_int
from gputrace.timeline.model import KIND_CODES

__all__ = ["TypedBatch", "decode_ours", "OursTyped", "hex_ids"]

_Str = Union[str, UnsetType]


class OursArgs(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``args`` of a gputrace export's events (any other key: not this shape). UNSET where the dict
    paths distinguish an absent key from a present one; None where they treat null as absent."""

    phase: _Str = UNSET
    color: Any = None  # unused by the reader
    kind: _Str = UNSET
    span_id: str = ""
    parent_span_id: str = ""
    trace_id: Union[str, None] = None
    device: Any = None  # unused: the lane gives the device
    circuit: int = -1
    batch: int = -1
    bytes: int = -1
    resource: int = -1
    status: Union[str, None] = None
    name: _Str = UNSET
    host_ts: Union[float, None] = field(default=None, name="host.ts_us")
    host_dur: float = field(default=0.0, name="host.dur_us")
    gpu_ts: Union[float, None] = field(default=None, name="gpu.ts_us")
    gpu_dur: float = field(default=0.0, name="gpu.dur_us")
    sort_index: Any = UNSET  # metadata events (on an X event, an attribute: not this shape)


_NO_ARGS = OursArgs()


class XEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    name: str = ""
    ts: Union[float, None] = None
    dur: float = 0.0
    pid: Any = None
    tid: Any = None
    args: Union[OursArgs, None] = None


class MEvent(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: Any = None
    pid: Any = None
    tid: Any = None
    args: Union[OursArgs, None] = None


class FlowStart(msgspec.Struct, tag_field="ph", tag="s", gc=False):
    """Flow events are skipped by the reader; no field is kept."""


class FlowEnd(msgspec.Struct, tag_field="ph", tag="f", gc=False):
    """See FlowStart."""


_DECODER = msgspec.json.Decoder(list[Union[XEvent, MEvent, FlowStart, FlowEnd]])


class TypedBatch:
    """Decoded events of one batch and the batch's JSON text (to re-decode as dicts if needed)."""

    __slots__ = ("events", "text")

    def __init__(self, events: list, text: bytes) -> None:
        self.events = events
        self.text = text


def decode_ours(text: bytes) -> TypedBatch | Any:
    """``text`` (a JSON array of events) as a TypedBatch, or as orjson objects when the events are
    valid JSON of another shape. Raises ValueError (orjson.JSONDecodeError) when it is not JSON."""
    try:
        return TypedBatch(_DECODER.decode(text), text)
    except msgspec.ValidationError:
        return orjson.loads(text)
    except msgspec.DecodeError as e:
        raise ValueError(str(e)) from None


# Hex digit value per byte; 255 for a byte that is not a hex digit.
_HEXVAL = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEXVAL[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEXVAL[_c] = 10 + _i


def hex_ids(vals: list[str]) -> np.ndarray:
    """``hex_int`` of each value as uint64, vectorised for the writer's 16-digit ids (and empty
    strings); other lengths go through ``hex_int`` one by one."""
    n = len(vals)
    lens = np.fromiter(map(len, vals), np.int64, n)
    try:
        raw = np.array(vals, dtype="S16") if n else np.zeros(0, "S16")
    except UnicodeEncodeError:  # not ASCII, hence not hex
        raw = None
    if raw is None or not np.isin(lens, (0, 16)).all():
        return np.fromiter((hex_int(v) for v in vals), np.uint64, n)
    nib = _HEXVAL[raw.view(np.uint8).reshape(n, 16)]
    ok = (lens == 16) & (nib < 16).all(axis=1)
    byts = np.ascontiguousarray((nib[:, 0::2] << 4) | (nib[:, 1::2] & 15))
    out = byts.view(">u8").ravel().astype(np.uint64)
    out[~ok] = 0
    return out


def _us_to_ns(vals: list) -> np.ndarray:
    return np.rint(np.asarray(vals, np.float64) * 1000).astype(np.int64)


class OursTyped:
    """Mixin of ``chrome_import._Events``: a TypedBatch of a gputrace export into columns."""

    # Provided by the accumulator (chrome_import._Events / chrome_batch.OursBatch).
    _track_lanes: dict
    _learn_tracks: Callable[[list], bool]

    def _add_ours_typed(self, events: list) -> bool:
        """The columns of a TypedBatch's events (same values as ``_add_ours_batch`` of the same
        events as dicts). Returns False, having changed nothing, when an ``X`` event lacks ``ts``,
        has a negative ``dur`` or an unknown track (the dict paths then raise or handle it)."""
        self_: Any = self
        xs = [e for e in events if type(e) is XEvent]
        metas = [e for e in events if type(e) is MEvent]
        nx = len(xs)
        if nx:
            ts_l = [e.ts for e in xs]
            if None in ts_l:
                return False
            ts = _us_to_ns(ts_l)
            dur = _us_to_ns([e.dur for e in xs])
            if (dur < 0).any():
                return False
            lane_of = self._track_lanes
            keys = [(e.pid, e.tid) for e in xs]
            try:
                lanes = [lane_of[k] for k in keys]
            except (KeyError, TypeError):
                if not self._learn_tracks(keys):
                    return False
                lanes = [lane_of[k] for k in keys]
            no = _NO_ARGS
            args = [e.args if e.args is not None else no for e in xs]
            if any(a.sort_index is not UNSET for a in args):
                return False
            names = [e.name for e in xs]
            phases = [a.phase if a.phase is not UNSET else nm for a, nm in zip(args, names)]
            pix = self_.phase_ix
            for ph in dict.fromkeys(phases):  # first appearance order, as the per-event path
                if ph not in pix:
                    pix[ph] = len(self_.phases)
                    self_.phases.append(ph)
            kind_of_phase: dict[str, int] = {}
            kinds = []
            for a, ph in zip(args, phases):
                k = a.kind
                if k is UNSET:
                    c = kind_of_phase.get(ph)
                    if c is None:
                        c = kind_of_phase[ph] = KIND_CODES.get(phase_kind(ph), 0)
                    kinds.append(c)
                else:
                    kinds.append(KIND_CODES.get(k, 0))
            h_ts = [a.host_ts for a in args]
            g_ts = [a.gpu_ts for a in args]
            host = np.array([h is not None for h in h_ts], bool)
            gpu = np.array([g is not None for g in g_ts], bool) & ~host
            hs = _us_to_ns([h if h is not None else 0.0 for h in h_ts])
            hd = np.where(host, _us_to_ns([a.host_dur for a in args]), 0)
            gs = _us_to_ns([g if g is not None else 0.0 for g in g_ts])
            gd = np.where(np.array([g is not None for g in g_ts], bool), _us_to_ns([a.gpu_dur for a in args]), 0)
            s, e = ts, ts + dur
            start = np.where(host, hs, s)
            end = np.where(host, hs + hd, e)
            g0 = np.where(host, s, np.where(gpu, gs, 0))
            g1 = np.where(host, e, np.where(gpu, gs + gd, 0))
            nres = len(self_.resources)
            res = np.asarray([a.resource for a in args], np.int64)
            res = np.where((res >= 0) & (res < nres), res, -1)
            status = [STATUS.get(a.status, 0) if a.status is not None else 0 for a in args]
            i0 = len(self_.start)
            sid = hex_ids([a.span_id for a in args])
            sid = np.where(sid != 0, sid, np.arange(i0 + 1, i0 + nx + 1, dtype=np.uint64))
            psid = hex_ids([a.parent_span_id for a in args])
            tix = self_.trace_ix
            trs = [a.trace_id for a in args]
            for t in dict.fromkeys(trs):
                if t is not None and t not in tix:
                    tix[t] = len(self_.trace_ids)
                    self_.trace_ids.append(t)
            trace = [tix[t] if t is not None else -1 for t in trs]
            for j, (a, nm, ph) in enumerate(zip(args, names, phases)):
                n_ = a.name if a.name is not UNSET else nm
                if n_ != ph:
                    self_.names[i0 + j] = n_
            self_.start.frombytes(start.tobytes())
            self_.end.frombytes(end.tobytes())
            self_.gstart.frombytes(g0.tobytes())
            self_.gend.frombytes(g1.tobytes())
            self_.hasg.frombytes((host | gpu).astype(np.int8).tobytes())
            self_.circuit.frombytes(np.asarray([a.circuit for a in args], np.int64).tobytes())
            self_.batch.frombytes(np.asarray([a.batch for a in args], np.int64).tobytes())
            self_.nbytes.frombytes(np.asarray([a.bytes for a in args], np.int64).tobytes())
            self_.kind.extend(kinds)
            self_.status.extend(status)
            self_.phase.extend([pix[ph] for ph in phases])
            self_.lane.extend(lanes)
            self_.span_id.frombytes(sid.astype(np.uint64).tobytes())
            self_.parent_sid.frombytes(psid.tobytes())
            self_.trace.extend(trace)
            self_.resource.frombytes(res.astype(np.int32).tobytes())
            t_end = int(e.max())
            if t_end > self_.t_max:
                self_.t_max = t_end
        self_.skipped += len(events) - nx - len(metas)
        self_.idx += len(events)
        for ev in metas:
            name, a = ev.name, ev.args if ev.args is not None else _NO_ARGS
            if name == "process_name":
                self_.proc_names[ev.pid] = str(a.name) if a.name is not UNSET else ""
            elif name == "thread_name":
                self_.thread_names[(ev.pid, ev.tid)] = str(a.name) if a.name is not UNSET else ""
        return True
