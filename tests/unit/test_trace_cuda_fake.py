"""CUDA-event bookkeeping without a GPU: a fake ``cupy`` with a simulated device clock.

The fake stamps an event at (host time + a device clock offset + the stream's queue delay) and reports
elapsed times as float32 milliseconds, like cudaEventElapsedTime. This checks the mapping onto the
host epoch clock (the offset must cancel out), lanes, pooling, pending events and failure counting.
The real thing is tests/gpu/test_cuda_timing.py.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import types

import numpy as np
import pytest

from gputrace.trace import MemorySink, configure, phase, shutdown

DEVICE_CLOCK_OFFSET = 987_654_321_000  # the device clock has nothing to do with the host clock


class FakeEvent:
    created = 0

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        FakeEvent.created += 1
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter_ns() + DEVICE_CLOCK_OFFSET + (stream.delay_ns if stream is not None else 0)

    @property
    def done(self):
        return self.t is not None and time.perf_counter_ns() + DEVICE_CLOCK_OFFSET >= self.t

    def synchronize(self):
        while not self.done:
            time.sleep(0.0005)


class FakeStream:
    _next = 1000

    def __init__(self, non_blocking=False, device_id=0, delay_ns=0):
        FakeStream._next += 16
        self.ptr = FakeStream._next
        self.device_id = device_id
        self.delay_ns = delay_ns


def fake_cupy():
    m = types.ModuleType("cupy")
    cuda = types.SimpleNamespace()
    cuda.Event = FakeEvent
    cuda.Stream = FakeStream
    cuda.Device = lambda d: contextlib.nullcontext()
    cuda.runtime = types.SimpleNamespace(getDevice=lambda: 0)

    def elapsed(a, b):
        if a.t is None or b.t is None:
            raise RuntimeError("cudaErrorInvalidResourceHandle")
        return float(np.float32((b.t - a.t) / 1e6))

    cuda.get_elapsed_time = elapsed
    m.cuda = cuda
    return m


@pytest.fixture
def ct(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.delitem(sys.modules, "gputrace.trace.cuda_timing", raising=False)
    mod = importlib.import_module("gputrace.trace.cuda_timing")
    from gputrace.trace import hotpath

    monkeypatch.setattr(hotpath, "_cuda", None)  # re-import through _cuda_start with the fake
    yield mod
    sys.modules.pop("gputrace.trace.cuda_timing", None)


def test_device_times_mapped_to_host_clock(ct):
    mem = MemorySink()
    configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.05)
    s = FakeStream(delay_ns=2_000_000)  # work queued ahead: the device reaches our events 2 ms later
    for i in range(20):
        with phase("ntt", device=0, stream=s, circuit=i):
            time.sleep(0.001)
    summary = shutdown()
    assert summary.cuda_unresolved == 0 and summary.spans_recorded == 20
    for sp in mem.spans:
        a = sp["attributes"]
        lead = a["gputrace.gpu.start_ns"] - sp["start_ns"]
        dur = a["gputrace.gpu.end_ns"] - a["gputrace.gpu.start_ns"]
        assert 1_500_000 < lead < 50_000_000, lead  # ~2 ms queue delay; the clock offset cancelled
        assert 500_000 < dur < 50_000_000, dur  # the 1 ms sleep between the two records
        assert a["gputrace.lane"].startswith("stream:") and a["gputrace.device"] == 0
    assert ct.last_alignment_error_ns[0] >= 0


def test_lanes_pool_and_pending(ct):
    mem = MemorySink()
    configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.05)
    s0, s1 = FakeStream(), FakeStream(delay_ns=300_000_000)  # s1's events complete 0.3 s later
    before = FakeEvent.created
    for _ in range(50):
        with phase("msm_h", stream=s0):
            pass
    with phase("msm_l", stream=s1):
        pass
    time.sleep(0.15)
    assert len(mem.by_name("msm_l")) == 0  # still pending on the device: not exported yet
    time.sleep(0.1)
    for _ in range(50):
        with phase("msm_h", stream=s0):
            pass
    summary = shutdown()  # waits for msm_l's events
    assert summary.cuda_unresolved == 0 and len(mem.spans) == 101
    lanes = {sp["name"]: sp["attributes"]["gputrace.lane"] for sp in mem.spans}
    assert lanes["msm_h"] != lanes["msm_l"]
    assert FakeEvent.created - before < 2 * 101  # events were reused from the pool
    assert len(mem.by_name("msm_l")[0]["attributes"]) > 0


def test_unreadable_events_are_counted(ct, monkeypatch):
    mem = MemorySink()
    configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.05)
    monkeypatch.setattr(ct.cupy.cuda, "get_elapsed_time", lambda a, b: (_ for _ in ()).throw(RuntimeError("x")))
    with phase("ntt", stream=FakeStream()):
        pass
    summary = shutdown()
    assert summary.cuda_unresolved == 1
    (sp,) = mem.spans
    assert "gputrace.gpu.start_ns" not in sp["attributes"] and sp["end_ns"] >= sp["start_ns"]
    assert "without device times" in str(summary)


def test_failed_end_record_is_counted_not_left_pending(ct, monkeypatch):
    # record_end raising (a CUDA fault on the caller's thread) leaves the phase without an end event:
    # it must be exported with host times at the next drain, not wait for an event that never comes
    # (it used to stay pending until shutdown, which then waited the full cuda_timeout_s for it).
    mem = MemorySink()
    rec = configure(sinks=[mem], collect_gpu_info=False, flush_interval_s=0.05)
    rec.cuda_timeout_s = 60.0

    def bad(p):
        raise RuntimeError("cudaErrorIllegalAddress")

    monkeypatch.setattr(ct, "record_end", bad)
    with pytest.raises(RuntimeError, match="cudaErrorIllegalAddress"):
        with phase("ntt", stream=FakeStream()):
            pass
    deadline = time.monotonic() + 10
    while not mem.spans and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(mem.spans) == 1  # exported while the run goes on
    summary = shutdown()
    assert summary.cuda_unresolved == 1 and summary.spans_recorded == 1
    assert "gputrace.gpu.start_ns" not in mem.spans[0]["attributes"]


class _FakeCollector:
    """The parts of CuptiCollector the recorder uses, with no CUPTI: stream ids, push/pop, no records."""

    xkind, offset_ns, dropped = 1, 0, 0

    def __init__(self):
        self.depth = 0
        self.asked = []

    def push(self, kind, xid):
        self.depth += 1

    def pop(self, kind):
        self.depth -= 1

    def stream_id(self, device, ptr):
        self.asked.append((device, ptr))
        return 40 + device

    def collect(self, force=False):
        return []

    def stop(self):
        return []

    def resource(self):
        return {"gputrace.cupti.version": "fake"}


def test_cuda_activity_on_stream_phases_skip_events_and_take_the_cupti_lane(ct):
    from gputrace.trace.recorder import Recorder

    col = _FakeCollector()
    mem = MemorySink()
    rec = Recorder([mem], {}, run_id="r", flush_interval_s=0.05)
    rec.enable_cuda_activity(col)
    rec.start()
    before = FakeEvent.created
    s = FakeStream(device_id=1)
    for _ in range(5):
        with phase("msm_h", stream=s):
            assert col.depth == 1
    summary = rec.stop()
    assert FakeEvent.created == before and summary.cuda_unresolved == 0 and col.depth == 0
    assert col.asked == [(1, s.ptr)]  # the stream's CUPTI id asked once, for its lane
    for sp in mem.spans:
        a = sp["attributes"]
        assert a["gputrace.lane"] == "stream:41" and a["gputrace.device"] == 1
        assert "gputrace.gpu.start_ns" not in a
    # collection over: the next recorder's stream phases record events again
    mem2 = MemorySink()
    configure(sinks=[mem2], collect_gpu_info=False, flush_interval_s=0.05)
    with phase("msm_h", stream=FakeStream()):
        pass
    shutdown()
    assert FakeEvent.created > before and "gputrace.gpu.start_ns" in mem2.spans[0]["attributes"]
