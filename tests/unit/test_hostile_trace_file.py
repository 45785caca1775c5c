"""The trace file under hostile conditions: two processes writing one file lose nothing, a full disk
or a short write never shows up as spans exported that are not on disk, and a cut line does not
corrupt the lines after it."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gputrace.timeline import read_trace
from gputrace.trace import configure, phase, shutdown
from gputrace.trace.sinks import jsonl
from gputrace.trace.sinks.jsonl import JsonlFileSink

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent("""
    import json, sys, time
    from gputrace.trace import configure, phase, shutdown
    path, n, go = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    configure(trace_file=path, collect_gpu_info=False, flush_interval_s=0.02)
    while time.time() < go:
        time.sleep(0.005)
    for i in range(n):
        with phase("msm_l", batch=i):
            pass
        if i % 50 == 0:
            time.sleep(0.001)  # let the exporter write while the other process writes too
    s = shutdown()
    print(json.dumps([s.spans_recorded, s.sinks[0].exported, s.sinks[0].dropped]))
""")


def _spans_in(path) -> int:
    n = 0
    for ln in Path(path).read_bytes().splitlines():
        n += sum(len(ss["spans"]) for rs in json.loads(ln)["resourceSpans"] for ss in rs["scopeSpans"])
    return n


@pytest.mark.slow
def test_two_processes_writing_one_trace_file_lose_nothing(tmp_path):
    path = tmp_path / "shared.jsonl"
    n = 3000
    go = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n), str(go)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    sums = [json.loads(out) for out, _ in outs]
    assert sums == [[n, n, 0], [n, n, 0]]
    assert _spans_in(path) == 2 * n  # every line parses (none interleaved) and nothing was truncated
    tl = read_trace(path)  # strict read: no corrupt line
    assert tl.n == 2 * n and len(set(tl.resources[i]["gputrace.run_id"] for i in range(len(tl.resources)))) == 2


def test_a_new_run_truncates_a_file_nobody_writes(tmp_path):
    path = tmp_path / "again.jsonl"
    for _ in range(2):
        configure(trace_file=path, collect_gpu_info=False)
        with phase("ntt"):
            pass
        shutdown()
    assert _spans_in(path) == 1


def test_a_second_writer_appends_instead_of_truncating(tmp_path):
    path = tmp_path / "busy.jsonl"
    first = JsonlFileSink(path)
    first.export([{"trace_id": 1, "span_id": 1, "name": "a", "start_ns": 1, "end_ns": 2}])
    second = JsonlFileSink(path)  # the first one still has it open
    assert first.truncated and not second.truncated
    second.export([{"trace_id": 1, "span_id": 2, "name": "b", "start_ns": 1, "end_ns": 2}])
    first.close()
    second.close()
    assert _spans_in(path) == 2


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_is_reported_not_claimed():
    configure(trace_file="/dev/full", collect_gpu_info=False, flush_interval_s=0.05)
    for _ in range(500):
        with phase("ntt"):
            pass
    s = shutdown()
    (sink,) = s.sinks
    assert s.spans_recorded == 500
    assert sink.exported == 0 and sink.dropped == 500
    assert any("No space left on device" in e and "not written" in e and "/dev/full" in e for e in sink.errors)
    assert "No space left on device" in str(s)


def _span(i):
    return {"trace_id": 7, "span_id": i + 1, "name": f"s{i}", "start_ns": 10, "end_ns": 20}


def test_short_write_counts_only_whole_lines_and_ends_the_cut_line(tmp_path, monkeypatch):
    path = tmp_path / "short.jsonl"
    sink = JsonlFileSink(path, max_spans_per_line=3)
    real = os.write
    calls = []

    def flaky(fd, data):
        calls.append(len(data))
        if len(calls) == 1:  # the disk fills in the middle of the second line
            first_line = bytes(data).index(b"\n") + 1
            return real(fd, bytes(data)[: first_line + 40])
        if len(calls) == 2:  # the newline that ends the cut line
            return real(fd, data)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(jsonl.os, "write", flaky)
    sink.export([_span(i) for i in range(9)])  # three lines of three spans
    monkeypatch.setattr(jsonl.os, "write", real)
    sink.export([_span(9)])  # space again: the next line is whole and readable
    sink.close()
    st = sink.stats
    assert (st.exported, st.dropped) == (4, 6)
    assert any("a cut line" in e for e in st.errors) and any("No space left" in e for e in st.errors)
    tl = read_trace(path, lenient=True)
    assert sorted(tl.name_of(r) for r in range(tl.n)) == ["s0", "s1", "s2", "s9"]
    assert tl.n == st.exported


SIGTERM_CHILD = textwrap.dedent("""
    import signal, sys, threading, time
    from gputrace.trace import configure, phase
    path, chain = sys.argv[1], sys.argv[2] == "chain"
    if chain:
        def mine(signum, frame):
            open(path + ".handler", "w").write(str(signum))
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)
    configure(trace_file=path, collect_gpu_info=False, flush_interval_s=1.0)
    started = threading.Event()
    def worker():
        with phase("msm_h", device=0):
            started.set()
            time.sleep(60)
    threading.Thread(target=worker, daemon=True).start()
    started.wait()
    with phase("prove"):
        for i in range(400):
            with phase("ntt", batch=i):
                pass
        print("ready", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("chain", [False, True])
def test_sigterm_flushes_and_closes_open_spans(tmp_path, chain):
    import signal

    path = tmp_path / "term.jsonl"
    p = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, str(path), "chain" if chain else "plain"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    if chain:  # the program's own handler ran after the flush, with its exit status
        assert p.returncode == 7, err
        assert (tmp_path / "term.jsonl.handler").read_text() == str(int(signal.SIGTERM))
    else:  # the default action: killed by SIGTERM, as without gputrace
        assert p.returncode == -signal.SIGTERM, err
    tl = read_trace(path)
    names = [tl.name_of(r) for r in range(tl.n)]
    assert names.count("ntt") == 400 and "prove" in names and "msm_h" in names
    status = tl.cols["status"]
    for open_name in ("prove", "msm_h"):
        r = names.index(open_name)
        assert int(status[r]) == 2, open_name  # error status
    assert all(int(status[r]) != 2 for r in range(tl.n) if names[r] == "ntt")
    prove = names.index("prove")
    ntt = names.index("ntt")
    assert int(tl.cols["parent"][ntt]) == prove  # the open parent kept its id: links hold
