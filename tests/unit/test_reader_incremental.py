"""iter_load (progressive) and follow (tail a file a writer is still appending to)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from gputrace.otlp.encode import encode_request
from gputrace.timeline import TraceFormatError, follow, iter_load, read_trace
from gputrace.testing.synthetic import write_synthetic


def _line(i: int, n: int = 10) -> bytes:
    spans = [dict(trace_id=b"\x07" * 16, span_id=i * 1000 + k + 1, name="msm_h", start_ns=i * 10_000 + k,
                  end_ns=i * 10_000 + k + 5, attributes={"gputrace.device": 0, "gputrace.lane": "stream:0"})
             for k in range(n)]
    return encode_request({"host.name": "h"}, spans) + b"\n"


def test_iter_load_yields_progress_then_the_full_timeline(tmp_path, monkeypatch):
    import gputrace.timeline.formats.otlp_jsonl.incremental as inc

    monkeypatch.setattr(inc, "_READ", 64 * 1024)  # several slices for a small file
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=2, gpus=2, circuits=4, batches=4)
    steps = list(iter_load(p, interval=0.0))
    assert len(steps) >= 3
    assert [s.done for s in steps] == [False] * (len(steps) - 1) + [True]
    got = [s.bytes_read for s in steps]
    assert got == sorted(got) and got[-1] == steps[-1].bytes_total == p.stat().st_size
    spans = [s.spans for s in steps]
    assert spans == sorted(spans) and 0 < spans[0] < spans[-1]
    mid = steps[len(steps) // 2].timeline  # a cumulative snapshot is usable mid-way
    assert 0 < mid.n <= spans[-1]
    full, ref = steps[-1].timeline, read_trace(p)
    assert full.n == ref.n and np.array_equal(full.start, ref.start) and full.lanes == ref.lanes


def test_iter_load_stops_when_asked(tmp_path, monkeypatch):
    import gputrace.timeline.formats.otlp_jsonl.incremental as inc

    monkeypatch.setattr(inc, "_READ", 16 * 1024)
    p = tmp_path / "run.jsonl"
    write_synthetic(p, hosts=1, gpus=2, circuits=4, batches=4)
    stop = threading.Event()
    seen = []
    for s in iter_load(p, interval=0.0, stop_event=stop):
        seen.append(s)
        stop.set()
    assert len(seen) == 1 and not seen[0].done


def test_iter_load_reports_errors_like_read_trace(tmp_path):
    p = tmp_path / "run.jsonl"
    p.write_bytes(_line(0) + _line(1)[:40])
    with pytest.raises(TraceFormatError, match=r"run.jsonl:2: truncated last line"):
        list(iter_load(p))
    last = list(iter_load(p, lenient=True))[-1]
    assert last.done and last.spans == 10 and last.report.lines_skipped == 1


def _collect(path, stop, out, **kw):
    try:
        for prog in follow(path, stop, poll=0.02, interval=0.05, **kw):
            out.append((prog.spans, prog.reset, prog.loader))
    except Exception as e:  # noqa: BLE001 - surfaced by the test
        out.append(e)


def _wait_for(out, pred, timeout=10.0):
    t = time.time() + timeout
    while time.time() < t:
        if out and not isinstance(out[-1], Exception) and pred(out[-1]):
            return out[-1]
        if out and isinstance(out[-1], Exception):
            raise out[-1]
        time.sleep(0.01)
    raise AssertionError(f"timed out; last progress: {out[-1] if out else None}")


def test_follow_tails_a_growing_file_with_partial_lines(tmp_path):
    p = tmp_path / "live.jsonl"
    stop = threading.Event()
    out: list = []
    th = threading.Thread(target=_collect, args=(p, stop, out), daemon=True)
    th.start()  # the file does not exist yet: follow waits for it
    time.sleep(0.1)
    with open(p, "ab", buffering=0) as f:
        f.write(_line(0))
        _wait_for(out, lambda s: s[0] == 10)
        half = _line(1)
        f.write(half[:100])  # a writer mid-line: nothing new until the newline arrives
        time.sleep(0.2)
        assert out[-1][0] == 10
        f.write(half[100:])
        _wait_for(out, lambda s: s[0] == 20)
        for i in range(2, 6):
            f.write(_line(i))
        prog = _wait_for(out, lambda s: s[0] == 60)
    tl = prog[2].timeline()
    assert tl.n == 60 and (np.diff(tl.start) >= 0).all()
    stop.set()
    th.join(5)
    assert not th.is_alive()


def test_follow_restarts_on_truncation_and_rotation(tmp_path):
    p = tmp_path / "live.jsonl"
    p.write_bytes(_line(0) + _line(1))
    stop = threading.Event()
    out: list = []
    th = threading.Thread(target=_collect, args=(p, stop, out), daemon=True)
    th.start()
    _wait_for(out, lambda s: s[0] == 20)
    p.write_bytes(_line(5, n=3))  # truncated and rewritten in place (same inode, smaller)
    prog = _wait_for(out, lambda s: s[1] and s[0] == 3)
    assert prog[2].timeline().n == 3
    tmp = tmp_path / "new.jsonl"
    tmp.write_bytes(_line(7, n=4) + _line(8, n=4) + _line(9, n=4))  # rotated: replaced by a new, larger file
    os.replace(tmp, p)
    _wait_for(out, lambda s: s[1] and s[0] == 12)
    stop.set()
    th.join(5)
    assert not th.is_alive()


def test_follow_stops_promptly_while_waiting(tmp_path):
    stop = threading.Event()
    out: list = []
    th = threading.Thread(target=_collect, args=(tmp_path / "never.jsonl", stop, out), daemon=True)
    th.start()
    time.sleep(0.1)
    t = time.time()
    stop.set()
    th.join(5)
    assert not th.is_alive() and time.time() - t < 1.0 and out == []


def test_iter_load_reads_gzip_with_compressed_progress(tmp_path):
    p = tmp_path / "run.jsonl.gz"
    write_synthetic(p, hosts=1, gpus=2, circuits=2, batches=2)
    steps = list(iter_load(p))
    assert steps[-1].done and steps[-1].bytes_read == steps[-1].bytes_total == p.stat().st_size
    assert steps[-1].timeline.n == read_trace(p).n > 0


def test_iter_load_accepts_one_pretty_printed_request(tmp_path):
    import json

    p = tmp_path / "pretty.json"
    p.write_text(json.dumps(json.loads(_line(0)), indent=2))
    (last,) = list(iter_load(p))
    assert last.done and last.spans == 10 and last.timeline.n == 10 and last.report.lines == 1


def test_binary_file_is_refused_and_its_handle_closed(tmp_path, monkeypatch):
    # _Reader opened the file, then open_trace_file refused it: that first handle used to stay open.
    import builtins

    import gputrace.timeline.formats.otlp_jsonl.incremental as inc

    opened = []

    def tracking_open(*a, **kw):
        f = builtins.open(*a, **kw)
        opened.append(f)
        return f

    monkeypatch.setattr(inc, "open", tracking_open, raising=False)
    p = tmp_path / "x.bin"
    p.write_bytes(b"\x00\x01binary")
    with pytest.raises(TraceFormatError, match="binary"):
        next(iter_load(p))
    assert opened and all(f.closed for f in opened)


def test_follow_sends_idle_heartbeats_while_the_file_is_quiet(tmp_path):
    """A consumer that batches updates needs a tick after the writer stops (the live view's tail)."""
    p = tmp_path / "live.jsonl"
    p.write_bytes(_line(0))
    stop = threading.Event()
    seen: list = []

    def run():
        for prog in follow(p, stop, poll=0.02, interval=0.05):
            seen.append((prog.spans, prog.idle))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    t = time.time() + 10
    while time.time() < t and sum(1 for _, idle in seen if idle) < 3:
        time.sleep(0.01)
    stop.set()
    th.join(5)
    assert seen[0] == (10, False)  # the data, then heartbeats that carry no news
    assert sum(1 for s, idle in seen if idle and s == 10) >= 3


def test_follow_restarts_when_the_file_is_rewritten_past_its_old_size_between_polls(tmp_path):
    # Truncated and regrown past the old size within one poll: same inode, a larger size, other bytes. The file
    # never looks smaller here (rewritten in place from offset 0), so only its content tells; the old spans
    # used to stay (70 shown, 65 in the file).
    p = tmp_path / "live.jsonl"
    p.write_bytes(_line(0) + _line(1))
    stop = threading.Event()
    out: list = []
    th = threading.Thread(target=_collect, args=(p, stop, out), daemon=True)
    th.start()
    _wait_for(out, lambda s: s[0] == 20)
    new = _line(5, n=12) + _line(6, n=13)
    assert len(new) > p.stat().st_size
    with open(p, "r+b") as f:  # rewritten in place, growing it
        f.write(new)
    prog = _wait_for(out, lambda s: s[1] or s[0] != 20)
    prog = _wait_for(out, lambda s: s[0] == 25)
    tl = prog[2].timeline()
    assert tl.n == 25 and set(tl.cols["span_id"].tolist()) == set(read_trace(p).cols["span_id"].tolist())
    stop.set()
    th.join(5)
    assert not th.is_alive()
