"""Parallel reading of large files: same Timeline as in-process, file line numbers in errors."""

from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest

import gputrace.timeline.formats.otlp_jsonl._workers as wk
import gputrace.timeline.formats.otlp_jsonl.parallel as par
from gputrace.otlp.encode import encode_request
from gputrace.testing.synthetic import write_synthetic
from gputrace.timeline import TraceFormatError, read_trace
from gputrace.timeline.formats.otlp_jsonl._pieces import PART_ERRORS, ClaimBoard, dump_part, load_part, new_anonymous_file


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(par, "MIN_PARALLEL_BYTES", 0)


@pytest.fixture(params=["fork", "interpreter"])
def start(request, monkeypatch):
    """How workers start: forks of the caller, or fresh interpreters (``_workers``). The fork is taken only
    while the caller has no other Python thread; the test runner may have some, so that check is passed
    here (``test_a_caller_with_threads_starts_interpreters`` covers it). Returns the mode and the workers."""
    started: list = []
    real = wk.start_worker

    def start_worker(*a, **kw):
        w = real(*a, **kw)
        started.append("interpreter" if w.popen is not None else "fork")
        return w

    monkeypatch.setattr(wk, "FORK", request.param == "fork")
    monkeypatch.setattr(wk.threading, "active_count", lambda: 1)
    monkeypatch.setattr(par, "start_worker", start_worker)
    return request.param, started


@pytest.fixture
def shared_pieces(monkeypatch, small_threshold):
    """The caller claims its next piece only once the workers hold as many, up to two (or after 10 s), so that
    workers read pieces of these small files (a worker starts in ~0.2 s, by when the caller alone would be done).
    Returns the number of worker pieces of each read."""
    real_claim, real_run = ClaimBoard.claim_front, par._run_workers
    counts: list[int] = []

    def claim_front(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            front, back = self.taken()
            if front >= back or self.n - back >= min(front, 2):
                break
            time.sleep(0.002)
        return real_claim(self)

    def run_workers(*a, **kw):
        parts = real_run(*a, **kw)
        counts.append(len(parts) - 1)
        return parts

    monkeypatch.setattr(ClaimBoard, "claim_front", claim_front)
    monkeypatch.setattr(par, "_run_workers", run_workers)
    return counts


def test_split_ranges_start_on_lines(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"".join(b"x" * (i % 7) + b"\n" for i in range(100)))
    data = p.read_bytes()
    for parts in (1, 2, 3, 8, 200):
        rs = par.split_ranges(p, parts)
        assert rs[0][0] == 0 and rs[-1][1] == len(data) and len(rs) <= parts
        assert all(a == prev_b for (_, prev_b), (a, _) in zip(rs, rs[1:], strict=False))
        assert all(a == 0 or data[a - 1:a] == b"\n" for a, _ in rs)
        assert all(b > a for a, b in rs)


def test_piece_bounds_are_line_starts_and_smaller_in_the_middle(tmp_path, monkeypatch):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"".join(b"y" * (i % 50) + b"\n" for i in range(20_000)))  # ~500 kB
    data = p.read_bytes()
    monkeypatch.setattr(par, "PIECE_BYTES", 8192)
    cuts = par.piece_bounds(p, 2)
    assert cuts[0] == 0 and cuts[-1] == len(data) and all(b > a for a, b in zip(cuts, cuts[1:], strict=False))
    assert all(data[c - 1:c] == b"\n" for c in cuts[1:-1])
    sizes = np.diff(cuts)
    outer, middle = sizes[: len(sizes) // 8], sizes[len(sizes) * 3 // 8: len(sizes) * 5 // 8]
    assert np.median(outer) > 3 * np.median(middle) and abs(np.median(middle) - 2048) < 100
    small = tmp_path / "s.jsonl"
    small.write_bytes(data[:30_000])  # too small for pieces of PIECE_BYTES: MIN_PIECES_PER_PROCESS per process
    assert len(par.piece_bounds(small, 3)) - 1 == 3 * par.MIN_PIECES_PER_PROCESS


def test_parallel_read_equals_in_process_read(tmp_path, shared_pieces, start):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=3, batches=3, shuffle_lines=True, spans_per_line=17)
    a, b = read_trace(p, workers=1), read_trace(p, workers=3)
    assert shared_pieces[-1] >= 2 and start[1] == [start[0]] * 2  # the workers, started as asked, read pieces
    assert a.n == b.n and a.lanes == b.lanes and set(a.trace_ids) == set(b.trace_ids)
    assert [a.trace_ids[i] for i in a.trace] == [b.trace_ids[i] for i in b.trace]
    for col in ("start", "end", "lane", "depth", "device", "gpu_start", "span_id", "kind", "batch"):
        assert np.array_equal(a.cols[col], b.cols[col]), col
    assert [a.phases[i] for i in a.phase] == [b.phases[i] for i in b.phase]
    assert [b.resources[i]["host.name"] for i in b.resource] == [a.resources[i]["host.name"] for i in a.resource]
    assert b.load_report.spans == b.n and b.load_report.lines == a.load_report.lines


def _line(i: int) -> bytes:
    return encode_request({"host.name": "h"}, [dict(trace_id=b"\x01" * 16, span_id=i + 1, name="ntt",
                                                    start_ns=i, end_ns=i + 1)]) + b"\n"


def test_parallel_errors_carry_file_line_numbers(tmp_path, shared_pieces, start):
    lines = [_line(i) for i in range(40)]
    lines[30] = b"garbage\n"
    lines[35] = b"{oops\n"
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"".join(lines))
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p, workers=4)
    assert str(ei.value) == f"{p}:31: not JSON (JSON is malformed: invalid character (byte 0))"
    tl = read_trace(p, lenient=True, workers=4)
    assert tl.n == 38 and tl.load_report.lines_skipped == 2
    assert [e.line for e in tl.load_report.problems] == [31, 36]
    assert shared_pieces[-1] >= 1


def test_worker_failure_falls_back_to_in_process(tmp_path, small_threshold, start, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2)
    want = read_trace(p, workers=1)

    def fail(*a):
        raise RuntimeError("worker bug")

    monkeypatch.setattr(wk.sys, "executable", "/bin/false")  # every interpreter exits 1
    monkeypatch.setattr(par, "_work", fail)  # every fork exits 1
    tl = read_trace(p, workers=3)
    assert tl.n == want.n > 0 and len(start[1]) == 2


def test_workers_run_our_package_not_one_in_the_working_directory(tmp_path, small_threshold, monkeypatch):
    # A worker used to be ``python -m gputrace.timeline.formats.otlp_jsonl.parallel``, which imports from the working directory
    # first: run from another checkout, it ran that checkout's code (here: a fake that answers nothing).
    monkeypatch.setattr(wk, "FORK", False)
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2, spans_per_line=9)
    fake = tmp_path / "other_checkout" / "gputrace" / "timeline"
    fake.mkdir(parents=True)
    for d in (fake.parent, fake):
        (d / "__init__.py").write_text("")
    (fake / "parallel.py").write_text("def _main(argv):\n    return 0\n")  # exits 0 with no output
    want = read_trace(p, workers=1)
    monkeypatch.chdir(fake.parent.parent)
    got = read_trace(p, workers=2)
    assert got.n == want.n > 0 and np.array_equal(got.cols["start"], want.cols["start"])


def test_the_caller_claims_from_the_front_and_a_worker_from_the_back(tmp_path, shared_pieces, start, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    fronts = []
    real_front = par._read_front

    def read_front(path, board, lenient):
        res = real_front(path, board, lenient)
        fronts.append((res["pieces"], board.n, board.taken()))
        return res

    monkeypatch.setattr(par, "_read_front", read_front)
    a, b = read_trace(p, workers=1), read_trace(p, workers=2)
    assert start[1] == [start[0]]  # one worker process; the caller reads too
    (mine, n, (front, back)), = fronts
    assert n == 2 * par.MIN_PIECES_PER_PROCESS and front == back == mine  # the claims met
    assert 1 <= mine < n and shared_pieces == [n - mine]  # the rest was the worker's
    assert a.n == b.n and np.array_equal(a.cols["start"], b.cols["start"])
    assert np.array_equal(a.cols["span_id"], b.cols["span_id"]) and a.lanes == b.lanes


def _claim_two_then(part_bytes: bytes | None):
    """A worker's ``_work`` (for a fork) that claims two pieces from the back, then writes ``part_bytes`` and
    returns (exit 0), or raises (exit 1) when it is None; and the same as a program for an interpreter."""
    def work(board, path, lenient, fd):
        board.claim_back()
        board.claim_back()
        if part_bytes is None:
            raise RuntimeError("died")
        os.write(fd, part_bytes)

    program = ("import os, sys; from gputrace.timeline.formats.otlp_jsonl._pieces import ClaimBoard; "
               "b = ClaimBoard.open(int(sys.argv[1])); b.claim_back(); b.claim_back(); "
               + ("sys.exit(3)" if part_bytes is None else f"os.write(int(sys.argv[2]), {part_bytes!r})"))
    return work, program


@pytest.mark.parametrize("part_bytes", [None, struct.pack("<QQ", 99, 0)], ids=["dies", "broken part file"])
def test_pieces_a_worker_claimed_but_did_not_deliver_are_read_here(tmp_path, shared_pieces, start, monkeypatch,
                                                                   part_bytes):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    work, program = _claim_two_then(part_bytes)
    monkeypatch.setattr(par, "_work", work)
    monkeypatch.setattr(wk, "WORKER", program)
    got, want = read_trace(p, workers=2), read_trace(p, workers=1)
    assert shared_pieces[0] == 2 and start[1] == [start[0]]  # read here, as two parts after the caller's
    assert got.n == want.n > 0 and np.array_equal(got.cols["span_id"], want.cols["span_id"])
    assert got.load_report.lines == want.load_report.lines


def test_a_caller_with_threads_starts_interpreters(tmp_path, small_threshold, monkeypatch):
    # A fork copies the caller with only the forking thread: a lock another thread held stays held in the child.
    import threading

    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2, spans_per_line=9)
    kinds = []
    real = wk.start_worker

    def start_worker(*a):
        w = real(*a)
        kinds.append(w.popen is not None)
        return w

    monkeypatch.setattr(par, "start_worker", start_worker)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        read_trace(p, workers=2)
    finally:
        stop.set()
        t.join()
    assert kinds == [True]  # one worker, an interpreter


def test_board_claims_meet_once_every_piece_is_taken():
    board = ClaimBoard.create([0, 10, 20, 30, 45])
    try:
        other = ClaimBoard.open(board.fd)  # as a worker sees it
        assert other.cuts == board.cuts and other.n == 4
        assert board.claim_front() == 0 and other.claim_back() == 3 and other.claim_back() == 2
        assert board.claim_front() == 1 and board.claim_front() is None and other.claim_back() is None
        assert board.taken() == (2, 2) and board.piece(3) == (30, 45)
    finally:
        os.close(board.fd)


def test_parallel_reads_from_two_free_cpus(monkeypatch):
    load = {"now": 0.4}
    monkeypatch.setattr(par, "_load_average", lambda: load["now"])
    monkeypatch.setattr(par.os, "sched_getaffinity", lambda _: {0, 1})
    assert par.default_workers() == 2
    load["now"] = 1.7
    assert par.default_workers() == 2
    load["now"] = 2.2  # both cores busy with other work: a second process would gain nothing
    assert par.default_workers() == 1
    load["now"] = 3.0
    assert par.default_workers() == 1
    monkeypatch.setattr(par.os, "sched_getaffinity", lambda _: set(range(16)))
    assert par.default_workers() == 8
    load["now"] = 12.2
    assert par.default_workers() == 5
    load["now"] = 40.0
    assert par.default_workers() == 1
    monkeypatch.setattr(par.os, "sched_getaffinity", lambda _: {0})
    load["now"] = 0.0
    assert par.default_workers() == 1


def test_part_file_round_trip_keeps_columns_as_writable_views():
    res = {"chunks": [{"start": np.arange(1000, dtype=np.int64), "kind": np.ones(7, np.int8)},
                      {"start": np.arange(3, dtype=np.int64)[::-1]}],  # a non-contiguous column goes in-band
           "phases": ["prove", "ntt"], "attrs": {5: {"k": "v", "n": 3}}, "nlines": 12, "error": None}
    fd = new_anonymous_file()
    try:
        assert load_part(fd) == []
        dump_part((7, res), fd)
        dump_part((3, {"chunks": [{"end": np.arange(5, dtype=np.int32)}]}), fd)  # records are appended
        (i, got), (j, second) = load_part(fd)
        (_, again), _ = load_part(fd)
    finally:
        os.close(fd)
    assert (i, j) == (7, 3) and second["chunks"][0]["end"].tolist() == [0, 1, 2, 3, 4]
    assert second["chunks"][0]["end"].ctypes.data % 64 == 0
    assert got["phases"] == res["phases"] and got["attrs"] == res["attrs"] and got["nlines"] == 12
    for a, b in zip(got["chunks"], res["chunks"], strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    col = got["chunks"][0]["start"]
    assert col.ctypes.data % 64 == 0
    col[:] = -1  # copy-on-write: the file (and another load of it) keeps the worker's values
    assert np.array_equal(again["chunks"][0]["start"], np.arange(1000))


@pytest.mark.parametrize("cut", [10, 200, 100, 3])
def test_a_truncated_part_file_is_refused(cut):
    fd = new_anonymous_file()
    try:
        dump_part((0, {"chunks": [{"start": np.arange(5000, dtype=np.int64)}], "phases": ["x"]}), fd)
        whole = os.fstat(fd).st_size
        dump_part((1, {"chunks": [{"start": np.arange(100, dtype=np.int64)}]}), fd)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        assert [i for i, _ in load_part(fd)] == [0, 1]
        for size in (cut, whole + cut, len(data) - cut):  # in the first record, the second, its end
            os.ftruncate(fd, 0)
            os.pwrite(fd, data[:size], 0)
            with pytest.raises(PART_ERRORS):
                load_part(fd)
    finally:
        os.close(fd)


def _same(got, want):
    assert got.n == want.n > 0 and np.array_equal(got.cols["span_id"], want.cols["span_id"])
    assert got.load_report.lines == want.load_report.lines


@pytest.mark.timeout(60)
def test_a_stopped_worker_is_given_up_and_its_pieces_read_here(tmp_path, small_threshold, start, monkeypatch):
    # SIGSTOP right after it starts: the read used to wait for it forever. A stopped worker is seen in /proc at
    # once (STALL_S is far longer than this test may take).
    import signal

    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    stopped = []
    real = par.start_worker

    def start_stopped(*a, **kw):
        w = real(*a, **kw)
        pid = w.popen.pid if w.popen is not None else w.pid
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)
        return w

    monkeypatch.setattr(par, "start_worker", start_stopped)
    t0 = time.monotonic()
    got = read_trace(p, workers=2)
    assert time.monotonic() - t0 < 20 and len(stopped) == 1
    _same(got, read_trace(p, workers=1))
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(stopped[0], 0)


@pytest.mark.timeout(60)
def test_a_hung_worker_is_given_up_after_the_stall_timeout(tmp_path, small_threshold, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    monkeypatch.setattr(wk, "FORK", True)
    monkeypatch.setattr(wk.threading, "active_count", lambda: 1)
    monkeypatch.setattr(par, "_work", lambda *a: time.sleep(3600))  # a fork that never finishes (not stopped)
    monkeypatch.setattr(par, "STALL_S", 0.5)
    t0 = time.monotonic()
    got = read_trace(p, workers=2)
    assert time.monotonic() - t0 < 20
    _same(got, read_trace(p, workers=1))


@pytest.mark.timeout(60)
def test_a_worker_stopped_while_holding_the_board_falls_back_to_one_process(tmp_path, small_threshold, monkeypatch):
    import fcntl
    import signal

    import gputrace.timeline.formats.otlp_jsonl._pieces as pieces

    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    monkeypatch.setattr(wk, "FORK", True)
    monkeypatch.setattr(wk.threading, "active_count", lambda: 1)

    def hold_and_stop(board, *a):  # the worker takes the board's lock and is stopped before it lets go
        fcntl.lockf(board.fd, fcntl.LOCK_EX, pieces._COUNTERS.size, 0)
        os.kill(os.getpid(), signal.SIGSTOP)

    real_claim = ClaimBoard.claim_front

    def claim_front(self):  # the caller claims only once the worker holds the lock
        time.sleep(0.3)
        return real_claim(self)

    monkeypatch.setattr(par, "_work", hold_and_stop)
    monkeypatch.setattr(ClaimBoard, "claim_front", claim_front)
    monkeypatch.setattr(pieces, "CLAIM_WAIT_S", 0.5)
    t0 = time.monotonic()
    got = read_trace(p, workers=2)
    assert time.monotonic() - t0 < 20
    _same(got, read_trace(p, workers=1))
