"""The single-run analysis composition: what ``gputrace report`` (tables and ``--json``) and
the TUI's summary and stalls panels show, computed once, by one function, under one policy.

Listing policy (the only thresholds):

* **Totals count everything.** GPU busy/idle per device is the union of its activity and
  every gap between (and before/after) it, however short; host waits, pinning and
  unattributed totals include every instance.
* **Thresholds only decide what is listed.** The stalls list shows groups (`stalls`) whose
  time lost is at least ``min_lost_ns`` (default: 0.1 % of the wall time, at least 1 µs),
  largest first, at most ``top`` rows; `Listing` says how many rows and how much time were
  left out, and every view prints that line.

So a GPU busy 1 ms in every 5 ms is 80 % idle in every view, and the report, its JSON and the
TUI list the same stall rows for one file. Pure numpy; any thread (the TUI calls it from a
worker). Raises nothing on an empty Timeline (empty results).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gputrace.analysis._common import fmt_ns
from gputrace.analysis.api_calls import api_call_table, phase_mask
from gputrace.analysis.collectives import collectives
from gputrace.analysis.critical_path import critical_path_summary
from gputrace.analysis.findings import Finding, default_min_ns, findings
from gputrace.analysis.gaps import IdleGaps, gpu_idle_gaps
from gputrace.analysis.gpu_activity import LaunchGaps, launch_gaps
from gputrace.analysis.gpu_summary import gpu_summary
from gputrace.analysis.host_samples import (
    attach_gpu_activity,
    attach_paths,
    attach_stalls,
    process_sites,
    samples_note,
)
from gputrace.analysis.pinning import PinningReport, pinning_economics, pinning_summary
from gputrace.analysis.processes import unfinished_note, unfinished_processes
from gputrace.analysis.stalls import (
    Stall,
    idle_stalls,
    launch_stalls,
    pin_stalls,
    rank,
    unattributed_stalls,
    wait_stalls,
)
from gputrace.analysis.startup import startup_intervals
from gputrace.analysis.stats import PhaseTable, phase_table, wall_ns
from gputrace.analysis.steps import steady_timeline, steps_report
from gputrace.analysis.unattributed import Unattributed, unattributed_time
from gputrace.analysis.unobserved import unobserved
from gputrace.analysis.waits import HostWaits, host_waits
from gputrace.timeline.model import Timeline

DEFAULT_TOP = 20
DEFAULT_WAIT_MARGIN_NS = 1_000_000


def default_min_lost(wall: int) -> int:
    """The default listing threshold: 0.1 % of the wall time, at least 1 µs."""
    return max(1_000, int(wall) // 1000)


@dataclass(frozen=True)
class Listing:
    """What the stalls list left out: ``min_lost_ns`` and ``top`` as applied; ``hidden_rows``
    groups (``hidden_ns`` lost in all) below the threshold or past ``top``."""

    min_lost_ns: int
    top: int
    shown_rows: int
    hidden_rows: int
    hidden_ns: int

    def describe(self) -> str:
        head = f"listed: stalls losing at least {fmt_ns(self.min_lost_ns)} (top {self.top})"
        if self.hidden_rows:
            head += f"; {self.hidden_rows:,} smaller rows ({fmt_ns(self.hidden_ns)} in all) not listed"
        return head + "; totals count every gap"

    def to_dict(self) -> dict:
        return {"min_lost_ns": self.min_lost_ns, "top": self.top, "shown_rows": self.shown_rows,
                "hidden_rows": self.hidden_rows, "hidden_ns": self.hidden_ns, "text": self.describe()}


@dataclass(frozen=True)
class DeviceIdle:
    """One device's totals over every gap: ``busy_ns`` (union of its activity), ``idle_ns``
    (all gaps, leading and trailing included: busy + idle is the device's observed share of the run
    extents), ``gaps`` (count) and ``longest_ns``; ``basis``: "kernels" (GPU activity spans),
    "brackets" (CUDA events / ``gpu`` phases: busy is an upper bound) or "mixed" (some runs each);
    ``unobserved_ns``: time of the run extents in which CUDA collection was paused (neither busy nor idle:
    the idle share is of the observed window, busy + idle)."""

    device: int
    busy_ns: int
    idle_ns: int
    gaps: int
    longest_ns: int
    basis: str = "brackets"
    unobserved_ns: int = 0

    @property
    def idle_share(self) -> float:
        tot = self.busy_ns + self.idle_ns
        return self.idle_ns / tot if tot else float("nan")

    def to_dict(self) -> dict:
        share = self.idle_share
        return {"device": self.device, "busy_ns": self.busy_ns, "idle_ns": self.idle_ns,
                "idle_share": None if share != share else share, "gaps": self.gaps, "longest_ns": self.longest_ns,
                "basis": self.basis, "unobserved_ns": self.unobserved_ns}


@dataclass
class TimelineAnalysis:
    """Everything one run's views show. Raw results (``gaps``, ``waits``, ``unattributed``)
    are kept for drawing; ``stalls`` is the full ranked list and ``listed`` its shown part."""

    spans: int
    t0: int
    wall_ns: int
    phases: PhaseTable  # a sequence of PhaseStat, largest total first (rows built on demand)
    gaps: IdleGaps
    devices: list[DeviceIdle]
    waits: HostWaits
    pinning: list[PinningReport]
    unattributed: Unattributed
    stalls: list[Stall]
    listing: Listing
    critical_path: list[dict] = field(default_factory=list)
    unattributed_paths: list[dict] = field(default_factory=list)
    launch: LaunchGaps | None = None  # GPU phases' launch gaps (empty without activity spans)
    emulated: dict = field(default_factory=dict)  # `emulated_costs`: injected/emulated costs the trace records
    unfinished: list = field(default_factory=list)  # `processes.unfinished_processes`: killed recorded processes
    gpu_activity: dict = field(default_factory=dict)  # `gpu_summary.gpu_summary` (empty when not computed)
    api_calls: list[dict] = field(default_factory=list)  # `api_calls.api_call_table`: CUDA API calls per name
    comm: dict = field(default_factory=dict)  # `collectives.collectives`: ranks, matched collectives, stragglers
    startup: list[dict] = field(default_factory=list)  # `startup.startup_intervals`: per process
    #: `unobserved_summary`: time CUDA collection was paused (no GPU figure counts it; no finding claims it)
    unobserved: dict = field(default_factory=dict)
    #: `steps.steps_report`: the loop's steps per process and the warm-up (empty: none found, or not computed)
    steps: dict = field(default_factory=dict)
    #: The same analysis of the steady state (the trace with its warm-up cut: `steps.steady_timeline`), which
    #: the findings read: made on first use (`steady_state`); stays None without a warm-up worth cutting.
    steady: TimelineAnalysis | None = None
    steady_tl: Timeline | None = field(default=None, repr=False)
    #: How to make ``steady`` (the source Timeline, the cuts, `analyse_timeline`'s options); empty: no cut.
    steady_plan: dict = field(default_factory=dict, repr=False)
    #: `host_samples.process_sites`: each process's top Python lines from the recorder's stack samples (empty
    #: without samples), and `host_samples.samples_note` (skipped batches, dropped samples)
    host_samples: list = field(default_factory=list)
    samples_note: str = ""

    def steady_state(self) -> TimelineAnalysis | None:
        """The analysis of the steady state (made now on first use: the stalls panel does not wait for it),
        or None when nothing was cut."""
        if self.steady is None and self.steady_plan:
            plan = dict(self.steady_plan)
            tl, cuts = plan.pop("tl"), plan.pop("cuts")
            plan["critical"] = plan["critical"] or bool(self.gpu_activity)
            self.steady_tl = steady_timeline(tl, cuts)
            self.steady = analyse_timeline(self.steady_tl, steps=False, **plan)
            # A launcher (torchrun) stays one in the steady state, where its start-up is empty: its root is
            # still not host work of the GPU's (findings read launchers from the start-up entries).
            seen = {(d["host"], d["pid"]) for d in self.steady.startup}
            first = min(cuts.values())
            at = {(d["host"], d["pid"]): cuts.get((d["host"], d["pid"]), first) for d in self.startup}
            self.steady.startup = self.steady.startup + [
                {**d, "start_ns": at[(d["host"], d["pid"])], "end_ns": at[(d["host"], d["pid"])], "duration_ns": 0}
                for d in self.startup if d.get("launcher") and (d["host"], d["pid"]) not in seen]
        return self.steady

    @property
    def listed(self) -> list[Stall]:
        return self.stalls[: self.listing.shown_rows]

    def to_dict(self) -> dict:
        """The ``report --json`` document (plain JSON-able data). With a warm-up cut (``steady``), ``steady``
        holds the same sections over the steady state, and the findings are read from them."""
        d = self._sections()
        d["steps"] = self.steps
        steady = self.steady_state()
        if steady is not None:
            d["steady"] = steady._sections()
        d["findings"] = [f.to_dict() for f in findings(d, self.comm)]  # the ranked fixes (analysis/findings.py)
        _drop_unused_intervals(d)
        if steady is not None:
            _drop_unused_intervals(d["steady"])
        return d

    def _sections(self) -> dict:
        """The document's analysis sections (``findings`` empty)."""
        d = {
            "findings": [],
            "spans": self.spans,
            "t0": self.t0,
            "wall_ns": self.wall_ns,
            "phases": self.phases.to_dicts(),
            "gpu_idle": {"per_device": [d.to_dict() for d in self.devices], "gaps": len(self.gaps)},
            "stalls": [s.to_dict() for s in self.listed],
            "listing": self.listing.to_dict(),
            "host_waits": self.waits.total_by(),
            "pinning": [r.to_dict() | {"text": r.describe()} for r in self.pinning if r.overhead_ns],
            "pinning_summary": pinning_summary(self.pinning, self.wall_ns),
            "unattributed": self.unattributed_paths,
            "startup": self.startup,
            "unobserved": self.unobserved,
            "critical_path": self.critical_path,
            "gpu_activity": self.gpu_activity,
            "api_calls": self.api_calls,
            "collectives": self.comm,
            "emulated": self.emulated,
        }
        if self.unfinished:  # (only when there is one: documents of finished runs keep their shape)
            d["unfinished_processes"] = [u.to_dict() for u in self.unfinished]
        if self.host_samples:  # (only in traces with stack samples: other documents keep their shape)
            d["host_samples"] = {"processes": [p.to_dict() for p in self.host_samples], "note": self.samples_note}
        return d

    def add_gpu_activity(self, tl: Timeline) -> None:
        """Compute the GPU-activity tables (`gpu_summary.gpu_summary` of ``tl``, the Timeline analysed) into
        ``gpu_activity`` when they are missing: what ``analyse_timeline(critical=True)`` includes, for a caller
        that analysed with ``critical=False`` first (the TUI: stalls first, then the findings that read them)."""
        if not self.gpu_activity:
            self.gpu_activity = gpu_summary(tl, top=self.listing.top, launch=self.launch)
            if self.host_samples:
                attach_gpu_activity(tl, self.gpu_activity)
        if self.steady is not None and self.steady_tl is not None:
            self.steady.add_gpu_activity(self.steady_tl)

    def findings(self) -> list[Finding]:
        """The ranked findings (``gputrace.analysis.findings``) over this analysis, as ``to_dict()["findings"]``
        gives them, without building the whole document (the TUI's stalls panel lists them): over the steady
        state when a warm-up was cut."""
        steady = self.steady_state()
        if steady is not None:
            return findings({**steady._findings_input(), "steps": self.steps}, steady.comm)
        return findings({**self._findings_input(), "steps": self.steps}, self.comm)

    def _findings_input(self) -> dict:
        """The sections the findings read, without building the whole document."""
        names = self.phases.names
        d = {"wall_ns": self.wall_ns, "stalls": [s.to_dict() for s in self.listed],
             "phases": [{"phase": names[i]} for i in sorted(set(self.phases.phase.tolist()))],
             "pinning": [r.to_dict() | {"text": r.describe()} for r in self.pinning if r.overhead_ns],
             "unattributed": self.unattributed_paths, "gpu_activity": self.gpu_activity, "startup": self.startup,
             "unobserved": self.unobserved, "api_calls": self.api_calls}
        return d

    def unfinished_note(self) -> str:
        """One line naming the recorded processes that ended without a final flush, or ''."""
        return unfinished_note(self.unfinished)

    def emulated_note(self) -> str:
        """One line naming the emulated/injected costs the trace records, or ''."""
        if not self.emulated:
            return ""
        return "emulated costs recorded in this trace (not real work): " + ", ".join(
            f"{k[len(EMULATED_PREFIX):]}={'/'.join(v)}" for k, v in self.emulated.items())


EMULATED_PREFIX = "gputrace.emulated."


def _drop_unused_intervals(d: dict) -> None:
    """Empty the ``intervals`` of entries too small to be a finding (under ``findings.default_min_ns``): the
    rules skip them before any interval is read, so the document reads back to the same findings, smaller."""
    floor = default_min_ns(int(d.get("wall_ns") or 0))

    def slim(rows: list[dict], key: str) -> list[dict]:  # copies: the analysis keeps its own lists
        return [{**r, "intervals": []} if r.get("intervals") and int(r.get(key) or 0) < floor else r for r in rows]

    d["stalls"] = slim(d.get("stalls") or [], "lost_ns")
    d["unattributed"] = slim(d.get("unattributed") or [], "unattributed_ns")
    if d.get("gpu_activity"):
        d["gpu_activity"] = {**d["gpu_activity"], "launch_gaps": slim(d["gpu_activity"].get("launch_gaps") or [],
                                                                      "gap_ns")}


def emulated_costs(tl: Timeline) -> dict:
    """``{key: sorted distinct values}`` of the ``gputrace.emulated.*`` resource attributes: costs a
    run injected or emulated on purpose (a sleep standing in for pinning, page faults added to
    synthesis), recorded by whatever injected them so that every view can say so."""
    out: dict[str, set] = {}
    for res in tl.resources:
        for k, v in res.items():
            if str(k).startswith(EMULATED_PREFIX):
                out.setdefault(str(k), set()).add(str(v))
    return {k: sorted(v) for k, v in sorted(out.items())}


def unobserved_summary(tl: Timeline, gaps: IdleGaps) -> dict:
    """The time CUDA activity collection was paused (``gputrace.analysis.unobserved``): ``intervals``, the wall
    time in which none of the devices with activity was observed (what no finding claims), ``ns`` its length,
    and ``per_device`` (host, device, ns, intervals). Empty when nothing was paused."""
    u = unobserved(tl)
    if not u:
        return {}
    ix = {h: i for i, h in enumerate(u.hosts)}
    wall = u.wall((ix[h], d) for _, h, d in gaps.groups if h in ix) if gaps.groups else []
    return {"ns": sum(b - a for a, b in wall), "intervals": wall, "per_device": u.per_device()}


def device_idle(gaps: IdleGaps) -> list[DeviceIdle]:
    """Per-device totals over every gap in ``gaps`` (all runs and hosts together)."""
    busy: dict[int, int] = {}
    unobs: dict[int, int] = {}
    bases: dict[int, set] = {}
    ng = len(gaps.groups)
    kb = gaps.kernel_basis.tolist() if len(gaps.kernel_basis) == ng else [False] * ng
    un = gaps.unobserved_ns.tolist() if len(gaps.unobserved_ns) == ng else [0] * ng
    for (_, _, dev), b, k, u in zip(gaps.groups, gaps.busy_ns.tolist(), kb, un, strict=True):
        busy[dev] = busy.get(dev, 0) + int(b)
        unobs[dev] = unobs.get(dev, 0) + int(u)
        bases.setdefault(dev, set()).add("kernels" if k else "brackets")
    idle, count, longest = {}, {}, {}
    dur = gaps.duration
    for d in np.unique(gaps.device).tolist():
        m = gaps.device == d
        idle[d], count[d], longest[d] = int(dur[m].sum()), int(m.sum()), int(dur[m].max())
    return [DeviceIdle(d, busy.get(d, 0), idle.get(d, 0), count.get(d, 0), longest.get(d, 0),
                       "mixed" if len(bases.get(d, ())) > 1 else next(iter(bases.get(d, {"brackets"}))),
                       unobs.get(d, 0))
            for d in sorted(set(busy) | set(idle))]


def analyse_timeline(
    tl: Timeline,
    *,
    by_device: bool = True,
    min_lost_ns: int | None = None,
    top: int = DEFAULT_TOP,
    wait_margin_ns: int = DEFAULT_WAIT_MARGIN_NS,
    pageable_gbps: float | None = None,
    critical: bool = True,
    steps: bool = True,
) -> TimelineAnalysis:
    """Run every single-run analysis once and rank the stalls (see module docstring).

    ``critical``: compute the critical path summary and the GPU-activity tables (the TUI skips
    them here and adds the GPU-activity tables after, `TimelineAnalysis.add_gpu_activity`).
    ``steps``: find the loop's steps and warm-up (`gputrace.analysis.steps`); with a warm-up of at least
    `findings.default_min_ns` of the steady-state wall, the same analysis of the steady state (``steady``,
    the trace with the warm-up cut) is made for the findings, on first use (`TimelineAnalysis.steady_state`).
    Raises ValueError on a negative ``top`` or ``wait_margin_ns``."""
    if top < 0:
        raise ValueError(f"top must be >= 0, got {top}")
    wall = wall_ns(tl)
    asked_min_lost = min_lost_ns
    if min_lost_ns is None:
        min_lost_ns = default_min_lost(wall)
    gaps = gpu_idle_gaps(tl, min_gap_ns=1)
    waits = host_waits(tl, margin_ns=wait_margin_ns)
    un = unattributed_time(tl, parents="host", among=phase_mask(tl))  # phases only: not operators
    pins = pinning_economics(tl, pageable_gbps)
    launch = launch_gaps(tl)
    stalls = rank(idle_stalls(gaps) + wait_stalls(tl, waits) + pin_stalls(tl, pins) + unattributed_stalls(tl, un)
                  + launch_stalls(tl, launch))
    shown = 0
    while shown < len(stalls) and shown < top and stalls[shown].lost_ns >= min_lost_ns:
        shown += 1
    hidden = stalls[shown:]
    listing = Listing(int(min_lost_ns), top, shown, len(hidden), int(sum(s.lost_ns for s in hidden)))
    procs = process_sites(tl)
    if procs:
        stalls = attach_stalls(tl, stalls, shown)
    out = TimelineAnalysis(
        spans=tl.n,
        t0=tl.t0,
        wall_ns=wall,
        phases=phase_table(tl, by_device=by_device, rows=phase_mask(tl)),
        gaps=gaps,
        devices=device_idle(gaps),
        waits=waits,
        pinning=pins,
        unattributed=un,
        stalls=stalls,
        listing=listing,
        critical_path=critical_path_summary(tl) if critical else [],
        unattributed_paths=attach_paths(tl, un.by_path(tl)) if procs else un.by_path(tl),
        launch=launch,
        emulated=emulated_costs(tl),
        unfinished=unfinished_processes(tl),
        api_calls=api_call_table(tl, top=top),
        comm=collectives(tl, top=top),
        startup=startup_intervals(tl),
        unobserved=unobserved_summary(tl, gaps),
        host_samples=procs,
        samples_note=samples_note(tl) if procs else "",
    )
    if steps:
        st = steps_report(tl, out.startup)
        out.steps = st.to_dict()
        warm = st.warmup_ns
        if st.cuts and warm >= default_min_ns(max(wall - warm, 0)):
            out.steady_plan = {"tl": tl, "cuts": st.cuts, "by_device": by_device, "min_lost_ns": asked_min_lost,
                               "top": top, "wait_margin_ns": wait_margin_ns, "pageable_gbps": pageable_gbps,
                               "critical": critical}
    if critical:
        out.add_gpu_activity(tl)
    return out

