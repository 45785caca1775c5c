"""Host stack samples of a Timeline as one typed side table (``Timeline.samples``), never as span rows.

The recorder writes each drain's Python stack samples as one ``gputrace.samples`` span carrying arrays
(docs/trace-format.md, "Host stack samples"; names in :mod:`gputrace.activity`). Those few batch rows stay in the
Timeline, bookkeeping on a lane of their own (``gputrace.role = "profiler"``: no analysis takes them for work or
a phase), so every reader, the cache, ``concat`` and ``select`` keep them with no plumbing of their own; the
samples themselves are decoded from the batch rows' attributes here, once per Timeline, into
:class:`HostSamples`: numpy columns per sample (time, process, thread, stack) over tables of processes,
threads, stacks and frames interned across batches.

Untrusted input: a batch whose arrays are not what the format says (a wrong type, a length that disagrees, an
index out of its table, a negative time step, more than ``MAX_SAMPLES`` samples) is skipped whole and counted in
``HostSamples.skipped``, with a line naming the row, the process and the field in ``problems`` (the first
``MAX_PROBLEMS``): never a traceback, never a partial batch.

Pure; any thread (the cache is a dict of weak references: a race decodes twice, never wrongly).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gputrace import activity as A
from gputrace.timeline.model import Timeline

#: Most samples one batch may hold (a hostile file's huge arrays are skipped, not decoded).
MAX_SAMPLES = 1 << 22
#: Most frames one stack may hold.
MAX_DEPTH = 4096
#: Problems kept (the count is complete).
MAX_PROBLEMS = 20
KIND_NAMES = ("user", "library", "stdlib", "internal")


@dataclass(frozen=True)
class Frame:
    """One Python frame: ``file`` (as recorded: trace data, escape before display), ``line``, ``func`` and
    ``kind`` (``activity.FILE_USER`` / ``FILE_LIBRARY`` / ``FILE_STDLIB`` / ``FILE_INTERNAL``)."""

    file: str
    line: int
    func: str
    kind: int

    @property
    def is_user(self) -> bool:
        return self.kind == A.FILE_USER


@dataclass
class HostSamples:
    """Every host stack sample of a Timeline, sorted by time.

    Per sample: ``t_ns`` (epoch ns), ``proc`` (index into ``procs``: (host, pid, resource index)), ``thread``
    (index into ``threads``: (proc index, ident, name)), ``stack`` (index into ``stacks``: frame indices into
    ``frames``, innermost first). ``hz``: per proc index, the sampling rate. ``batches``: batches decoded;
    ``skipped``: batches skipped (``problems`` says why); ``dropped``: samples the recorder dropped (its bound)."""

    t_ns: np.ndarray
    proc: np.ndarray
    thread: np.ndarray
    stack: np.ndarray
    procs: list[tuple[str, int, int]] = field(default_factory=list)
    threads: list[tuple[int, int, str]] = field(default_factory=list)
    stacks: list[tuple[int, ...]] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    hz: dict[int, float] = field(default_factory=dict)
    batches: int = 0
    skipped: int = 0
    dropped: int = 0
    problems: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(len(self.t_ns))

    @classmethod
    def empty(cls) -> HostSamples:
        z = np.zeros(0, np.int64)
        return cls(z, z.astype(np.int32), z.astype(np.int32), z.astype(np.int32))

    def window(self, t0: int, t1: int) -> slice:
        """The samples taken in [t0, t1) (``t_ns`` is sorted)."""
        a = int(np.searchsorted(self.t_ns, t0, side="left"))
        b = int(np.searchsorted(self.t_ns, t1, side="left"))
        return slice(a, max(a, b))


class _Bad(ValueError):
    """One batch's field is not what the format says."""

    def __init__(self, fld: str, why: str) -> None:
        super().__init__(f"{fld}: {why}")


def _ints(a: Any, fld: str, n: int | None = None, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """``a`` as an int64 array (a list of ints), checked: length ``n``, values in [lo, hi)."""
    if not isinstance(a, list):
        raise _Bad(fld, f"expected an array of integers, got {type(a).__name__}")
    if len(a) > MAX_SAMPLES * 4:
        raise _Bad(fld, f"{len(a)} values (at most {MAX_SAMPLES * 4})")
    if not a:
        arr = np.zeros(0, np.int64)
    else:
        if not all(type(x) is int for x in a):
            bad = next(x for x in a if type(x) is not int)
            raise _Bad(fld, f"expected integers, got {type(bad).__name__}")
        try:
            arr = np.asarray(a, dtype=np.int64)
        except OverflowError:
            raise _Bad(fld, "an integer out of the 64-bit range") from None
    if n is not None and len(arr) != n:
        raise _Bad(fld, f"{len(arr)} values, expected {n}")
    if len(arr) and lo is not None and int(arr.min()) < lo:
        raise _Bad(fld, f"value {int(arr.min())} below {lo}")
    if len(arr) and hi is not None and int(arr.max()) >= hi:
        raise _Bad(fld, f"value {int(arr.max())} out of range (table of {hi})")
    return arr


def _strs(a: Any, fld: str, n: int | None = None) -> list[str]:
    if not isinstance(a, list) or not all(type(x) is str for x in a):
        raise _Bad(fld, "expected an array of strings")
    if n is not None and len(a) != n:
        raise _Bad(fld, f"{len(a)} values, expected {n}")
    return a


def _intern(index: dict, items: list, key) -> int:
    """The position of ``key`` in ``items``, appending it (and noting it in ``index``) the first time."""
    k = index.get(key)
    if k is None:
        k = index[key] = len(items)
        items.append(key)
    return k


class _Builder:
    """Interns frames and stacks across batches; collects the per-sample columns."""

    def __init__(self) -> None:
        self.frame_ix: dict[Frame, int] = {}
        self.stack_ix: dict[tuple[int, ...], int] = {}
        self.thread_ix: dict[tuple[int, int, str], int] = {}
        self.proc_ix: dict[tuple[str, int, int], int] = {}
        self.out = HostSamples.empty()
        self.cols: list[tuple[np.ndarray, ...]] = []

    def batch(self, a: Any, start: int, host: str, pid: int, resource: int) -> None:
        """Decode one batch's attributes (raises _Bad; nothing is added unless all of it is valid)."""
        if not hasattr(a, "get"):
            raise _Bad("attributes", "not a mapping")
        dt = _ints(a.get(A.SAMPLES_DT), A.SAMPLES_DT, lo=0)
        n = len(dt)
        if n > MAX_SAMPLES:
            raise _Bad(A.SAMPLES_DT, f"{n} samples (at most {MAX_SAMPLES})")
        tids = _ints(a.get(A.SAMPLES_THREAD_IDS), A.SAMPLES_THREAD_IDS)
        tnames = _strs(a.get(A.SAMPLES_THREAD_NAMES), A.SAMPLES_THREAD_NAMES, len(tids))
        files = _strs(a.get(A.SAMPLES_FILES), A.SAMPLES_FILES)
        fkind = _ints(a.get(A.SAMPLES_FILE_KIND), A.SAMPLES_FILE_KIND, len(files), 0, len(KIND_NAMES))
        ffile = _ints(a.get(A.SAMPLES_FRAME_FILE), A.SAMPLES_FRAME_FILE, None, 0, max(len(files), 0))
        fline = _ints(a.get(A.SAMPLES_FRAME_LINE), A.SAMPLES_FRAME_LINE, len(ffile), 0, 1 << 31)
        ffunc = _strs(a.get(A.SAMPLES_FRAME_FUNC), A.SAMPLES_FRAME_FUNC, len(ffile))
        slen = _ints(a.get(A.SAMPLES_STACK_LEN), A.SAMPLES_STACK_LEN, None, 1, MAX_DEPTH + 1)
        sfr = _ints(a.get(A.SAMPLES_STACK_FRAMES), A.SAMPLES_STACK_FRAMES, int(slen.sum()), 0, len(ffile))
        thr = _ints(a.get(A.SAMPLES_THREAD), A.SAMPLES_THREAD, n, 0, len(tids))
        stk = _ints(a.get(A.SAMPLES_STACK), A.SAMPLES_STACK, n, 0, len(slen))
        hz = a.get(A.SAMPLES_HZ)
        if type(hz) not in (int, float) or not 0 < hz <= 1e6:
            raise _Bad(A.SAMPLES_HZ, f"expected a rate in (0, 1e6], got {hz!r}")
        dropped = a.get(A.SAMPLES_DROPPED, 0)
        if type(dropped) is not int or dropped < 0:
            raise _Bad(A.SAMPLES_DROPPED, f"expected a count, got {dropped!r}")
        t = int(start) + np.cumsum(dt)
        # valid: intern
        o = self.out
        p = _intern(self.proc_ix, o.procs, (host, pid, resource))
        o.hz[p] = float(hz)
        fmap = np.empty(len(ffile), np.int64)
        for j, (fi, ln, fn) in enumerate(zip(ffile.tolist(), fline.tolist(), ffunc, strict=True)):
            fmap[j] = _intern(self.frame_ix, o.frames, Frame(files[fi], ln, fn, int(fkind[fi])))
        smap = np.empty(len(slen), np.int64)
        at = 0
        for j, ln in enumerate(slen.tolist()):
            smap[j] = _intern(self.stack_ix, o.stacks, tuple(fmap[sfr[at:at + ln]].tolist()))
            at += ln
        tmap = np.empty(len(tids), np.int64)
        for j, (ident, name) in enumerate(zip(tids.tolist(), tnames, strict=True)):
            tmap[j] = _intern(self.thread_ix, o.threads, (p, ident, name))
        self.cols.append((t, np.full(n, p, np.int32), tmap[thr].astype(np.int32), smap[stk].astype(np.int32)))
        o.batches += 1
        o.dropped += dropped

    def done(self) -> HostSamples:
        o = self.out
        if self.cols:
            t, p, th, st = (np.concatenate(c) for c in zip(*self.cols, strict=True))
            order = np.argsort(t, kind="stable")
            o.t_ns, o.proc, o.thread, o.stack = t[order], p[order], th[order], st[order]
        return o


def decode(tl: Timeline) -> HostSamples:
    """The host samples of ``tl``'s ``gputrace.samples`` rows (see the module docstring); bad batches are
    skipped and counted."""
    b = _Builder()
    lane_name = f"thread:{A.SAMPLES_SPAN}"
    for k, ln in enumerate(tl.lanes):
        if ln.name != lane_name:
            continue
        for r in range(int(tl.lane_offsets[k]), int(tl.lane_offsets[k + 1])):
            a = tl.attrs.get(r)
            if a is None or A.SAMPLES_DT not in a:
                continue
            try:
                b.batch(a, int(tl.cols["start"][r]), ln.host, int(ln.pid), int(tl.cols["resource"][r]))
            except _Bad as e:
                b.out.skipped += 1
                if len(b.out.problems) < MAX_PROBLEMS:
                    b.out.problems.append(f"stack samples of pid {ln.pid} (row {r}): {e}; batch skipped")
    return b.done()


_CACHE: dict[int, tuple[weakref.ref, HostSamples]] = {}


def host_samples(tl: Timeline) -> HostSamples:
    """``decode(tl)``, once per Timeline object (a Timeline is immutable)."""
    hit = _CACHE.get(id(tl))
    if hit is not None and hit[0]() is tl:
        return hit[1]
    out = decode(tl)
    for k in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        _CACHE.pop(k, None)
    _CACHE[id(tl)] = (weakref.ref(tl), out)
    return out
