"""The batch path of the Chrome reader for other tools' traces (PyTorch profiler / Kineto,
``chrome://tracing``): a batch of ``X`` and metadata events becomes columns through one pass per
field, where the per-event path (``chrome_import._Events._row``) costs several microseconds an event.

Batches without ``B``/``E`` events are decoded straight into msgspec Structs (``decode_foreign``;
``gc=False``, fields read by ``attrgetter`` instead of a ``dict.get`` each), others into orjson
dicts. A mixin of ``chrome_import._Events``. Only for batches it can map exactly as the per-event
path does: every event an object, no ``B``/``E`` events (their pairing follows file order across
batches), numeric ``ts``/``dur >= 0``, ``args`` a dict (or absent), hashable tracks. Anything else
returns False, having changed nothing, and the per-event path handles the batch (as dicts) with its
exact errors (file, event index, field). ``tests/unit/test_chrome_foreign.py`` compares the paths.

Attribute dicts: a span's ``args`` dict is kept as its attributes with ``chrome.cat`` set in it (the
decoded dict is owned by the reader); spans with no ``args`` share one ``{"chrome.cat": cat}`` dict
per category (attribute dicts are read-only once in a Timeline). Not thread-safe.
"""

from __future__ import annotations

from itertools import count
from operator import attrgetter
from typing import Any, Union

import msgspec
import numpy as np
import orjson

from gputrace.phases import phase_kind
from gputrace.timeline.chrome_batch import ColumnState, dict_meta_names
from gputrace.timeline.chrome_typed import TypedBatch
from gputrace.timeline.model import KIND_CODES

__all__ = ["ForeignBatch", "GPU_CATS", "RUNTIME_CATS", "decode_foreign"]

#: Kineto categories of device activity (drawn on GPU stream lanes).
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_op"}
#: Kineto categories of host-side CUDA API calls (carry ``args.correlation``).
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
_PAIRED = {"B", "E"}
_NUM = {int, float}
#: |ts| in microseconds below which an integer times 1000 is exact as a double (2**53 / 1000).
_EXACT_INT_US = 9_007_199_254_740
#: The span attributes that are also columns (``-1`` when absent or not an int).
_NUM_KEYS = ("circuit", "batch", "bytes")


class ForeignX(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """An ``X`` event's fields as the per-event path reads them (``ev.get(key, default)``: absent ->
    the default, JSON null -> None); other keys are ignored, as there."""

    name: Any = ""
    cat: Any = ""
    ts: Any = None
    dur: Any = 0
    pid: Any = None
    tid: Any = None
    args: Any = None


class ForeignM(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: Any = None
    pid: Any = None
    tid: Any = None
    args: Any = None


#: Events the reader skips (counted), one Struct without fields per ``ph`` (instant, counter, flow,
#: async, object, sample, mark, context); any other ``ph``, or B/E, sends the batch to the dict paths.
_SKIPPED = tuple(msgspec.defstruct(f"Skip{ord(ph)}", [], tag_field="ph", tag=ph, gc=False)
                 for ph in ("i", "I", "C", "s", "t", "f", "b", "n", "e", "S", "T", "p", "F",
                            "N", "O", "D", "P", "R", "c", "(", ")", "V", "v"))
_EVENT: Any = Union.__getitem__((ForeignX, ForeignM) + _SKIPPED)  # the union of a runtime tuple
_FOREIGN = msgspec.json.Decoder(list[_EVENT])
_g_ts, _g_dur, _g_args = attrgetter("ts"), attrgetter("dur"), attrgetter("args")
_g_name, _g_cat, _g_pid, _g_tid = attrgetter("name"), attrgetter("cat"), attrgetter("pid"), attrgetter("tid")


def decode_foreign(text: bytes | bytearray | memoryview) -> TypedBatch | Any:
    """``text`` (a JSON array of events) as a TypedBatch of ForeignX/ForeignM/skipped Structs, or as
    orjson objects when it may hold ``B``/``E`` events (a ``"B"``/``"E"`` string anywhere) or has
    another shape. Raises ValueError when it is not JSON (the scanner then tries another split)."""
    raw = bytes(text)  # bytes.find (memchr) is ~10x faster than a regex over the buffer
    if raw.find(b'"B"') < 0 and raw.find(b'"E"') < 0:
        try:
            return TypedBatch(_FOREIGN.decode(text), memoryview(text)[1:-1])
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as e:
            raise ValueError(str(e)) from None
    return orjson.loads(text)


def _ns(vals: list) -> np.ndarray | None:
    """``round(v * 1000)`` of each number (ints exactly, floats as doubles), or None if the values
    cannot be taken together exactly (an integer beyond 2**53 / 1000 us)."""
    arr = np.asarray(vals, np.float64)
    if len(arr) and float(np.abs(arr).max()) >= _EXACT_INT_US and any(type(v) is int for v in vals):
        return None
    return np.rint(arr * 1000).astype(np.int64)


def _int_or_neg1(v: Any) -> int:
    return v if type(v) is int else -1


class ForeignBatch(ColumnState):
    # More of the accumulator's state (set in ``chrome_import._Events.__init__``).
    attrs: dict[int, dict]
    lane_ix: dict[Any, int]
    correlation: dict[int, int]
    gpu_rows: list[tuple[int, int]]
    cat_attrs: dict[str, dict]  # category -> the shared attributes of spans without args

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
        return self._foreign_columns(
            len(events), [ev.get("ts") for ev in xs], [ev.get("dur", 0) for ev in xs],
            [ev.get("args") or {} for ev in xs], [ev.get("name", "") for ev in xs], [ev.get("cat", "") for ev in xs],
            [ev.get("pid") for ev in xs], [ev.get("tid") for ev in xs], metas and dict_meta_names(metas))

    def _add_foreign_typed(self, events: list) -> bool:
        """A batch decoded by ``decode_foreign`` (no B/E events). Same contract as
        ``_add_foreign_batch``."""
        xs = [ev for ev in events if type(ev) is ForeignX]
        metas = [ev for ev in events if type(ev) is ForeignM]
        names: list[tuple[Any, Any, Any, str]] = []
        for ev in metas:
            a = ev.args or {}
            if type(a) is not dict:
                return False
            names.append((ev.name, ev.pid, ev.tid, str(a.get("name", ""))))
        return self._foreign_columns(
            len(events), list(map(_g_ts, xs)), list(map(_g_dur, xs)), [a or {} for a in map(_g_args, xs)],
            list(map(_g_name, xs)), list(map(_g_cat, xs)), list(map(_g_pid, xs)), list(map(_g_tid, xs)), names)

    def _foreign_columns(self, n_events: int, ts_l: list, dur_l: list, args: list, name_l: list, cat_l: list,
                         pids: list, tids: list, meta_names: list) -> bool:
        """The X events' fields (as the per-event path reads them: ``args`` already ``or {}``) into
        columns; False, having changed nothing, when they cannot be taken together exactly."""
        nx = len(ts_l)
        e = None
        if nx:
            if not ({type(v) for v in ts_l} | {type(v) for v in dur_l}) <= _NUM:
                return False
            if not all(type(a) is dict for a in args):
                return False
            ts, dur = _ns(ts_l), _ns(dur_l)
            if ts is None or dur is None or (dur < 0).any():
                return False
            names = list(map(str, name_l))
            cats = list(map(str, cat_l))
            devs = [a.get("device") for a in args]
            streams = [a.get("stream") for a in args]
            on_gpu = [c in GPU_CATS and isinstance(d, int) and s is not None
                      for c, d, s in zip(cats, devs, streams, strict=True)]
            keys = [("gpu", d, s) if g else ("thr", p, t)
                    for g, d, s, p, t in zip(on_gpu, devs, streams, pids, tids, strict=True)]
            try:
                distinct_keys = dict.fromkeys(keys)
            except TypeError:  # an unhashable pid/tid/stream: the per-event path reports it
                return False
            # From here on nothing is refused.
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
            if "correlation" in present:
                for j, g, c, corr in zip(count(i0), on_gpu, cats, [a.get("correlation") for a in args], strict=False):
                    if isinstance(corr, int):
                        if g:
                            self.gpu_rows.append((j, corr))
                        elif c in RUNTIME_CATS:
                            self.correlation[corr] = j
            nums = [[_int_or_neg1(a.get(key)) for a in args] if key in present else [-1] * nx for key in _NUM_KEYS]
            attrs, cat_attrs = self.attrs, self.cat_attrs
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
            s, e = ts, ts + dur
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
        self._finish_batch(n_events, e, meta_names or [])
        return True
