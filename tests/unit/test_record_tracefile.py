"""``gputrace record``'s trace path (issue 33): claimed once, never written through a link, joined at the end;
the closing line counts what the file holds; Python children that cannot run the bootstrap are found."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gputrace.commands.record import summary_line, unrecorded_line
from gputrace.otlp.segments import Segment, folder_of
from gputrace.timeline.load import read_any
from gputrace.trace.launch.tracefile import TraceRefused, claim
from gputrace.trace.launch.watch import Watch, why_unrecorded
from gputrace.trace.sinks.jsonl import JsonlFileSink, create_private


def _write_segment(folder, pid, n, cut=b""):
    sink = JsonlFileSink(create_private(folder, pid), append=True, private=True)
    sink.start({"service.name": "job", "process.pid": pid})
    sink.export([{"trace_id": pid, "span_id": i + 1, "parent_span_id": None, "name": "s", "start_ns": 10 + i,
                  "end_ns": 20 + i, "attributes": {}} for i in range(n)])
    sink.close()
    if cut:
        with open(sink.path, "ab") as f:
            f.write(cut)


def test_claim_refuses_a_second_run_on_the_same_path_and_finish_joins(tmp_path):
    trace = tmp_path / "run.jsonl"
    trace.write_text("an earlier run\n")
    first = claim(trace)
    with pytest.raises(TraceRefused, match=rf"another gputrace record \(pid {os.getpid()}\) is writing"):
        claim(trace)
    _write_segment(first.folder, 11, 3)
    _write_segment(first.folder, 12, 2, cut=b'{"resourceSpans":[')
    assert trace.read_text() == "an earlier run\n"  # untouched until the end
    segs = first.finish()
    assert [(s.pid, s.spans, s.cut_bytes) for s in segs] == [(11, 3, 0), (12, 2, 18)]
    assert not os.path.exists(first.folder)
    assert read_any(trace).n == 5  # strict
    assert oct(trace.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    claim(trace).release()  # the path is free again


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_claim_refuses_a_symlink_a_directory_and_leftover_segments(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(TraceRefused, match="symbolic link"):
        claim(link)
    assert target.read_text() == "keep me" and not os.path.exists(folder_of(link))
    with pytest.raises(TraceRefused, match="is a directory"):
        claim(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(TraceRefused, match="not a regular file"):
        claim(tmp_path / "fifo")
    left = claim(tmp_path / "killed.jsonl")
    os.close(left.lock_fd)  # record killed: its lock is gone, its segments stay
    with pytest.raises(TraceRefused, match=r"did not finish \(killed\?\): read them with `gputrace view"):
        claim(tmp_path / "killed.jsonl")


def test_closing_line_counts_the_file_not_what_was_sent():
    """The killed child's check-in says 0 spans (never rewritten); its segment holds 1 span; a 1.5 s phase
    that was open when it died is lost whatever the flush interval: no '< 1 s' claim."""
    infos = [{"pid": 1, "label": "python k.py", "spans": 1, "final": True},
             {"pid": 2, "label": "fork: python k.py", "spans": 0, "final": False}]
    segs = [Segment("1-0.jsonl", 1, spans=1, lines=1), Segment("2-0.jsonl", 2, spans=1, lines=1, cut_bytes=70)]
    line = summary_line(infos, "t.jsonl", False, segs)
    assert line.startswith("trace: 2 spans from 2 processes in t.jsonl; 1 process ended without a final flush "
                           "(killed?): pid 2 (fork: python k.py): the phases still open then are missing")
    assert "< 1 s" not in line and "1 cut last line (70 bytes) left out" in line


def test_why_unrecorded():
    env = {"GPUTRACE_RECORD_TRACE": "/t.d", "PYTHONPATH": "/tmp/x/site:/other"}
    assert why_unrecorded(["python", "a.py"], env, "/tmp/x/site") is None
    assert why_unrecorded(["python", "a.py"], {**env, "PYTHONPATH": "/other"}, "/tmp/x/site") == (
        "its PYTHONPATH lost record's bootstrap folder")
    assert why_unrecorded(["python", "-E", "a.py"], env, "/tmp/x/site") == "started with -E"
    assert why_unrecorded(["python", "-Ic", "x"], env, "/tmp/x/site") == "started with -I"
    assert why_unrecorded(["python", "a.py"], {}, "/tmp/x/site") == "its environment lost GPUTRACE_RECORD_*"
    helper = ["python", "-c", "from multiprocessing.resource_tracker import main; main(3)"]
    assert why_unrecorded(helper, {}, "/tmp/x/site") is None
    line = unrecorded_line([type("U", (), {"pid": 5, "command": "python w.py", "why": "started with -E"})()])
    assert line.startswith("record: 1 python process started without the recorder, not in the trace: pid 5")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_watch_finds_a_python_child_that_reset_its_pythonpath(tmp_path):
    site = str(tmp_path / "site")
    env = {"PATH": os.environ.get("PATH", ""), "GPUTRACE_RECORD_TRACE": "x", "PYTHONPATH": "/elsewhere"}
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"], env=env, process_group=0)
    try:
        w = Watch(p.pid, site)
        deadline = time.monotonic() + 3
        while p.pid not in w.found and time.monotonic() < deadline:
            w.scan()
            time.sleep(0.02)
        assert w.found[p.pid].why == "its PYTHONPATH lost record's bootstrap folder"
        assert [u.pid for u in w.unrecorded(set())] == [p.pid] and w.unrecorded({p.pid}) == []
    finally:
        p.kill()
        p.wait()




def test_a_folder_that_is_not_records_is_refused_and_left_alone(tmp_path):
    (tmp_path / "x.jsonl.d").mkdir()
    (tmp_path / "x.jsonl.d" / "mine.txt").write_text("user file")
    with pytest.raises(TraceRefused, match="is not a record segment folder"):
        claim(tmp_path / "x.jsonl")
    assert (tmp_path / "x.jsonl.d" / "mine.txt").read_text() == "user file"
