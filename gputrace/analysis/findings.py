"""Findings: the report's opening table. One table of rules (:data:`RULES`) turns analysis results into
ranked advice, each with its evidence and an estimated time saved (docs/findings.md).

A rule is a function of a :class:`Context` (the ``report --json`` document the analysis composed, plus the
collectives of a multi-rank trace) returning zero or more :class:`Finding`. A finding is listed when its
estimated saving is at least ``Context.min_ns`` (default 1 % of the wall time, at least 100 µs); findings
are ranked by saving, largest first. Savings are estimates of what the fix could win, stated per rule
(upper bounds where the rule says so), never measured gains.

**Each second of wall time in at most one finding**: :func:`account` (gputrace/analysis/findings_account.py)
bounds each finding's saving by the wall-clock ``intervals`` it carries, claimed in :data:`CLAIM_ORDER`, so
the table's savings add up to at most ``wall_ns``, the union of the runs' extents. GPU idle is the device's:
one ``gpu-idle-host`` finding per (host, device), over the union of every process's activity on it (gaps.py).

To add a rule: write ``def _rule(ctx) -> list[Finding]``, add one ``Rule`` row to :data:`RULES`, and give it
a test where it fires and one where it stays silent (tests/unit/test_findings.py).

Pure; any thread; raises nothing on missing sections (a rule whose inputs are absent is silent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gputrace.analysis._common import MAX_INTERVALS, fmt_ns
from gputrace.analysis.collectives import is_collective_name
from gputrace.analysis.findings_account import CLAIM_ORDER, Finding, Span, account, merge_spans
from gputrace.analysis.findings_context import Context, _idle_split, _join, _names, _roots, _startup_window
from gputrace.analysis.gpu_activity import LONG_HOLE_NS
from gputrace.analysis.host_samples import headline

# Finding, Span, account and CLAIM_ORDER live in findings_account.py, Context (and the helpers the rules share to
# read it) in findings_context.py; the public names are re-exported here.
__all__ = ["ASSUMED_PINNED_GBPS", "CLAIM_ORDER", "LAUNCH_BOUND_BUSY", "LAUNCH_BOUND_KERNELS", "LAUNCH_GAP_MAX",
           "PINNED_MIN_BYTES", "RULES", "Context", "Finding", "Rule", "Span", "account", "default_min_ns", "findings"]

#: Pinned host-to-device bandwidth assumed when the trace shows no pinned copy of at least
#: ``PINNED_MIN_BYTES`` (GB/s: bytes per ns). A PCIe Gen4 x16 link moves about 25 GB/s pinned.
ASSUMED_PINNED_GBPS = 25.0
PINNED_MIN_BYTES = 1 << 20
#: A phase is launch-bound when its GPU was busy less than this share of the time it had work.
LAUNCH_BOUND_BUSY = 0.5
#: ... and launched at least this many kernels per instance (fewer is a wait, not launch overhead).
LAUNCH_BOUND_KERNELS = 4
#: ... with gaps of at most this much per kernel on average (ns): launching and dispatching, not waiting.
LAUNCH_GAP_MAX = LONG_HOLE_NS
#: A GPU-idle finding says the host is mostly untraced (add phases) rather than "overlap X with GPU work" when
#: the host's recorded spans cover less than this share of the idle time (the stall's ``host_busy_ns``).
UNTRACED_SHARE = 0.5


#: What bounds each rule's saving (``Finding.bound``): what its fix can physically recover (docs/findings.md).
BOUND_STARTUP = "the start-up's wall time"
BOUND_WARMUP = "the warm-up's wall time"
BOUND_FILL = "the GPU work that could fill it (the device's busy time not already under the host work named)"
BOUND_BLOCKED = "the time in the blocking call (warming up takes it out of the timed work)"
BOUND_FILL_BLOCKED = ("the GPU work that could fill it plus the time in blocking calls (the device's busy time not "
                      "already under the host work named; warming up takes a blocking call out of the timed work)")
BOUND_LAUNCH = "the launch gaps (the GPU idle between the phase's kernels; a CUDA graph leaves its busy time)"
BOUND_PAGEABLE = "the copy time less the same bytes at the pinned bandwidth"
BOUND_SYNC = "the host work that could run during the waits (each wait at most the host's time until its next sync)"
BOUND_UNATTRIBUTED = "the unexplained host time itself"
BOUND_COMM = "the compute that could hide it (the rank's compute kernels not already overlapping its communication)"
BOUND_STRAGGLER = "the others' waits, each rank's at most its time in collectives"
BOUND_PINNING = "the pinning and unpinning time"


def _bounded(f: Finding, bound: int, what: str, estimate: int | None = None) -> Finding:
    """``f`` with ``bound_ns``/``bound`` set and its saving cut to the bound; when the bound cuts the estimate
    (``estimate``, default ``f.saving_ns``), the evidence says so ("at most 7.9 ms: ...")."""
    bound = max(0, int(bound))
    est = f.saving_ns if estimate is None else int(estimate)
    evidence = f.evidence
    if bound < est:
        evidence += f"; at most {fmt_ns(bound)}: {what.split(' (', 1)[0]}"
    return replace(f, saving_ns=min(f.saving_ns, bound), evidence=evidence, bound_ns=bound, bound=what)


@dataclass(frozen=True)
class Rule:
    name: str
    what: str  # one line: what the rule looks for
    check: Callable[[Context], list[Finding]]


def _startup(ctx: Context) -> list[Finding]:
    """Start-up: from each process's root span to its first phase or GPU activity (a launcher's: to its
    children's first work), merged over processes; one finding, saving = that wall time, counted once
    (not an overlap to win: shorten imports and initialisation, or amortise them over a longer run)."""
    st = ctx.data.get("startup") or []
    window = _startup_window(ctx)
    total = sum(b - a for a, b in window)
    if total < ctx.min_ns:
        return []
    parts = []
    for d in st:
        who = d["process"] + (" (launcher, no GPU work)" if d.get("launcher") else "")
        parts.append(f"{who} {fmt_ns(d['duration_ns'])} until {d['ends_at']}")
    idle = sorted({f"GPU {s['device']}" for s in ctx.data.get("stalls", [])
                   if s.get("category") == "idle" and _idle_split(ctx, s, window)[1]})
    if idle:
        parts.append(f"{', '.join(idle)} idle until its first work (not listed again)")
    return [Finding(
        "startup", f"start-up: {fmt_ns(total)} before the first phase or GPU work (interpreter, imports, CUDA "
                   "context, set-up): shorten it or amortise it over a longer run",
        "; ".join(parts), int(total), "start-up", tuple(window), bound_ns=int(total), bound=BOUND_STARTUP)]


def _gpu_idle(ctx: Context) -> list[Finding]:
    """One finding per device (host and GPU index): GPU idle is the device's, whichever process left it
    idle. The idle stalls of a device (see :func:`_idle_findings`) are merged: estimate = their sum, intervals
    = their union, title from the largest, evidence listing each (at most three, then how many more).

    Bound (``BOUND_FILL``): overlapping host work with GPU work wins at most the GPU work there is to overlap, so
    each stall's part is at most its ``fill_ns`` (the busy time of its device groups not already under the host
    work it names) and the parts together at most the device's busy time (``device_busy_ns``: one GPU's work
    fills one gap once); a part titled *blocked in one call* is bounded by the time in that call (``BOUND_BLOCKED``:
    the API's total in ``api_calls``, the parts blocked in one API together at most it).
    In a document without these figures, the device's busy time (``gpu_idle.per_device``) bounds the whole."""
    by_dev: dict[str, list[Finding]] = {}
    main_of: dict[int, str] = {}
    for f, main in _idle_findings(ctx):
        by_dev.setdefault(f.where, []).append(f)
        main_of[id(f)] = main
    dev_busy = _device_busy(ctx)
    out = []
    for where, parts in by_dev.items():
        parts.sort(key=lambda f: -f.saving_ns)
        total = sum(f.saving_ns for f in parts)
        fill = sum(min(f.saving_ns, f.bound_ns) for f in parts if f.bound == BOUND_FILL)
        blocked: dict[str, list[int]] = {}  # per API: [the parts' idle, its calls' time]
        for f in parts:
            if f.bound == BOUND_BLOCKED:
                v = blocked.setdefault(main_of[id(f)], [0, f.bound_ns])
                v[0] += f.saving_ns
        bound = (min(fill, dev_busy.get(where, fill)) + sum(min(lost, call) for lost, call in blocked.values())
                 + sum(f.saving_ns for f in parts if f.bound not in (BOUND_FILL, BOUND_BLOCKED)))
        kinds = {f.bound for f in parts}
        what = BOUND_FILL if kinds == {BOUND_FILL} else BOUND_BLOCKED if BOUND_FILL not in kinds else BOUND_FILL_BLOCKED
        if min(total, bound) < ctx.min_ns and all(f.bound_ns >= 0 for f in parts):
            continue  # what overlapping could win is under the listing threshold
        if len(parts) == 1:
            out.append(_bounded(parts[0], bound, what) if parts[0].bound_ns >= 0 else parts[0])
            continue
        evidence = "; ".join(f.evidence for f in parts[:3])
        if len(parts) > 3:
            evidence += f"; {len(parts) - 3} more idle stretch(es), {fmt_ns(sum(f.saving_ns for f in parts[3:]))}"
        iv = tuple(merge_spans(p for f in parts for p in f.intervals)) if all(f.intervals for f in parts) else ()
        merged = Finding("gpu-idle-host", parts[0].title, f"{fmt_ns(total)} idle in all: {evidence}", total, where, iv)
        out.append(_bounded(merged, bound, what) if all(f.bound_ns >= 0 for f in parts) else merged)
    return out


def _idle_where(s: dict, hosts: set) -> str:
    """The ``where`` of an idle stall's finding: its device, and its host when the trace has several."""
    return f"GPU {s['device']}" + (f" ({s.get('host')})" if len(hosts) > 1 and s.get("host") else "")


def _device_busy(ctx: Context) -> dict[str, int]:
    """Each device's busy time (keyed as the findings' ``where``): the idle stalls' ``device_busy_ns``, else, in an
    older document, ``gpu_idle.per_device`` (every host's device of that index together)."""
    stalls = [s for s in ctx.data.get("stalls", []) if s.get("category") == "idle"]
    hosts = {s.get("host", "") for s in stalls}
    per = {int(d["device"]): int(d["busy_ns"]) for d in (ctx.data.get("gpu_idle") or {}).get("per_device") or []}
    out: dict[str, int] = {}
    for s in stalls:
        busy = int(s.get("device_busy_ns", -1))
        busy = busy if busy >= 0 else per.get(int(s["device"]), -1)
        if busy >= 0:
            out[_idle_where(s, hosts)] = busy
    return out


def _idle_findings(ctx: Context) -> list[tuple[Finding, str]]:
    """The gpu-idle-host findings, each with the main host work its gap names (first in the list).

    GPU idle while the host runs X: the idle stalls (grouped gaps) with the host phase named; saving
    = the idle time outside start-up (upper bound: what overlapping that host work with the GPU could win).
    A leading gap at least half inside start-up (``data["startup"]``) is left to the startup finding; a
    launcher's root is not named as host work, and a gap under launchers alone is not listed. In a document
    without start-up data, a leading gap whose main host work is a top-level span with time no phase explains
    is titled as start-up (interpreter, imports, CUDA context, set-up): nothing to overlap."""
    out = []
    roots = set() if "startup" in ctx.data else _roots(ctx)  # the old start-up title: documents without start-up
    hosts = {s.get("host", "") for s in ctx.data.get("stalls", []) if s.get("category") == "idle"}
    window = _startup_window(ctx)
    launchers = {d["process"] for d in ctx.data.get("startup") or [] if d.get("launcher")}
    slow = _straggler(ctx)
    pool = slow[0].saving_ns if slow else 0  # the straggler's waits: idle while waiting at a collective is theirs
    dev_busy = _device_busy(ctx)
    # the longest single call of each CUDA API (report's api_calls table): a gap spent in one call is that call
    api_max = {str(a["api"]): int(a.get("max_ns") or 0) for a in ctx.data.get("api_calls") or []}
    api_total = {str(a["api"]): int(a.get("total_ns") or a.get("max_ns") or 0) for a in ctx.data.get("api_calls") or []}
    for s in ctx.data.get("stalls", []):
        if s.get("category") != "idle" or s["lost_ns"] < ctx.min_ns:
            continue
        over, merged = _idle_split(ctx, s, window)
        lost = int(s["lost_ns"]) - over
        if merged or lost < ctx.min_ns:
            continue  # start-up: the startup finding counts it
        text = s["text"]
        head, _, what = text.partition(" while ")
        what = (what or "the host recorded no work").split(" ran on the host", 1)[0].removeprefix("mostly ")
        notes = [f"{fmt_ns(over)} of it in start-up, counted there"] if over else []
        if launchers and not what.startswith("the host recorded no work"):
            names = _names(what)
            kept = [n for n in names if n not in launchers]
            if not kept:
                continue  # only a launcher (torchrun's process) ran: not the GPU's work to overlap
            if len(kept) < len(names):
                what = _join(kept)
                notes.append("launcher " + ", ".join(sorted(launchers & set(names))) + " not counted as host work")
        main = _names(what)[0]
        if pool and is_collective_name(main):
            claim = min(lost, pool)
            pool, lost = pool - claim, lost - claim
            notes.append(f"{fmt_ns(claim)} of it waiting for the straggler ({slow[0].where}), counted in that finding")
            if lost < ctx.min_ns:
                continue
        busy = s.get("host_busy_ns", -1)
        lines = headline(s.get("samples") or ())  # the Python lines the host ran in the gaps (stack samples)
        ran = _join(lines) if lines else what
        title = f"GPU {s['device']} idle while the host runs {ran}: overlap it with GPU work"
        if what.startswith("the host recorded no work") and not lines:
            title = f"GPU {s['device']} idle while the host records no work: add phases to see what it does"
        elif "(leading)" in head and any(what == r or what.startswith((r + " and ", r + ", ")) for r in roots):
            title = (f"GPU {s['device']} idle at start-up, before its first GPU work (imports, CUDA context, "
                     f"set-up in no phase; host: {what})")
        elif api_max.get(main, 0) * 2 >= int(s.get("largest_ns") or s["lost_ns"]):
            title = (f"GPU {s['device']} idle while the host is blocked in one {main} call "
                     f"({fmt_ns(api_max[main])}): CUDA context creation or module loading at first use, or a "
                     f"blocking call; warm up before timing")
        elif 0 <= busy < UNTRACED_SHARE * s["lost_ns"] and not lines:
            title = (f"GPU {s['device']} idle while the host is mostly untraced: add phases to see what it does "
                     f"({busy / max(s['lost_ns'], 1):.0%} in spans: {what})")
        if lines:
            notes.insert(0, f"Python stack samples in the gaps: {_join(lines)}")
        evidence = text + "".join(f"; {n}" for n in notes)
        where = _idle_where(s, hosts)
        iv = tuple(merge_spans(s.get("intervals") or ()))
        # The bound (see _gpu_idle): the GPU work that could fill the gaps; a call that blocked the host: the idle.
        blocked = title.startswith(f"GPU {s['device']} idle while the host is blocked in one ")
        fill = int(s.get("fill_ns", -1))
        fill = fill if fill >= 0 else dev_busy.get(where, -1)
        call = min(lost, api_total.get(main, lost))  # the time in that call (the API's total over the trace)
        bound, what = (call, BOUND_BLOCKED) if blocked else (fill, BOUND_FILL) if fill >= 0 else (-1, "")
        out.append((Finding("gpu-idle-host", title, evidence, lost, where, iv, bound_ns=bound, bound=what), main))
    return out


def _launch_bound(ctx: Context) -> list[Finding]:
    """Launch-bound phases: under a phase with kernel truth that launched at least 4 kernels per instance,
    the GPU was busy less than half of its busy time plus its launch gaps, the gaps average at most 1 ms per
    kernel, and the host spent them in the phase itself (launching), not in other phases; saving = the launch
    gaps (fuse kernels, CUDA graphs). A hole longer than ``LAUNCH_GAP_MAX`` (where the phase's ``intervals``
    show it) is not launch overhead but host work or a wait: it is left out of the gaps, said so, and left to
    the GPU-idle finding (one 0.5 s stall among 500 kernels made a phase 'launch-bound')."""
    out = []
    phases = {p["phase"] for p in ctx.data.get("phases", [])}
    for r in ctx.gpu.get("launch_gaps", []):
        iv = merge_spans(r.get("intervals") or ())
        coarse = len(r.get("intervals") or ()) >= MAX_INTERVALS  # merged windows, not holes: every one looks long
        if "long_gap_ns" in r:  # the holes over LAUNCH_GAP_MAX, counted exactly by the analysis
            n_long, long_ns = int(r["long_gaps"]), int(r["long_gap_ns"])
        else:  # an older document: from its intervals
            long_ = [(a, b) for a, b in iv if b - a > LAUNCH_GAP_MAX]
            n_long, long_ns = len(long_), sum(b - a for a, b in long_)
        gap = max(0, int(r["gap_ns"]) - long_ns)
        width = r["busy_ns"] + gap
        if width <= 0 or gap < ctx.min_ns or r["busy_ns"] / width >= LAUNCH_BOUND_BUSY:
            continue
        if r["kernels"] < LAUNCH_BOUND_KERNELS * max(r["instances"], 1) or gap > LAUNCH_GAP_MAX * r["kernels"]:
            continue  # few kernels, or gaps far longer than a launch: a wait, not launch overhead
        # Gaps filled by other phases on the host are "GPU idle while the host runs X", not launch-bound.
        other = sum(a["ns"] for a in r.get("host_activity", []) if a["phase"] in phases and a["phase"] != r["phase"])
        if other * 2 >= gap:
            continue
        note = (f"; {n_long} hole(s) over {fmt_ns(LAUNCH_GAP_MAX)} ({fmt_ns(long_ns)}) "
                f"left out: not launch overhead" if n_long else "")
        lines = headline(r.get("samples") or ())
        note += f"; the host in the gaps: {_join(lines)}" if lines else ""
        out.append(Finding(
            "launch-bound", f"{r['phase']} is launch-bound: fuse its kernels or capture them in a CUDA graph",
            f"{r['kernels']} kernels busy {fmt_ns(r['busy_ns'])} of {fmt_ns(width)} "
            f"({r['busy_ns'] / width:.0%}); launch gaps {fmt_ns(gap)} over {r['instances']} run(s){note}",
            gap, f"{r['phase']} GPU {r['device']}",
            tuple(iv) if coarse else tuple((a, b) for a, b in iv if b - a <= LAUNCH_GAP_MAX),
            bound_ns=gap, bound=BOUND_LAUNCH))
    return out


def _pinned_gbps(copies: list[dict]) -> tuple[float, bool]:
    """(pinned host<->device bandwidth the trace shows, whether measured): the fastest pinned copy group
    moving at least PINNED_MIN_BYTES per copy; else ASSUMED_PINNED_GBPS."""
    best = 0.0
    for c in copies:
        host = c["src_kind"] if c["kind"] == "HtoD" else c["dst_kind"] if c["kind"] == "DtoH" else ""
        if host == "PINNED" and c["gbps"] and c["bytes"] / max(c["count"], 1) >= PINNED_MIN_BYTES:
            best = max(best, float(c["gbps"]))
    return (best, True) if best > 0 else (ASSUMED_PINNED_GBPS, False)


def _pageable(ctx: Context) -> list[Finding]:
    """Pageable copies: host<->device copies from/to pageable memory; saving = their time minus the
    same bytes at the pinned bandwidth this trace shows (or the assumed one, said so)."""
    copies = ctx.gpu.get("copies", [])
    gbps, measured = _pinned_gbps(copies)
    out = []
    for c in copies:
        if not c["pageable"] or c["kind"] not in ("HtoD", "DtoH"):
            continue
        saving = min(int(c["ns"]), int(c["ns"] - c["bytes"] / gbps))  # the bound: never more than the copy time
        if saving < ctx.min_ns:
            continue
        basis = "pinned copies in this trace" if measured else "assumed (no large pinned copy in this trace)"
        out.append(Finding(
            "pageable-copy", f"pin the host memory of {c['phase']}'s {c['kind']} copies",
            f"{c['count']} pageable {c['kind']} copies, {c['bytes'] / (1 << 20):.3g} MiB in {fmt_ns(c['ns'])} "
            f"({c['gbps'] or 0:.3g} GB/s); pinned: {gbps:.3g} GB/s, {basis}",
            saving, f"{c['phase']} GPU {c['device']}", bound_ns=saving, bound=BOUND_PAGEABLE))
    return out


def _sync_waits(ctx: Context) -> list[Finding]:
    """Sync waits: the host blocked in stream/device/event synchronisations, per phase; estimate = the
    blocked time. Bound (``BOUND_SYNC``): moving a sync later or dropping it does not make the GPU's work
    shorter; it lets the host run its next work during the wait, so each wait wins at most the host's time
    until its next sync on that thread (``host_next_ns``: what could move into it). A document without it
    bounds by the blocked time."""
    acc: dict[tuple, list[int]] = {}
    spans: dict[tuple, list[Span] | None] = {}
    for w in ctx.gpu.get("sync_waits", []):
        key = (w["phase"], w["type"])
        v = acc.setdefault(key, [0, 0, 0, 0])
        v[0] += 1
        v[1] += int(w["wait_ns"])
        v[2] += int(w["gpu_busy_ns"])
        nxt = int(w.get("host_next_ns", -1))
        v[3] += int(w["wait_ns"]) if nxt < 0 else min(int(w["wait_ns"]), nxt)
        iv = spans.setdefault(key, [])
        if iv is not None:
            t = w.get("start")
            spans[key] = None if t is None else [*iv, (int(t), int(t) + int(w["wait_ns"]))]
    out = []
    called = {(str(w.get("phase")), str(w.get("type"))): headline(w.get("samples") or ())
              for w in ctx.gpu.get("sync_wait_samples", [])}  # the Python lines that waited (stack samples)
    for (phase, typ), (n, ns, busy, bound) in acc.items():
        if min(ns, bound) < ctx.min_ns:
            continue
        lines = called.get((str(phase), str(typ))) or []
        at = f" at {lines[0]}" if lines else ""
        out.append(_bounded(Finding(
            "sync-wait", f"{phase} blocks the host in {typ} syncs{at}: sync later or less often",
            f"{n} {typ} sync(s) blocked the host {fmt_ns(ns)}; the GPU worked {fmt_ns(busy)} of it"
            + (f"; waiting in {_join(lines)}" if lines else ""), ns, phase,
            tuple(merge_spans(spans.get((phase, typ)) or ()))), bound, BOUND_SYNC))
    return out


def _unattributed(ctx: Context) -> list[Finding]:
    """Unattributed host time: time inside a phase that no child phase covers; saving = that time
    (unknown work: instrument it to learn what it is)."""
    start_up: dict[str, int] = {}
    idle_claims = _idle_findings(ctx)
    for d in ctx.data.get("startup") or []:
        start_up[d["process"]] = start_up.get(d["process"], 0) + int(d["duration_ns"])
    out = []
    for u in ctx.data.get("unattributed", []):
        ns, dur = int(u["unattributed_ns"]), int(u["duration_ns"])
        excl = min(ns, start_up.get(u["path"], 0))  # a process root: its start-up is the startup finding's
        ns, dur = ns - excl, dur - excl
        # ... and GPU-idle findings whose main host work is this root claim that host time already.
        idle = min(ns, sum(min(f.saving_ns, f.bound_ns) if f.bound_ns >= 0 else f.saving_ns
                           for f, main in idle_claims if main == u["path"]))
        if ns - idle < ctx.min_ns:
            continue
        evidence = (f"{fmt_ns(ns)} of {fmt_ns(dur)} ({ns / dur if dur else 0.0:.0%}) over {u['count']} instance(s)"
                    + (f"; start-up ({fmt_ns(excl)}) excluded, see the startup finding" if excl else "")
                    + (f"; {fmt_ns(idle)} of it with the GPU idle, counted in gpu-idle-host" if idle else ""))
        ns -= idle
        lines = headline(u.get("samples") or ())  # what the host ran there (stack samples)
        what = f"mostly {_join(lines)}; add phases to see it" if lines else "add phases to see it"
        evidence += f"; Python stack samples: {_join(lines)}" if lines else ""
        out.append(Finding("unattributed", f"{u['path']}: host time no phase explains ({what})",
                           evidence, ns, u["path"], tuple(merge_spans(u.get("intervals") or ())), bound_ns=ns,
                           bound=BOUND_UNATTRIBUTED))
    out.sort(key=lambda f: -f.saving_ns)
    return out[:3]


def _exposed_comm(ctx: Context) -> list[Finding]:
    """Exposed communication: a rank's communication time no compute overlapped; estimate = that time less its
    waits for the straggler (overlap it with compute, e.g. bucketed all-reduce during backward). Bound
    (``BOUND_COMM``): overlap hides communication only under compute, so at most the rank's compute kernel
    time not already overlapping its communication (``compute_ns - overlap_ns``); none without ``compute_ns``."""
    slow = _straggler(ctx)
    srank = ctx.comm["stragglers"][0]["rank"] if slow else None
    out = []
    for r in ctx.comm.get("ranks", []):
        claimed = 0
        if slow and r["rank"] != srank:  # its waits for the straggler: the straggler finding's saving
            waits = sum(int((c.get("waits") or {}).get(r["rank"], (c.get("waits") or {}).get(str(r["rank"]), 0)))
                        for c in ctx.comm.get("collectives", []) if c.get("last_rank") == srank)
            claimed = min(int(r["exposed_ns"]), waits)
        saving = int(r["exposed_ns"]) - claimed
        bound = int(r["compute_ns"]) - int(r["overlap_ns"]) if "compute_ns" in r else -1
        if (saving if bound < 0 else min(saving, bound)) < ctx.min_ns:
            continue
        share = r["overlap_ns"] / r["comm_ns"] if r["comm_ns"] else 0.0
        evidence = (f"{r['calls']} collective(s) ({r['source']}): {fmt_ns(r['comm_ns'])}, {share:.0%} overlapped, "
                    f"{fmt_ns(r['exposed_ns'])} exposed")
        if claimed:
            evidence += f"; {fmt_ns(claimed)} of it waiting for straggler rank {srank}, counted in that finding"
        f = Finding("exposed-comm", f"rank {r['rank']}: communication not overlapped with compute",
                    evidence, saving, f"rank {r['rank']}", tuple(merge_spans(r.get("intervals") or ())))
        out.append(_bounded(f, bound, BOUND_COMM) if bound >= 0 else f)
    return out


def _straggler(ctx: Context) -> list[Finding]:
    """A straggler rank: the rank that arrived last at most collectives matched across ranks by content or time
    (analysis/collectives.py); saving = the waits it caused at those collectives, each bounded by the waiting
    rank's own call (what the other ranks would win if it kept up). Silent when the collectives' clock check
    refused a verdict (``comm["clock"]["ok"]`` false: the report says "cannot tell: clocks differ by X")."""
    st = ctx.comm.get("stragglers", [])
    if not st or (ctx.comm.get("clock") or {}).get("ok") is False:
        return []
    s = st[0]
    if s["last"] * 2 <= s["of"] or s["caused_ns"] < ctx.min_ns:
        return []
    # The others' waits on the job's timeline: [its arrival - their wait, its arrival] at each collective it
    # came last at (ranks waiting at once count once); only when every matched collective is listed.
    coll = ctx.comm.get("collectives", [])
    iv: list[Span] = [(int(a), int(b)) for a, b in s.get("intervals") or []]
    if not iv and coll and ctx.comm.get("matched", len(coll)) == len(coll) and all("start" in c for c in coll):
        iv = merge_spans((int(c["start"]) - int(w), int(c["start"])) for c in coll if c.get("last_rank") == s["rank"]
                    for w in (c.get("waits") or {}).values())
    cause = s.get("cause") or []
    ran = (f"; meanwhile rank {s['rank']} ran " + ", ".join(f"{c['name']} {fmt_ns(c['ns'])}" for c in cause)
           if cause else "")
    kern = s.get("kernels") or []
    if kern:
        ran += "; its GPU ran " + ", ".join(f"{k['name']} {fmt_ns(k['ns'])}" for k in kern)
    lines = s.get("lines") or []
    if lines:  # the stack samples name the line (docs/findings.md, "Ranks and collectives")
        per_site: dict[str, int] = {}  # (one site may come as several rows: busy and waiting, other library frames)
        for x in lines:
            per_site[x["site"]] = per_site.get(x["site"], 0) + int(x["samples"])
        ran += f"; rank {s['rank']} was at " + ", ".join(f"{k} ({n} samples)" for k, n in list(per_site.items())[:2])
    f = Finding(
        "straggler", f"rank {s['rank']} is the straggler" + (f" (at {lines[0]['site']})" if lines else "")
        + ": the other ranks wait for it at collectives",
        f"last at {s['last']} of {s['of']} collectives; {_waited(s)}{ran}", int(s["caused_ns"]),
        f"rank {s['rank']}", tuple(iv))
    # Bound: a rank waits for the straggler inside its own collective calls, so at most its time in collectives;
    # and waits of one rank that overlap (a step's bucket all-reduces waiting for one late arrival) count once.
    others = [int(r["comm_ns"]) for r in ctx.comm.get("ranks", []) if r.get("rank") != s["rank"]]
    bound = min(int(s["caused_ns"]), int(s.get("waited_ns", s["caused_ns"])))
    return [_bounded(f, min(bound, sum(others)), BOUND_STRAGGLER) if others else f]


def _waited(s: dict) -> str:
    """How long the others waited for straggler ``s``: per wait with a rank's overlapping waits merged (one per step
    where a step's collectives wait together) when that differs from per collective, else per collective."""
    per_coll = f"{fmt_ns(s['median_wait_ns'])} per collective (median)"
    n = int(s.get("waits") or 0)
    if n and n < s["last"]:
        return (f"the others waited {fmt_ns(s['median_merged_wait_ns'])} per wait (median of {n}, a rank's "
                f"overlapping waits merged: {s['last']} collectives waited in {n} stretches), "
                f"{fmt_ns(s['waited_ns'])} in all; {per_coll}")
    return f"the others waited {per_coll}, {fmt_ns(s['caused_ns'])} in all"


def _warmup(ctx: Context) -> list[Finding]:
    """Warm-up: each process's time before its steady state (``data["steps"]``, gputrace/analysis/steps.py):
    start-up, module loading and the first steps far slower than the median; one finding, saving = that wall
    time (a one-off cost: what a longer run amortises or a warm-up before timing hides, not a per-step gain).
    The other rules read the steady state only (``data["steady"]``, see :func:`findings`); this one is listed
    after them whatever its size."""
    steps = ctx.data.get("steps") or {}
    w = steps.get("warmup")
    if not w or int(w.get("ns") or 0) < ctx.min_ns:
        return []
    parts, what = [], []
    for s in steps.get("series") or []:
        ww = s.get("warmup")
        if not ww:
            continue
        bits = []
        if ww.get("startup_ns"):
            bits.append(f"start-up {fmt_ns(ww['startup_ns'])}")
            what.append("start-up")
        before = int(ww.get("before_first_step_ns") or 0) - int(ww.get("startup_ns") or 0)
        if before > 0:
            bits.append(f"{fmt_ns(before)} {'more ' if ww.get('startup_ns') else ''}before step 0")
            what.append("loading before the first step")
        if ww.get("steps"):
            bits.append(f"{ww['steps']} first step(s) {fmt_ns(ww['steps_ns'])} "
                        f"(steady median {fmt_ns(s['median_ns'])})")
        most = ", ".join(f"{t['what']} {fmt_ns(t['ns'])}" for t in ww.get("top") or [])
        parts.append(f"{s['process']}: {fmt_ns(ww['ns'])} until step {ww['steps']} of {s['name']} ("
                     + "; ".join(bits) + ")" + (f"; most of it: {most}" if most else ""))
    n = int(w.get("steps") or 0)
    what = list(dict.fromkeys(what)) + ([f"{n} slow first step(s)"] if n else [])
    return [Finding(
        "warm-up", f"warm-up: {fmt_ns(w['ns'])} before the steady state ({', '.join(what)}); the other findings "
                   "leave it out: time after warm-up, or amortise it over a longer run",
        "; ".join(parts), int(w["ns"]), "warm-up", tuple((int(a), int(b)) for a, b in w.get("intervals") or ()),
        bound_ns=int(w["ns"]), bound=BOUND_WARMUP)]


def _pinning(ctx: Context) -> list[Finding]:
    """Pinning that does not pay: pinning and unpinning cost more than the faster copies won; saving =
    the net loss (copy from pageable memory, or pin once and reuse the buffer)."""
    out = []
    for p in ctx.data.get("pinning", []):
        net = p.get("net_ns")
        if net is None or net != net or net >= 0 or -net < ctx.min_ns:
            continue
        dev = "all" if p.get("device") is None else f"GPU {p['device']}"
        f = Finding("pinning-loss", f"pinning does not pay on {dev}: reuse pinned buffers or skip pinning",
                    p.get("text", ""), int(-net), dev)
        # Bound: not pinning (or pinning once) wins at most what pinning and unpinning cost.
        out.append(_bounded(f, int(p["overhead_ns"]), BOUND_PINNING) if "overhead_ns" in p else f)
    return out


#: The rules, in the order the Findings table documents them (docs/findings.md).
RULES: tuple[Rule, ...] = (
    Rule("startup", "process start-up before the first phase or GPU work", _startup),
    Rule("gpu-idle-host", "GPU idle while the host runs something else", _gpu_idle),
    Rule("launch-bound", "phases whose kernels leave the GPU idle between launches", _launch_bound),
    Rule("pageable-copy", "host<->device copies from pageable memory", _pageable),
    Rule("sync-wait", "the host blocked in CUDA synchronisations", _sync_waits),
    Rule("unattributed", "host time inside a phase that no child phase covers", _unattributed),
    Rule("exposed-comm", "communication no compute overlapped", _exposed_comm),
    Rule("straggler", "the rank the others wait for at collectives", _straggler),
    Rule("pinning-loss", "pinning that costs more than it wins", _pinning),
    Rule("warm-up", "start-up, loading and slow first steps before the steady state", _warmup),
)


def default_min_ns(wall_ns: int) -> int:
    """The smallest saving listed: 1 % of the wall time, at least 100 µs."""
    return max(100_000, int(wall_ns) // 100)


def findings(data: dict, comm: dict | None = None, min_ns: int | None = None,
             rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every rule's findings over ``data`` (a ``report --json`` document) and ``comm``, each second of wall time
    counted once (:func:`account`), largest saving first; the ``warm-up`` finding last. A document with a
    ``steady`` section (the analysis of the steady state: gputrace/analysis/steps.py) is read through it: the
    rules, their ``min_ns`` and the wall time are the steady state's, and its collectives replace ``comm``."""
    if data.get("steady"):
        comm = data["steady"].get("collectives") or {}
        data = {**data["steady"], "steps": data.get("steps")}
    wall = int(data.get("wall_ns", 0) or 0)
    ctx = Context(data, comm or {}, wall, default_min_ns(wall) if min_ns is None else min_ns)
    out: list[Finding] = []
    for rule in rules:
        out.extend(rule.check(ctx))
    warm = [f for f in out if f.rule == "warm-up"]  # outside the steady wall the others share
    out = account([f for f in out if f.rule != "warm-up"], wall, ctx.min_ns,
                  (data.get("unobserved") or {}).get("intervals") or ()) + warm
    out.sort(key=lambda f: (f.rule == "warm-up", -f.saving_ns, f.rule, f.where))
    return out
