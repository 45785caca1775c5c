"""Runs inside a Timeline: which rows belong to which run, and one Timeline per run.

A run is the resource attribute ``gputrace.run_id`` when present, else (service.name, host.name,
process.pid), else the trace id. Pure numpy over Timeline columns; thread-safe.
"""

from __future__ import annotations

import numpy as np

from gputrace.timeline.model import Timeline

__all__ = ["RUN_KEYS", "PROCESS_KEYS", "run_index", "split_runs"]

#: Resource attributes that identify one run (first one present wins).
RUN_KEYS = ("gputrace.run_id",)
#: Fallback identity of a run when no run id was recorded.
PROCESS_KEYS = ("service.name", "host.name", "process.pid")


def run_index(tl: Timeline) -> tuple[np.ndarray, list[str]]:
    """Row -> run number, and one label per run.

    Files of one run merged by ``Timeline.concat`` (one resource entry each) map to the same run.
    """
    n = tl.n
    if n == 0:
        return np.zeros(0, np.int64), []
    ix: dict[str, int] = {}
    res_map = np.full(max(len(tl.resources), 1), -1, np.int64)
    for r, attrs in enumerate(tl.resources):
        key = None
        for k in RUN_KEYS:
            if attrs.get(k) not in (None, ""):
                key = f"run:{attrs[k]}"
                break
        if key is None and any(attrs.get(k) not in (None, "") for k in PROCESS_KEYS):
            key = "proc:" + "/".join(str(attrs.get(k, "")) for k in PROCESS_KEYS)
        if key is not None:
            res_map[r] = ix.setdefault(key, len(ix))
    res = tl.cols["resource"]
    has_res = (res >= 0) & (res < len(tl.resources))
    run = np.where(has_res, res_map[np.where(has_res, res, 0)], -1)
    labels = list(ix)
    missing = run < 0
    if missing.any():
        # No usable resource: group by trace id instead.
        tr = tl.cols["trace"][missing]
        uniq, inv = np.unique(tr, return_inverse=True)
        base = len(labels)
        run[missing] = base + inv
        for t in uniq:
            t = int(t)
            labels.append("trace:" + (tl.trace_ids[t] if 0 <= t < len(tl.trace_ids) else str(t)))
    return run.astype(np.int64), labels


def split_runs(tl: Timeline) -> list[Timeline]:
    """One Timeline per run, in start order (the Timeline itself when it holds one run)."""
    run, labels = run_index(tl)
    if len(labels) <= 1:
        return [tl]
    parts = [tl.select(run == r) for r in range(len(labels))]
    parts = [p for p in parts if p.n]
    parts.sort(key=lambda p: p.t0)
    return parts
