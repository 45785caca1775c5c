"""Which rows are phases, and the CUDA API-call table.

A *phase* is what a user or framework marked as a stretch of work: a gputrace ``phase()``, an NVTX range,
a ``torch.profiler.record_function`` annotation. Everything else a trace holds is not: GPU activity
(``gputrace.activity``), CUDA API calls (``gputrace.role = "api"`` or a row on an ``api:NAME`` lane: the
Nsight and Kineto readers put them there), framework operators (``"op"``: Kineto's ``aten::...``) and
profiler bookkeeping (``"profiler"``). The Phases table lists only phases; API calls get
:func:`api_call_table`.

Pure; any thread. The attributes are read by one pass shared with ``activity_index``
(``gputrace.analysis.activity_index.attr_scan``); :func:`phase_mask` is cached per Timeline object, as
``activity_index`` is. :func:`profiler_rows` lives with that pass in ``activity_index`` (so
``_common.host_rows`` reads it without importing this module, which imports ``_common``); it is re-exported here.
"""

from __future__ import annotations

import weakref

import numpy as np

from gputrace import activity as A
from gputrace.analysis._common import sum_count_max
from gputrace.analysis.activity_index import attr_scan, profiler_rows
from gputrace.timeline.model import Timeline

__all__ = ["api_call_table", "api_rows", "background_lanes", "phase_ids", "phase_mask", "profiler_rows"]

_CACHE: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def api_rows(tl: Timeline) -> np.ndarray:
    """Mask of the CUDA API-call rows (on an ``api:`` lane, or with ``gputrace.role = "api"``)."""
    m = np.zeros(tl.n, bool)
    api_lanes = [i for i, ln in enumerate(tl.lanes) if ln.name.startswith(A.API_LANE_PREFIX)]
    if api_lanes:
        m |= np.isin(tl.cols["lane"], np.asarray(api_lanes))
    m[attr_scan(tl).api] = True
    return m


def phase_mask(tl: Timeline) -> np.ndarray:
    """Mask of the rows that are phases (see the module docstring); cached while ``tl`` lives."""
    hit = _CACHE.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    m = ~api_rows(tl)
    m[attr_scan(tl).tagged] = False
    for k in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        _CACHE.pop(k, None)
    _CACHE[id(tl)] = (weakref.ref(tl), m)
    return m


def background_lanes(tl: Timeline) -> np.ndarray:
    """Bool per lane: a host thread's lane (``thread:NAME``, or a lane of no GPU stream) with rows, none of
    them a phase, whose thread made no CUDA API call (no row on its ``api:NAME`` lane). Such a thread never
    marked work nor fed a GPU: in a torch.profiler trace recorded with Python stacks it is tqdm's monitor or a
    usage reporter waiting through the whole window (``threading.py(359): wait``), and its frames are not the
    host work a GPU waited for. A ``record`` or Nsight trace has a phase or an API call on every thread that
    ran anything, so none of its lanes is background."""
    n = len(tl.lanes)
    out = np.zeros(n, bool)
    if tl.n == 0 or n == 0:
        return out
    lane = tl.cols["lane"]
    has_rows = np.bincount(lane, minlength=n) > 0
    has_phase = np.bincount(lane[phase_mask(tl)], minlength=n) > 0
    api = api_rows(tl)
    api_lanes = {(ln.host, ln.pid, ln.name) for ln in (tl.lanes[i] for i in np.unique(lane[api]).tolist())}
    for i, ln in enumerate(tl.lanes):
        if not has_rows[i] or has_phase[i] or ln.device >= 0 or ln.name.startswith(A.API_LANE_PREFIX):
            continue
        out[i] = (ln.host, ln.pid, A.api_lane_name(ln.name)) not in api_lanes
    return out


def phase_ids(tl: Timeline) -> set[int]:
    """Phase-name ids with at least one phase row."""
    return set(np.unique(tl.cols["phase"][phase_mask(tl)]).tolist())


def api_call_table(tl: Timeline, top: int = 20) -> list[dict]:
    """CUDA API calls per name, most total time first: ``api``, ``count``, ``total_ns``, ``mean_ns``,
    ``max_ns``; at most ``top`` rows (``top <= 0``: all)."""
    m = api_rows(tl)
    if not m.any():
        return []
    rows = np.flatnonzero(m)
    c = tl.cols
    d = (c["end"][rows] - c["start"][rows]).astype(np.int64)
    ph = c["phase"][rows]
    uk, _, tot, cnt, mx = sum_count_max(ph, d)
    out: list[dict] = [{"api": tl.phases[int(p)], "count": int(cnt[j]), "total_ns": int(tot[j]),
                        "mean_ns": float(tot[j] / cnt[j]), "max_ns": int(mx[j])} for j, p in enumerate(uk.tolist())]
    out.sort(key=lambda r: (-int(r["total_ns"]), str(r["api"])))
    return out[:top] if top > 0 else out
