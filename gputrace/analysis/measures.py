"""Per-run measurements for comparisons: time per phase path, device, clock and instance.

A run's measurement for ``(path, device, clock)`` is the summed duration of its spans with
that phase path (``prove/ntt/coset_ntt``), on that device (``None`` = all devices), on that
clock (``host``: end - start; ``device``: CUDA-event time, only spans that have it), kept per
instance ``(circuit, batch)`` so that comparisons can align instances across runs. The
special path ``(run)`` is the run's extent (first start to last end), and ``(prove)`` the
extent of its ``prove`` roots (end to end without key setup or verification). Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import group_ids, run_index
from gputrace.timeline.model import Timeline

RUN_PATH = "(run)"
PROVE_PATH = "(prove)"
Key = tuple  # (path: str, device: int | None, clock: str)
Instance = tuple  # (circuit: int, batch: int); (-1, -1) when not recorded


@dataclass
class RunMeasures:
    """Measurements of one run.

    ``label``: a name for messages (file path or run id); ``start_ns``: the run's first
    timestamp (orders runs for warm-up discarding); ``resource``: the run's resource
    attributes (environment, ``gputrace.config.*``); ``values``: key -> {instance: ns}.
    """

    label: str
    start_ns: int
    resource: dict
    values: dict[Key, dict[Instance, float]] = field(default_factory=dict)

    @property
    def wall_ns(self) -> float:
        return sum(self.values.get((RUN_PATH, None, "host"), {}).values())


def path_ids(tl: Timeline) -> tuple[np.ndarray, list[str]]:
    """Row -> phase-path id, and the path strings (``prove/ntt/coset_ntt``). One ``np.unique``
    per depth level."""
    n = tl.n
    c = tl.cols
    pid = np.full(n, -1, np.int64)
    names: list[str] = []
    if n == 0:
        return pid, names
    nph = max(len(tl.phases), 1)
    depth = c["depth"].astype(np.int64)
    par = c["parent"]
    for d in range(int(depth.max()) + 1):
        rows = np.flatnonzero(depth == d)
        if len(rows) == 0:
            continue
        ppid = np.where(par[rows] >= 0, pid[np.maximum(par[rows], 0)], -1) if d else np.full(len(rows), -1, np.int64)
        key = (ppid + 1) * nph + c["phase"][rows].astype(np.int64)
        uk, inv = np.unique(key, return_inverse=True)
        base = len(names)
        for k in uk.tolist():
            parent_id, ph = k // nph - 1, k % nph
            prefix = names[parent_id] + "/" if parent_id >= 0 else ""
            names.append(prefix + tl.phases[ph])
        pid[rows] = base + inv.reshape(-1)
    return pid, names


def _accumulate(values, pid, names, dev, cir, bat, dur, clock):
    if len(dur) == 0:
        return
    for devkey in (None, "dev"):
        d = dev if devkey == "dev" else np.full(len(dur), -9, np.int64)
        gid, first = group_ids(pid, d, cir, bat)
        sums = np.bincount(gid, weights=dur.astype(np.float64), minlength=len(first))
        for g, r in enumerate(first.tolist()):
            key = (names[int(pid[r])], None if devkey is None else int(dev[r]), clock)
            values.setdefault(key, {})[(int(cir[r]), int(bat[r]))] = float(sums[g])


def run_measures(tl: Timeline, label: str = "") -> RunMeasures:
    """Measurements of a Timeline holding one run (see `split_runs` for several)."""
    c = tl.cols
    pid, names = path_ids(tl)
    dev = np.where(c["device"] < 0, -1, c["device"]).astype(np.int64)
    cir, bat = c["circuit"].astype(np.int64), c["batch"].astype(np.int64)
    values: dict = {}
    ok = pid >= 0
    _accumulate(values, pid[ok], names, dev[ok], cir[ok], bat[ok], (c["end"] - c["start"])[ok], "host")
    gd = tl.gpu_duration()
    g = ok & (gd >= 0)
    _accumulate(values, pid[g], names, dev[g], cir[g], bat[g], gd[g], "device")
    start = tl.t0
    if tl.n:
        values[(RUN_PATH, None, "host")] = {(-1, -1): float(tl.t1 - tl.t0)}
        pid_prove = tl.phase_id("prove")
        roots = (c["parent"] < 0) & (c["phase"] == pid_prove) if pid_prove >= 0 else np.zeros(tl.n, bool)
        if roots.any():
            values[(PROVE_PATH, None, "host")] = {(-1, -1): float(c["end"][roots].max() - c["start"][roots].min())}
    r0 = int(c["resource"][0]) if tl.n else -1
    res = dict(tl.resources[r0]) if 0 <= r0 < len(tl.resources) else {}
    if not label:
        label = str(res.get("gputrace.run_id") or (tl.trace_ids[0] if tl.trace_ids else "run"))
    return RunMeasures(label=label, start_ns=int(start), resource=res, values=values)


def split_runs(tl: Timeline) -> list[Timeline]:
    """One Timeline per run (``gputrace.run_id``, else process, else trace id), in start order."""
    run, labels = run_index(tl)
    if len(labels) <= 1:
        return [tl]
    parts = [tl.select(run == r) for r in range(len(labels))]
    parts = [p for p in parts if p.n]
    parts.sort(key=lambda p: p.t0)
    return parts
