"""Parallel reading of large plain OTLP JSONL files: pieces of the file decoded in several processes.

JSON decoding holds the GIL (msgspec and orjson alike), so threads do not help; a single
process reads about 0.3 M spans/s on our machines, under the 0.5 M spans/s target. A large
uncompressed file is therefore cut at line starts into pieces of ``PIECE_BYTES``; the calling
process claims pieces from the front and reads them as one stream with a ``TraceLoader``, while each
worker process (``_workers``: a fork of the caller where that is safe, else a ``python`` running
``_main`` below) claims pieces from the back and reads each with a loader of its own, until the claims
meet (``_pieces.ClaimBoard``; a process's reads are ``_part_read``). So the processes end within about
one piece of each other however the machine's other work slows one of them, and a worker that starts
late gets fewer pieces. The parent then remaps the pieces' phase, lane, resource and trace tables into
one set, in file order, and builds one Timeline. With ``workers=2`` that is one extra process: on a 2-core
machine the parent's core is not left idle and at most one interpreter starts (~0.16 CPU-s; a fork: ~0).

What crosses the process boundary is what our own workers built: numpy columns, lists of strings and
dicts of plain attribute values, in a part file (``_pieces.dump_part``: an anonymous shared-memory file
that the parent created and handed down, mapped by the parent; the columns stay views of the mapping).
Trace text is only ever parsed as JSON; no pickle comes from a path in the file system.

Errors keep their meaning: line numbers are translated to the file's line numbers, and in
strict mode the error with the lowest line is raised.
"""

from __future__ import annotations

import math
import os
import sys
from functools import partial
from itertools import pairwise

import numpy as np

from gputrace.timeline.errors import LoadReport, TraceFormatError
from gputrace.timeline.formats.otlp_jsonl._interner import sort_phases
from gputrace.timeline.formats.otlp_jsonl._part_read import _read_front, _read_range
from gputrace.timeline.formats.otlp_jsonl._pieces import (
    PART_ERRORS,
    ClaimBoard,
    ClaimTimeout,
    dump_part,
    load_part,
    new_anonymous_file,
)
from gputrace.timeline.formats.otlp_jsonl._workers import Worker, start_worker
from gputrace.timeline.model import COLUMNS, Lane, Timeline

__all__ = ["read_parallel", "split_ranges", "default_workers"]

#: Files smaller than this are read in-process (a worker's start-up costs ~0.3 CPU-s).
MIN_PARALLEL_BYTES = 64 << 20


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


#: Bytes per piece (cut at line starts; a quarter of that in the middle of the file, ``piece_bounds``). A process
#: claims a piece only when it has read the one before, so the processes end within about one piece's read of
#: each other (~0.01 s for a middle piece at ~180 MB/s); smaller pieces cost nothing measurable
#: (benchmarks/RESULTS.md, step 15: 127 MB as 15 or 63 pieces read in 0.62-0.79 CPU-s, as one range 0.64-0.75).
PIECE_BYTES = 8 << 20
#: How long the caller waits for a worker once its own share is read (a live worker then has at most one piece
#: left: ~0.05-0.3 s); a worker that is stopped is given up at once (``_workers.Worker.finish``).
STALL_S = 30.0
#: At least this many pieces per process (smaller files).
MIN_PIECES_PER_PROCESS = 4


def split_ranges(path, parts: int) -> list[tuple[int, int]]:
    """Up to ``parts`` byte ranges of about equal size covering the file, each starting at the beginning
    of a line (fewer where lines are longer than a range)."""
    size = os.path.getsize(path)
    if parts <= 1 or size == 0:
        return [(0, size)]
    return list(pairwise(_line_starts(path, size, [size / parts * k for k in range(1, parts)])))


def piece_bounds(path, workers: int) -> list[int]:
    """The bounds of a parallel read's pieces (``n + 1`` offsets, each piece starting at a line start):
    ``PIECE_BYTES`` in the outer quarters, a quarter of that in the middle half, where the claims from
    the front and the back meet (the last pieces read decide how long one process waits for another)."""
    size = os.path.getsize(path)
    small = PIECE_BYTES // 4
    if size < 2 * PIECE_BYTES * MIN_PIECES_PER_PROCESS * workers:
        return [a for a, _ in split_ranges(path, MIN_PIECES_PER_PROCESS * workers)] + [size]
    q1, q3 = size // 4, size - size // 4
    pos = list(range(PIECE_BYTES, q1, PIECE_BYTES)) + list(range(q1, q3, small))
    pos += list(range(q3, size - PIECE_BYTES // 2, PIECE_BYTES))
    return _line_starts(path, size, pos)


def _line_starts(path, size: int, positions) -> list[int]:
    """0, the start of the first line after each of ``positions`` (ascending; repeats dropped), and ``size``."""
    cuts = [0]
    with open(path, "rb") as f:
        for p in positions:
            f.seek(max(int(p), cuts[-1]))
            f.readline()  # move to the start of the next line
            cut = f.tell()
            if cut >= size:
                break
            if cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(size)
    return cuts


def _run_workers(path: str, workers: int, lenient: bool) -> list[dict]:
    """Read the file with this process and ``workers - 1`` worker processes (``_workers.start_worker``: forks
    where that is safe) sharing one ``ClaimBoard``; return every part's result in file order (this process's
    pieces as one part, then each worker piece).

    A worker writes its pieces into a part file inherited as a file descriptor. Pieces that a worker claimed
    but did not deliver (it failed, could not start, was stopped, or hung: ``Worker.finish`` waits at most
    ``STALL_S`` once this process's share is read) are read here (``RuntimeError`` is never surfaced for a
    worker problem). Where the claim board's lock stays taken (its holder stopped: ``ClaimTimeout``), the
    workers are killed and the whole file is read here. An exception of our own read (a bug,
    KeyboardInterrupt) kills the workers.
    """
    cuts = piece_bounds(path, workers)
    try:
        board = ClaimBoard.create(cuts)
    except OSError:  # no shared file: everything is read here
        return [_read_range(path, 0, cuts[-1], lenient)]
    procs: list[tuple[Worker, int]] = []
    try:
        for _ in range(workers - 1):
            fd = -1
            try:
                fd = new_anonymous_file()
                procs.append((start_worker(partial(_work, board, path, lenient, fd),
                                           [str(board.fd), str(fd), path, str(int(lenient))], (board.fd, fd)), fd))
            except OSError:  # cannot start a process: its pieces are claimed by the others
                if fd >= 0:
                    os.close(fd)
        try:
            first = _read_front(path, board, lenient)
        except ClaimTimeout:  # a worker stopped while it held the board: read everything here
            for w, _ in procs:
                w.kill()
            return [_read_range(path, 0, cuts[-1], lenient)]
        if first["error"] is not None:  # strict: the caller's pieces come first, so its error is the lowest
            return [first]
        done: dict[int, dict] = {}
        for w, fd in procs:
            if w.finish(STALL_S) == 0:
                try:
                    done.update(load_part(fd))  # (piece, result) records
                except PART_ERRORS:
                    pass  # a worker that died while writing: its pieces are read below
        parts = [first]
        for i in range(first["pieces"], board.n):
            got = done.get(i)
            parts.append(got if got is not None else _read_range(path, *board.piece(i), lenient))
        return parts
    finally:
        for w, fd in procs:
            w.kill()
            os.close(fd)
        os.close(board.fd)


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
    parts = _run_workers(path, workers, lenient)
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


def _work(board: ClaimBoard, path: str, lenient: bool, part_fd: int) -> int:
    """A worker's share: pieces claimed from the back until the claims meet, each read by its own loader
    and appended to the part file as ``(piece, result)``; returns the number of pieces."""
    n = 0
    while (i := board.claim_back()) is not None:
        dump_part((i, _read_range(path, *board.piece(i), lenient)), part_fd)
        n += 1
    return n


def _main(argv: list[str]) -> int:
    """A worker: ``BOARD_FD PART_FD PATH LENIENT``; reads its pieces into ``PART_FD``."""
    board_fd, part_fd, path, lenient = int(argv[0]), int(argv[1]), argv[2], argv[3] == "1"
    _work(ClaimBoard.open(board_fd), path, lenient, part_fd)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
