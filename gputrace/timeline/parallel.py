"""Parallel reading of large plain OTLP JSONL files: byte ranges decoded in several processes.

JSON decoding holds the GIL (msgspec and orjson alike), so threads do not help; a single
process reads about 0.25-0.3 M spans/s on our machines, under the 0.5 M spans/s target. A
large uncompressed file is therefore split into byte ranges at line boundaries; the calling
process reads the first range itself with a ``TraceLoader`` while one worker process per other
range (a ``python`` running ``_main`` below) reads the rest, and the parent remaps the
workers' phase, lane, resource and trace tables into one set and builds one Timeline. With
``workers=2`` that is one extra process: on a 2-core machine the parent's core is not left idle
and only one interpreter starts (~0.3 CPU-s).

What crosses the process boundary is what our own workers built: numpy columns, lists of
strings and dicts of plain attribute values, pickled by the worker (protocol 5, the numpy buffers
out of band) into an anonymous shared-memory file that the parent created and handed down
(``_part_file``), then mapped and unpickled by that parent; the columns stay views of the mapping (no
copy). Trace text is only ever parsed as JSON; no pickle comes from a path in the file system.

Errors keep their meaning: line numbers are translated to the file's line numbers, and in
strict mode the error with the lowest line is raised.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import struct
import subprocess
import sys
import tempfile
from itertools import pairwise

import numpy as np

from gputrace.timeline._interner import sort_phases
from gputrace.timeline._lines import iter_line_blocks
from gputrace.timeline._loader import TraceLoader
from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.model import COLUMNS, Lane, Timeline

__all__ = ["read_parallel", "split_ranges", "default_workers"]

#: Files smaller than this are read in-process (a worker's start-up costs ~0.3 CPU-s).
MIN_PARALLEL_BYTES = 64 << 20
_READ = 8 << 20


#: Below this many usable CPUs the default is to read in-process. Two suffice since the parent
#: reads a range itself (before, with the parent idle behind two workers, 2 CPUs measured slower
#: than one process: benchmarks/RESULTS.md, "OTLP JSONL read").
MIN_PARALLEL_CPUS = 2


def _load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not available
        return 0.0


def default_workers() -> int:
    """Processes for a parallel read, the caller included: about the CPUs that other work leaves
    free, at most 8; 1 (read in-process) below ``MIN_PARALLEL_CPUS`` usable CPUs or on a busy machine.
    ``read_trace(workers=N)`` overrides it. The decision whether a file is read in parallel is
    ``gputrace.timeline.load.parallel_workers``.

    ``floor(CPUs - load) + 2`` readers, by the 1-minute load average: on a 2-core machine, two
    while the load is under 2. Measured on such a machine with 1 M spans (benchmarks/RESULTS.md,
    "OTLP JSONL read"): at load 1.2-1.7 two processes took 2.1-2.6 s against 3.2-3.8 s for one;
    at load 3.5-6 they were slower than one (a second process on a core that others keep busy
    gains no CPU and costs ~0.3-0.6 CPU-s: start-up, shipping the columns, merging)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    if n < MIN_PARALLEL_CPUS:
        return 1
    return max(1, min(8, n, math.floor(n - _load_average()) + 2))


#: Bytes the calling process reads more than each worker: about what it reads while a worker
#: process starts (~0.25 CPU-s at ~150 MB/s) and pickles its columns, so that the parts end together.
#: Measured at 1 M spans on 2 cores (benchmarks/RESULTS.md, step 10): with 32 MiB the caller waited a
#: median 0.12 s for the worker, with 44 MiB 0.06 s.
HEAD_START_BYTES = 48 << 20


def split_ranges(path, parts: int, head_start: int = 0) -> list[tuple[int, int]]:
    """``parts`` byte ranges covering the file, each starting at the beginning of a line; the first
    is ``head_start`` bytes longer than the others (at most twice as long)."""
    size = os.path.getsize(path)
    if parts <= 1 or size == 0:
        return [(0, size)]
    extra = min(head_start, size // parts)
    share = (size - extra) / parts
    cuts = [0]
    with open(path, "rb") as f:
        for k in range(1, parts):
            pos = max(int(extra + share * k), cuts[-1])
            f.seek(pos)
            f.readline()  # move to the start of the next line
            cut = f.tell()
            if cut >= size:
                break
            if cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(size)
    return list(pairwise(cuts))


class _Bounded:
    """Reads of a binary file that stop ``left`` bytes on."""

    def __init__(self, f, left: int) -> None:
        self.f, self.left = f, left

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            return b""
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data


def _read_range(path: str, start: int, end: int, lenient: bool) -> dict:
    """Worker: load lines in [start, end) of ``path``; line numbers local to the range."""
    loader = TraceLoader(lenient=lenient)
    loader.report.files.append(path)
    line_no = 0
    error = None
    with open(path, "rb") as f:
        f.seek(start)
        try:
            for line, block, terminated in iter_line_blocks(_Bounded(f, end - start), _READ):
                if line is None:
                    assert block is not None
                    line_no = loader.feed_block(path, line_no, block)
                else:
                    line_no += 1
                    loader.feed(path, line_no, line, terminated)
            loader.flush()
        except TraceFormatError as e:
            error = e
            line_no = _count_lines(path, start, end)  # the parent needs every range's line count
    it = loader.it
    attrs: dict[int, dict] = {}
    chunks: list[dict[str, np.ndarray]] = []
    if error is None:
        chunks = [c for c in loader._chunks if len(c["start"])]
        for a in loader._chunk_attrs:  # keyed by row across the loader's chunks
            attrs.update(a)
    return {
        "nlines": line_no,
        "error": error,
        "report": loader.report,
        "chunks": chunks,  # column sets, rows in order; Timeline.from_parts joins them
        "rows": loader._rows if error is None else 0,
        "attrs": attrs,
        "phases": it.phases,
        "trace_ids": it.trace_ids,
        "resources": it.resources,
        "lanes": it.lanes,
    }


def _count_lines(path: str, start: int, end: int) -> int:
    n = 0
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        last = b"\n"
        while left > 0:
            data = f.read(min(_READ, left))
            if not data:
                break
            left -= len(data)
            n += data.count(b"\n")
            last = data[-1:]
    return n + (last != b"\n")


#: A worker's program. ``python -c`` (like ``-m``) puts the working directory first on ``sys.path``; it is
#: taken off, so that the worker imports the caller's ``gputrace`` (``PYTHONPATH``), never a ``gputrace``
#: directory that happens to be in the caller's working directory (another checkout).
_WORKER = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
           "from gputrace.timeline.parallel import _main; sys.exit(_main(sys.argv[1:]))")

#: Header of a part file: pickle length, number of out-of-band buffers; then one length per buffer.
_HEAD = struct.Struct("<QQ")
_ALIGN = 64


def _part_file() -> int:
    """A new anonymous file for a worker's result (an fd; shared memory where the system has
    ``memfd_create``, else an unlinked temporary file). Raises OSError."""
    if hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("gputrace-part", os.MFD_CLOEXEC)
        except OSError:
            pass
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


def _dump_part(res: dict, fd: int) -> None:
    """Write ``res`` into ``fd`` (``_load_part``'s format): header, pickle (protocol 5), then each
    out-of-band buffer (numpy columns) at a 64-byte boundary."""
    bufs: list[pickle.PickleBuffer] = []
    meta = pickle.dumps(res, protocol=5, buffer_callback=bufs.append)
    raws = [b.raw() for b in bufs]
    head = _HEAD.pack(len(meta), len(raws)) + struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    with os.fdopen(fd, "wb", closefd=False) as f:
        f.write(head)
        f.write(meta)
        pos = len(head) + len(meta)
        for r in raws:
            pad = -pos % _ALIGN
            f.write(b"\0" * pad)
            f.write(r)
            pos += pad + r.nbytes


def _load_part(fd: int) -> dict:
    """A worker's result from its part file (our own worker wrote it: see the module docstring). The
    numpy columns are views of a copy-on-write mapping of the file, alive while they are."""
    size = os.fstat(fd).st_size
    mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    view = memoryview(mm)
    nmeta, nbuf = _HEAD.unpack_from(view, 0)
    lens = struct.unpack_from(f"<{nbuf}Q", view, _HEAD.size)
    pos = _HEAD.size + 8 * nbuf
    meta = view[pos:pos + nmeta]
    pos += nmeta
    bufs = []
    for n in lens:
        pos += -pos % _ALIGN
        bufs.append(view[pos:pos + n])
        pos += n
    if pos > size:
        raise ValueError("part file shorter than its header says")
    return pickle.loads(meta, buffers=bufs)


def _run_workers(path: str, ranges: list[tuple[int, int]], lenient: bool) -> list[dict]:
    """Read ``ranges[0]`` in this process while one worker process (``_WORKER``) per other range
    reads that one; return every range's result, in order.

    Plain subprocesses rather than ``multiprocessing``: its spawn/forkserver start methods
    re-import the caller's ``__main__`` (re-running an unguarded script's top level in every
    worker), and fork is unsafe in a process with threads (the TUI). A worker writes its result into
    a part file (``_part_file``) inherited as a file descriptor, so nothing of ours drains a pipe while
    we read our own range. A range whose worker fails is read here instead (``RuntimeError`` is never
    surfaced for a worker problem). An exception of our own read (a bug, KeyboardInterrupt) kills the
    workers.
    """
    import gputrace

    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(gputrace.__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs: list[tuple[subprocess.Popen, int] | None] = []
    try:
        for a, b in ranges[1:]:
            fd = -1
            try:
                fd = _part_file()
                procs.append((subprocess.Popen(
                    [sys.executable, "-c", _WORKER, str(fd), path, str(a), str(b), str(int(lenient))],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                    pass_fds=(fd,)), fd))
            except OSError:  # cannot start a process: that range is read here
                if fd >= 0:
                    os.close(fd)
                procs.append(None)
        first = _read_range(path, ranges[0][0], ranges[0][1], lenient)
        parts = [first]
        for (a, b), pf in zip(ranges[1:], procs, strict=True):
            part = None
            if pf is not None and pf[0].wait() == 0:
                try:
                    part = _load_part(pf[1])
                except (OSError, ValueError, EOFError, pickle.UnpicklingError, struct.error):
                    part = None  # a worker that died while writing: its range is read here
            parts.append(part if part is not None else _read_range(path, a, b, lenient))
        return parts
    finally:
        for pf in procs:
            if pf is not None:
                if pf[0].poll() is None:
                    pf[0].kill()
                    pf[0].wait()
                os.close(pf[1])


def _shifted(e: TraceFormatError, lines_before: int) -> TraceFormatError:
    """A worker's error with its range-relative line number turned into the file's line number."""
    line = None if e.line is None else e.line + lines_before
    return TraceFormatError(e.path, line, e.field, e.message, e.reason)


def read_parallel(path, lenient: bool = False,
                  workers: int | None = None) -> tuple[list, dict, list, list, list, list, LoadReport]:
    """Read one plain (uncompressed) file with ``workers`` processes.

    Returns ``(parts, attrs, phases, lanes, resources, trace_ids, report)`` ready for
    ``Timeline.from_parts`` (``parts``: column sets in file order, codes remapped to the merged tables;
    not concatenated). Raises ``TraceFormatError`` (file line numbers) unless lenient.
    """
    path = os.fspath(path)
    workers = workers or default_workers()
    ranges = split_ranges(path, workers, HEAD_START_BYTES)
    parts = _run_workers(path, ranges, lenient)
    offsets = np.cumsum([0] + [p["nlines"] for p in parts])
    errors = []
    for p, off in zip(parts, offsets[:-1], strict=True):
        if p["error"] is not None:
            e = p["error"]
            errors.append(_shifted(e, int(off)))
    if errors:
        raise min(errors, key=lambda e: e.line or 0)
    report = LoadReport(files=[path])
    phase_ix: dict[str, int] = {}
    lane_ix: dict[Lane, int] = {}
    trace_ix: dict[str, int] = {}
    res_ix: dict[str, int] = {}
    resources: list[dict] = []
    out: list[dict[str, np.ndarray]] = []
    attrs: dict[int, dict] = {}
    base = 0
    import orjson

    for p, off in zip(parts, offsets[:-1], strict=True):
        r = p["report"]
        report.lines += r.lines
        report.spans += r.spans
        report.lines_skipped += r.lines_skipped
        report.spans_skipped += r.spans_skipped
        report.reasons.update(r.reasons)
        for e in r.problems:
            report.problems.append(_shifted(e, int(off)))
        if not p["chunks"]:
            continue
        pm = np.array([phase_ix.setdefault(x, len(phase_ix)) for x in p["phases"]] or [0], dtype=np.int32)
        lm = np.array([lane_ix.setdefault(x, len(lane_ix)) for x in p["lanes"]] or [0], dtype=np.int32)
        tm = np.array([trace_ix.setdefault(x, len(trace_ix)) for x in p["trace_ids"]] or [0], dtype=np.int32)
        res_codes = []
        for rd in p["resources"]:
            key = orjson.dumps(rd, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr).decode()
            if key not in res_ix:
                res_ix[key] = len(resources)
                resources.append(rd)
            res_codes.append(res_ix[key])
        rm = np.array(res_codes or [0], dtype=np.int32)
        for c in p["chunks"]:
            for k, m in (("phase", pm), ("lane", lm), ("trace", tm), ("resource", rm)):
                if k in c:
                    c[k] = m[c[k]]
            out.append(c)
        for row, d in p["attrs"].items():
            attrs[base + row] = d
        base += p["rows"]
    report.problems.sort(key=lambda e: e.line or 0)
    if not out:
        out = [{k: np.empty(0, dtype=d) for k, d in COLUMNS.items()}]
    return out, attrs, list(phase_ix), list(lane_ix), resources, list(trace_ix), report


def timeline_parallel(path, lenient: bool = False, workers: int | None = None) -> Timeline:
    parts, attrs, phases, lanes, resources, trace_ids, report = read_parallel(path, lenient, workers)
    tl = sort_phases(Timeline.from_parts(parts, phases, lanes, resources, trace_ids, attrs, consume=True))
    tl.load_report = report
    return tl


def _main(argv: list[str]) -> int:
    """A worker: ``FD PATH START END LENIENT``; reads the range and writes the result into ``FD``."""
    fd, path, start, end, lenient = int(argv[0]), argv[1], int(argv[2]), int(argv[3]), argv[4] == "1"
    _dump_part(_read_range(path, start, end, lenient), fd)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
