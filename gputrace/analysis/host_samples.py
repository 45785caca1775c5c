"""What the host was doing in a stretch of time, from the recorder's Python stack samples (no ranges needed).

``sites_in(samples, intervals)`` counts the samples taken inside some wall-clock intervals (a GPU idle gap
group, a phase's launch gaps, a kind of sync wait) by **site**: the process, the innermost frame in user code
(``file.py:LINE in function``: the first frame from the innermost outwards that is not in an installed library,
a console script, the standard library or the interpreter's own code) and the innermost library frame inside
it (what the user line was calling, e.g. ``torch/autograd/graph.py:825 in _engine_run_backward``). It returns
the top sites as :class:`SiteCount` records, most samples first, with *parked* samples last: a thread whose
innermost frame is a standard-library blocking wait (``queue.get``, ``threading.Condition.wait``, a
``select``/``poll``, a connection's ``recv``) was waiting for work, not doing it (a DataLoader worker between
batches, a helper thread), so it explains no stall however many samples it has. Sites with no user frame
(only library code, e.g. the ``torchrun`` launcher's monitor loop) come after those with one.

``process_sites`` gives each process's top sites over its whole run (``report``'s "Host samples" table).

Records only: no sentence is built here that another analysis would parse (``SiteCount.label`` is for
display). Names come from the trace: escape them before they reach a terminal or markup. Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gputrace import activity as A
from gputrace.timeline.model import Timeline
from gputrace.timeline.samples import Frame, HostSamples, host_samples

#: Sites listed per stall or process.
TOP = 5
#: Innermost standard-library functions that mean "this thread waits for something to do" (parked).
PARKED_FUNCS = frozenset({
    "wait", "get", "poll", "_poll", "select", "recv", "_recv", "recv_bytes", "_recv_bytes", "recv_into",
    "accept", "join", "_wait_for_tstate_lock", "acquire", "sleep", "read", "readinto", "readline", "epoll",
    "_worker", "_handle_workers", "wait_for", "_wait", "serve_forever",
})


@dataclass(frozen=True)
class FrameRef:
    """A frame as the report names it: ``file`` (as recorded), ``line``, ``func``."""

    file: str
    line: int
    func: str

    @classmethod
    def of(cls, f: Frame) -> FrameRef:
        return cls(f.file, f.line, f.func)

    def short(self) -> str:
        """``name.py:LINE in func`` (a library file from its package folder: ``torch/autograd/graph.py``)."""
        return f"{short_path(self.file)}:{self.line} in {self.func}"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "func": self.func}


@dataclass(frozen=True)
class SiteCount:
    """Samples at one site inside a window. ``user``: innermost user frame (None: only library code);
    ``library``: innermost library frame inside it (None when the user frame is innermost); ``count``: samples;
    ``share``: of the window's samples; ``parked``: the thread was waiting for work (see the module docstring);
    ``host``/``pid``/``rank`` (None: no rank) and ``thread``: where most of them were taken."""

    count: int
    share: float
    user: FrameRef | None
    library: FrameRef | None
    parked: bool
    host: str
    pid: int
    rank: int | None
    thread: str

    def label(self) -> str:
        """``ddp_plain.py:58 in load_batch`` (+ `` > torch/...py:825 in fn`` when a library frame is inside)."""
        parts = [p.short() for p in (self.user, self.library) if p is not None]
        return " > ".join(parts) or "?"

    def to_dict(self) -> dict:
        return {"count": self.count, "share": round(self.share, 4),
                "user": self.user.to_dict() if self.user else None,
                "library": self.library.to_dict() if self.library else None, "parked": self.parked,
                "host": self.host, "pid": self.pid, "rank": self.rank, "thread": self.thread, "label": self.label()}


def short_path(path: str) -> str:
    """A file name for display: after ``site-packages/`` or ``dist-packages/`` (the package path), else the base
    name."""
    for mark in ("site-packages/", "dist-packages/"):
        i = path.rfind(mark)
        if i >= 0:
            return path[i + len(mark):]
    return path.rsplit("/", 1)[-1]


def _site_of(hs: HostSamples, stack: int) -> tuple[int, int, bool]:
    """(user frame index or -1, innermost library frame inside it or -1, parked) of a stack."""
    fr = hs.stacks[stack]
    frames = hs.frames
    user = lib = -1
    for j, f in enumerate(fr):
        if frames[f].kind == A.FILE_USER:
            user = f
            lib = fr[0] if j > 0 else -1
            break
    if user < 0 and fr:
        lib = fr[0]
    leaf = frames[fr[0]] if fr else None
    parked = (leaf is not None and leaf.kind in (A.FILE_STDLIB, A.FILE_INTERNAL)
              and leaf.func.rsplit(".", 1)[-1] in PARKED_FUNCS)  # (Condition.wait: a method's qualified name)
    return user, lib, parked


class _Sites:
    """Per stack: its site (cached); per process: its rank."""

    def __init__(self, tl: Timeline | None, hs: HostSamples) -> None:
        self.hs = hs
        self.cache: dict[int, tuple[int, int, bool]] = {}
        self.rank: dict[int, int | None] = {}
        for p, (_, _, res) in enumerate(hs.procs):
            r = None
            if tl is not None and 0 <= res < len(tl.resources):
                v = tl.resources[res].get("gputrace.rank")
                r = v if type(v) is int else None
            self.rank[p] = r

    def site(self, stack: int) -> tuple[int, int, bool]:
        s = self.cache.get(stack)
        if s is None:
            s = self.cache[stack] = _site_of(self.hs, stack)
        return s

    def count(self, sel: np.ndarray, top: int) -> list[SiteCount]:
        """Top sites of the samples at indices ``sel`` (each site's thread: the one with most of its samples)."""
        hs = self.hs
        if len(sel) == 0:
            return []
        per: dict[tuple[int, int, int, bool], dict[int, int]] = {}  # site -> thread -> samples
        keys, counts = np.unique(np.stack([hs.proc[sel], hs.stack[sel], hs.thread[sel]]).astype(np.int64), axis=1,
                                 return_counts=True)
        for p, st, th, n in zip(*keys.tolist(), counts.tolist(), strict=True):
            u, lib, parked = self.site(st)
            d = per.setdefault((p, u, lib, parked), {})
            d[th] = d.get(th, 0) + n
        total = len(sel)
        out = []
        for (p, u, lib, parked), ths in per.items():
            n = sum(ths.values())
            th = max(ths, key=lambda k: ths[k])
            host, pid, _ = hs.procs[p]
            out.append(SiteCount(n, n / total, FrameRef.of(hs.frames[u]) if u >= 0 else None,
                                 FrameRef.of(hs.frames[lib]) if lib >= 0 else None, parked, host, pid,
                                 self.rank.get(p), hs.threads[th][2]))
        out.sort(key=lambda s: (s.parked, s.user is None, -s.count, s.label(), s.pid))
        return out[:top]


def window_mask(hs: HostSamples, intervals: Iterable[Sequence[int]], host: str | None = None,
                pid: int | None = None) -> np.ndarray:
    """Indices of the samples inside any of ``intervals`` ((start, end) epoch ns), on ``host`` (and of process
    ``pid``) when given."""
    parts = []
    for a, b in intervals:
        sl = hs.window(int(a), int(b))
        if sl.stop > sl.start:
            parts.append(np.arange(sl.start, sl.stop))
    if not parts:
        return np.zeros(0, np.int64)
    idx = np.unique(np.concatenate(parts))
    if (host is not None or pid is not None) and len(idx):
        ok = np.array([(host is None or h == host) and (pid is None or p_ == pid) for h, p_, _ in hs.procs], bool)
        idx = idx[ok[hs.proc[idx]]]
    return idx


def sites_in(tl: Timeline, intervals: Iterable[Sequence[int]], host: str | None = None,
             top: int = TOP, pid: int | None = None) -> list[SiteCount]:
    """The top sites of ``tl``'s host samples inside ``intervals`` (on ``host``, of process ``pid``, when given;
    see the module docstring); [] without samples."""
    hs = host_samples(tl)
    if len(hs) == 0:
        return []
    return _Sites(tl, hs).count(window_mask(hs, intervals, host, pid), top)


@dataclass(frozen=True)
class ProcessSites:
    """One process's samples over its run: ``samples``, ``hz``, ``seconds`` (samples / hz per thread sampled),
    its top ``sites`` (parked ones left out)."""

    host: str
    pid: int
    rank: int | None
    samples: int
    hz: float
    sites: tuple[SiteCount, ...]
    command: str = ""  # the process's command label (``gputrace.launch.command``: ``fork: python x.py``), or ""

    def to_dict(self) -> dict:
        return {"host": self.host, "pid": self.pid, "rank": self.rank, "command": self.command,
                "samples": self.samples, "hz": self.hz, "sites": [s.to_dict() for s in self.sites]}


def process_sites(tl: Timeline, top: int = TOP) -> list[ProcessSites]:
    """Per process with samples, its top non-parked sites with a user frame first (rank, then pid order)."""
    hs = host_samples(tl)
    if len(hs) == 0:
        return []
    s = _Sites(tl, hs)
    out = []
    for p, (host, pid, res) in enumerate(hs.procs):
        sel = np.flatnonzero(hs.proc == p)
        sites = [c for c in s.count(sel, 10**9) if not c.parked][:top]
        cmd = tl.resources[res].get("gputrace.launch.command") if 0 <= res < len(tl.resources) else None
        out.append(ProcessSites(host, pid, s.rank.get(p), int(len(sel)), hs.hz.get(p, 0.0), tuple(sites),
                                cmd if isinstance(cmd, str) else ""))
    out.sort(key=lambda x: (x.rank is None, x.rank if x.rank is not None else 0, x.host, x.pid))
    return out


def samples_note(tl: Timeline) -> str:
    """One plain line when sample batches were skipped or samples dropped, else ''."""
    hs = host_samples(tl)
    bits = []
    if hs.skipped:
        bits.append(f"{hs.skipped} stack-sample batch(es) skipped ({hs.problems[0] if hs.problems else ''})")
    if hs.dropped:
        bits.append(f"{hs.dropped} stack sample(s) dropped by the recorder (its memory bound)")
    return "; ".join(bits)


def headline(sites: Sequence[SiteCount] | Sequence[dict]) -> list[str]:
    """The sites a finding names: the top non-parked site with a user frame, and the next one from another
    process with at least half its samples (two ranks in one gap: each one's line). Accepts records or their
    ``to_dict()`` (a ``report --json`` document)."""
    maybe = [s if isinstance(s, SiteCount) else _from_dict(s) for s in sites]
    recs = [s for s in maybe if s is not None and not s.parked and s.user is not None]
    if not recs:
        return []
    first = recs[0]
    out = [_who(first, recs)]
    for s in recs[1:]:
        if (s.host, s.pid) != (first.host, first.pid) and s.count * 2 >= first.count:
            out.append(_who(s, recs))
            break
    return out


def _who(s: SiteCount, all_: Sequence[SiteCount]) -> str:
    multi = len({(x.host, x.pid) for x in all_}) > 1
    tag = (f" (rank {s.rank})" if s.rank is not None else f" (pid {s.pid})") if multi else ""
    return s.label() + tag


def _from_dict(d: dict) -> SiteCount | None:
    try:
        u, lib = d.get("user"), d.get("library")
        return SiteCount(int(d["count"]), float(d.get("share") or 0.0),
                         FrameRef(str(u["file"]), int(u["line"]), str(u["func"])) if u else None,
                         FrameRef(str(lib["file"]), int(lib["line"]), str(lib["func"])) if lib else None,
                         bool(d.get("parked")), str(d.get("host") or ""), int(d.get("pid") or 0),
                         d.get("rank") if type(d.get("rank")) is int else None, str(d.get("thread") or ""))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


# ---- attaching samples to the report's analyses ----------------------------------------------------------------
#: Stall categories whose instances get their top sites: GPU idle gaps and host waits.
STALL_CATEGORIES = ("idle", "wait")


def attach_stalls(tl: Timeline, stalls: list, shown: int) -> list:
    """``stalls`` with the first ``shown`` idle and wait stalls carrying their top sites (``Stall.samples``),
    counted over the stall's ``intervals`` (its gaps) on its host, else over its extent."""
    from dataclasses import replace

    hs = host_samples(tl)
    if len(hs) == 0:
        return stalls
    sites = _Sites(tl, hs)
    out = list(stalls)
    for i, s in enumerate(out[:shown]):
        if s.category not in STALL_CATEGORIES:
            continue
        iv = s.intervals or ((s.start, s.end),)
        got = sites.count(window_mask(hs, iv, s.host or None), TOP)
        if got:
            out[i] = replace(s, samples=tuple(got))
    return out


def attach_gpu_activity(tl: Timeline, gpu: dict) -> None:
    """Add ``samples`` (top sites, as dicts) to each ``launch_gaps`` row of a ``gpu_summary`` document (over its
    ``intervals``), and ``sync_wait_samples`` (per phase and sync type, over the listed waits) beside
    ``sync_waits``. In place; nothing without samples."""
    hs = host_samples(tl)
    if len(hs) == 0:
        return
    sites = _Sites(tl, hs)
    rows = []
    for r in gpu.get("launch_gaps") or []:
        iv = r.get("intervals") or ()
        got = sites.count(window_mask(hs, iv), TOP) if iv else []
        rows.append({**r, "samples": [s.to_dict() for s in got]} if got else r)
    if rows:
        gpu["launch_gaps"] = rows
    by: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for w in gpu.get("sync_waits") or []:
        t = w.get("start")
        if t is not None:
            by.setdefault((str(w["phase"]), str(w["type"])), []).append((int(t), int(t) + int(w["wait_ns"])))
    out = []
    for (phase, typ), iv in by.items():
        got = sites.count(window_mask(hs, iv), TOP)
        if got:
            out.append({"phase": phase, "type": typ, "samples": [s.to_dict() for s in got]})
    if out:
        gpu["sync_wait_samples"] = out


def attach_paths(tl: Timeline, paths: list[dict], top: int = 10) -> list[dict]:
    """``unattributed_time(...).by_path`` entries, the first ``top`` with ``samples`` (top sites, as dicts) over
    their uncovered ``intervals``: what the host ran in the time no phase explains. Copies; nothing without
    samples."""
    hs = host_samples(tl)
    if len(hs) == 0:
        return paths
    sites = _Sites(tl, hs)
    out = list(paths)
    for i, u in enumerate(out[:top]):
        iv = u.get("intervals") or ()
        got = sites.count(window_mask(hs, iv), TOP) if iv else []
        if got:
            out[i] = {**u, "samples": [c.to_dict() for c in got]}
    return out
