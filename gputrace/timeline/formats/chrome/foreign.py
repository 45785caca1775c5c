"""The batch path of the Chrome reader for other tools' traces (PyTorch profiler / Kineto,
``chrome://tracing``): a batch of events becomes columns through one pass per field, where the
per-event path (``events._Events._row``) costs several microseconds an event.

Batches are decoded straight into msgspec Structs (``decode_foreign``; ``gc=False``, fields read by
``attrgetter`` instead of a ``dict.get`` each); a batch with an event of another shape (an unknown
``ph``, a non-object) is decoded into orjson dicts, whose batch path takes only the runs between
``B``/``E`` events. ``B``/``E`` pairs in a typed batch are matched in file order per (pid, tid), across
batches, on a copy of the open stacks kept only when the batch is taken (``_add_foreign_paired``). A
mixin of ``events._Events``. Only for batches it can map exactly as the per-event path does:
numeric ``ts`` (and ``dur >= 0``), ``args`` a dict (or absent), hashable tracks. Anything else returns
False, having changed nothing, and the per-event path handles the batch (as dicts) with its exact
errors (file, event index, field). ``tests/unit/test_chrome_foreign.py`` compares the paths.

Attribute dicts: a span's ``args`` dict is kept as its attributes with ``chrome.cat`` set in it (the
decoded dict is owned by the reader); spans with no ``args`` share one ``{"chrome.cat": cat}`` dict
per category; big ``args`` (``SHARE_MIN_KEYS``: a Kineto kernel's) become ``TemplateAttrs`` over one
template per distinct static part (``args_share``). Attributes are read-only once in a Timeline. Not
thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import count, repeat
from operator import attrgetter
from typing import Any, Union

import msgspec
import numpy as np
import orjson

from gputrace.phases import phase_kind
from gputrace.timeline.formats.chrome.args_share import ArgsSharer
from gputrace.timeline.formats.chrome.batch import (
    MAX_TIME_US,
    ColumnState,
    dict_meta_names,
    ident_ok,
    meta_label,
    times_ok,
)
from gputrace.timeline.formats.chrome.typed import TypedBatch
from gputrace.timeline.model import KIND_CODES

__all__ = ["ANNOTATION_CATS", "ForeignBatch", "GPU_CATS", "RUNTIME_CATS", "decode_foreign", "is_device"]

#: Kineto categories of device activity (drawn on GPU stream lanes).
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_op"}
#: Kineto's device-side copy of a ``record_function`` range: on the lane ``annotations:stream N`` of its GPU
#: (``events._Events._lanes``), not on the stream's own lane. Kineto writes it with ``pid`` = the GPU index and
#: ``tid`` = the stream and no ``device``/``stream`` args, so its lane key is ``("ann", pid, tid)`` until the
#: end of the read says which GPU that is (``("gpuann", device, stream)`` when it has the args).
ANNOTATION_CATS = {"gpu_user_annotation"}
#: Kineto categories of host-side CUDA API calls (carry ``args.correlation``).
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
_PAIRED = {"B", "E"}
_NUM = {int, float}
#: |ts| in microseconds below which an integer times 1000 is exact as a double (2**53 / 1000).
_EXACT_INT_US = 9_007_199_254_740
#: ``args`` dicts of at least this many keys (``chrome.cat`` included) are shared through ``ArgsSharer``
#: (a Kineto kernel has 14, a copy 8); smaller ones cost less than sharing them (~2 us a row).
SHARE_MIN_KEYS = 8
#: The span attributes that are also columns (``-1`` when absent or not an int).
_NUM_KEYS = ("circuit", "batch", "bytes")


class ForeignE(msgspec.Struct, tag_field="ph", tag="E", gc=False):
    """An event's fields as the per-event path reads them (``ev.get(key, default)``: absent -> the
    default, JSON null -> None); other keys are ignored, as there. ``E``: the fields every kind has."""

    ts: Any = None
    pid: Any = None
    tid: Any = None
    args: Any = None


class ForeignB(ForeignE, tag="B"):
    name: Any = ""
    cat: Any = ""


class ForeignX(ForeignB, tag="X"):
    dur: Any = 0


class ForeignM(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: Any = None
    pid: Any = None
    tid: Any = None
    args: Any = None


#: Events the reader skips (counted), one Struct without fields per ``ph`` (instant, counter, flow,
#: async, object, sample, mark, context); any other ``ph`` sends the batch to the dict paths.
_SKIPPED = tuple(msgspec.defstruct(f"Skip{ord(ph)}", [], tag_field="ph", tag=ph, gc=False)
                 for ph in ("i", "I", "C", "s", "t", "f", "b", "n", "e", "S", "T", "p", "F",
                            "N", "O", "D", "P", "R", "c", "(", ")", "V", "v"))
_EVENT: Any = Union.__getitem__((ForeignX, ForeignM, ForeignB, ForeignE) + _SKIPPED)  # the union of a runtime tuple
_FOREIGN = msgspec.json.Decoder(list[_EVENT])
_g_ts, _g_dur, _g_args = attrgetter("ts"), attrgetter("dur"), attrgetter("args")
_g_name, _g_cat, _g_pid, _g_tid = attrgetter("name"), attrgetter("cat"), attrgetter("pid"), attrgetter("tid")


def decode_foreign(text: bytes | bytearray | memoryview) -> TypedBatch | Any:
    """``text`` (a JSON array of events) as a TypedBatch of ForeignX/ForeignM/ForeignB/ForeignE/skipped
    Structs, or as orjson objects when it has another shape. Raises ValueError when it is not JSON (the
    scanner then tries another split)."""
    try:
        return TypedBatch(_FOREIGN.decode(text), memoryview(text)[1:-1])
    except msgspec.ValidationError:
        return orjson.loads(text)
    except msgspec.DecodeError as e:
        raise ValueError(str(e)) from None


def _x_times(ts_l: list, dur_l: list) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end (ns, relative) of X events as the per-event path computes them, or None where
    it would raise or the values cannot be taken together exactly."""
    if not ({type(v) for v in ts_l} | {type(v) for v in dur_l}) <= _NUM:
        return None
    ts, dur = _ns(ts_l), _ns(dur_l)
    if ts is None or dur is None or (dur < 0).any():
        return None
    return ts, ts + dur


def _ns(vals: list) -> np.ndarray | None:
    """``round(v * 1000)`` of each number (ints exactly, floats as doubles), or None if the values
    cannot be taken together exactly (an integer beyond 2**53 / 1000 us)."""
    arr = np.asarray(vals, np.float64)
    if not times_ok(arr):
        return None  # the per-event path refuses it
    if len(arr) and float(np.abs(arr).max()) >= _EXACT_INT_US and any(type(v) is int for v in vals):
        return None
    return np.rint(arr * 1000).astype(np.int64)


def _meta_names(metas: list) -> list[tuple[Any, Any, Any, str]] | None:
    """(name, pid, tid, label) of typed metadata events, or None if one's ``args`` is not a dict (the
    per-event path reads them with ``.get``)."""
    out = []
    for ev in metas:
        a = ev.args or {}
        if type(a) is not dict:
            return None
        out.append((ev.name, ev.pid, ev.tid, meta_label(ev.name, a)))
    return out


def is_device(d: Any) -> bool:
    """Whether an ``args.device`` names a GPU: an int (not a bool) the ``device`` column (int16) holds, not
    negative (-1 is a host lane). Any other value leaves the event on its thread's lane, ``args`` kept."""
    return type(d) is int and 0 <= d < 1 << 15


def _int_or_neg1(v: Any) -> int:
    return v if type(v) is int else -1


class ForeignBatch(ColumnState):
    # More of the accumulator's state (set in ``events._Events.__init__``).
    attrs: dict[int, Mapping]
    lane_ix: dict[Any, int]
    correlation: dict[int, int]
    gpu_rows: list[tuple[int, int]]
    gpu_tracks: dict[tuple, tuple]  # (pid, tid) of device rows -> (device, stream) of the first of them
    cat_attrs: dict[str, dict]  # category -> the shared attributes of spans without args
    args_sharers: dict[str, ArgsSharer]  # category -> its sharer of args
    open_b: dict[tuple, list]  # (pid, tid) -> stack of open B events (start ns, name, cat, args)

    def _add_foreign_batch(self, events: list) -> bool:
        """A batch decoded as dicts. See the module docstring. Returns False (nothing changed) when
        the batch is not plain."""
        if not all(type(ev) is dict for ev in events):
            return False
        phs = [ev.get("ph") for ev in events]
        if set(phs) & _PAIRED:
            return False
        xs = [ev for ev, ph in zip(events, phs, strict=True) if ph == "X"]
        metas = [ev for ev, ph in zip(events, phs, strict=True) if ph == "M"]
        for ev in metas:  # metadata args are read with .get: they must be dicts
            if type(ev.get("args") or {}) is not dict:
                return False
        times = _x_times([ev.get("ts") for ev in xs], [ev.get("dur", 0) for ev in xs])
        return times is not None and self._foreign_columns(
            len(events), *times, [ev.get("args") or {} for ev in xs], [ev.get("name", "") for ev in xs],
            [ev.get("cat", "") for ev in xs], [ev.get("pid") for ev in xs], [ev.get("tid") for ev in xs],
            metas and dict_meta_names(metas))

    def _add_foreign_typed(self, events: list) -> bool:
        """A batch decoded by ``decode_foreign``. Same contract as ``_add_foreign_batch``."""
        kinds = set(map(type, events))
        if ForeignB in kinds or ForeignE in kinds:
            return self._add_foreign_paired(events)
        xs = events if kinds == {ForeignX} else [ev for ev in events if type(ev) is ForeignX]
        names = _meta_names([ev for ev in events if type(ev) is ForeignM] if ForeignM in kinds else [])
        times = _x_times(list(map(_g_ts, xs)), list(map(_g_dur, xs)))
        return names is not None and times is not None and self._foreign_columns(
            len(events), *times, [a or {} for a in map(_g_args, xs)], list(map(_g_name, xs)),
            list(map(_g_cat, xs)), list(map(_g_pid, xs)), list(map(_g_tid, xs)), names)

    def _add_foreign_paired(self, events: list) -> bool:
        """A typed batch with ``B``/``E`` events: rows in the per-event path's order (an ``X`` event
        where it stands, a ``B``/``E`` pair where its ``E`` stands; pairs per (pid, tid), across
        batches), X rows' fields taken together. Works on a copy of the open ``B`` stacks, kept only
        when the batch is taken."""
        stacks = {k: list(v) for k, v in self.open_b.items()}
        xs: list = []
        x_rows: list[int] = []
        e_rows: list[tuple] = []  # (row, start, end, name, cat, pid, tid, args)
        n_b = 0
        row = 0
        try:
            for ev in events:
                t = type(ev)
                if t is ForeignX:
                    xs.append(ev)
                    x_rows.append(row)
                    row += 1
                elif t is ForeignB or t is ForeignE:
                    a = ev.args or {}
                    if type(ev.ts) not in _NUM or type(a) is not dict or not abs(ev.ts) < MAX_TIME_US:
                        return False  # the per-event path raises its error
                    if t is ForeignB:
                        stacks.setdefault((ev.pid, ev.tid), []).append(
                            (round(ev.ts * 1000), str(ev.name), str(ev.cat), a))
                        n_b += 1
                    else:
                        stack = stacks.get((ev.pid, ev.tid))
                        if stack:  # else an E without its B: skipped
                            s0, name, cat, b_args = stack.pop()
                            if round(ev.ts * 1000) < s0:
                                return False  # an E before its B: the per-event path raises its error
                            e_rows.append((row, s0, round(ev.ts * 1000), name, cat, ev.pid, ev.tid,
                                           {**b_args, **a}))
                            row += 1
        except TypeError:  # an unhashable pid/tid
            return False
        names = _meta_names([ev for ev in events if type(ev) is ForeignM])
        times = _x_times(list(map(_g_ts, xs)), list(map(_g_dur, xs)))
        if names is None or times is None:
            return False
        start, end = np.empty(row, np.int64), np.empty(row, np.int64)
        start[x_rows], end[x_rows] = times
        fields: list[list] = [[None] * row for _ in range(5)]  # args, name, cat, pid, tid
        for f, vals in zip(fields, ([a or {} for a in map(_g_args, xs)], list(map(_g_name, xs)),
                                    list(map(_g_cat, xs)), list(map(_g_pid, xs)), list(map(_g_tid, xs))),
                           strict=True):
            for r, v in zip(x_rows, vals, strict=True):
                f[r] = v
        if e_rows:
            try:
                start[[r[0] for r in e_rows]] = [r[1] for r in e_rows]
                end[[r[0] for r in e_rows]] = [r[2] for r in e_rows]
            except OverflowError:  # beyond int64: the per-event path raises its error
                return False
            for r, _s, _e, name, cat, pid, tid, a in e_rows:
                fields[0][r], fields[1][r], fields[2][r], fields[3][r], fields[4][r] = a, name, cat, pid, tid
        args_r, name_r, cat_r, pid_r, tid_r = fields
        if not self._foreign_columns(len(events) - n_b, start, end, args_r, name_r, cat_r, pid_r, tid_r, names):
            return False
        self.open_b = stacks
        self.idx += n_b  # B events are neither spans nor skipped until their E comes
        return True

    def _foreign_columns(self, n_events: int, s: np.ndarray, e: np.ndarray, args: list, name_l: list,
                         cat_l: list, pids: list, tids: list, meta_names: list) -> bool:
        """Rows (start/end in ns relative to the base, and the fields as the per-event path reads them:
        ``args`` already ``or {}``) into columns; False, having changed nothing, when they cannot be
        taken together exactly. ``n_events``: the events they came from that are now counted."""
        nx = len(s)
        if nx:
            if set(map(type, args)) != {dict}:
                return False
            names = list(map(str, name_l))
            cats = list(map(str, cat_l))
            keys = list(zip(repeat("thr"), pids, tids))  # a thread's lane, unless on a GPU stream (below)
            on_gpu = [False] * nx
            gpu_js = []
            for j in [j for j, c in enumerate(cats) if c in GPU_CATS]:
                a = args[j]
                d, st = a.get("device"), a.get("stream")
                ann = cats[j] in ANNOTATION_CATS
                if is_device(d) and st is not None:
                    on_gpu[j] = True
                    keys[j] = ("gpuann" if ann else "gpu", d, st)
                    gpu_js.append(j)
                elif ann:
                    keys[j] = ("ann", pids[j], tids[j])
            try:
                distinct_keys = dict.fromkeys(keys)
            except TypeError:  # an unhashable pid/tid/stream: the per-event path reports it
                return False
            if not all(ident_ok(k[2]) and (k[0] in ("gpu", "gpuann") or ident_ok(k[1])) for k in distinct_keys):
                return False  # a pid/tid/stream beyond 64 bits: the per-event path reports it
            # From here on nothing is refused.
            tracks = self.gpu_tracks
            for j in gpu_js:  # which GPU stream each device row's (pid, tid) is, as the per-event path learns it
                pid, tid = pids[j], tids[j]
                if keys[j][0] == "gpu" and ident_ok(pid) and ident_ok(tid) and (pid, tid) not in tracks:
                    tracks[(pid, tid)] = keys[j][1:]
            for key in distinct_keys:  # first appearance order, as the per-event path
                self._lane(key)
            lane_ix = self.lane_ix
            lanes = np.fromiter(map(lane_ix.__getitem__, keys), np.int32, nx)
            pix = self.phase_ix
            for ph in dict.fromkeys(names):
                if ph not in pix:
                    pix[ph] = len(self.phases)
                    self.phases.append(ph)
            phase_col = np.fromiter(map(pix.__getitem__, names), np.int32, nx)
            kind_of_phase = np.fromiter((KIND_CODES.get(phase_kind(ph), 0) for ph in self.phases), np.int8)
            has_g = np.fromiter(on_gpu, bool, nx)
            kinds = np.where(has_g, np.int8(KIND_CODES["gpu"]), kind_of_phase[phase_col])
            i0 = len(self.start)
            present = set().union(*args)  # the keys of this batch's args
            if "correlation" in present:  # launches (runtime calls) and what they launched (GPU rows), in row order
                for j in gpu_js:
                    corr = args[j].get("correlation")
                    if isinstance(corr, int):
                        self.gpu_rows.append((i0 + j, corr))
                for j in [j for j, c in enumerate(cats) if c in RUNTIME_CATS]:
                    corr = args[j].get("correlation")
                    if isinstance(corr, int):
                        self.correlation[corr] = i0 + j
            nums = [[_int_or_neg1(a.get(key)) for a in args] if key in present else [-1] * nx for key in _NUM_KEYS]
            attrs, cat_attrs, sharers = self.attrs, self.cat_attrs, self.args_sharers
            for j, a, c in zip(count(i0), args, cats, strict=False):
                if a:
                    if c:
                        a["chrome.cat"] = c  # as {**a, "chrome.cat": c}: last if new, in place if present
                    attrs[j] = a
                elif c:
                    shared = cat_attrs.get(c)
                    if shared is None:
                        shared = cat_attrs[c] = {"chrome.cat": c}
                    attrs[j] = shared
            by_cat: dict[str, list[int]] = {}  # big args dicts: their static part shared, per category
            for j in np.flatnonzero(np.fromiter(map(len, args), np.int64, nx) >= SHARE_MIN_KEYS).tolist():
                by_cat.setdefault(cats[j], []).append(j)
            for c, js in by_cat.items():
                sharer = sharers.get(c)
                if sharer is None:
                    sharer = sharers[c] = ArgsSharer()
                if sharer.enabled:
                    attrs.update(zip([i0 + j for j in js], sharer.views([args[j] for j in js]), strict=True))
            self.start.frombytes(s.tobytes())
            self.end.frombytes(e.tobytes())
            self.gstart.frombytes(np.where(has_g, s, 0).tobytes())
            self.gend.frombytes(np.where(has_g, e, 0).tobytes())
            self.hasg.frombytes(has_g.astype(np.int8).tobytes())
            self.circuit.extend(nums[0])
            self.batch.extend(nums[1])
            self.nbytes.extend(nums[2])
            self.kind.frombytes(kinds.tobytes())
            self.status.frombytes(bytes(nx))
            self.phase.frombytes(phase_col.tobytes())
            self.lane.frombytes(lanes.tobytes())
            self.span_id.frombytes(np.arange(i0 + 1, i0 + nx + 1, dtype=np.uint64).tobytes())
            self.parent_sid.frombytes(bytes(8 * nx))
            self.trace.frombytes(np.full(nx, -1, np.int32).tobytes())
            self.resource.frombytes(np.full(nx, -1, np.int32).tobytes())
        self._finish_batch(n_events, e if nx else None, meta_names or [])
        return True
