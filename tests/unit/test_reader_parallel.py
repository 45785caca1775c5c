"""Parallel reading of large files: same Timeline as in-process, file line numbers in errors."""

from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest

import gputrace.timeline.parallel as par
from gputrace.otlp.encode import encode_request
from gputrace.testing.synthetic import write_synthetic
from gputrace.timeline import TraceFormatError, read_trace


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(par, "MIN_PARALLEL_BYTES", 0)


def test_split_ranges_start_on_lines(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"".join(b"x" * (i % 7) + b"\n" for i in range(100)))
    data = p.read_bytes()
    for parts in (1, 2, 3, 8, 200):
        for head in (0, 40, 10_000):
            rs = par.split_ranges(p, parts, head)
            assert rs[0][0] == 0 and rs[-1][1] == len(data)
            assert all(a == prev_b for (_, prev_b), (a, _) in zip(rs, rs[1:]))
            assert all(a == 0 or data[a - 1:a] == b"\n" for a, _ in rs)
    first, second = par.split_ranges(p, 2, 60)
    assert first[1] - first[0] > second[1] - second[0] + 40  # the caller's range is longer by ~head_start


def test_parallel_read_equals_in_process_read(tmp_path, small_threshold):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=3, batches=3, shuffle_lines=True, spans_per_line=17)
    a, b = read_trace(p, workers=1), read_trace(p, workers=3)
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


def test_parallel_errors_carry_file_line_numbers(tmp_path, small_threshold):
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


def test_worker_failure_falls_back_to_in_process(tmp_path, small_threshold, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2)
    monkeypatch.setattr(par.sys, "executable", "/bin/false")  # every worker exits 1
    tl = read_trace(p, workers=3)
    monkeypatch.undo()
    assert tl.n == read_trace(p, workers=1).n > 0


def test_workers_run_our_package_not_one_in_the_working_directory(tmp_path, small_threshold, monkeypatch):
    # A worker used to be ``python -m gputrace.timeline.parallel``, which imports from the working directory
    # first: run from another checkout, it ran that checkout's code (here: a fake that answers nothing).
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


def test_the_caller_reads_the_first_range_itself(tmp_path, small_threshold, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=2, batches=2, spans_per_line=9)
    started = []
    real_popen = par.subprocess.Popen

    def popen(args, **kw):
        started.append((int(args[-3]), int(args[-2])))
        return real_popen(args, **kw)

    monkeypatch.setattr(par.subprocess, "Popen", popen)
    a, b = read_trace(p, workers=1), read_trace(p, workers=2)
    ranges = par.split_ranges(p, 2, par.HEAD_START_BYTES)
    assert len(ranges) == 2 and started == ranges[1:]  # one worker process, for the second range
    assert a.n == b.n and np.array_equal(a.cols["start"], b.cols["start"])
    assert np.array_equal(a.cols["span_id"], b.cols["span_id"]) and a.lanes == b.lanes


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
    fd = par._part_file()
    try:
        par._dump_part(res, fd)
        got = par._load_part(fd)
        again = par._load_part(fd)
    finally:
        os.close(fd)
    assert got["phases"] == res["phases"] and got["attrs"] == res["attrs"] and got["nlines"] == 12
    for a, b in zip(got["chunks"], res["chunks"], strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    col = got["chunks"][0]["start"]
    assert col.ctypes.data % 64 == 0
    col[:] = -1  # copy-on-write: the file (and another load of it) keeps the worker's values
    assert np.array_equal(again["chunks"][0]["start"], np.arange(1000))


@pytest.mark.parametrize("keep", [0, 10, 200, -100])
def test_a_truncated_part_file_is_refused(keep):
    res = {"chunks": [{"start": np.arange(5000, dtype=np.int64)}], "phases": ["x"]}
    fd = par._part_file()
    try:
        par._dump_part(res, fd)
        os.ftruncate(fd, keep if keep >= 0 else os.fstat(fd).st_size + keep)
        with pytest.raises((ValueError, EOFError, pickle.UnpicklingError, struct.error)):
            par._load_part(fd)
    finally:
        os.close(fd)


def test_a_worker_that_leaves_a_broken_part_file_is_read_here(tmp_path, small_threshold, monkeypatch):
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2, spans_per_line=9)
    # The worker writes a header that promises more than it wrote, then exits 0.
    monkeypatch.setattr(par, "_WORKER", "import os, struct, sys; os.write(int(sys.argv[1]), struct.pack('<QQ', 99, 0))")
    got, want = read_trace(p, workers=2), read_trace(p, workers=1)
    assert got.n == want.n > 0 and np.array_equal(got.cols["span_id"], want.cols["span_id"])
