"""The batch path of the Chrome reader for other tools' traces (PyTorch profiler / Kineto,
``chrome://tracing``): a batch of ``X`` and metadata events becomes columns through one pass per
field, where the per-event path (``chrome_import._Events._row``) costs several microseconds an event.

A mixin of ``chrome_import._Events``. Only for batches it can map exactly as the per-event path does:
every event a dict, no ``B``/``E`` events (their pairing follows file order across batches), numeric
``ts``/``dur >= 0``, ``args`` a dict (or absent), hashable tracks. Anything else returns False,
having changed nothing, and the per-event path handles the batch with its exact errors (file, event
index, field). ``tests/unit/test_chrome_typed.py`` compares both paths. Not thread-safe.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputrace.phases import phase_kind
from gputrace.timeline.chrome_batch import ColumnState, dict_meta_names
from gputrace.timeline.model import KIND_CODES

__all__ = ["ForeignBatch", "GPU_CATS", "RUNTIME_CATS"]

#: Kineto categories of device activity (drawn on GPU stream lanes).
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "gpu_op"}
#: Kineto categories of host-side CUDA API calls (carry ``args.correlation``).
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
_PAIRED = {"B", "E"}
_NUM = {int, float}
#: |ts| in microseconds below which an integer times 1000 is exact as a double (2**53 / 1000).
_EXACT_INT_US = 9_007_199_254_740


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

    def _add_foreign_batch(self, events: list) -> bool:
        """See the module docstring. Returns False (nothing changed) when the batch is not plain."""
        if not all(type(ev) is dict for ev in events):
            return False
        phs = [ev.get("ph") for ev in events]
        kinds_present = set(phs)
        if kinds_present & _PAIRED:
            return False
        xs = [ev for ev, ph in zip(events, phs, strict=True) if ph == "X"]
        metas = [ev for ev, ph in zip(events, phs, strict=True) if ph == "M"]
        for ev in metas:  # metadata args are read with .get: they must be dicts
            if type(ev.get("args") or {}) is not dict:
                return False
        nx = len(xs)
        if nx:
            ts_l = [ev.get("ts") for ev in xs]
            dur_l = [ev.get("dur", 0) for ev in xs]
            args = [ev.get("args") or {} for ev in xs]
            if not ({type(v) for v in ts_l} | {type(v) for v in dur_l}) <= _NUM:
                return False
            if not all(type(a) is dict for a in args):
                return False
            ts, dur = _ns(ts_l), _ns(dur_l)
            if ts is None or dur is None or (dur < 0).any():
                return False
            names = [str(ev.get("name", "")) for ev in xs]
            cats = [str(ev.get("cat", "")) for ev in xs]
            devs = [a.get("device") for a in args]
            streams = [a.get("stream") for a in args]
            on_gpu = [c in GPU_CATS and isinstance(d, int) and s is not None
                      for c, d, s in zip(cats, devs, streams, strict=True)]
            keys = [("gpu", d, s) if g else ("thr", ev.get("pid"), ev.get("tid"))
                    for g, d, s, ev in zip(on_gpu, devs, streams, xs, strict=True)]
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
            kind_of = {nm: KIND_CODES.get(phase_kind(nm), 0) for nm in dict.fromkeys(names)}
            gpu_code = KIND_CODES["gpu"]
            kinds = np.fromiter((gpu_code if g else kind_of[nm] for g, nm in zip(on_gpu, names, strict=True)),
                                np.int8, nx)
            i0 = len(self.start)
            corrs = [a.get("correlation") for a in args]
            for j, (g, c, corr) in enumerate(zip(on_gpu, cats, corrs, strict=True)):
                if isinstance(corr, int):
                    if g:
                        self.gpu_rows.append((i0 + j, corr))
                    elif c in RUNTIME_CATS:
                        self.correlation[corr] = i0 + j
            nums = [[_int_or_neg1(a.get(key)) for a in args] for key in ("circuit", "batch", "bytes")]
            for j, (a, c) in enumerate(zip(args, cats, strict=True)):
                if c:
                    a = {**a, "chrome.cat": c}
                if a:
                    self.attrs[i0 + j] = a
            s, e = ts, ts + dur
            has_g = np.fromiter(on_gpu, bool, nx)
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
            self.phase.frombytes(np.fromiter(map(pix.__getitem__, names), np.int32, nx).tobytes())
            self.lane.frombytes(lanes.tobytes())
            self.span_id.frombytes(np.arange(i0 + 1, i0 + nx + 1, dtype=np.uint64).tobytes())
            self.parent_sid.frombytes(bytes(8 * nx))
            self.trace.frombytes(np.full(nx, -1, np.int32).tobytes())
            self.resource.frombytes(np.full(nx, -1, np.int32).tobytes())
        self._finish_batch(len(events), e if nx else None, dict_meta_names(metas))
        return True
