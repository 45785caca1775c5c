"""Per-run measurements for comparisons: time per phase path, device, clock and instance.

A run's measurement for ``(path, device, clock)`` is the summed duration of its spans with
that phase path (``prove/ntt/coset_ntt``), on that device (``None`` = all devices), on that
clock (``host``: end - start; ``device``: CUDA-event time, only spans that have it, and the time of GPU
activity spans, which have no host clock here; ``gpu busy``: the union of the kernels, copies and memsets a
phase enqueued, kernel truth where activity spans exist), kept per
instance ``(circuit, batch)`` so that comparisons can align instances across runs. The
special path ``(run)`` is the run's extent (first start to last end), and ``(prove)`` the
extent of its ``prove`` roots (end to end without key setup or verification).

Kernel evidence (``gputrace ab --cuda-activity``; only where the run has GPU activity spans), per phase path:
``kernels`` (the union of the kernels the phase enqueued, its sub-phases' included), ``launch gaps`` (device idle
inside the phase's window, ``gpu_activity.launch_gaps``), ``sync wait`` (host time blocked in CUDA
synchronisations made inside the phase) and ``copy <kind> <host memory kind>`` (summed copy time, e.g. ``copy
HtoD PAGEABLE``; the bytes go to ``RunMeasures.copy_bytes`` under the same key, for GB/s). Pure numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gputrace.analysis._common import group_ids
from gputrace.analysis.api_calls import phase_mask
from gputrace.analysis.gpu_activity import activity_index, launch_gaps
from gputrace.timeline.model import Timeline
from gputrace.timeline.runs import split_runs  # noqa: F401 - re-export (run splitting belongs to the readers)

#: Clocks of the kernel evidence (see module doc); copy clocks start with ``COPY_CLOCK``.
KERNEL_CLOCK, GAP_CLOCK, SYNC_CLOCK, COPY_CLOCK = "kernels", "launch gaps", "sync wait", "copy "
EVIDENCE_CLOCKS = (KERNEL_CLOCK, GAP_CLOCK, SYNC_CLOCK)

RUN_PATH = "(run)"
PROVE_PATH = "(prove)"
Key = tuple  # (path: str, device: int | None, clock: str)
Instance = tuple  # (circuit: int, batch: int); (-1, -1) when not recorded


def _code(circuit: npt.ArrayLike, batch: npt.ArrayLike) -> np.ndarray:
    return ((np.asarray(circuit, np.int64) + 1) << 32) | (np.asarray(batch, np.int64) + 1)


class Instances(Mapping):
    """Read-only mapping ``(circuit, batch) -> ns`` backed by two sorted numpy arrays
    (``codes``: instance codes, ``vals``: ns), so a run with a million instances costs two
    arrays, not a million dict entries. Compares equal to the equivalent dict."""

    __slots__ = ("codes", "vals")

    def __init__(self, codes: np.ndarray, vals: np.ndarray):
        o = np.argsort(codes, kind="stable")
        self.codes = np.asarray(codes, np.int64)[o]
        self.vals = np.asarray(vals, np.float64)[o]

    @classmethod
    def single(cls, value: float) -> Instances:
        return cls(_code(np.array([-1]), np.array([-1])), np.array([value], np.float64))

    @classmethod
    def from_dict(cls, d: Mapping) -> Instances:
        if isinstance(d, Instances):
            return d
        keys = list(d)
        return cls(_code([k[0] for k in keys], [k[1] for k in keys]), np.array([d[k] for k in keys], np.float64))

    def __getitem__(self, inst):
        c = int(_code(np.array([inst[0]]), np.array([inst[1]]))[0])
        i = int(np.searchsorted(self.codes, c))
        if i < len(self.codes) and self.codes[i] == c:
            return float(self.vals[i])
        raise KeyError(inst)

    def __iter__(self):
        for c in self.codes.tolist():
            yield ((c >> 32) - 1, (c & 0xFFFFFFFF) - 1)

    def __len__(self) -> int:
        return int(len(self.codes))

    def total(self, codes: np.ndarray | None = None) -> float:
        """Sum over all instances, or over those whose code is in ``codes`` (sorted)."""
        if codes is None:
            return float(self.vals.sum())
        return float(self.vals[np.isin(self.codes, codes, assume_unique=True)].sum())

    def __repr__(self) -> str:
        return f"Instances({dict(self.items())!r})"


@dataclass
class RunMeasures:
    """Measurements of one run.

    ``label``: a name for messages (file path or run id); ``start_ns``: the run's first
    timestamp (orders runs for warm-up discarding); ``resource``: the run's resource
    attributes (environment, ``gputrace.config.*``); ``values``: key -> `Instances` (a
    mapping ``(circuit, batch) -> ns``; plain dicts are accepted and converted); ``round``: the
    experiment round the run belongs to (None outside an experiment).
    """

    label: str
    start_ns: int
    resource: dict
    values: dict[Key, Instances] = field(default_factory=dict)
    round: int | None = None  # experiment round (interleaved runs), for paired comparisons
    copy_bytes: dict[Key, float] = field(default_factory=dict)  # bytes moved per ``copy ...`` key

    def __post_init__(self) -> None:
        self.values = {k: Instances.from_dict(v) for k, v in self.values.items()}

    @property
    def wall_ns(self) -> float:
        """End-to-end time: the ``(prove)`` extent when the run has prove roots, else ``(run)``."""
        v = self.values.get((PROVE_PATH, None, "host")) or self.values.get((RUN_PATH, None, "host"))
        return v.total() if v is not None else 0.0


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
    """Sum durations per (path, device or all, instance); one Instances per (path, device)."""
    if len(dur) == 0:
        return
    code = _code(cir, bat)
    for per_device in (False, True):
        d = dev if per_device else np.full(len(dur), -9, np.int64)
        gid, first = group_ids(pid, d, code)
        sums = np.bincount(gid, weights=dur.astype(np.float64), minlength=len(first))
        # Groups come in (path, device, instance) order: cut them per (path, device).
        kp, kd = pid[first], d[first]
        cut = np.flatnonzero((kp[1:] != kp[:-1]) | (kd[1:] != kd[:-1])) + 1
        bounds = np.concatenate([[0], cut, [len(first)]])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            r = int(first[a])
            key = (names[int(pid[r])], int(dev[r]) if per_device else None, clock)
            values[key] = Instances(code[first[a:b]], sums[a:b])


def run_measures(tl: Timeline, label: str = "") -> RunMeasures:
    """Measurements of a Timeline holding one run (see `split_runs` for several)."""
    c = tl.cols
    pid, names = path_ids(tl)
    dev = np.where(c["device"] < 0, -1, c["device"]).astype(np.int64)
    cir, bat = c["circuit"].astype(np.int64), c["batch"].astype(np.int64)
    values: dict = {}
    ok = pid >= 0
    # GPU activity spans (kernels, copies, memsets, syncs) are measured on the device clock only (their host
    # clock is the same interval); so ``prove/ntt/ntt_radix`` compares one kernel name inside a phase.
    # Host clock: phases only (not CUDA API calls, framework operators or profiler rows: analysis/api_calls.py).
    h = ok & phase_mask(tl)
    _accumulate(values, pid[h], names, dev[h], cir[h], bat[h], (c["end"] - c["start"])[h], "host")
    gd = tl.gpu_duration()
    g = ok & (gd >= 0)
    _accumulate(values, pid[g], names, dev[g], cir[g], bat[g], gd[g], "device")
    # Kernel truth per phase: the union of the device work it enqueued (clock "gpu busy"), where recorded.
    lg = launch_gaps(tl)
    if len(lg):
        r = lg.row
        _accumulate(values, pid[r], names, lg.device.astype(np.int64), cir[r], bat[r], lg.busy_ns, "gpu busy")
        _accumulate(values, pid[r], names, lg.device.astype(np.int64), cir[r], bat[r], lg.kernel_ns, KERNEL_CLOCK)
        _accumulate(values, pid[r], names, lg.device.astype(np.int64), cir[r], bat[r], lg.gap_ns, GAP_CLOCK)
    copy_bytes = _activity_evidence(tl, values, pid, names, dev, cir, bat)
    start = tl.t0
    if tl.n:
        values[(RUN_PATH, None, "host")] = Instances.single(float(tl.t1 - tl.t0))
        pid_prove = tl.phase_id("prove")
        roots = (c["parent"] < 0) & (c["phase"] == pid_prove) if pid_prove >= 0 else np.zeros(tl.n, bool)
        if roots.any():
            extent = float(c["end"][roots].max() - c["start"][roots].min())
            values[(PROVE_PATH, None, "host")] = Instances.single(extent)
    r0 = int(c["resource"][0]) if tl.n else -1
    res = dict(tl.resources[r0]) if 0 <= r0 < len(tl.resources) else {}
    if not label:
        label = str(res.get("gputrace.run_id") or (tl.trace_ids[0] if tl.trace_ids else "run"))
    return RunMeasures(label=label, start_ns=int(start), resource=res, values=values, copy_bytes=copy_bytes)


def _host_kind(kind: str, src: str, dst: str) -> str:
    """'HtoD PAGEABLE', 'DtoH PINNED', 'DtoD': a copy's direction and its host side's memory kind."""
    if kind in ("HtoD", "HtoH"):
        return f"{kind} {src}"
    if kind == "DtoH":
        return f"{kind} {dst}"
    return kind


def _activity_evidence(tl: Timeline, values: dict, pid, names, dev, cir, bat) -> dict:
    """Add ``sync wait`` and ``copy ...`` keys (per enclosing phase path) to ``values``; return the copies' bytes
    per key (all devices and per device, summed over instances)."""
    from gputrace import activity as A
    from gputrace.analysis.activity_index import MEMCPY, SYNC

    idx = activity_index(tl)
    if not len(idx):
        return {}
    c = tl.cols
    par = c["parent"][idx.rows].astype(np.int64)
    has = par >= 0
    ppid = np.where(has, pid[np.maximum(par, 0)], -1)
    ok = has & (ppid >= 0)
    dur = (idx.end - idx.start).astype(np.int64)
    sync = ok & (idx.what == SYNC)
    if sync.any():
        p = par[sync]
        _accumulate(values, ppid[sync], names, dev[p], cir[p], bat[p], dur[sync], SYNC_CLOCK)
    out: dict = {}
    cp = np.flatnonzero(ok & (idx.what == MEMCPY))
    if len(cp):
        kinds = []
        for r in idx.rows[cp].tolist():
            a = tl.attrs.get(r, {})
            kinds.append(_host_kind(str(a.get(A.MEMCPY_KIND, "unknown")), str(a.get(A.MEMCPY_SRC, "UNKNOWN")),
                                    str(a.get(A.MEMCPY_DST, "UNKNOWN"))))
        nbytes = np.maximum(c["nbytes"][idx.rows[cp]].astype(np.float64), 0.0)
        for kind in sorted(set(kinds)):
            m = np.array([k == kind for k in kinds])
            sel, p = cp[m], par[cp[m]]
            clock = COPY_CLOCK + kind
            _accumulate(values, ppid[sel], names, dev[p], cir[p], bat[p], dur[sel], clock)
            for path_id, d, nb in zip(ppid[sel].tolist(), dev[p].tolist(), nbytes[m].tolist(), strict=True):
                for key in ((names[path_id], None, clock), (names[path_id], int(d), clock)):
                    out[key] = out.get(key, 0.0) + nb
    return out
