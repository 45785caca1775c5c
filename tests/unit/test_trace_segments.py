"""Trace-file integrity (issue 33): one segment per writer, joined on read or by ``record``; the trace
descriptor never becomes the program's. Pure file-system tests, no subprocess."""

from __future__ import annotations

import json
import os

import pytest

from gputrace.otlp.encode import encode_request
from gputrace.otlp.segments import LOCK_NAME, count_spans, folder_of, merge, segment_files
from gputrace.timeline.errors import CUT_REASON, LoadReport
from gputrace.timeline.load import check_paths, load_steps, read_any
from gputrace.trace.sinks import jsonl
from gputrace.trace.sinks.jsonl import JsonlFileSink, create_private


def _spans(n, first=0, name="step"):
    return [{"trace_id": 7, "span_id": first + i + 1, "parent_span_id": None, "name": name,
             "start_ns": 1_000 + 10 * i, "end_ns": 1_005 + 10 * i, "attributes": {}} for i in range(n)]


def _res(pid):
    return {"service.name": "job", "host.name": "h", "process.pid": pid}


def _folder(tmp_path, name="trace.jsonl"):
    folder = folder_of(tmp_path / name)
    os.mkdir(folder)
    open(os.path.join(folder, LOCK_NAME), "w").close()
    return folder


def _private_sink(folder, pid):
    sink = JsonlFileSink(create_private(folder, pid), append=True, private=True)
    sink.start(_res(pid))
    return sink


def test_a_writer_killed_mid_line_costs_the_others_nothing(tmp_path):
    """The issue's case: writer A dies inside a write (its line has no newline), writer B goes on writing.
    In one shared file B's next batch joined A's cut line and the strict reader refused the file; with a
    segment each, B keeps every span and the strict read opens the folder, reporting A's cut line."""
    folder = _folder(tmp_path)
    a, b = _private_sink(folder, 101), _private_sink(folder, 202)
    a.export(_spans(5, name="a"))
    b.export(_spans(5, first=100, name="b"))
    with open(a.path, "ab") as f:  # what SIGKILL in the middle of A's next write leaves
        f.write(encode_request(_res(101), _spans(2048, first=1000, name="a"))[: 5000])
    b.export(_spans(3000, first=10_000, name="b"))
    b.close()
    tl = read_any(folder)  # strict
    names = [tl.phases[k] for k in tl.cols["phase"].tolist()]
    assert names.count("b") == 3005 and names.count("a") == 5
    rep = tl.load_report
    assert isinstance(rep, LoadReport) and rep.reasons[CUT_REASON] == 1
    (p,) = rep.problems
    assert p.path == a.path and p.line == 2
    # A trace path whose file is missing while its segment folder exists reads the same.
    assert read_any(tmp_path / "trace.jsonl").n == tl.n
    check_paths([str(tmp_path / "trace.jsonl"), folder])
    steps = list(load_steps([folder]))
    assert steps[-1].snapshot is not None and steps[-1].snapshot().n == tl.n
    assert "segment" in steps[-1].note and CUT_REASON in steps[-1].note


def test_merge_keeps_whole_lines_and_counts_the_spans_in_the_file(tmp_path):
    folder = _folder(tmp_path)
    s1 = _private_sink(folder, 7)
    s1.export(_spans(3))
    s2 = _private_sink(folder, 7)  # a second recorder of the same process: its own segment
    s2.export(_spans(3, first=10) + _spans(1, first=20, name="gputrace.samples"))  # (a stack-sample batch)
    assert segment_files(folder) == ["7-0.jsonl", "7-1.jsonl"]
    with open(s2.path, "ab") as f:
        f.write(b'{"resourceSpans":[{"resource"')
    out = tmp_path / "joined.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    try:
        segs = merge(folder, fd)
    finally:
        os.close(fd)
    assert [(s.pid, s.spans, s.sample_batches, s.lines, s.cut_bytes) for s in segs] == [(7, 3, 0, 1, 0),
                                                                                        (7, 4, 1, 1, 29)]
    data = out.read_bytes()
    assert data.endswith(b"\n") and count_spans(data) == 7
    assert all(json.loads(line) for line in data.splitlines())


def test_a_short_write_in_a_private_file_leaves_only_whole_lines(tmp_path, monkeypatch):
    """A full disk cuts a write: a shared file gets the cut line ended by a newline (a damaged line the
    strict reader refuses); a private segment cuts it off, so the file stays strictly readable."""
    folder = _folder(tmp_path)
    sink = _private_sink(folder, 9)
    sink.export(_spans(2))
    real = os.write
    monkeypatch.setattr(jsonl.os, "write", lambda fd, data: real(fd, bytes(data)[: len(data) // 2]))
    sink.export(_spans(10, first=50))
    monkeypatch.setattr(jsonl.os, "write", real)
    sink.export(_spans(1, first=90))
    sink.close()
    s = sink.summary()
    assert s.exported == 3 and s.dropped == 10
    lines = open(sink.path, "rb").read().splitlines()
    assert [len(json.loads(x)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for x in lines] == [2, 1]
    assert read_any(sink.path).n == 3


def test_the_trace_descriptor_never_becomes_the_programs(tmp_path):
    """A program that closes every descriptor and then opens a file of its own gets the lowest free number:
    the sink's old one. Nothing of gputrace's may land in that file, and the trace still gets its lines."""
    trace = tmp_path / "t.jsonl"
    sink = JsonlFileSink(trace)
    sink.start(_res(1))
    sink.export(_spans(2))
    os.close(sink._fd)  # what os.closerange(3, ...) does to it
    mine = os.open(tmp_path / "mydata.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        assert mine == sink._fd  # (the same number: the case to guard against)
        sink.export(_spans(3, first=10))
        sink.close()  # must not close the program's file either
        os.write(mine, b"user data\n")
    finally:
        os.close(mine)
    assert (tmp_path / "mydata.txt").read_bytes() == b"user data\n"
    assert read_any(trace).n == 5


def test_a_pipe_sink_keeps_its_descriptor_and_checks_it(tmp_path):
    """Not a regular file (a FIFO here): the kept descriptor is checked before each write and the path
    reopened when the number now names another file."""
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        sink = JsonlFileSink(fifo, append=True)
        sink.start(_res(1))
        os.close(sink._fd)
        other = os.open(tmp_path / "other.txt", os.O_WRONLY | os.O_CREAT)
        try:
            assert other == sink._fd
            sink.export(_spans(2))
        finally:
            os.close(other)
        sink.close()
        got = os.read(r, 1 << 20)
    finally:
        os.close(r)
    assert count_spans(got) == 2 and (tmp_path / "other.txt").read_bytes() == b""


def test_a_private_file_removed_under_its_writer_is_not_made_again(tmp_path):
    """A process that outlives its launch: record has joined and removed the segments; its later batches are
    counted as dropped, never written into a file of the same name (another run's folder, say)."""
    folder = _folder(tmp_path)
    sink = _private_sink(folder, 4)
    sink.export(_spans(2))
    os.unlink(sink.path)
    sink.export(_spans(3, first=10))
    sink.close()
    assert not os.path.exists(sink.path)
    s = sink.summary()
    assert (s.exported, s.dropped) == (2, 3) and "3 spans not written" in s.errors[0]


def test_create_private_never_reuses_a_name(tmp_path):
    paths = {create_private(str(tmp_path), 5) for _ in range(3)}
    assert sorted(os.path.basename(p) for p in paths) == ["5-0.jsonl", "5-1.jsonl", "5-2.jsonl"]
    with pytest.raises(OSError):
        create_private(str(tmp_path / "missing"), 5)
