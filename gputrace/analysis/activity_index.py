"""The GPU activity rows of a Timeline (kernels, copies, memsets, syncs; names: :mod:`gputrace.activity`).

:func:`activity_index` finds them in one pass over ``Timeline.attrs`` and caches the result per Timeline
object (a Timeline is immutable), so every analysis of one Timeline shares it. Pure; any thread (the cache
is a dict of weak references: a race computes the index twice, never wrongly).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from gputrace.activity import ACTIVITY, STREAM
from gputrace.timeline.model import Timeline

KERNEL, MEMCPY, MEMSET, SYNC = 0, 1, 2, 3
WHAT_NAMES = ("kernel", "memcpy", "memset", "sync")
_WHAT_CODES = {n: i for i, n in enumerate(WHAT_NAMES)}
KERNELS, BRACKETS = "kernels", "brackets"
CUDA_EVENTS, HOST_TIMES = "cuda events", "host"


@dataclass
class ActivityIndex:
    """The activity rows of a Timeline, ascending by row. ``what``: KERNEL/MEMCPY/MEMSET/SYNC;
    ``start``/``end``: the device interval (``gpu_start``/``gpu_end`` where set, else the span's own
    times; a sync's host interval); ``device``: the device column; ``stream``: ``cuda.stream`` (-1 absent)."""

    rows: np.ndarray
    what: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray

    def __len__(self) -> int:
        return int(len(self.rows))

    def device_work(self) -> np.ndarray:
        """Mask of kernels, copies and memsets (what occupies a GPU; syncs are host waits)."""
        return self.what != SYNC

    def mask(self, n: int) -> np.ndarray:
        """Row mask of length ``n`` (the Timeline's row count) for the activity rows."""
        m = np.zeros(n, bool)
        m[self.rows] = True
        return m


_CACHE: dict[int, tuple[weakref.ref, ActivityIndex]] = {}


def activity_index(tl: Timeline) -> ActivityIndex:
    """Activity rows of ``tl`` (one pass over ``tl.attrs``; cached while ``tl`` lives)."""
    hit = _CACHE.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    rows, codes, streams = [], [], []
    get = _WHAT_CODES.get
    for r, a in tl.attrs.items():
        w = a.get(ACTIVITY)
        if w is not None:
            c = get(w)
            if c is not None:
                rows.append(r)
                codes.append(c)
                s = a.get(STREAM)
                streams.append(s if isinstance(s, int) else -1)
    unsorted = np.asarray(rows, np.int64)
    o = np.argsort(unsorted, kind="stable")
    ra, wa, st = unsorted[o], np.asarray(codes, np.int8)[o], np.asarray(streams, np.int64)[o]
    cols = tl.cols
    has = (cols["gpu_start"][ra] >= 0) & (cols["gpu_end"][ra] >= cols["gpu_start"][ra])
    idx = ActivityIndex(ra, wa, np.where(has, cols["gpu_start"][ra], cols["start"][ra]),
                        np.where(has, cols["gpu_end"][ra], cols["end"][ra]), cols["device"][ra].astype(np.int64), st)
    for k in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        _CACHE.pop(k, None)
    _CACHE[id(tl)] = (weakref.ref(tl), idx)
    return idx
