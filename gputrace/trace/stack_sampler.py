"""A low-rate Python stack sampler: what every thread of this process was running, without ranges.

Contract:

* ``StackSampler(hz)`` samples ``sys._current_frames()`` of every thread (gputrace's own threads left out:
  the sampler's thread and any thread whose name starts with ``gputrace-``) every ``1/hz`` s on a daemon
  thread named ``gputrace-sampler``. One sample is (``perf_counter_ns()``, thread ident, stack id); a stack is
  the tuple of frame ids from the innermost frame out; a frame is (file, line, function). Frames and stacks
  are interned once per process, so a sample costs three list appends after the first sight of its stack.
* ``take()`` (any thread; the recorder's exporter calls it at every drain) hands over the samples taken since
  the last call as a ``SampleBatch`` that carries only the frames and stacks it uses (each batch stands alone:
  lines of the trace may be read in any order, a lost one loses only its own samples). ``batch_span`` turns a
  batch into the one span the trace stores it as (docs/trace-format.md, "Host stack samples").
* Memory is bounded: past ``max_pending`` samples not yet taken, new ones are dropped and counted
  (``SampleBatch.dropped``).
* ``stop()`` ends the thread (joins it, unless called from it) and is idempotent; what was sampled stays for
  the last ``take()``. The recorder stops its sampler before its final drain (``Recorder.stop``), so a sampler
  flushes at exit and at SIGTERM with the rest of the recording.
* Fork: the thread does not exist in a forked child; ``gputrace record`` starts a new sampler there.

The rate: ``GPUTRACE_SAMPLE_HZ`` (``gputrace record --sample-hz``; 0 turns sampling off), default
``DEFAULT_HZ``, chosen by measured cost (benchmarks/bench_stack_sampler.py, benchmarks/RESULTS.md).

Stdlib only; never raises into the program: a failing sample round is counted (``errors``) and skipped.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from types import FrameType

from gputrace import activity as A

#: Environment variable with the rate in samples per second per thread (0: off).
ENV_HZ = "GPUTRACE_SAMPLE_HZ"
#: Default rate: the measured cost per sample times this rate stays under 0.5 % of a process's time
#: (benchmarks/RESULTS.md, "Issue 32: the stack sampler's cost").
DEFAULT_HZ = 20.0
#: Highest rate accepted (the sampler holds the GIL while it walks the stacks).
MAX_HZ = 1000.0
#: Deepest stack kept (frames beyond it, the outermost ones, are cut; the stack ends with a frame "...").
MAX_DEPTH = 128
#: Name of each batch's span, and its lane (``thread:`` + it).
SPAN_NAME = A.SAMPLES_SPAN
THREAD_NAME = "gputrace-sampler"

#: File kinds stored per file (``gputrace.samples.file_kind``): user code, an installed library
#: (site-packages, console scripts), the standard library, or the interpreter's own frozen / generated code.
USER, LIBRARY, STDLIB, INTERNAL = A.FILE_USER, A.FILE_LIBRARY, A.FILE_STDLIB, A.FILE_INTERNAL


def env_hz(environ: dict | None = None) -> float:
    """The rate ``GPUTRACE_SAMPLE_HZ`` asks for (unset or empty: ``DEFAULT_HZ``; 0 or negative: 0, off).
    Raises ValueError naming the variable for anything but a number, or a rate above ``MAX_HZ``."""
    raw = (os.environ if environ is None else environ).get(ENV_HZ, "").strip()
    if not raw:
        return DEFAULT_HZ
    try:
        hz = float(raw)
    except ValueError:
        raise ValueError(f"{ENV_HZ}={raw!r}: expected a number of samples per second (0: off)") from None
    if hz != hz or hz > MAX_HZ:
        raise ValueError(f"{ENV_HZ}={raw!r}: expected 0..{MAX_HZ:g} samples per second")
    return max(hz, 0.0)


#: gputrace's own package folder: its frames (the recorder's exit hooks) are INTERNAL, never the user's code.
_OWN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def _lib_roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(library roots, stdlib roots) of this interpreter, as path prefixes."""
    paths = sysconfig.get_paths()
    # (console scripts, e.g. torchrun, are installed entry points of libraries, not the user's code)
    libs = {paths.get("purelib"), paths.get("platlib"), paths.get("scripts")}
    std = {paths.get("stdlib"), paths.get("platstdlib")}
    libs.discard(None)
    std.discard(None)
    lib = tuple(os.path.join(p, "") for p in libs if p)
    stdr = tuple(os.path.join(p, "") for p in std if p and os.path.join(p, "") not in lib)
    return lib, stdr


def file_kind(path: str, roots: tuple[tuple[str, ...], tuple[str, ...]] | None = None) -> int:
    """USER / LIBRARY / STDLIB / INTERNAL (frozen or generated code, gputrace itself) for a code object's file
    name (``roots``: ``_lib_roots()``)."""
    if not path or path.startswith(("<", _OWN)):
        return INTERNAL
    lib, std = roots if roots is not None else _lib_roots()
    if "site-packages" in path or "dist-packages" in path or path.startswith(lib):
        return LIBRARY
    if path.startswith(std):
        return STDLIB
    return USER


@dataclass
class SampleBatch:
    """Samples taken between two ``take()`` calls, with the tables they use (local indices).

    ``t_ns``: perf_counter_ns of each sample (non-decreasing); ``thread``: index into ``threads`` (ident,
    name); ``stack``: index into ``stacks``, each a tuple of indices into ``frames`` (innermost first);
    ``frames``: (file index, line, function); ``files``: (file name, kind). ``dropped``: samples not kept
    since the previous batch (the bound); ``hz``: the rate."""

    t_ns: list[int]
    thread: list[int]
    stack: list[int]
    threads: list[tuple[int, str]]
    stacks: list[tuple[int, ...]]
    frames: list[tuple[int, int, str]]
    files: list[tuple[str, int]]
    hz: float
    dropped: int = 0
    errors: int = 0


@dataclass
class _Interned:
    """Process-wide tables: (code, line) -> frame id, frame-id tuple -> stack id, and back."""

    frame_ix: dict = field(default_factory=dict)
    frames: list = field(default_factory=list)  # frame id -> (filename, line, function)
    stack_ix: dict = field(default_factory=dict)
    stacks: list = field(default_factory=list)  # stack id -> tuple of frame ids


class StackSampler:
    """See the module docstring. ``hz`` > 0; ``max_pending``: samples kept until ``take()``."""

    def __init__(self, hz: float = DEFAULT_HZ, max_pending: int = 1 << 18) -> None:
        if not 0 < hz <= MAX_HZ:
            raise ValueError(f"hz must be in (0, {MAX_HZ:g}], got {hz}")
        self.hz = float(hz)
        self.max_pending = int(max_pending)
        self._tab = _Interned()
        self._lock = threading.Lock()
        self._t: list[int] = []
        self._tid: list[int] = []
        self._sid: list[int] = []
        self._names: dict[int, str] = {}
        self._dropped = 0
        self.errors = 0
        self.samples = 0  # kept
        self.samples_seen = 0  # kept and dropped
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._roots = _lib_roots()

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> StackSampler:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread() and t.is_alive():
            t.join(timeout=5)

    def _run(self) -> None:
        period = 1.0 / self.hz
        nxt = time.monotonic() + period
        while not self._stop.wait(max(nxt - time.monotonic(), 0.0)):
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 never into the program: counted, the next round goes on
                self.errors += 1
            nxt += period
            now = time.monotonic()
            if nxt < now:  # fell behind (a long GIL hold elsewhere): no burst of catch-up samples
                nxt = now + period

    # -- sampling -----------------------------------------------------------------------------------
    def sample_once(self) -> int:
        """Take one sample of every other thread now (any thread may call it; tests do); returns how many
        stacks were kept."""
        frames = sys._current_frames()
        t = time.perf_counter_ns()
        me = threading.get_ident()
        active = threading._active  # type: ignore[attr-defined]  # ident -> Thread (stdlib's own table)
        names = self._names
        tab = self._tab
        fix, sfix = tab.frame_ix, tab.stack_ix
        kept: list[tuple[int, int]] = []
        f: FrameType | None
        for tid, f in frames.items():
            if tid == me:
                continue
            name = names.get(tid)
            if name is None:
                th = active.get(tid)
                name = th.name if th is not None else f"thread {tid}"
                names[tid] = name
            if name.startswith("gputrace-"):
                continue
            ids = []
            depth = 0
            while f is not None and depth < MAX_DEPTH:
                key = (f.f_code, f.f_lineno)
                i = fix.get(key)
                if i is None:
                    i = fix[key] = len(tab.frames)
                    co = f.f_code
                    tab.frames.append((co.co_filename, f.f_lineno or 0, getattr(co, "co_qualname", co.co_name)))
                ids.append(i)
                f = f.f_back
                depth += 1
            if f is not None:
                ids.append(self._cut_frame())
            st = tuple(ids)
            s = sfix.get(st)
            if s is None:
                s = sfix[st] = len(tab.stacks)
                tab.stacks.append(st)
            kept.append((tid, s))
        del frames
        self.samples_seen += len(kept)
        with self._lock:
            room = self.max_pending - len(self._t)
            if room < len(kept):
                self._dropped += len(kept) - max(room, 0)
                kept = kept[:max(room, 0)]
            for tid, s in kept:
                self._t.append(t)
                self._tid.append(tid)
                self._sid.append(s)
        self.samples += len(kept)
        return len(kept)

    def _cut_frame(self) -> int:
        key = ("...", 0)
        i = self._tab.frame_ix.get(key)
        if i is None:
            i = self._tab.frame_ix[key] = len(self._tab.frames)
            self._tab.frames.append(("<gputrace: deeper frames cut>", 0, "..."))
        return i

    def forget_threads(self) -> None:
        """Drop the cached thread names (a thread ident may be reused by a new thread)."""
        self._names = {}

    # -- hand-over ----------------------------------------------------------------------------------
    def take(self) -> SampleBatch | None:
        """The samples since the last call with their own tables, or None when there are none (nor drops)."""
        with self._lock:
            t, tid, sid, dropped = self._t, self._tid, self._sid, self._dropped
            self._t, self._tid, self._sid, self._dropped = [], [], [], 0
        names = dict(self._names)
        self._names = {}  # (re-read next round: idents are reused once a thread ends)
        if not t and not dropped:
            return None
        th_ix: dict[int, int] = {}
        st_ix: dict[int, int] = {}
        fr_ix: dict[int, int] = {}
        file_ix: dict[str, int] = {}
        threads: list[tuple[int, str]] = []
        stacks: list[tuple[int, ...]] = []
        frames: list[tuple[int, int, str]] = []
        files: list[tuple[str, int]] = []
        all_frames, all_stacks = self._tab.frames, self._tab.stacks
        out_th: list[int] = []
        out_st: list[int] = []
        for a, s in zip(tid, sid, strict=True):
            j = th_ix.get(a)
            if j is None:
                j = th_ix[a] = len(threads)
                threads.append((a, names.get(a, f"thread {a}")))
            out_th.append(j)
            k = st_ix.get(s)
            if k is None:
                k = st_ix[s] = len(stacks)
                local = []
                for fid in all_stacks[s]:
                    m = fr_ix.get(fid)
                    if m is None:
                        m = fr_ix[fid] = len(frames)
                        fname, line, func = all_frames[fid]
                        fi = file_ix.get(fname)
                        if fi is None:
                            fi = file_ix[fname] = len(files)
                            files.append((fname, file_kind(fname, self._roots)))
                        frames.append((fi, line, func))
                    local.append(m)
                stacks.append(tuple(local))
            out_st.append(k)
        return SampleBatch(t_ns=t, thread=out_th, stack=out_st, threads=threads, stacks=stacks, frames=frames,
                           files=files, hz=self.hz, dropped=dropped, errors=self.errors)


# -- the batch as a span -------------------------------------------------------------------------------
def batch_attributes(b: SampleBatch) -> dict:
    """The attributes of a batch's span: delta-encoded times (the first from the span's start), per-sample
    thread and stack indices, and the batch's own thread, stack, frame and file tables."""
    dt: list[int] = []
    prev = b.t_ns[0] if b.t_ns else 0
    for t in b.t_ns:
        dt.append(t - prev)
        prev = t
    flat: list[int] = []
    for s in b.stacks:
        flat.extend(s)
    return {
        "gputrace.lane": f"thread:{SPAN_NAME}", A.SOURCE: "gputrace", A.ROLE: "profiler",
        A.SAMPLES_HZ: float(b.hz), A.SAMPLES_DT: dt, A.SAMPLES_THREAD: list(b.thread),
        A.SAMPLES_STACK: list(b.stack), A.SAMPLES_THREAD_IDS: [t for t, _ in b.threads],
        A.SAMPLES_THREAD_NAMES: [n for _, n in b.threads], A.SAMPLES_STACK_LEN: [len(s) for s in b.stacks],
        A.SAMPLES_STACK_FRAMES: flat, A.SAMPLES_FILES: [f for f, _ in b.files],
        A.SAMPLES_FILE_KIND: [k for _, k in b.files], A.SAMPLES_FRAME_FILE: [f for f, _, _ in b.frames],
        A.SAMPLES_FRAME_LINE: [ln for _, ln, _ in b.frames], A.SAMPLES_FRAME_FUNC: [fn for _, _, fn in b.frames],
        A.SAMPLES_DROPPED: int(b.dropped),
    }


def batch_span(b: SampleBatch, epoch_offset_ns: int, span_id: int, trace_id: int,
               parent_span_id: int | None) -> dict:
    """The span record (``gputrace.otlp.ids.SpanDict``) of one batch: named ``gputrace.samples`` on the lane
    ``thread:gputrace.samples``, ``gputrace.role = "profiler"`` (bookkeeping: no analysis takes it for work or a
    phase), from its first sample to its last (+1 ns)."""
    t0 = (b.t_ns[0] if b.t_ns else time.perf_counter_ns()) + epoch_offset_ns
    t1 = (b.t_ns[-1] if b.t_ns else t0 - epoch_offset_ns) + epoch_offset_ns + 1
    return {"trace_id": trace_id, "span_id": span_id, "parent_span_id": parent_span_id, "name": SPAN_NAME,
            "start_ns": int(t0), "end_ns": int(t1), "attributes": batch_attributes(b)}
