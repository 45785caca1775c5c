"""The stack sampler (gputrace.trace.stack_sampler): rate, interning, thread filtering, hand-over, flush at stop."""

from __future__ import annotations

import threading
import time

import pytest

from gputrace import activity as A
from gputrace.trace import recorder
from gputrace.trace.sinks.memory import MemorySink
from gputrace.trace.stack_sampler import (
    DEFAULT_HZ,
    LIBRARY,
    STDLIB,
    USER,
    StackSampler,
    batch_attributes,
    env_hz,
    file_kind,
)


def _parked_in_named_function(stop: threading.Event) -> None:
    while not stop.wait(0.001):
        pass


def _thread(name: str) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    t = threading.Thread(target=_parked_in_named_function, args=(stop,), name=name, daemon=True)
    t.start()
    return t, stop


def _funcs(b, thread_name: str) -> set[str]:
    """Functions seen in the batch's stacks of the thread named ``thread_name``."""
    th = {i for i, (_, n) in enumerate(b.threads) if n == thread_name}
    out = set()
    for t, s in zip(b.thread, b.stack, strict=True):
        if t in th:
            out.update(b.frames[f][2] for f in b.stacks[s])
    return out


def test_sample_once_interns_frames_and_stacks_and_skips_gputrace_threads():
    worker, stop = _thread("user-worker")
    ours, stop2 = _thread("gputrace-exporter")
    try:
        s = StackSampler(100)
        time.sleep(0.01)
        s.sample_once()
        s.sample_once()
        b = s.take()
    finally:
        stop.set()
        stop2.set()
    names = {n for _, n in b.threads}
    assert "user-worker" in names and "MainThread" not in names  # (the calling thread: sample_once skips itself)
    assert not any(n.startswith("gputrace-") for n in names)
    assert "_parked_in_named_function" in _funcs(b, "user-worker")
    # the worker parked in one place twice: one stack id, used by both samples
    wk = [i for i, (_, n) in enumerate(b.threads) if n == "user-worker"]
    stacks = {s_ for t, s_ in zip(b.thread, b.stack, strict=True) if t in wk}
    assert len([t for t in b.thread if t in wk]) == 2 and len(stacks) == 1
    # batch tables are local and complete: every index in range
    assert all(0 <= f < len(b.frames) for st in b.stacks for f in st)
    assert all(0 <= fi < len(b.files) for fi, _, _ in b.frames)
    assert s.take() is None  # handed over once


def test_the_sampler_thread_samples_at_about_its_rate_and_never_itself():
    worker, stop = _thread("user-worker")
    s = StackSampler(200).start()
    try:
        time.sleep(0.5)
    finally:
        s.stop()
        stop.set()
    b = s.take()
    wk = {i for i, (_, n) in enumerate(b.threads) if n == "user-worker"}
    n = sum(1 for t in b.thread if t in wk)
    assert 40 <= n <= 110, n  # 200 Hz for 0.5 s: ~100 (a loaded 2-core machine lags, never bursts)
    assert not any(n.startswith("gputrace-") for _, n in b.threads)
    assert s.errors == 0
    ts = b.t_ns
    assert ts == sorted(ts)


def test_bound_drops_and_counts():
    s = StackSampler(100, max_pending=1)
    worker, stop = _thread("user-worker")
    try:
        kept = s.sample_once() + s.sample_once()
    finally:
        stop.set()
    b = s.take()
    assert kept == 1 and len(b.t_ns) == 1 and b.dropped == s.samples_seen - 1 >= 1


def test_batch_attributes_are_delta_encoded_and_consistent():
    s = StackSampler(100)
    worker, stop = _thread("user-worker")
    try:
        s.sample_once()
        time.sleep(0.002)
        s.sample_once()
    finally:
        stop.set()
    b = s.take()
    a = batch_attributes(b)
    dt = a[A.SAMPLES_DT]
    assert dt[0] == 0 and all(d >= 0 for d in dt) and sum(dt) == b.t_ns[-1] - b.t_ns[0]
    assert sum(a[A.SAMPLES_STACK_LEN]) == len(a[A.SAMPLES_STACK_FRAMES])
    assert len(a[A.SAMPLES_FRAME_LINE]) == len(a[A.SAMPLES_FRAME_FUNC]) == len(a[A.SAMPLES_FRAME_FILE])
    assert a["gputrace.role"] == "profiler" and a["gputrace.lane"] == "thread:gputrace.samples"


def test_env_hz():
    assert env_hz({}) == DEFAULT_HZ
    assert env_hz({"GPUTRACE_SAMPLE_HZ": "0"}) == 0
    assert env_hz({"GPUTRACE_SAMPLE_HZ": "-3"}) == 0
    assert env_hz({"GPUTRACE_SAMPLE_HZ": "25"}) == 25
    for bad in ("fast", "nan", "1e9"):
        with pytest.raises(ValueError, match="GPUTRACE_SAMPLE_HZ"):
            env_hz({"GPUTRACE_SAMPLE_HZ": bad})
    with pytest.raises(ValueError):
        StackSampler(0)


def test_file_kind():
    roots = (("/venv/lib/python3.11/site-packages/", "/venv/bin/"), ("/usr/lib/python3.11/",))
    assert file_kind("/home/me/train.py", roots) == USER
    assert file_kind("/venv/lib/python3.11/site-packages/torch/nn/module.py", roots) == LIBRARY
    assert file_kind("/venv/bin/torchrun", roots) == LIBRARY
    assert file_kind("/usr/lib/python3.11/threading.py", roots) == STDLIB
    assert file_kind("<frozen importlib._bootstrap>", roots) == A.FILE_INTERNAL
    assert file_kind(recorder.__file__, roots) == A.FILE_INTERNAL  # gputrace itself is never the user's code


def test_recorder_stop_flushes_the_samplers_last_batch():
    sink = MemorySink()
    rec = recorder.configure(sinks=[sink], collect_gpu_info=False, cuda_activity=False, flush_interval_s=1.0)
    try:
        rec.sampler = StackSampler(500).start()
        rec.sample_parent = (123, 456)
        time.sleep(0.05)
    finally:
        recorder.shutdown()
    batches = [s for s in sink.spans if s["name"] == A.SAMPLES_SPAN]
    assert batches, "the final drain writes what was sampled"
    assert all(s["trace_id"] == 123 and s["parent_span_id"] is None for s in batches)
    assert not rec.sampler._thread.is_alive()
    assert rec.sample_batches == len(batches) and rec.samples_written == sum(
        len(s["attributes"][A.SAMPLES_DT]) for s in batches)
