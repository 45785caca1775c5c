"""The GPU activity rows of a Timeline (kernels, copies, memsets, syncs; names: :mod:`gputrace.activity`).

:func:`activity_index` finds them in one pass over ``Timeline.attrs`` and caches the result per Timeline
object (a Timeline is immutable), so every analysis of one Timeline shares it. The pass (:func:`attr_scan`)
also collects the rows that ``gputrace.analysis.api_calls`` needs (API calls, profiler rows, rows that are not
phases; :func:`profiler_rows` itself is here, below ``_common``, which needs it too), so a Timeline's attributes
are walked once, and a ``RowAttrs`` row whose overlay holds none of the keys read is answered from its shared
dict once per shared dict (a million kernel launches share a handful).
Pure; any thread (the caches are dicts of weak references: a race computes twice, never wrongly).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from gputrace.activity import ACTIVITY, PAUSED, ROLE, SOURCE, STREAM
from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import RowAttrs, TemplateAttrs

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


@dataclass(frozen=True)
class AttrScan:
    """What one pass over ``Timeline.attrs`` finds (see :func:`attr_scan`). ``act_rows``/``act_what``/
    ``act_stream``: rows whose ``gputrace.activity`` is one of ``WHAT_NAMES``, ascending, with its code and
    ``cuda.stream`` (-1 where absent or not an int); ``api``: rows with ``gputrace.role == "api"``;
    ``profiler``: rows with ``gputrace.role == "profiler"``; ``paused``: the spans of intervals CUDA activity
    collection was paused (``gputrace.record.paused`` true: ``gputrace.trace.record_control``); ``tagged``: rows
    holding a ``gputrace.activity`` or a ``gputrace.role`` key (whatever its value), and the paused rows.
    ``api``, ``profiler``, ``paused`` and ``tagged`` follow the attributes' order."""

    act_rows: np.ndarray
    act_what: np.ndarray
    act_stream: np.ndarray
    api: np.ndarray
    profiler: np.ndarray
    tagged: np.ndarray
    paused: np.ndarray


def _classify(a) -> tuple:
    """(activity code or None, stream, role, tagged) of one attribute Mapping: the per-row reference. A paused
    span's role is ``PAUSED`` (its attribute, not a ``gputrace.role`` value: what the recorder writes)."""
    w = a.get(ACTIVITY)
    code = _WHAT_CODES.get(w) if w is not None else None
    st = a.get(STREAM) if code is not None else None
    if a.get(PAUSED) is True:
        return code, (st if isinstance(st, int) else -1), PAUSED, True
    return code, (st if isinstance(st, int) else -1), a.get(ROLE), (ACTIVITY in a or ROLE in a)


_READ = (ACTIVITY, STREAM, ROLE, PAUSED)
_SCANS: dict[int, tuple[weakref.ref, AttrScan]] = {}


def attr_scan(tl: Timeline) -> AttrScan:
    """One pass over ``tl.attrs`` (cached while ``tl`` lives). A ``RowAttrs``/``TemplateAttrs`` whose overlay
    keys hold none of the keys read gives what its shared dict gives (its ``get`` and ``in`` fall through to
    it), so it is classified once per shared dict; any other row is classified itself."""
    hit = _SCANS.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    rows: list[int] = []
    codes: list[int] = []
    streams: list[int] = []
    api: list[int] = []
    prof: list[int] = []
    paused: list[int] = []
    tagged: list[int] = []
    by_shared: dict[int, tuple] = {}  # id(shared dict) -> _classify(shared dict); all alive in tl.attrs
    plain_keys: dict[int, bool] = {}  # id(overlay keys tuple) -> it holds none of _READ
    overlaid = (RowAttrs, TemplateAttrs)
    attrs: dict[int, Any] = tl.attrs  # dicts, RowAttrs, TemplateAttrs (any Mapping)
    for r, a in attrs.items():
        if type(a) in overlaid:
            ks = a.keys_
            plain = plain_keys.get(id(ks))
            if plain is None:
                plain = plain_keys[id(ks)] = not any(k in ks for k in _READ)
            if plain:
                sh = a.shared
                res = by_shared.get(id(sh))
                if res is None:
                    res = by_shared[id(sh)] = _classify(sh)
            else:
                res = _classify(a)
        else:
            res = _classify(a)
        code, st, role, tag = res
        if code is not None:
            rows.append(r)
            codes.append(code)
            streams.append(st)
        if tag:
            tagged.append(r)
            if role == "api":
                api.append(r)
            elif role == "profiler":
                prof.append(r)
            elif role == PAUSED:
                paused.append(r)
    r_ = np.asarray(rows, np.int64)
    o = np.argsort(r_, kind="stable")
    scan = AttrScan(r_[o], np.asarray(codes, np.int8)[o], np.asarray(streams, np.int64)[o],
                    np.asarray(api, np.int64), np.asarray(prof, np.int64), np.asarray(tagged, np.int64),
                    np.asarray(paused, np.int64))
    for k in [k for k, (ref, _) in _SCANS.items() if ref() is None]:
        _SCANS.pop(k, None)
    _SCANS[id(tl)] = (weakref.ref(tl), scan)
    return scan


def renumbered_scan(new: Timeline, old: Timeline, inv: np.ndarray) -> None:
    """Cache for ``new`` the :func:`attr_scan` of ``old`` renumbered, without a pass over the attributes:
    ``new`` holds the rows of ``old`` with ``inv[row] >= 0`` (``inv``: old row -> new row), with the same
    attribute objects, in the same attribute order (``gputrace.analysis.steps.steady_timeline``)."""
    s = attr_scan(old)

    def kept(a: np.ndarray) -> np.ndarray:
        x = inv[a]
        return x[x >= 0]

    k = inv[s.act_rows]
    keep = k >= 0
    o = np.argsort(k[keep], kind="stable")
    scan = AttrScan(k[keep][o], s.act_what[keep][o], s.act_stream[keep][o], kept(s.api), kept(s.profiler),
                    kept(s.tagged), kept(s.paused))
    _SCANS[id(new)] = (weakref.ref(new), scan)


def profiler_rows(tl: Timeline) -> np.ndarray:
    """Row numbers of profiler bookkeeping (``gputrace.role = "profiler"``: Kineto's ``PyTorch Profiler (0)``
    span, buffer requests, device-side annotation copies): not host work. Only Kineto traces have them
    (others: an empty array, without a pass over the attributes); cached while ``tl`` lives."""
    if not any(res.get(SOURCE) == "kineto" for res in tl.resources):
        return np.zeros(0, np.int64)
    return attr_scan(tl).profiler


_CACHE: dict[int, tuple[weakref.ref, ActivityIndex]] = {}


def activity_index(tl: Timeline) -> ActivityIndex:
    """Activity rows of ``tl`` (from :func:`attr_scan`; cached while ``tl`` lives)."""
    hit = _CACHE.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    scan = attr_scan(tl)
    r, w, st = scan.act_rows, scan.act_what, scan.act_stream
    c = tl.cols
    has = (c["gpu_start"][r] >= 0) & (c["gpu_end"][r] >= c["gpu_start"][r])
    idx = ActivityIndex(r, w, np.where(has, c["gpu_start"][r], c["start"][r]),
                        np.where(has, c["gpu_end"][r], c["end"][r]), c["device"][r].astype(np.int64), st)
    for k in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        _CACHE.pop(k, None)
    _CACHE[id(tl)] = (weakref.ref(tl), idx)
    return idx
