"""Process start-up: the time from a process's root span to its first phase or first GPU activity.

Under ``gputrace record`` each process has one root span (named after its command) that covers all its
host work. Before the program's first phase or first GPU activity, whichever comes first, that root runs
the interpreter, ``import torch``, the CUDA context and whatever set-up the program does outside phases:
start-up. It is defined here once, per process (``host``, ``pid``), and the findings share it
(``gputrace.analysis.findings``): the root's unattributed time excludes it, GPU-idle gaps inside it are not
listed separately, and one ``startup`` finding reports it (docs/findings.md).

A *launcher* is a process with neither phases (besides its root) nor GPU activity that is the parent
(resource attribute ``process.parent_pid``) of processes that have some: torchrun's own Python process.
Its start-up runs from its root's start to its children's first phase or GPU activity.

A process has a start-up only when it has a root: a top-level phase row covering every host row of the
process (a ``record`` root; Nsight traces usually have none, so nothing is inferred there). A PyTorch-profiler
(Kineto) trace never has one: it records a window of a running program, so an annotation around all of it
(``execute_...``, ``ProfilerStep#N``) is a step of the program, not its process from start (its resource
says ``gputrace.source = "kineto"``). Pure; any thread.
"""

from __future__ import annotations

import numpy as np

from gputrace import activity as A
from gputrace.analysis._common import device_activity, host_rows
from gputrace.analysis.api_calls import phase_mask
from gputrace.timeline.model import Timeline


def _parent_pid(tl: Timeline, rows: np.ndarray) -> int | None:
    """The ``process.parent_pid`` of any resource these rows come from, else None."""
    for r in np.unique(tl.cols["resource"][rows]).tolist():
        if 0 <= r < len(tl.resources):
            v = tl.resources[r].get("process.parent_pid")
            try:
                return int(v) if v is not None else None
            except (TypeError, ValueError):
                return None
    return None


def _profiler_window(tl: Timeline, rows: np.ndarray) -> bool:
    """Whether these rows come from a PyTorch-profiler (Kineto) trace: a recorded window, no process start."""
    return any(0 <= r < len(tl.resources) and tl.resources[r].get(A.SOURCE) == "kineto"
               for r in np.unique(tl.cols["resource"][rows]).tolist())


def startup_intervals(tl: Timeline) -> list[dict]:
    """One entry per process that has a root span and a non-empty start-up, by start:
    ``process`` (the root's name), ``host``, ``pid``, ``start_ns``/``end_ns`` (epoch ns), ``duration_ns``,
    ``ends_at`` (plain text: what ended it: ``first phase NAME``, ``first GPU activity (GPU n)`` or, for a
    launcher, ``its child processes' first work``), ``launcher`` (bool). Names come from the trace: escape
    them before they reach markup."""
    if tl.n == 0 or not tl.lanes:
        return []
    c = tl.cols
    keys = sorted({(ln.host, int(ln.pid)) for ln in tl.lanes})
    key_ix = {k: i for i, k in enumerate(keys)}
    lane_proc = np.array([key_ix[(ln.host, int(ln.pid))] for ln in tl.lanes], dtype=np.int64)
    proc = lane_proc[c["lane"]]  # row -> index into keys (one process: host, pid)
    # Each process's rows as one slice of a stable sort (rows ascending within it), so the loop below costs
    # the process's own rows, not a pass over the whole trace per process (40k Kineto pids took minutes).
    by_proc = np.argsort(proc, kind="stable")
    bounds = np.searchsorted(proc[by_proc], np.arange(len(keys) + 1))
    pm = phase_mask(tl)
    hm = np.zeros(tl.n, bool)
    hm[host_rows(tl)] = True
    act_rows, act_s, _ = device_activity(tl)
    # Each process's first GPU activity (the first listed among equal starts).
    act_proc = proc[act_rows]
    o = np.lexsort((act_s, act_proc))
    lead = o[np.r_[True, act_proc[o][1:] != act_proc[o][:-1]]] if len(o) else o
    first_act = dict(zip(act_proc[lead].tolist(), lead.tolist(), strict=True))
    procs: dict[tuple[str, int], dict] = {}
    for k, (h, p) in enumerate(keys):
        mine = by_proc[bounds[k]:bounds[k + 1]]
        hrows = mine[hm[mine]]
        if not len(hrows):
            continue
        lo, hi = int(c["start"][hrows].min()), int(c["end"][hrows].max())
        roots = hrows[pm[hrows] & (c["parent"][hrows] < 0) & (c["start"][hrows] <= lo) & (c["end"][hrows] >= hi)]
        if not len(roots) or _profiler_window(tl, hrows):
            continue
        root = int(roots[0])
        first, ends_at = None, ""
        ph = mine[pm[mine]]
        ph = ph[ph != root]
        if len(ph):
            f = int(ph[np.argmin(c["start"][ph])])
            first, ends_at = int(c["start"][f]), f"first phase {tl.phases[int(c['phase'][f])]}"
        i = first_act.get(k)
        if i is not None and (first is None or int(act_s[i]) < first):
            first = int(act_s[i])
            ends_at = f"first GPU activity (GPU {int(c['device'][act_rows[i]])})"
        procs[(h, p)] = {"process": tl.phases[int(c["phase"][root])], "host": h, "pid": p,
                         "start_ns": int(c["start"][root]), "first": first, "ends_at": ends_at,
                         "parent": _parent_pid(tl, mine)}
    kids: dict[tuple[str, int], list[int]] = {}  # (host, parent pid) -> its children's first work
    for (h, _), d in procs.items():
        if d["parent"] is not None and d["first"] is not None:
            kids.setdefault((h, d["parent"]), []).append(d["first"])
    out = []
    for (h, p), d in procs.items():
        first, launcher, ends_at = d["first"], False, d["ends_at"]
        if first is None:  # no work of its own: a launcher if its children have some
            if (h, p) not in kids:
                continue
            first, launcher, ends_at = min(kids[(h, p)]), True, "its child processes' first work"
        if first <= d["start_ns"]:
            continue
        out.append({"process": d["process"], "host": h, "pid": p, "start_ns": d["start_ns"], "end_ns": first,
                    "duration_ns": first - d["start_ns"], "ends_at": ends_at, "launcher": launcher})
    out.sort(key=lambda d: (d["start_ns"], d["host"], d["pid"]))
    return out
